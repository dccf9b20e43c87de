"""bench_engine.dispatch's auto rule: the K that makes the fewest calls over the timed blocks (no framework needed)."""

from __future__ import annotations

from typing import Any

import pytest

from bench_engine.dispatch import (
    AUTO_CAP,
    auto_steps_per_dispatch,
    choose_steps_per_dispatch,
    planned_dispatches,
    timed_calls,
)
from bench_engine.harness import timing_blocks
from bench_engine.schedule import Schedule, steps_per_epoch
from orchestrator.scenario import load_scenario


def spec(samples: int, batch: int, spe: int, epochs: int, warmup: int, window: int) -> Schedule:
    return Schedule(per_device=batch, steps_per_epoch=spe, epochs=epochs, warmup_steps=warmup, window_steps=window)


# scenarios/opennn_seed.yaml: 50,000 samples, batch 128 (drop_last: 390 steps), 2 epochs, warmup 32, windows of 40:
# epoch 1 = 32 warmup + 8 x 40 + 38, epoch 2 = 9 x 40 + 30
SEED = spec(50000, 128, 390, 2, 32, 40)


def scenario_schedule(name: str) -> tuple[Schedule, int]:
    """(the fields of a one-device spec the harness's schedule reads, samples) of a bundled scenario."""
    scenario = load_scenario(name)
    w = scenario.workload
    samples, batch = w.dataset.samples, w.batch.size
    return spec(samples, batch, steps_per_epoch(samples, batch, w.batch.drop_last), w.epochs, w.warmup_steps,
                scenario.measurement.window_steps), samples


def test_the_seed_schedule_fits_ten() -> None:
    assert scenario_schedule("opennn_seed") == (SEED, 50000)
    blocks = [len(b.steps) for b in timing_blocks(SEED, 50000) if not b.warmup]
    assert blocks == [40] * 8 + [38] + [40] * 9 + [30]
    choice = auto_steps_per_dispatch(SEED, 50000)
    # K=10: 17 windows of 40 in 4 calls, 38 = 3 calls + 8 singles, 30 = 3 calls
    assert choice.steps == 10 and choice.reason == "auto: K=10 fitted to the timing blocks (82 calls for 748 timed steps)"
    # neither the window (40) nor the cap (16) is the rule: K=16 makes 193 calls, K=8 104, K=13 88
    assert [timed_calls(SEED, 50000, k)[0] for k in (8, 13, 16)] == [104, 88, 193]


def test_the_fit_beats_a_divisor_of_the_window() -> None:
    """Blocks of 12 and 11 (23 steps an epoch, no warmup): 11 makes 3 calls an epoch, 12 (the window) makes 12."""
    blocks = spec(23 * 4, 4, 23, 2, 0, 12)
    assert auto_steps_per_dispatch(blocks, 23 * 4).steps == 11
    assert (timed_calls(blocks, 23 * 4, 11), timed_calls(blocks, 23 * 4, 12)) == ((6, 46), (24, 46))


@pytest.mark.parametrize(("name", "fitted"), [("opennn_seed", 10), ("cifar_resnet50", 10), ("imagenet_resnet50", 5)])
def test_bundled_scenarios_need_no_dispatch_option(name: str, fitted: int) -> None:
    """auto gives each bundled training scenario the K its file used to set (the seed sets no engine option at all)."""
    schedule, samples = scenario_schedule(name)
    assert auto_steps_per_dispatch(schedule, samples).steps == fitted
    assert not load_scenario("opennn_seed").engines
    for engine in ("jax", "tensorflow"):
        assert "steps_per_dispatch" not in load_scenario("cifar_resnet50").engine_block(engine).options


def test_one_step_windows_and_no_timed_steps_stay_at_one() -> None:
    assert auto_steps_per_dispatch(spec(50000, 128, 390, 2, 32, 1), 50000).steps == 1  # every K: one call a block
    only_warmup = auto_steps_per_dispatch(spec(64, 16, 4, 1, 4, 2), 64)  # all 4 steps are warmup: nothing to fit
    assert only_warmup.steps == 1 and "(0 calls for 0 timed steps)" in only_warmup.reason


def test_the_cap_bounds_the_fit_and_ties_go_to_the_smaller_k() -> None:
    one_block = spec(40 * 8, 8, 40, 1, 0, 40)  # one timed block of 40 steps
    # under the cap K=10 (4 calls) and K=13 (3 calls + 1 single) tie: the smaller wins; 40 needs a cap of 40
    assert (timed_calls(one_block, 320, 10)[0], timed_calls(one_block, 320, 13)[0]) == (4, 4)
    assert auto_steps_per_dispatch(one_block, 320).steps == 10 and AUTO_CAP == 16
    assert auto_steps_per_dispatch(one_block, 320, cap=40).steps == 40
    tens = spec(10 * 2, 2, 10, 1, 0, 10)  # one block of 10: K=5 and K=9 both make 2 calls
    assert auto_steps_per_dispatch(tens, 20, cap=9).steps == 5 and auto_steps_per_dispatch(tens, 20, cap=10).steps == 10


def test_a_partial_batch_runs_alone() -> None:
    """drop_last false: the partial last batch is a single call and flushes the queue before it (as StepQueue)."""
    partial = spec(8 * 9 + 3, 8, 10, 1, 0, 10)  # one block: 9 full batches, then 3 samples
    assert timed_calls(partial, 75, 9) == (2, 10) and timed_calls(partial, 75, 10) == (10, 10)
    assert auto_steps_per_dispatch(partial, 75).steps == 9


@pytest.mark.parametrize("group", [1, 3, 10])
def test_timed_calls_are_the_planned_calls(group: int) -> None:
    """With no warmup every block is timed: the count is the number of calls the engines will make."""
    schedule = spec(50000, 128, 390, 2, 0, 40)
    assert timed_calls(schedule, 50000, group)[0] == len(planned_dispatches(schedule, 50000, group))


def test_choose_resolves_the_option() -> None:
    def choose(value: Any = "auto", kind: str = "cuda", blocked: str | None = None, world: int = 1) -> tuple[int, str]:
        made = choose_steps_per_dispatch(value, blocked=blocked, kind=kind, plan=SEED, samples=50000, world=world)
        return made.steps, made.reason

    assert choose() == (10, "auto: K=10 fitted to the timing blocks (82 calls for 748 timed steps)")
    steps, reason = choose(kind="cpu")
    assert steps == 1 and reason.startswith("auto: 1 (cpu:") and "4x slower" in reason
    assert choose(world=2)[0] == 1 and "several devices" in choose(world=2)[1]
    assert choose(kind="rocm")[0] == 1
    assert choose(4, kind="cpu") == (4, "steps_per_dispatch: 4") and choose(4, world=2)[0] == 4  # an integer wins
    assert choose(1) == (1, "one step per call (steps_per_dispatch: 1)")
    assert choose(blocked="inference") == (1, "inference") == choose(8, blocked="inference")
