"""The model tests build every engine's models in-process: put the engine packages on the path."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO / "images" / "common", REPO / "images" / "pytorch", REPO / "images" / "jax", REPO / "images" / "tensorflow"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
