"""Re-make the shared initial weights of artifacts copied back without them, from the seed, where the manifest lists them.

A campaign on a remote GPU copies back an artifact's small files only; bench's shared initial weights
(``init/*.safetensors`` and each run's ``init.safetensors`` link) stay behind, so the copy does not validate. The
weights are a pure function of (arch, classes, channels, seed): this re-makes them (``orchestrator.model.initweights``)
for every run whose spec names shared weights and whose folder the manifest lists them in (the runs kept from a
published copy hold none), checks each against the spec's hash, and removes an ``init/`` file the manifest does not
list. Then ``bench results validate`` and ``bench results publish`` work as on the machine that ran it.

    python3 benchmarks/restore_init.py ARTIFACT [ARTIFACT ...]   # exit 1 when a spec's hash is not the seed's weights
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator.model.initweights import RUN_FILE, place_in_run, write_init


def restore(artifact: Path) -> int:
    """Re-make and place the weights of ``artifact``; the number of run folders given them. ValueError on a mismatch."""
    listed = {entry["path"] for entry in json.loads((artifact / "manifest.json").read_text())["files"]}
    made: dict[tuple[str, int, int, int], tuple[Path, str]] = {}
    placed = 0
    for spec_path in sorted(artifact.glob("runs/*/spec.json")):
        parity = json.loads(spec_path.read_text())["parity"]
        init = parity.get("init") or {}
        if init.get("mode") != "shared" or f"runs/{spec_path.parent.name}/{RUN_FILE}" not in listed:
            continue
        key = (parity["model"]["arch"], parity["model"]["num_classes"], parity["input"]["channels"], parity["seed"])
        if key not in made:
            made[key] = write_init(artifact, *key)
        path, sha = made[key]
        if sha != init["sha256"]:
            raise ValueError(f"{spec_path}: its shared weights {init['sha256'][:12]} are not those of {key} ({sha[:12]})")
        place_in_run(path, spec_path.parent)
        placed += 1
    for stray in artifact.glob("init/*"):
        if f"init/{stray.name}" not in listed:
            stray.unlink()
    return placed


def main(argv: list[str] | None = None) -> int:
    failed = False
    for artifact in map(Path, sys.argv[1:] if argv is None else argv):
        try:
            print(f"{artifact}: shared weights re-made in {restore(artifact)} run folder(s)")
        except (OSError, ValueError, KeyError) as exc:
            print(f"{artifact}: {exc}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
