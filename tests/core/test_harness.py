"""The engine library's harness and result writing, with an in-process numpy workload."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench_engine.api import StepBatch, Workload
from bench_engine.blocklosses import BlockLosses
from bench_engine.contract import RunSpec
from bench_engine.harness import Measurements, run_harness
from bench_engine.main import execute
from bench_engine.report import EnvironmentFacts, PrecisionReport
from bench_engine.schedule import Schedule, batches_of_epoch
from orchestrator.schemas import validate


class CountingWorkload(Workload):
    def __init__(self):
        super().__init__(trainable_parameters=1, precision=PrecisionReport("fp32", "float32", "float32", False, False),
                         data_placement="device")
        self.seen: list[StepBatch] = []
        self.syncs = 0

    def step(self, batch: StepBatch) -> None:
        self.seen.append(batch)

    def sync(self) -> None:
        self.syncs += 1


def spec(samples=100, batch=32, spe=4, epochs=2, warmup=3, window=2) -> Schedule:
    return Schedule(per_device=batch, steps_per_epoch=spe, epochs=epochs, warmup_steps=warmup, window_steps=window)


def test_partial_batch_is_the_last_step():
    steps = batches_of_epoch(1, 100, 32, 4)
    assert [s.size for s in steps] == [32, 32, 32, 4] and steps[-1].start == 96
    with pytest.raises(ValueError):
        batches_of_epoch(1, 100, 32, 5)


def test_warmup_is_excluded_and_windows_do_not_cross_epochs():
    workload = CountingWorkload()
    measured = run_harness(workload, spec(), 100, Measurements())
    assert len(workload.seen) == 8 and measured.steps_done == 8 and measured.samples_done == 200
    assert measured.warmup_steps == 3
    assert [w[0] for w in measured.windows] == [1, 2, 2]  # epoch 1: 3 warmup + 1; epoch 2: 2 + 2
    assert measured.steady().samples == 4 + 64 + 36
    assert [e.samples for e in measured.epochs] == [100, 100]


def test_warmup_longer_than_an_epoch_carries_over():
    measured = run_harness(CountingWorkload(), spec(warmup=6, window=1), 100, Measurements())
    assert measured.warmup_steps == 6 and len(measured.windows) == 2


class LossWorkload(CountingWorkload):
    """A step's loss is its batch start, kept by block in BlockLosses as JAX and TensorFlow do."""

    def __init__(self):
        super().__init__()
        self.blocks, self.reads, self.closed_after_syncs = BlockLosses(), 0, []

    def step(self, batch: StepBatch) -> None:
        super().step(batch)
        self.blocks.add(np.float32(batch.start))

    def block_done(self) -> None:
        self.closed_after_syncs.append(self.syncs)
        self.blocks.close()

    def block_losses(self) -> list[float]:
        self.reads += 1
        return self.blocks.means(np.atleast_1d)


def test_every_block_reports_the_mean_loss_of_its_steps():
    workload = LossWorkload()
    measured = run_harness(workload, spec(), 100, Measurements())
    # epoch 1: warmup [0, 32, 64], window [96]; epoch 2: [0, 32], [64, 96]
    assert measured.block_losses == [32.0, 96.0, 16.0, 80.0] and workload.reads == 1
    assert workload.closed_after_syncs == [2, 3, 4, 5] and workload.syncs == 5  # after each block's clock read, no sync of its own
    assert run_harness(CountingWorkload(), spec(), 100, Measurements()).block_losses == []  # a workload without losses: none


def test_latency_percentiles_from_single_step_windows():
    measured = Measurements(windows=[[1, 8, t / 1000] for t in range(1, 101)])
    latency = measured.latency_ms()
    assert latency["p50"] == pytest.approx(50.5) and latency["p99"] == pytest.approx(99.01)
    assert latency["max"] == pytest.approx(100.0)


def test_engine_exception_becomes_a_failed_result(tmp_path, make_spec):
    from bench_engine.api import Engine

    class Broken(Engine):
        name, framework = "broken", "none"

        def environment(self, spec):
            return EnvironmentFacts(framework_version="0", device_kind="cpu", devices=())

        def prepare(self, spec, data):
            raise MemoryError("out of memory while allocating")

    result, code = execute(Broken(), RunSpec.from_json(make_spec("broken")))
    document = result.to_json()
    assert code == 1 and document["status"] == "failed" and document["failure"]["kind"] == "oom"
    validate(json.loads(json.dumps(document)), "engine-result")


def test_normalize_matches_the_contract():
    from bench_engine.data import normalize

    out = normalize(np.array([[[[0, 255, 127]]]], dtype=np.uint8))
    assert out.dtype == np.float32 and out[0, 0, 0, 0] == -1.0 and out[0, 0, 0, 1] == 1.0


def test_normalize_lookup_gives_the_formulas_bits_for_every_value_and_shape():
    from bench_engine.data import normalize, normalize_formula

    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(5, 7, 6, 3), dtype=np.uint8)
    images[0, 0, 0] = [0, 255, 128]
    for sample in (images, np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1), images[:, ::2]):
        out, expected = normalize(sample), normalize_formula(sample)
        assert out.dtype == np.float32 and out.shape == sample.shape
        assert np.array_equal(out.view(np.uint32), expected.view(np.uint32))  # bit for bit, not approximately


def test_normalize_refuses_images_that_are_not_uint8():
    from bench_engine.data import DatasetError, normalize

    with pytest.raises(DatasetError, match="uint8"):
        normalize(np.zeros((1, 2, 2, 3), dtype=np.int16))


def test_step_queue_groups_full_batches_and_keeps_order():
    from bench_engine.dispatch import StepQueue, planned_dispatches

    calls: list[tuple[int, ...]] = []
    queue = StepQueue(3, 32, lambda b: calls.append((b.start,)), lambda bs: calls.append(tuple(b.start for b in bs)))
    batches = [StepBatch(epoch=1, index=i, start=32 * i, size=32) for i in range(4)] + [StepBatch(epoch=1, index=4, start=128, size=4)]
    for batch in batches:
        queue.push(batch)
    queue.flush()
    assert calls == [(0, 32, 64), (96,), (128,)]  # a full group; the partial batch first runs the shorter queue

    # the schedule of spec(): 100 samples, batch 32, 4 steps an epoch (the last of 4), 3 warmup, windows of 2
    plan = planned_dispatches(spec(), 100, group=2)
    assert plan == [(32, (0, 32)), (32, (64,)), (4, (96,)),  # epoch 1: warmup [32 32 | 32 flushed at the sync], window [4]
                    (32, (0, 32)), (32, (64,)), (4, (96,))]  # epoch 2: windows [32 32] and [32 | 4]
    assert [c for c in planned_dispatches(spec(), 100, group=1)] == [(b.size, (b.start,)) for e in (1, 2) for b in batches_of_epoch(e, 100, 32, 4)]
