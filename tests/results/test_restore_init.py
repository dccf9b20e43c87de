"""benchmarks/restore_init.py: an artifact copied back without its shared weights validates again once they are
re-made from the seed; a spec whose hash is not the seed's weights is refused, and nothing is placed for it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from orchestrator.artifacts import seal
from orchestrator.artifacts.layout import Artifact
from orchestrator.artifacts.manifest import write_manifest
from orchestrator.artifacts.validate import validate_artifact
from orchestrator.jsonio import write_json
from orchestrator.model.initweights import RUN_FILE, place_in_run, write_init

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

from restore_init import main  # noqa: E402


def _with_shared_weights(root: Path, sha: str) -> None:
    """Each run given a spec naming shared weights of ``sha`` and the weights' link, then the artifact re-sealed."""
    weights = next((root / "init").iterdir())
    for run in sorted((root / "runs").iterdir()):
        spec = json.loads((FIXTURES / "example-run-spec.json").read_text())
        spec["run_id"] = run.name
        spec["parity"]["init"] = {"mode": "shared", "file": RUN_FILE, "sha256": sha, "format": "bench-init-v1"}
        write_json(run / "spec.json", spec)
        place_in_run(weights, run)
    manifest = json.loads((root / "manifest.json").read_text())
    seal.start(root, trust_current=True)  # files added by hand after the manifest sealed it: adopt them
    write_manifest(Artifact(root, manifest["scenario"], manifest["artifact_id"]), complete=True)


def test_the_weights_left_behind_are_re_made_and_the_copy_validates(make_artifact: Callable[..., Path], capsys) -> None:
    root = make_artifact({("pytorch", "bf16"): [100.0, 101.0]})
    _, sha = write_init(root, "resnet50_v1.5", 10, 3, 0)
    _with_shared_weights(root, sha)
    assert validate_artifact(root) == []
    for weights in root.rglob("*.safetensors"):  # what a campaign's tar leaves behind
        weights.unlink()
    assert validate_artifact(root)  # listed but missing
    assert main([str(root)]) == 0
    assert "re-made in 2 run folder(s)" in capsys.readouterr().out
    assert validate_artifact(root) == []


def test_a_hash_that_is_not_the_seeds_weights_is_refused(make_artifact: Callable[..., Path], capsys) -> None:
    root = make_artifact({("pytorch", "bf16"): [100.0]})
    write_init(root, "resnet50_v1.5", 10, 3, 0)
    _with_shared_weights(root, "ab" * 32)  # weights of some other seed
    for weights in (root / "runs").rglob("*.safetensors"):
        weights.unlink()
    assert main([str(root)]) == 1
    assert "are not those of ('resnet50_v1.5', 10, 3, 0)" in capsys.readouterr().err
    assert not list((root / "runs").rglob("*.safetensors"))
