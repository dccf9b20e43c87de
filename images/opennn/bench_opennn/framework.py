"""Imported by ``bench env`` / the local runtime to ask "is OpenNN usable here?".

The import fails, with the reason as its message, when no driver is built (the framework of this
engine is a compiled program, not a Python package).
"""

from __future__ import annotations

import os
from pathlib import Path

from bench_opennn.locate import build_info, cached_variants, sources

_explicit = os.environ.get("BENCH_OPENNN_DRIVER")
if _explicit:
    if not (Path(_explicit).is_file() and os.access(_explicit, os.X_OK)):
        raise ImportError(f"BENCH_OPENNN_DRIVER={_explicit} is not an executable file")
    _variants = [build_info(Path(_explicit).parent.parent).get("variant", "driver") + " (BENCH_OPENNN_DRIVER)"]
else:
    _variants = cached_variants()
    if not _variants:
        raise ImportError("OpenNN driver not built: run 'bench env create opennn' (or --cuda) with BENCH_OPENNN_VENDOR set")

_opennn = next(s for s in sources() if s.name == "opennn")
__version__ = f"{_opennn.commit[:8]} ({', '.join(_variants)})"
