"""A framework-free engine that runs one process per device: tests of bench_engine.launch.

Each worker checks that its compact shard holds exactly its share of every global batch
(samples ``start + rank*share ..``) and sleeps ``delay_s * (rank + 1)`` per step, so rank 1 is
the slowest worker of a two-device run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bench_engine.api import Engine, StepBatch, Workload
from bench_engine.data import Dataset
from bench_engine.launch import worker_info
from bench_engine.shards import ShardPlan, plan_shards, shard_dataset


class FakeDPWorkload(Workload):
    def __init__(self, shards: ShardPlan, data: Dataset, rank: int, delay_s: float, **fields: Any) -> None:
        super().__init__(**fields)
        self.shards, self.full, self.rank, self.delay_s = shards, data, rank, delay_s
        self.local = shard_dataset(data, shards, rank)
        self.seen = 0

    def step(self, batch: StepBatch) -> None:
        local = self.shards.local(batch)
        start, size = self.shards.slice_of(batch, self.rank)
        mine = self.local.labels[local.start : local.start + local.size]
        if size != self.shards.per_device or not np.array_equal(mine, self.full.labels[start : start + size]):
            raise AssertionError(f"rank {self.rank}: shard slice {local} is not samples {start}..{start + size}")
        self.seen += size
        time.sleep(self.delay_s)

    def sync(self) -> None:
        pass

    def loss(self) -> float | None:
        return float(self.rank)


class FakeDPEngine(Engine):
    name = "fakedp"
    framework = "FakeDP"

    def processes(self, spec: dict[str, Any]) -> int:
        return int(spec["parity"]["devices"])

    def environment(self, spec: dict[str, Any]) -> dict[str, Any]:
        worker = worker_info()
        return {"framework_version": np.__version__, "device_kind": "cpu", "devices": ["cpu"] * spec["parity"]["devices"],
                "extra": {"rank": worker.rank if worker else None}}

    def prepare(self, spec: dict[str, Any], data: Dataset) -> Workload:
        worker = worker_info()
        assert worker is not None, "fakedp runs as launched workers only"
        precision = {"name": "fp32", "compute_dtype": "float32", "param_dtype": "float32", "tf32_matmul": False, "tf32_conv": False}
        delay = float((spec.get("engine_options") or {}).get("delay_s", 0.02)) * (worker.rank + 1)
        return FakeDPWorkload(plan_shards(spec, data.samples), data, worker.rank, delay,
                              trainable_parameters=spec["expected"]["trainable_parameters"] or 0, precision=precision,
                              data_placement="host", world_size=worker.world_size)
