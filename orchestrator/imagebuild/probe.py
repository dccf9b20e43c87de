"""Run a built engine image once to read, from inside, what it really contains.

The image's ``python3`` imports the framework named by image.yaml's ``probe.module`` and
evaluates that file's expressions (framework version, CUDA, cuDNN); the CUDA_VERSION and
CUDNN_VERSION variables NVIDIA's images set are the fallback. It also checks that the engine
library and the adapter import, and which user the image runs as. No GPU and no network
are needed: these are the versions the framework was built with and ships.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.docker_client import ENGINE_LABEL, RUN_LABEL, hardened_host_config
from orchestrator.errors import BadInput
from orchestrator.imagebuild.metadata import ImageMeta

MARKER = "BENCH_PROBE "
TIMEOUT_S = 300

PROBE_SOURCE = r'''
import importlib, importlib.util, json, os, platform, sys
spec = json.loads(sys.argv[1])
out = {"python": platform.python_version(), "uid": os.getuid(), "errors": {}}
try:
    with open("/etc/os-release") as fh:
        rel = dict(l.rstrip("\n").split("=", 1) for l in fh if "=" in l)
    out["os"] = rel.get("PRETTY_NAME", "").strip('"') or None
except OSError:
    out["os"] = None
ns = {"os": os, "importlib": importlib}
try:
    module = importlib.import_module(spec["module"])
    ns[spec["module"].split(".")[0]] = importlib.import_module(spec["module"].split(".")[0])
    ns["module"] = module
except Exception as exc:
    out["errors"]["module"] = f"import {spec['module']}: {type(exc).__name__}: {exc}"
for key, expression in spec["fields"].items():
    value = None
    if "module" in ns:
        try:
            value = eval(expression, ns)
        except Exception as exc:
            out["errors"][key] = f"{type(exc).__name__}: {exc}"
    out[key] = None if value is None else str(value)
for key, var in (("cuda", "CUDA_VERSION"), ("cudnn", "CUDNN_VERSION")):
    if not out.get(key) and os.environ.get(var):
        out[key] = os.environ[var]
        out.setdefault("from_env", []).append(key)
try:
    import bench_engine
    out["engine_version"] = bench_engine.ENGINE_LIB_VERSION
except Exception as exc:
    out["errors"]["bench_engine"] = f"{type(exc).__name__}: {exc}"
try:
    found = importlib.util.find_spec(spec["adapter"]) is not None
except Exception as exc:
    found = False
    out["errors"]["adapter_spec"] = f"{type(exc).__name__}: {exc}"
if not found:
    out["errors"]["adapter"] = f"{spec['adapter']} is not importable"
print("BENCH_PROBE " + json.dumps(out), flush=True)
'''

DEFAULT_FIELDS = {"framework_version": "getattr(module, '__version__', None)"}


FATAL = ("module", "bench_engine", "adapter", "adapter_spec")  # errors that mean the image cannot run the engine


@dataclass(frozen=True)
class ProbeSpec:
    """What the probe imports (``module``, ``adapter``) and the expressions it evaluates (``fields``)."""

    module: str
    adapter: str
    fields: dict[str, str]

    def to_json(self) -> dict[str, str | dict[str, str]]:
        return {"module": self.module, "adapter": self.adapter, "fields": dict(self.fields)}


@dataclass(frozen=True)
class ProbeResult:
    """What the probe read inside an image (None: not read), and the errors it met, by what failed."""

    python: str | None = None
    uid: int | None = None
    os: str | None = None
    framework_version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    engine_version: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    from_env: tuple[str, ...] = ()  # versions read from NVIDIA's CUDA_VERSION / CUDNN_VERSION

    @classmethod
    def from_json(cls, doc: Any) -> ProbeResult:
        """The probe's printed document; ValueError when it is not one."""
        if not isinstance(doc, dict):
            raise ValueError("the probe prints a JSON object")

        def text(key: str) -> str | None:
            value = doc.get(key)
            return None if value is None else str(value)
        uid = doc.get("uid")
        return cls(text("python"), int(uid) if uid is not None else None, text("os"), text("framework_version"), text("cuda"),
                   text("cudnn"), text("engine_version"), {str(k): str(v) for k, v in (doc.get("errors") or {}).items()},
                   tuple(str(k) for k in doc.get("from_env") or ()))

    def fatal(self) -> dict[str, str]:
        """The errors that mean the image cannot run the engine (its framework, the engine library or the adapter)."""
        return {key: value for key, value in self.errors.items() if key in FATAL}


def probe_spec(meta: ImageMeta) -> ProbeSpec:
    fields = {k: v for k, v in meta.probe.items() if k != "module"}
    return ProbeSpec(meta.probe.get("module", meta.module), meta.module, {**DEFAULT_FIELDS, **fields})


def parse_probe_output(text: str) -> ProbeResult | None:
    for line in reversed(text.splitlines()):
        if line.startswith(MARKER):
            try:
                return ProbeResult.from_json(json.loads(line[len(MARKER):]))
            except (ValueError, TypeError, AttributeError):
                return None
    return None


def run_probe(client: Any, image_id: str, meta: ImageMeta) -> ProbeResult:
    """Run the probe in a throw-away, network-less, capability-less container; always remove it."""
    api = client.api
    container = api.create_container(
        image_id,
        entrypoint=["python3", "-c", PROBE_SOURCE],
        command=[json.dumps(probe_spec(meta).to_json())],
        environment={"NVIDIA_VISIBLE_DEVICES": "void", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONDONTWRITEBYTECODE": "1"},
        labels={RUN_LABEL: f"image-probe:{meta.engine}", ENGINE_LABEL: meta.engine},
        host_config=api.create_host_config(**hardened_host_config()),
        working_dir="/tmp",
        use_config_proxy=False,
    )
    cid = container["Id"]
    try:
        api.start(cid)
        deadline = time.monotonic() + TIMEOUT_S
        while api.inspect_container(cid)["State"]["Running"]:
            if time.monotonic() > deadline:
                raise BadInput(f"image {meta.engine}: the version probe did not finish within {TIMEOUT_S} s")
            time.sleep(0.2)
        state = api.inspect_container(cid)["State"]
        output = api.logs(cid, stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        api.remove_container(cid, force=True)
    found = parse_probe_output(output)
    if found is None:
        tail = " | ".join(output.strip().splitlines()[-3:]) or "no output"
        raise BadInput(f"image {meta.engine}: the version probe failed (exit {state.get('ExitCode')}): {tail[:300]}")
    return found
