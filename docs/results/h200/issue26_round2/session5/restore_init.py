"""Re-make an artifact's shared initial weights (left behind on the device) from the seed, in the places its manifest
lists them: the artifact's init/ file and the runs that held a copy (runs kept from a published copy hold none)."""
import json
import sys
from pathlib import Path

from orchestrator.model.initweights import place_in_run, write_init

for art in map(Path, sys.argv[1:]):
    listed = {entry["path"]: entry["sha256"] for entry in json.loads((art / "manifest.json").read_text())["files"]}
    made = {}
    for spec_path in sorted(art.glob("runs/*/spec.json")):
        run_file = f"runs/{spec_path.parent.name}/init.safetensors"
        spec = json.loads(spec_path.read_text())
        init = spec["parity"].get("init") or {}
        if init.get("mode") != "shared" or run_file not in listed:
            continue
        p = spec["parity"]
        key = (p["model"]["arch"], p["model"]["num_classes"], p["input"]["channels"], p["seed"])
        if key not in made:
            made[key] = write_init(art, *key)
        path, sha = made[key]
        assert sha == init["sha256"], (spec_path, sha, init["sha256"])
        place_in_run(path, spec_path.parent)
    stray = [path for path in art.glob("init/*") if f"init/{path.name}" not in listed]
    for path in stray:
        path.unlink()
    print(art, "init restored:", list(made), "runs:", sum(1 for f in listed if f.endswith("/init.safetensors")))
