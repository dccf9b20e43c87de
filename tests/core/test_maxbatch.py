"""Maximal batch search: the procedure on a known limit, and end to end with a simulated memory limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.artifacts import validate_artifact
from orchestrator.run.maxbatch import ProbeOutcome, chosen_batch, probe_length, search
from orchestrator.run.resume import plan_resume
from tests.core.cli_helpers import FAKE_SCENARIO, FIXTURES, run_cli


def limited(limit: int, calls: list[int]):
    def probe(batch: int) -> ProbeOutcome:
        calls.append(batch)
        return ProbeOutcome(batch, "fits" if batch <= limit else "oom")

    return probe


@pytest.mark.parametrize(("limit", "granularity", "expected"), [(37, 1, 37), (300, 8, 296), (5000, 8, 4096), (3, 1, 3)])
def test_grow_then_bisect_finds_the_limit(limit, granularity, expected):
    calls: list[int] = []
    found, probes, error = search(limited(limit, calls), 16, 4096, granularity)
    assert error is None and found == expected
    assert calls[:2] == [16, 32] or limit < 16
    assert len(probes) == len(calls) and len(calls) < 25


def test_errors_stop_the_search():
    found, _, error = search(lambda b: ProbeOutcome(b, "error: crash"), 8, 64, 1)
    assert found == 0 and error.startswith("error")
    found, _, error = search(lambda b: ProbeOutcome(b, "oom"), 8, 64, 1)
    assert error and "does not fit" in error


def test_chosen_batch_is_a_fraction_rounded_to_granularity():
    assert chosen_batch(512, 0.9, 8) == 456
    assert chosen_batch(37, 0.9, 1) == 33
    assert chosen_batch(4, 0.9, 8) == 3


@pytest.mark.parametrize(("warmup", "probe", "per_epoch", "expected"),
                         [(0, 3, 8, (None, 3)), (10, 3, 20, (None, 13)), (10, 3, 1, (13, None)), (10, 3, 4, (4, None)), (2, 1, 3, (None, 3))])
def test_a_probe_runs_the_warmup_then_its_own_steps_over_as_many_epochs_as_needed(warmup, probe, per_epoch, expected):
    assert probe_length(warmup, probe, per_epoch) == expected
    epochs, steps = expected
    assert (steps if steps is not None else epochs * per_epoch) >= warmup + probe


def test_a_limit_that_bites_after_the_warmup_is_found(capsys, monkeypatch, tmp_path, fake_engines):
    """Memory that only a later step takes (a CUDA graph captured after the engine's warmup), at batches
    whose split holds one step per epoch: a probe that stopped at the split's one step would fit them all."""
    scenario = tmp_path / "s.yaml"
    search_config = "{fraction: 0.9, start: 8, granularity: 1, probe_steps: 1, limit: 64}"
    text = FAKE_SCENARIO.read_text().replace("batch: {size: 16, drop_last: true}",
                                             f"batch: {{size: 16, drop_last: true, max_search: {search_config}}}")
    text = text.replace("warmup_steps: 1", "warmup_steps: 4").replace("epochs: 2", "epochs: 6")
    scenario.write_text(text + "engines:\n  fake: {options: {memory_limit_batch: 40, memory_limit_from_step: 5}}\n")
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--engines", "fake", "--precisions", "fp32",
                             "--runtime", "local", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    (search_record,) = json.loads(out)["max_batch"]
    assert search_record["max_batch"] == 40 and search_record["chosen_batch"] == 36
    assert {"batch": 64, "outcome": "oom"} in search_record["probes"]  # one step per epoch of 64 samples: 5 epochs
    artifact = Path(json.loads(out)["artifact"])
    probe_spec = json.loads((artifact / "maxbatch" / "fake-fp32-optimized-d1" / "b40" / "spec.json").read_text())
    assert probe_spec["parity"]["warmup_steps"] == 4 and probe_spec["parity"]["total_steps"] == 5


def test_scenario_runs_at_ninety_percent_of_the_simulated_maximum(capsys, monkeypatch, tmp_path, fake_engines):
    scenario = tmp_path / "s.yaml"
    text = FAKE_SCENARIO.read_text().replace("batch: {size: 16, drop_last: true}",
                                             "batch: {size: 16, drop_last: true, max_search: {fraction: 0.9, start: 4, granularity: 1, probe_steps: 1}}")
    scenario.write_text(text + "engines:\n  fake: {options: {memory_limit_batch: 37}}\n")
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--engines", "fake", "--precisions", "fp32",
                             "--runtime", "local", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    summary = json.loads(out)
    artifact = Path(summary["artifact"])
    (search_record,) = summary["max_batch"]
    assert search_record["max_batch"] == 37 and search_record["chosen_batch"] == 33
    assert [p["outcome"] for p in search_record["probes"]][:5] == ["fits", "fits", "fits", "fits", "oom"]
    (run,) = summary["runs"]
    assert run["batch_per_device"] == 33 and run["status"] == "ok"
    assert (artifact / "maxbatch" / "fake-fp32-optimized-d1" / "b64" / "result.json").is_file()
    assert validate_artifact(artifact) == []


def _interrupt_search(tmp_path: Path, search: str, engine: str, options: str, fault: str = "") -> Path:
    """Run a search scenario in a bench process, Ctrl-C it once a probe says it hangs; the artifact (sealed, exit 130)."""
    scenario = tmp_path / "s.yaml"
    text = FAKE_SCENARIO.read_text().replace("batch: {size: 16, drop_last: true}", f"batch: {{size: 16, drop_last: true, max_search: {search}}}")
    scenario.write_text(text + f"engines:\n  {engine}: {{options: {options}}}\n")
    env = {**os.environ, "BENCH_ENGINE_PATH": os.pathsep.join([str(FIXTURES / "fake_engine"), str(FIXTURES / "fake_engine2")]),
           "BENCH_FAKE_FAULT": fault}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "scenario", "run", str(scenario), "--runtime", "local",
                             "--engines", engine, "--precisions", "fp32", "--out", str(tmp_path / "r"), "--verbose"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, deadline = "", time.monotonic() + 120
    while "hanging" not in output and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output += line
    assert "hanging" in output, output
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output + rest
    (artifact,) = (tmp_path / "r" / "fake_tiny").iterdir()
    return artifact


def test_a_signal_during_a_probe_leaves_the_search_to_resume(tmp_path, fake_engines):
    """Ctrl-C while a probe runs: no search.json (not a failed search), so resume searches again."""
    artifact = _interrupt_search(tmp_path, "{start: 4, granularity: 1, probe_steps: 1}", "fake2", "{behaviour: hang}")
    assert not list((artifact / "maxbatch").glob("*/search.json"))
    assert validate_artifact(artifact) == []
    plan = plan_resume(artifact)
    assert [p.engine for p in plan.unsearched] == ["fake2"]
    # the runs recorded 'not started' at the scenario's placeholder batch are not run again at it: the search decides
    assert [r.plan.run_id for r in plan.superseded] == ["fake2-fp32-optimized-b16-d1-r1"]
    assert not [r for r in plan.to_run if r.plan.engine == "fake2"]


def _cut_search(tmp_path: Path) -> Path:
    """A search (simulated limit 37) cut by Ctrl-C while its probe at 64 hangs: the probes at 4..32 fitted before."""
    artifact = _interrupt_search(tmp_path, "{fraction: 0.9, start: 4, granularity: 1, probe_steps: 1}", "fake",
                                 "{memory_limit_batch: 37}", fault="probe-fake-fp32-b64:hang")
    progress = json.loads((artifact / "maxbatch" / "fake-fp32-optimized-d1" / "probes.json").read_text())
    assert [(p["batch"], p["outcome"]) for p in progress["probes"]] == [(4, "fits"), (8, "fits"), (16, "fits"), (32, "fits")]
    return artifact


def _resume(capsys, monkeypatch, artifact: Path) -> dict:
    code, _out, err = run_cli(capsys, monkeypatch, "scenario", "resume", str(artifact), "--runtime", "local", "--json")
    assert code == 0, err
    return json.loads((artifact / "maxbatch" / "fake-fp32-optimized-d1" / "search.json").read_text())


def test_a_resumed_search_takes_over_the_probes_an_earlier_sitting_sealed(capsys, monkeypatch, tmp_path, fake_engines):
    """Cut during its 5th probe, the search resumes from its sealed probes.json: the 4 probes that fitted are not made
    again (each points at its evidence under attempts/), the cut one is, and the search ends where an uncut one would."""
    artifact = _cut_search(tmp_path)
    search_record = _resume(capsys, monkeypatch, artifact)
    assert search_record["max_batch"] == 37 and search_record["chosen_batch"] == 33
    moved = "attempts/maxbatch-fake-fp32-optimized-d1/1"
    assert search_record["probes"][:5] == [{"batch": b, "outcome": "fits", "from": f"{moved}/b{b}"} for b in (4, 8, 16, 32)] + \
        [{"batch": 64, "outcome": "oom"}]
    for batch in (4, 8, 16, 32):  # the evidence is where the record says; the new sitting made no probe of these batches
        assert (artifact / moved / f"b{batch}" / "result.json").is_file()
        assert not (artifact / "maxbatch" / "fake-fp32-optimized-d1" / f"b{batch}").exists()
    assert validate_artifact(artifact) == []


def test_a_resumed_search_reuses_no_probe_the_manifest_never_sealed(capsys, monkeypatch, tmp_path, fake_engines):
    """A probes.json the manifest does not list (bench killed mid-search leaves the search folder in flight) is not
    taken over: every probe is made again."""
    from orchestrator.artifacts import open_artifact, write_manifest

    artifact = _cut_search(tmp_path)
    write_manifest(open_artifact(artifact), complete=False, in_flight_folders=["maxbatch"])  # as a SIGKILL leaves it
    search_record = _resume(capsys, monkeypatch, artifact)
    assert search_record["max_batch"] == 37
    assert not [p for p in search_record["probes"] if "from" in p]
    assert (artifact / "maxbatch" / "fake-fp32-optimized-d1" / "b4" / "result.json").is_file()


def test_recorded_probes_are_taken_only_from_the_same_search_and_only_fits_or_oom(tmp_path):
    """probes.json of another search (name, start, limit or granularity) gives none; an error outcome is probed again;
    a file that does not match its schema gives none."""
    from orchestrator.jsonio import write_json
    from orchestrator.run.maxbatch import ProbeOutcome, read_recorded_probes
    from orchestrator.scenario.workload import MaxSearch

    doc = {"schema_version": 1, "engine": "fake", "precision": "fp32", "path": "optimized", "devices": 1, "start": 4,
           "limit": 64, "granularity": 1, "probes": [{"batch": 4, "outcome": "fits"}, {"batch": 8, "outcome": "oom"},
                                                     {"batch": 6, "outcome": "error: failed: stalled"}]}
    write_json(tmp_path / "probes.json", doc, "maxbatch-probes")
    config = MaxSearch(fraction=0.9, start=4, limit=64, granularity=1)
    moved = "attempts/maxbatch-fake-fp32-optimized-d1/1"
    assert read_recorded_probes("fake-fp32-optimized-d1", tmp_path, moved, config) == {
        4: ProbeOutcome(4, "fits", f"{moved}/b4"), 8: ProbeOutcome(8, "oom", f"{moved}/b8")}
    assert read_recorded_probes("fake-bf16-optimized-d1", tmp_path, moved, config) == {}
    assert read_recorded_probes("fake-fp32-optimized-d1", tmp_path, moved, MaxSearch(fraction=0.9, start=8, limit=64, granularity=1)) == {}
    assert read_recorded_probes("fake-fp32-optimized-d1", tmp_path, moved, MaxSearch(fraction=0.9, start=4, limit=64, granularity=2)) == {}
    (tmp_path / "probes.json").write_text(json.dumps({**doc, "probes": [{"batch": 0, "outcome": "fits"}]}))
    assert read_recorded_probes("fake-fp32-optimized-d1", tmp_path, moved, config) == {}


@pytest.mark.parametrize(("limits_gib", "warned"), [((3.0, 4.0), "apart"), ((3.8, 4.0), None), ((3.0, None), "unknown")])
def test_maximal_batches_under_allocator_limits_far_apart_are_named_not_comparable(capsys, monkeypatch, tmp_path, fake_engines,
                                                                                    limits_gib, warned):
    """Each probe keeps the peak and the allocator limit its result reports; the search keeps the limit; two engines'
    searches whose limits are more than 10% apart get a warning in the summary (JAX's default 75% against PyTorch's
    whole device is 33% apart); beside an engine that reports no limit, the summary says the comparison is not judged."""
    scenario = tmp_path / "s.yaml"
    text = FAKE_SCENARIO.read_text().replace("batch: {size: 16, drop_last: true}",
                                             "batch: {size: 16, drop_last: true, max_search: {fraction: 0.9, start: 4, granularity: 1, probe_steps: 1}}")
    low, high = (None if g is None else int(g * 2**30) for g in limits_gib)
    high_option = "" if high is None else f", memory_limit_bytes: {high}"  # None: fake2 reports no limit
    scenario.write_text(text + f"engines:\n  fake: {{options: {{memory_limit_batch: 37, memory_limit_bytes: {low}}}}}\n"
                               f"  fake2: {{options: {{memory_limit_batch: 21{high_option}}}}}\n")
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--precisions", "fp32",
                             "--runtime", "local", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    summary = json.loads(out)
    searches = {s["engine"]: s for s in summary["max_batch"]}
    assert (searches["fake"]["max_batch"], searches["fake2"]["max_batch"]) == (37, 21)
    assert (searches["fake"]["memory_limit_bytes"], searches["fake2"].get("memory_limit_bytes")) == (low, high)
    fitted = next(p for p in searches["fake"]["probes"] if p["batch"] == 32)
    assert fitted == {"batch": 32, "outcome": "fits", "peak_memory_bytes": 32 * 2**20, "memory_limit_bytes": low}
    if warned == "apart":
        (warning,) = summary["max_batch_warnings"]
        assert "fake fp32 optimized d1 searched within 3.0 GiB" in warning and "fake2 fp32 optimized d1 within 4.0 GiB" in warning
        assert "memory_fraction" in warning and "not comparable" in err
    elif warned == "unknown":
        (warning,) = summary["max_batch_warnings"]
        assert warning.startswith("maximal batches not judged comparable: fake2 fp32 optimized d1 reported no allocator")
        assert "not judged comparable" in err
    else:
        assert "max_batch_warnings" not in summary
    artifact = Path(summary["artifact"])
    assert json.loads((artifact / "summary.json").read_text()).get("max_batch_warnings") == summary.get("max_batch_warnings")
    assert validate_artifact(artifact) == []


def test_limit_warnings_name_limits_a_tenth_apart_and_limits_unknown():
    from orchestrator.judge.maxbatch_limits import SearchLimit, limit_warnings

    def search(engine: str, limit: int | None) -> SearchLimit:
        doc = {"engine": engine, "precision": "bf16", "path": "optimized", "devices": 1}
        return SearchLimit.of(doc if limit is None else {**doc, "memory_limit_bytes": limit})

    gib = 2**30
    (unknown,) = limit_warnings([search("jax", 105 * gib), search("tensorflow", None)])  # one known: nothing to compare
    assert unknown.startswith("maximal batches not judged comparable: tensorflow bf16 optimized d1 reported no allocator")
    one_engine = [search("tensorflow", None), SearchLimit("tensorflow", "tensorflow fp32 optimized d1", None)]
    assert limit_warnings(one_engine) == []  # one engine's precisions share its allocator
    assert limit_warnings([search("jax", 105 * gib)]) == []
    assert limit_warnings([search("jax", 133 * gib), search("pytorch", 140 * gib)]) == []  # 5% apart
    assert limit_warnings([search("jax", 100 * gib), search("pytorch", 110 * gib)]) == []  # exactly 10%
    (warning,) = limit_warnings([search("pytorch", 140 * gib), search("jax", 105 * gib), search("tensorflow", 139 * gib)])
    assert warning.startswith("maximal batches not comparable: jax bf16 optimized d1 searched within 105.0 GiB, "
                              "pytorch bf16 optimized d1 within 140.0 GiB (33% more")


def memory_limited(limit_bytes: int, per_sample: int, fixed: int, calls: list[int], usable: float = 1.0):
    """A device whose peak grows by ``per_sample`` a sample over ``fixed``; a batch fits while its peak stays within
    ``usable`` x the limit (an allocator that fragments reaches less than its limit), and every probe reports both."""
    def probe(batch: int) -> ProbeOutcome:
        calls.append(batch)
        peak = fixed + per_sample * batch
        return ProbeOutcome(batch, "fits" if peak <= limit_bytes * usable else "oom", None, peak, limit_bytes)

    return probe


def test_peak_memory_guides_growth_to_just_above_the_predicted_maximum():
    """JAX's TResNet-M on an H200 at 95%: about 31 MB a sample over 0.6 GB in 142.6 GB. Doubling probes 2,048,
    4,096, 8,192, 6,144, 5,120, 4,608, 4,352, 4,480; guided by the peaks, 4,608 closes the bracket instead of 8,192,
    every batch above 4,608 is never compiled, and the bisection starts at the predicted 4,480, not 4,352."""
    calls: list[int] = []
    notes: list[str] = []
    probe = memory_limited(int(132.8 * 2**30), 31_100_000, 600_000_000, calls)
    found, probes, error = search(probe, 2048, 8192, 128, notes.append)
    plain: list[int] = []
    found_plain, _, _ = search(limited(found, plain), 2048, 8192, 128)
    assert error is None and found == found_plain == 4480
    assert calls == [2048, 4096, 4608, 4480] and max(calls) < 8192
    assert plain == [2048, 4096, 8192, 6144, 5120, 4608, 4352, 4480]
    assert [p.peak_memory_bytes for p in probes][:2] == [600_000_000 + 31_100_000 * 2048, 600_000_000 + 31_100_000 * 4096]
    growth, bisection = notes
    assert growth.startswith("probing 4608, not 8192: the peaks of the batches that fitted (2048, 4096) reach the 132.8 GiB limit near 4,5")
    assert bisection.startswith("probing 4480, not the midpoint 4352: the peaks of the batches that fitted (2048, 4096)")


def test_a_wrong_prediction_costs_the_bisection_one_probe_at_most(monkeypatch):
    """An allocator that stops short of its limit makes the guessed batch fail: the bisection then takes midpoints,
    finds the real maximum, probes no batch twice, and makes at most one probe more than the same search bisecting
    by midpoints only; where the allocator reaches its limit the guess saves probes."""
    import orchestrator.run.maxbatch as maxbatch

    def run(usable: float, per_sample: int, guided: bool) -> tuple[int, list[int]]:
        if not guided:
            monkeypatch.setattr(maxbatch, "bisection_guess", lambda *args: None)
        calls: list[int] = []
        found, _, error = search(memory_limited(150 * 10**9, per_sample, 7_900_000_000, calls, usable), 2048, 8192, 128)
        monkeypatch.undo()
        assert error is None
        return found, calls

    saved = 0
    for usable in (0.83, 0.9, 0.97, 1.0):
        for per_sample in (21_000_000, 28_600_000, 31_100_000):
            truth = max(b for b in range(128, 8193, 128) if 7_900_000_000 + per_sample * b <= 150 * 10**9 * usable)
            found, calls = run(usable, per_sample, True)
            found_plain, plain = run(usable, per_sample, False)
            assert found == found_plain == truth, (usable, per_sample, calls)
            assert len(calls) == len(set(calls)) and len(calls) <= len(plain) + 1, (usable, per_sample, calls, plain)
            if usable == 1.0:
                assert len(calls) <= len(plain), (per_sample, calls, plain)
                saved += len(plain) - len(calls)
    assert saved > 0


def test_an_allocator_that_reaches_less_than_its_limit_still_ends_at_the_real_maximum():
    """PyTorch's TResNet-M on the H200 ran out of memory near 83% of its limit: the guided bracket's top fails sooner,
    and the bisection still finds the largest batch that fits; a prediction below the batch that fitted grows it by
    an eighth at least, and a search whose probes report no memory doubles as before."""
    for usable in (0.83, 0.5, 1.0):
        calls: list[int] = []
        probe = memory_limited(150 * 10**9, 28_600_000, 7_900_000_000, calls, usable)
        found, _, error = search(probe, 2048, 8192, 128)
        truth = max(b for b in range(128, 8193, 128) if 7_900_000_000 + 28_600_000 * b <= 150 * 10**9 * usable)
        assert error is None and found == truth, (usable, calls)
        assert len(calls) == len(set(calls))


def test_growth_rules():
    from orchestrator.run.memory_model import MemoryPoint, bisection_guess, next_growth, predicted_max

    assert predicted_max([], 100) is None and predicted_max([MemoryPoint(10, 50)], None) is None
    assert predicted_max([MemoryPoint(10, 50)], 100) == 20  # through the origin: 5 a sample
    assert predicted_max([MemoryPoint(10, 60), MemoryPoint(20, 110)], 210) == pytest.approx(40)  # 5 a sample over 10
    assert predicted_max([MemoryPoint(10, 60), MemoryPoint(20, 60)], 210) is None  # flat: no prediction
    assert next_growth(16, 64, 1, None) == 32 and next_growth(48, 64, 1, None) == 64
    assert next_growth(16, 4096, 4, 21.5) == 24  # the first multiple of 4 above 21.5
    assert next_growth(16, 4096, 4, 100.0) == 32  # doubling is the smaller step
    assert next_growth(2048, 8192, 128, 1000.0) == 2304  # below the batch that fitted: an eighth more at least
    assert next_growth(4, 4096, 8, 3.0) == 8  # at least one granularity
    assert bisection_guess(4096, 4608, 128, 4565.7) == 4480  # the prediction rounded down to the granularity
    assert bisection_guess(4096, 4608, 128, 4100.0) is None  # rounds down onto the batch that fitted: a midpoint
    assert bisection_guess(4096, 4608, 128, 4700.0) is None  # above the batch that failed: the prediction is wrong
    assert bisection_guess(4096, 4608, 128, None) is None


def test_a_search_whose_probes_report_memory_skips_the_batches_far_above_it(capsys, monkeypatch, tmp_path, fake_engines):
    """End to end: the fake's peak is 1 MiB a sample in a 37 MiB limit; after 32 fits the search probes 38, not 64."""
    scenario = tmp_path / "s.yaml"
    text = FAKE_SCENARIO.read_text().replace("batch: {size: 16, drop_last: true}",
                                             "batch: {size: 16, drop_last: true, max_search: {fraction: 0.9, start: 4, granularity: 1, probe_steps: 1}}")
    scenario.write_text(text + f"engines:\n  fake: {{options: {{memory_limit_batch: 37, memory_limit_bytes: {37 * 2**20}}}}}\n")
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--engines", "fake", "--precisions", "fp32",
                             "--runtime", "local", "--out", str(tmp_path / "r"), "--json")
    assert code == 0, err
    (search_record,) = json.loads(out)["max_batch"]
    batches = [p["batch"] for p in search_record["probes"]]
    assert search_record["max_batch"] == 37 and batches[:5] == [4, 8, 16, 32, 38] and 64 not in batches
    assert "probing 38, not 64" in err
    assert validate_artifact(Path(json.loads(out)["artifact"])) == []
