"""A framework-free engine that runs one process per device: tests of bench_engine.launch.

Each worker checks that its compact shard holds exactly its share of every global batch
(samples ``start + rank*share ..``) and sleeps ``delay_s * (rank + 1)`` per step, so rank 1 is
the slowest worker of a two-device run. With the option ``barrier`` (a folder), every step
first waits for every rank to reach it, as a collective does: a rank that stops makes the
others wait forever. With ``hang_at_exit`` the interpreter's exit blocks, as a process group's
teardown can when a peer still waits in a collective.
"""

from __future__ import annotations

import atexit
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench_engine.api import Engine, StepBatch, Workload
from bench_engine.contract import RunSpec
from bench_engine.data import Dataset
from bench_engine.launch import worker_info
from bench_engine.report import (
    EnvironmentFacts,
    InitReadback,
    LossReadback,
    Observed,
    OptimizerReadback,
    PrecisionReport,
    Readback,
)
from bench_engine.shards import ShardPlan, plan_shards, shard_dataset


class FakeDPWorkload(Workload):
    def __init__(self, shards: ShardPlan, data: Dataset, rank: int, delay_s: float, barrier: Path | None = None,
                 **fields: Any) -> None:
        super().__init__(**fields)
        self.shards, self.full, self.rank, self.delay_s, self.barrier = shards, data, rank, delay_s, barrier
        self.local = shard_dataset(data, shards, rank)
        self.seen = 0
        self.steps = 0
        self.blocks = 0

    def wait_for_every_rank(self) -> None:
        """A file barrier: this rank arrives at its step, then waits for every rank to arrive."""
        assert self.barrier is not None
        self.steps += 1
        (self.barrier / f"step-{self.steps}-rank-{self.rank}").touch()
        while len(list(self.barrier.glob(f"step-{self.steps}-rank-*"))) < self.world_size:
            time.sleep(0.005)

    def step(self, batch: StepBatch) -> None:
        if self.barrier is not None:
            self.wait_for_every_rank()
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

    def block_done(self) -> None:
        self.blocks += 1

    def block_losses(self) -> list[float]:
        """Each rank's own block mean (its rank): the launcher's merge reports the mean over ranks."""
        return [float(self.rank)] * self.blocks if self.readback.mode == "train" else []


class FakeDPEngine(Engine):
    name = "fakedp"
    framework = "FakeDP"

    def processes(self, spec: RunSpec) -> int:
        return spec.parity.devices

    def environment(self, spec: RunSpec) -> EnvironmentFacts:
        worker = worker_info()
        return EnvironmentFacts(framework_version=np.__version__, device_kind="cpu", devices=("cpu",) * spec.parity.devices,
                                extra={"rank": worker.rank if worker else None})

    def prepare(self, spec: RunSpec, data: Dataset) -> Workload:
        worker = worker_info()
        assert worker is not None, "fakedp runs as launched workers only"
        precision = PrecisionReport("fp32", "float32", "float32", False, False)
        options = spec.engine_options
        if options.get("hang_at_exit"):  # as a communicator whose teardown waits for a peer's collective
            atexit.register(time.sleep, 3600)
        delay = float(options.get("delay_s", 0.02)) * (worker.rank + 1)
        barrier = Path(options["barrier"]) if options.get("barrier") else None
        workload = FakeDPWorkload(plan_shards(spec, data.samples), data, worker.rank, delay, barrier,
                                  trainable_parameters=spec.expected_parameters or 0, precision=precision,
                                  data_placement="host", world_size=worker.world_size)
        parity = spec.parity
        opt = parity.optimizer
        train = parity.mode == "train"
        init = parity.init or {"mode": "framework"}
        betas = opt.get("betas")
        workload.readback = Readback(  # a test double: it "reads back" its spec
            mode=parity.mode, arch=parity.arch, num_classes=parity.num_classes,
            input_shape=tuple(int(d) for d in data.images.shape[1:]), param_dtypes=("float32",),
            observed=Observed("float32", "float32" if train else None, "float32"),
            optimizer=OptimizerReadback(opt["name"], "fakedp.Optimizer", opt["lr"], opt["weight_decay"], opt.get("momentum"),
                                        opt.get("nesterov"), tuple(betas) if betas is not None else None, opt.get("eps"))
            if train else None,
            loss=LossReadback(parity.loss, "fakedp.CrossEntropy", "mean", 0.0) if train else None,
            init=InitReadback(init["mode"], init.get("sha256")), steps_per_dispatch=1,
        )
        return workload
