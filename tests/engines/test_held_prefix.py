"""An engine holds only the samples its steps read (bench_engine.data.Dataset.prefix, schedule.samples_read):
the prefix covers every step the harness issues, the split's count and hash stay the whole split's."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench_engine.data import Dataset, load_dataset
from bench_engine.harness import timing_blocks
from bench_engine.schedule import Schedule, samples_read, steps_per_epoch


@pytest.mark.parametrize(("samples", "batch", "steps", "drop_last", "world"),
                         [(96, 8, 3, True, 1), (96, 32, 3, True, 1), (100, 32, 4, False, 1), (30720, 1, 120, True, 1),
                          (30720, 256, 120, True, 1), (96, 4, 5, True, 2), (97, 16, None, False, 2)])
def test_every_step_reads_inside_the_prefix(samples: int, batch: int, steps: int | None, drop_last: bool, world: int) -> None:
    global_batch = batch * world
    steps = steps or steps_per_epoch(samples, global_batch, drop_last)
    plan = Schedule(per_device=batch, steps_per_epoch=steps, epochs=2, warmup_steps=2, window_steps=3)
    read = samples_read(samples, global_batch, steps)
    ends = [step.start + step.size for block in timing_blocks(plan, samples, world) for step in block.steps]
    assert max(ends) == read  # all the prefix is read, nothing past it
    assert read <= samples


def test_prefix_holds_the_first_samples_and_keeps_the_splits_count() -> None:
    images = np.arange(10 * 2 * 2 * 3, dtype=np.uint8).reshape(10, 2, 2, 3)
    labels = np.arange(10, dtype=np.int32)
    whole = Dataset(images, labels, "ab" * 32)
    part = whole.prefix(4)
    assert (part.samples, part.held, part.sha256) == (10, 4, whole.sha256)
    assert np.array_equal(part.images, images[:4]) and np.array_equal(part.labels, labels[:4])
    assert part.prefix(2).samples == 10  # a prefix of a prefix still names the split
    assert whole.prefix(10, copy=False) is whole and whole.prefix(99).held == 10
    assert whole.prefix(10).images is not images  # copied


def test_prefix_of_a_memory_map_is_copied_out(smoke_split: Any) -> None:
    mapped = load_dataset(smoke_split.path, smoke_split.sha256, mmap=True)
    part = mapped.prefix(24)
    assert not isinstance(part.images, np.memmap) and part.images.flags.writeable
    assert isinstance(mapped.prefix(24, copy=False).images, np.memmap)
    assert np.array_equal(part.images, np.load(Path(smoke_split.path) / "images.npy")[:24])


@pytest.mark.parametrize("engine", ["pytorch", "jax"])
def test_an_inference_run_holds_only_what_its_steps_read(make_spec: Any, run_engine: Any, engine: str) -> None:
    spec = make_spec(engine, mode="infer", batch=8, steps_per_epoch=3)
    code, result, log = run_engine(spec)
    assert code == 0, log
    assert "96 samples; the steps read its first 24, only those are held" in log
    assert result["work"]["dataset_samples"] == 96 and result["work"]["samples"] == 24


def test_a_training_epoch_over_the_split_holds_it_all(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", batch=32, steps_per_epoch=3)
    code, _, log = run_engine(spec)
    assert code == 0, log
    assert "(96 samples) mapped" in log


def test_samples_read_is_monotone_and_bounded() -> None:
    for samples, batch, steps in itertools.product((1, 7, 96), (1, 5, 32), (1, 3, 40)):
        read = samples_read(samples, batch, steps)
        assert 0 < read <= samples and read == min(samples, batch * steps)


def test_the_split_hash_read_beside_the_setup_is_the_splits_and_refuses_another(smoke_split: Any, tmp_path: Path) -> None:
    """bench_engine.data.SplitHash: the thread's hash is split_sha256's; a different spec hash, or a file that
    cannot be read, is a DatasetError when the engine asks for it (before its first step), never before."""
    from bench_engine.data import DatasetError, SplitHash, split_sha256

    hashing = SplitHash(smoke_split.path)
    assert hashing.verified(smoke_split.sha256) == split_sha256(Path(smoke_split.path)) == smoke_split.sha256
    assert not hashing._thread.is_alive() and hashing.hash_s > 0
    with pytest.raises(DatasetError, match="does not match the spec's 000000000000"):
        SplitHash(smoke_split.path).verified("0" * 64)
    missing = SplitHash(tmp_path / "nowhere")  # the thread fails; the caller hears of it when it asks
    with pytest.raises(DatasetError, match="could not be hashed"):
        missing.verified(None)


def test_a_run_logs_the_hash_it_waited_for_and_reports_the_wait(make_spec: Any, run_engine: Any) -> None:
    spec = make_spec("pytorch", mode="infer", batch=8, steps_per_epoch=3)
    code, result, log = run_engine(spec)
    assert code == 0, log
    assert "beside the setup (waited" in log
    parts = result["measurements"]["setup_parts"]
    assert parts["hash_s"] > 0 and parts["hash_wait_s"] >= 0
    in_sum = sum(value for name, value in parts.items() if name != "hash_s")
    assert in_sum == pytest.approx(result["measurements"]["setup_s"], rel=1e-6)
