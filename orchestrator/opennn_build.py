"""Build the OpenNN engine's driver for the local runtime (``bench env create opennn``).

images/opennn/build.sh compiles OpenNN's library target from the pinned archives and then
bench's driver, into a cache keyed by the checksums of the sources (bench_opennn.locate), so a
second call finds it built. Archives come from ``--vendor`` or ``BENCH_OPENNN_VENDOR``; they
are checked here (present, pinned sha256) before build.sh looks for a compiler: inputs first.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from orchestrator.artifacts.manifest import file_sha256
from orchestrator.engines.registry import get_engine
from orchestrator.errors import BadInput


class BuildFailed(BadInput):
    """A compile step failed (build.sh exit 1); the message names the step and its log."""


@dataclass(frozen=True)
class BuildRequest:
    cuda: bool = False
    vendor: str | None = None
    cuda_arch: str = "90"
    cudnn_root: str | None = None
    deps_prefix: str | None = None
    jobs: int | None = None


@cache
def locate_module() -> ModuleType:
    """images/opennn/bench_opennn/locate.py (the adapter's own cache layout), loaded by path."""
    path = get_engine("opennn").folder / "bench_opennn" / "locate.py"
    spec = importlib.util.spec_from_file_location("bench_opennn_locate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def build_command(request: BuildRequest) -> list[str]:
    """The build.sh command line for ``request`` (prefixes from the checksum-keyed cache)."""
    locate = locate_module()
    variant = locate.variant_name(request.cuda, request.cuda_arch)
    lib, driver = locate.prefixes(variant)
    vendor = request.vendor or os.environ.get("BENCH_OPENNN_VENDOR")
    if not (lib / ".complete").is_file() and not vendor:
        raise BadInput("OpenNN sources: pass --vendor DIR or set BENCH_OPENNN_VENDOR to a folder holding the archives of images/opennn/sources.txt")
    if not (lib / ".complete").is_file():
        check_archives(Path(vendor).expanduser())
    command = [str(get_engine("opennn").folder / "build.sh"), "--lib-prefix", str(lib), "--driver-prefix", str(driver)]
    if vendor:
        command += ["--vendor", str(Path(vendor).expanduser())]
    if request.cuda:
        command += ["--cuda", "--cuda-arch", request.cuda_arch]
        cudnn = request.cudnn_root or cudnn_from_wheel()
        if cudnn:
            command += ["--cudnn-root", cudnn]
    if request.deps_prefix:
        command += ["--deps-prefix", request.deps_prefix]
    if request.jobs:
        command += ["--jobs", str(request.jobs)]
    return command


def check_archives(vendor: Path) -> None:
    """Every archive of sources.txt in ``vendor`` with its pinned sha256, else BadInput naming the file.

    The same checks (and words) as build.sh's, made before it runs: a bad archive is reported
    even on a machine without the toolchain, whose absence build.sh would report first."""
    if not vendor.is_dir():
        raise BadInput(f"OpenNN build: --vendor {vendor}: not a folder")
    pins = locate_module().sources(get_engine("opennn").folder)
    for pin in pins:  # every archive present before any is hashed
        if not (vendor / pin.file).is_file():
            raise BadInput(f"OpenNN build: source archive missing: {vendor / pin.file} ({pin.name} at {pin.upstream} commit {pin.commit})")
    for pin in pins:
        got = file_sha256(vendor / pin.file)
        if got != pin.sha256:
            raise BadInput(f"OpenNN build: source archive corrupt: {vendor / pin.file} has sha256 {got}, expected {pin.sha256}")


def cudnn_from_wheel() -> str | None:
    """The folder of the nvidia-cudnn-cu13/cu12 wheel in this Python, if installed."""
    try:
        import nvidia.cudnn  # type: ignore[import-not-found]
    except ImportError:
        return None
    paths = list(getattr(nvidia.cudnn, "__path__", []))
    return paths[0] if paths else None


def build(request: BuildRequest) -> Path:
    """Run build.sh (its progress on stderr); return the driver binary. BadInput on bad inputs."""
    command = build_command(request)
    errors: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        for line in proc.stderr:  # build.sh's progress, passed through as it comes
            sys.stderr.write(line)
            if line.startswith("bench-opennn-build:"):
                errors.append(line.strip())
        stdout = proc.stdout.read()
    if proc.returncode != 0:
        message = errors[-1].removeprefix("bench-opennn-build:").strip() if errors else f"build.sh exited with {proc.returncode}"
        if proc.returncode == 1:
            raise BuildFailed(f"OpenNN build: {message}")
        raise BadInput(f"OpenNN build: {message.removeprefix('error:').strip()}")
    return Path(stdout.strip().splitlines()[-1])
