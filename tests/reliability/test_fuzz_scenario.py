"""Scenario fuzzing with hypothesis: generated YAML documents, mutated scenario text and ``--set``
values go through the CLI in-process; every one answers exit 0 or 2 (one line), never a traceback,
within the example bound. Examples per test: $BENCH_FUZZ_EXAMPLES (default 150); the examples are
derandomized (the same in every CI run) unless $BENCH_FUZZ_RANDOM is set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.core.cli_helpers import run_cli
from tests.reliability.hostile_support import FAKE_SCENARIO, FUZZ, call, fake_engines, save_figures, timed

__all__ = ["fake_engines"]
pytestmark = pytest.mark.usefixtures("fake_engines")

BASE: dict[str, Any] = yaml.safe_load(FAKE_SCENARIO.read_text())
BASE_TEXT = FAKE_SCENARIO.read_text()
YAML_CHARS = "&*[]{}:,-?!|>'\"#%@`\n\t \\.=0123456789abcxyzeE+_~"


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["fp32", "bf16", "fake", "fake2", "synthetic", "train", "sgd", "auto", "", "1e12", "32.0"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                      max_leaves=10)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = [p for p in _paths(BASE) if p]
DOTTED = sorted({".".join(map(str, p)) for p in PATHS if all(isinstance(k, str) for k in p)})


def _mutate(document: Any, path: tuple, action: str, value: Any, key: str) -> Any:
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = value
    elif isinstance(parent[last], dict):
        parent[last][key] = value
    elif isinstance(parent[last], list):
        parent[last].append(value)
    else:
        parent[last] = [parent[last], value]
    return document


@FUZZ
@given(data=st.data())
def test_generated_documents(data: st.DataObject, tmp_path_factory: pytest.TempPathFactory, capsys, monkeypatch) -> None:
    """The fake scenario with 1 to 4 random edits (a value replaced, a key deleted or added)."""
    import copy

    document = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(1, 4))):
        paths = [p for p in _paths(document) if p]
        if not paths:
            break
        document = _mutate(document, data.draw(st.sampled_from(paths)), data.draw(st.sampled_from(["replace", "delete", "add"])),
                           data.draw(values), data.draw(st.text(max_size=10)))
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True))
    with timed("fuzz: generated YAML documents"):
        code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code in (0, 2), err


@FUZZ
@given(edits=st.lists(st.tuples(st.integers(0, len(BASE_TEXT)), st.integers(0, 8), st.text(alphabet=YAML_CHARS, max_size=12)),
                      min_size=1, max_size=6))
def test_mutated_scenario_text(edits: list[tuple[int, int, str]], tmp_path_factory: pytest.TempPathFactory, capsys, monkeypatch) -> None:
    """The fake scenario's text with random spans replaced by YAML punctuation (anchors, aliases, tags, flow, quotes)."""
    text = BASE_TEXT
    for at, cut, insert in edits:
        text = text[:at] + insert + text[at + cut:]
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(text)
    with timed("fuzz: mutated scenario text"):
        code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code in (0, 2), err


set_keys = st.sampled_from(DOTTED) | st.sampled_from([d.removeprefix("workload.") for d in DOTTED if d.startswith("workload.")]) \
    | st.text(alphabet="abcz._-0 =", min_size=0, max_size=16)
set_values = st.text(alphabet=YAML_CHARS, max_size=24) | values.map(lambda v: yaml.safe_dump(v, default_flow_style=True, width=10**6).strip())


@FUZZ
@given(assignments=st.lists(st.tuples(set_keys, set_values), min_size=1, max_size=3))
def test_set_values(assignments: list[tuple[str, str]], capsys, monkeypatch) -> None:
    """``--set KEY=VALUE`` with known and random keys and YAML values, through ``scenario run --dry-run``."""
    args = [arg for key, value in assignments for arg in ("--set", f"{key}={value}")]
    with timed("fuzz: --set values"):
        code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--dry-run", "--runtime", "local", *args)
    assert code in (0, 2), err


def test_known_regressions(tmp_path: Path, capsys, monkeypatch) -> None:
    """Inputs the fuzzers or the issue found, kept as fixed examples."""
    for args, needle in [(["--set", "workload.batch.size=32.0"], "is not of type 'integer'"),
                         (["--set", "schema_version=2"], "schema_version"),
                         (["--set", "workload.dataset.samples=1000000000000"], "maximum"),
                         (["--runtime", "../../etc"], "--runtime"),
                         (["--set", "a b=1"], "dotted key")]:
        code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--dry-run", *args)
        assert code == 2 and needle in err, (args, err)
    code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--dry-run", "--set", "runtime.docker.shm_size=16g")
    assert code == 0, err
    # a field name holding a record separator (a line break for str.splitlines) stays one escaped line
    document = yaml.safe_load(BASE_TEXT)
    document["matrix"]["\x1e0"] = None
    path = tmp_path / "separator.yaml"
    path.write_text(yaml.safe_dump(document))
    code, _, err = call(capsys, monkeypatch, "scenario", "validate", str(path))
    assert code == 2 and "unknown field(s) \\x1e0" in err, err


def test_data_prepare_names_and_sizes(data_dir: Path, capsys, monkeypatch) -> None:
    """Any well-formed name works with synthetic data (as the error message says); absurd sizes are bad input."""
    code, _, err = call(capsys, monkeypatch, "data", "prepare", "my-data.v2", "--source", "synthetic", "--samples", "16", "--size", "4", "--json")
    assert code == 0, err
    assert (data_dir / "my-data.v2").is_dir()
    for args, needle in [(["../escape", "--source", "synthetic"], "not a dataset name"),
                         (["foo"], "source 'synthetic' works with any name"),
                         (["cifar10", "--source", "synthetic", "--samples", "1e12"], "samples"),
                         (["cifar10", "--source", "synthetic", "--samples", "1000000000000"], "samples"),
                         (["cifar10", "--source", "synthetic", "--samples", "2000000000"], "GB free")]:
        code, _, err = run_cli(capsys, monkeypatch, "data", "prepare", *args)
        assert code == 2 and needle in err and "Traceback" not in err, (args, err)
    assert not (data_dir.parent / "escape").exists()
