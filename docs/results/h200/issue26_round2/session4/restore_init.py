"""Re-make an artifact's shared initial weights (left behind on the device) from the seed, and place them in its runs."""
import json
import sys
from pathlib import Path

from orchestrator.model.initweights import place_in_run, write_init

for art in map(Path, sys.argv[1:]):
    made = {}
    for spec_path in sorted(art.glob("runs/*/spec.json")):
        spec = json.loads(spec_path.read_text())
        init = spec["parity"].get("init") or {}
        if init.get("mode") != "shared":
            continue
        p = spec["parity"]
        key = (p["model"]["arch"], p["model"]["num_classes"], p["input"]["channels"], p["seed"])
        if key not in made:
            made[key] = write_init(art, *key)
        path, sha = made[key]
        assert sha == init["sha256"], (spec_path, sha, init["sha256"])
        place_in_run(path, spec_path.parent)
    print(art, "init restored:", list(made))
