"""Where the OpenNN driver binary is: an explicit path, or bench's build cache keyed by checksums.

Cache layout (``BENCH_OPENNN_CACHE``, default ``~/.cache/bench/opennn``)::

    <variant>-<library key>/lib/                       OpenNN + Eigen installed (build.sh --lib-prefix)
    <variant>-<library key>/driver-<driver key>/bin/   bench_opennn_driver (build.sh --driver-prefix)

The library key hashes the pinned sources (sources.txt), build.sh and the <format> shim; the
driver key adds the driver's sources, so editing the driver rebuilds only the driver.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parent.parent
DRIVER_NAME = "bench_opennn_driver"
VARIANTS = ("cpu", "cuda")


class DriverMissing(RuntimeError):
    """No built driver for the variant (the message says how to build one)."""


@dataclass(frozen=True)
class Source:
    name: str
    file: str
    sha256: str
    upstream: str
    commit: str


def sources(engine_dir: Path = ENGINE_DIR) -> list[Source]:
    """The pinned archives of sources.txt."""
    out = []
    for line in (engine_dir / "sources.txt").read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            out.append(Source(*fields[:5]))
    return out


def _digest(paths: list[Path], extra: str) -> str:
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        digest.update(path.relative_to(ENGINE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    return Path(os.environ.get("BENCH_OPENNN_CACHE") or Path.home() / ".cache" / "bench" / "opennn")


def variant_name(cuda: bool, cuda_arch: str = "90") -> str:
    return f"cuda-sm{cuda_arch}" if cuda else "cpu"


def library_key(variant: str) -> str:
    files = [ENGINE_DIR / "sources.txt", ENGINE_DIR / "build.sh", *sorted((ENGINE_DIR / "compat").iterdir())]
    return _digest(files, variant)


def driver_key(variant: str) -> str:
    files = sorted(p for p in (ENGINE_DIR / "driver").iterdir() if p.is_file())
    return _digest(files, library_key(variant))


def prefixes(variant: str) -> tuple[Path, Path]:
    """(library prefix, driver prefix) of ``variant`` in the cache."""
    base = cache_root() / f"{variant}-{library_key(variant)}"
    return base / "lib", base / f"driver-{driver_key(variant)}"


def build_info(prefix: Path) -> dict[str, str]:
    """The ``key value`` lines build.sh wrote into a prefix."""
    path = prefix / "build-info.txt"
    if not path.is_file():
        return {}
    info = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        info[key] = value
    return info


def cached_variants() -> list[str]:
    """Variants (cpu, cuda-smNN) whose library and current driver are built in the cache."""
    root = cache_root()
    found = []
    for folder in sorted(root.glob("*-*")) if root.is_dir() else []:
        variant = folder.name.rsplit("-", 1)[0]
        lib, drv = prefixes(variant)
        if (lib / ".complete").is_file() and (drv / ".complete").is_file() and (drv / "bin" / DRIVER_NAME).is_file():
            found.append(variant)
    return found


def find_driver(cuda: bool) -> tuple[Path, dict[str, str]]:
    """The driver for a CPU or CUDA run and its build info; DriverMissing says how to build it."""
    explicit = os.environ.get("BENCH_OPENNN_DRIVER")
    if explicit:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise DriverMissing(f"BENCH_OPENNN_DRIVER={explicit} is not an executable file")
        info = build_info(path.parent.parent)
        if info.get("variant") and (info["variant"] == "cuda") != cuda:
            raise DriverMissing(f"BENCH_OPENNN_DRIVER={explicit} is a {info['variant']} build; this run needs {'CUDA' if cuda else 'the CPU'}")
        return path, info
    wanted = [v for v in cached_variants() if v.startswith("cuda") == cuda]
    if not wanted:
        how = "bench env create opennn --cuda" if cuda else "bench env create opennn"
        raise DriverMissing(f"OpenNN is not built for {'CUDA' if cuda else 'the CPU'} in {cache_root()}: run '{how}' "
                            "(sources from BENCH_OPENNN_VENDOR or --vendor)")
    _, drv = prefixes(wanted[0])
    return drv / "bin" / DRIVER_NAME, build_info(drv)
