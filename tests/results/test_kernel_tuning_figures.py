"""The README's figures for ``inductor_kernel_tuning`` (issue 26, session 22) are what ``bench results compare``
reads from the published H100 artifacts, and those artifacts say which mode each side ran."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.cli.console import out
from tests.conftest import REPO
from tests.results.helpers import run_cli

SESSION = REPO / "docs" / "results" / "h100" / "issue26_session22"
DOCS = (REPO / "README.md", SESSION / "README.md", REPO / "docs" / "results" / "h200" / "issue26_round2" / "README.md")


def _artifact(name: str) -> Path:
    (folder,) = (SESSION / name).iterdir()
    return folder


def _ratios(default: str, tuned: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> dict[str, str]:
    monkeypatch.setattr(out, "width", 200)
    code, text, err = run_cli(["results", "compare", _artifact(default), _artifact(tuned)], monkeypatch, capsys)
    assert code == 0, err
    assert re.search(r"optimizations\.inductor_kernel_tuning\s+off: auto: off.*\s+on: option:", text)
    return dict(re.findall(r"^pytorch\s+(\w+)\s+\d+/\d+\s+([\d.]+x)\s", text, re.M))


def test_the_docs_quote_the_compare_of_the_published_pairs(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture) -> None:
    at_224 = _ratios("train224_default", "train224_kerneltune", monkeypatch, capsys)
    at_32 = _ratios("cifar_default", "cifar_kerneltune", monkeypatch, capsys)
    assert at_224 == {"bf16": "1.037x"} and at_32 == {"bf16": "0.994x", "tf32": "0.975x"}
    for doc in DOCS:
        text = " ".join(doc.read_text().split())
        assert "1.037x" in text and "0.994x" in text and "0.975x" in text, doc
