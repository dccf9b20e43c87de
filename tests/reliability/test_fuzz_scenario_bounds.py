"""Property-based tests (hypothesis) of scenario documents and ``--set`` overrides, in-process: every
generated input is either valid, and then holds only finite numbers inside 64 bits, a name without a
line break and a matrix of at most MAX_RUNS runs that expands, or it is one BadInput naming the file;
never another exception, each within the example bound. Derandomized like test_fuzz_scenario."""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given
from hypothesis import strategies as st

from orchestrator.errors import BadInput
from orchestrator.scenario import expand, load_scenario
from orchestrator.scenario.bounds import INT_BOUND, MAX_RUNS, matrix_size
from tests.reliability.hostile_support import EXAMPLE_BOUND_S, FAKE_SCENARIO, FUZZ, fake_engines, record, save_figures

__all__ = ["fake_engines"]
pytestmark = pytest.mark.usefixtures("fake_engines")

BASE: dict[str, Any] = yaml.safe_load(FAKE_SCENARIO.read_text())
NUMERIC = ["workload.optimizer.lr", "workload.optimizer.momentum", "workload.optimizer.weight_decay", "workload.seed",
           "workload.model.num_classes", "workload.epochs", "workload.warmup_steps", "workload.batch.size",
           "workload.dataset.samples", "workload.input.height", "matrix.repeats", "measurement.timeout_s",
           "measurement.stall_s", "measurement.window_steps", "measurement.max_step_samples", "runtime.slurm.poll_s",
           "runtime.slurm.gpus", "runtime.docker.cpus", "runtime.docker.pids_limit"]
STRINGS = ["name", "workload.dataset.name", "runtime.slurm.partition", "runtime.slurm.time", "runtime.slurm.account",
           "runtime.docker.shm_size", "engines.fake.image", "engines.fake.interpreter"]
GROUP = "fuzz: numbers, names and matrices (in-process)"


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


edge_numbers = (st.floats(allow_nan=True, allow_infinity=True)
                | st.integers(min_value=-(2**200), max_value=2**200)
                | st.sampled_from([0, 1, -1, 2**63 - 1, 2**63, -(2**63) - 1, 1000, 1001, 100000, 100001, 2592000, 2592001,
                                   1048576, 1048577, 0.5, 1e-300, 1e300, float("nan"), float("inf"), True]))
edge_strings = st.text(alphabet="abc019_.-:\n\r\t\x00\x1b $`;,/", max_size=12)
axis_lists = st.lists(st.integers(1, 300), max_size=70) | st.lists(st.sampled_from(["fp32", "bf16", "fp16", "tf32", "x"]), max_size=6)


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    node = document
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
    node[last] = value


def _holds_its_bounds(document: Any) -> None:
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, float):
            assert math.isfinite(node)
        elif isinstance(node, int) and not isinstance(node, bool):
            assert -INT_BOUND <= node < INT_BOUND


def _judge(path: Path, sets: list[str]) -> None:
    start = time.perf_counter()
    try:
        scenario = load_scenario(str(path), sets)
        plans = expand(scenario)
    except BadInput as exc:
        assert str(exc).startswith((str(path), "--set")), exc
        event("refused")
    else:
        event("valid")
        _holds_its_bounds(scenario.document)
        assert re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", scenario.name)
        assert len(plans) == matrix_size(scenario.matrix) <= MAX_RUNS
    elapsed = time.perf_counter() - start
    record(GROUP, elapsed)
    assert elapsed < EXAMPLE_BOUND_S


@FUZZ
@given(edits=st.lists(st.one_of(st.tuples(st.sampled_from(NUMERIC), edge_numbers),
                                st.tuples(st.sampled_from(STRINGS), edge_strings),
                                st.tuples(st.sampled_from(["matrix.batch_sizes", "matrix.devices", "matrix.precisions"]), axis_lists)),
                      min_size=1, max_size=4))
def test_documents_with_edge_values(edits: list[tuple[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> None:
    document = copy.deepcopy(BASE)
    document["workload"]["dataset"]["samples"] = 10**6
    for dotted, value in edits:
        _set(document, dotted, value)
    path = tmp_path_factory.mktemp("bounds") / "s.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    _judge(path, [])


def _yaml_value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).removesuffix("\n...\n").strip()


@FUZZ
@given(sets=st.lists(st.one_of(st.tuples(st.sampled_from(NUMERIC), edge_numbers.map(_yaml_value)),
                               st.tuples(st.sampled_from(STRINGS), edge_strings.map(_yaml_value)),
                               st.tuples(st.sampled_from(NUMERIC + STRINGS), st.text(alphabet="0123456789.eE+-naif ", max_size=14))),
                     min_size=1, max_size=4))
def test_overrides_with_edge_values(sets: list[tuple[str, str]]) -> None:
    _judge(FAKE_SCENARIO, [f"{key}={value}" for key, value in sets])
