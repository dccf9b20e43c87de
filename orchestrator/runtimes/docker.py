"""The docker runtime: one container per run spec, from the engine's pinned image.

Each run gets a fresh container of ``bench/<engine>:latest`` (built by ``bench image build``;
never pulled), created by id so the record names exactly what ran:

- the dataset split mounted read-only at /bench/dataset, the run folder read-write at
  /bench/run (spec in, result and nothing else out);
- never root: when bench runs as root, the container runs as the image's own non-root user
  (``USER`` of the Dockerfile; uid 65534 if the image has none or names root) and the run folder
  is handed to that uid for the run, then back to bench's; otherwise as the invoking uid:gid;
- least privilege: ``network_mode none``, all capabilities dropped, ``no-new-privileges``,
  never privileged, a private IPC namespace, a read-only root filesystem (scratch in a
  tmpfs at /tmp; compilation caches on the named volume ``bench-compile-cache`` at
  /bench/cache), ``docker-init`` as PID 1, and limits: pids (``runtime.docker.pids_limit``,
  default 8192), memory without swap (``mem_limit``, default 90% of the host's memory, so the
  kernel's OOM killer ends the container, not bench; /dev/shm counts in it) and optionally CPUs
  (``cpus``);
- NVIDIA's recommended settings for its framework images (``--shm-size`` plus
  ``--ulimit memlock=-1 --ulimit stack=67108864``). NVIDIA documents ``--ipc=host`` as the
  alternative to a larger /dev/shm; sharing the host's IPC namespace is not least privilege,
  so bench gives the container its own, large /dev/shm instead (8g by default; PyTorch
  DataLoader workers and NCCL's intra-node transport live there). Unlimited memlock lets
  NCCL/CUDA pin host memory; the 64 MiB stack is what NVIDIA's images are tested with;
- GPUs through device requests (all, or ``visible_devices``) when the device is cuda, or auto
  on a host with GPUs; ``NCCL_NVLS_ENABLE=0`` (and the other multicast switches) always;
- output streamed into the run's engine.log and the console; a per-run timeout, Ctrl-C,
  SIGTERM and SIGHUP stop the container (SIGTERM, then SIGKILL after a grace period); every
  container carries the ``bench.run`` label and is removed whatever happens: a watchdog process
  (:mod:`orchestrator.runtimes.docker_watchdog`) removes it when bench itself dies (SIGKILL).

The run record's runtime block names the image, its id and base digest, and the security
options as ``docker inspect`` reported them for the container before it was removed.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator import signals
from orchestrator.engines import EngineInfo
from orchestrator.envvars import without_internal
from orchestrator.errors import BadInput
from orchestrator.gpus import nvml_snapshot, visible_ids
from orchestrator.runtimes import docker_watchdog
from orchestrator.runtimes.base import Execution, LineSink, RunPaths, Runtime
from orchestrator.runtimes.docker_client import ENGINE_LABEL, NO_GPU_SUPPORT, RUN_LABEL, GpuSupport, _reason, connect, find_image, gpu_support, is_local_daemon
from orchestrator.runtimes.local import FIXED_ENV

DATASET_MOUNT = "/bench/dataset"
RUN_MOUNT = "/bench/run"
WORKDIR = "/tmp"
DEFAULT_SHM_SIZE = "8g"
SHM_ENV = "BENCH_DOCKER_SHM_SIZE"
ULIMITS = ({"name": "memlock", "soft": -1, "hard": -1}, {"name": "stack", "soft": 67108864, "hard": 67108864})
GRACE_S = 10
POLL_S = 0.25
CACHE_VOLUME = "bench-compile-cache"
CACHE_MOUNT = "/bench/cache"
DEFAULT_PIDS_LIMIT = 8192
DEFAULT_TMP_SIZE = "8g"
NOBODY = "65534:65534"
SIZE = re.compile(r"[1-9][0-9]*[bkmgBKMG]?")
LABEL_BASE_NAME = "org.opencontainers.image.base.name"
LABEL_BASE_DIGEST = "org.opencontainers.image.base.digest"
LABEL_BASE_ID = "io.bench.base.image-id"
LABEL_VERSION = "org.opencontainers.image.version"
LABEL_REVISION = "org.opencontainers.image.revision"


def hardened_host_config() -> dict[str, Any]:
    """The least-privilege part of every bench container's host config."""
    return {"network_mode": "none", "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "privileged": False}


@dataclass(frozen=True)
class GpuAccess:
    """GPUs handed to a container: ``mode`` none | nvidia (device request) | cdi; no devices = all."""

    mode: str = "none"
    devices: tuple[str, ...] = ()
    why: str = ""

    def label(self) -> str:
        if self.mode == "none":
            return "none" + (f" ({self.why})" if self.why else "")
        return f"{','.join(self.devices) if self.devices else 'all'} via {self.mode}"

    def device_requests(self) -> list[dict[str, Any]]:
        if self.mode == "nvidia":
            if self.devices:
                return [{"driver": "nvidia", "count": 0, "device_ids": list(self.devices), "capabilities": [["gpu"]]}]
            return [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
        if self.mode == "cdi":
            ids = [f"nvidia.com/gpu={d}" for d in self.devices] or ["nvidia.com/gpu=all"]
            return [{"driver": "cdi", "device_ids": ids}]
        return []


def parse_visible(visible: Any) -> tuple[str, ...]:
    """settings['visible_devices'] ('0,2', [0, 2], 'all' or empty) as device ids (empty = all)."""
    ids = visible_ids(visible)
    for ident in ids:
        if not re.fullmatch(r"\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+", ident):
            raise BadInput(f"visible_devices: '{ident}' is not a GPU index or UUID")
    return ids


def plan_gpus(device: str, visible: Any, host_gpus: int, support: GpuSupport) -> GpuAccess:
    """Which GPUs a container gets. Pure: the caller supplies NVML's count and the daemon's support.

    cpu: none. cuda (or explicit visible_devices): GPUs, or BadInput when the daemon cannot
    hand them out. auto: GPUs when the host has some and the daemon can, else none (saying why).
    """
    ids = parse_visible(visible)
    if device == "cpu":
        return GpuAccess("none", why="--device cpu")
    requested = device == "cuda" or bool(ids)
    if not support.available:
        if requested:
            what = "--device cuda" if device == "cuda" else f"visible_devices {','.join(ids)}"
            raise BadInput(f"{what}: {NO_GPU_SUPPORT} (install the NVIDIA Container Toolkit and restart dockerd, or use --runtime local)")
        return GpuAccess("none", why=NO_GPU_SUPPORT if host_gpus else "no GPU on this host")
    if not requested and host_gpus == 0:
        return GpuAccess("none", why="no GPU on this host")
    return GpuAccess(support.mode or "nvidia", ids, support.how)


def _safe_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:100] or "run"


@dataclass(frozen=True)
class Limits:
    """Resource limits of a run's container (``runtime.docker`` settings)."""

    pids: int = DEFAULT_PIDS_LIMIT
    memory: str | None = None  # None: no limit
    cpus: float | None = None  # None: all the host's CPUs
    tmp_size: str = DEFAULT_TMP_SIZE

    def host_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"pids_limit": self.pids}
        if self.memory:
            config.update(mem_limit=self.memory, memswap_limit=self.memory)  # no swap on top
        if self.cpus:
            config["nano_cpus"] = int(self.cpus * 1e9)
        return config


def host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def limits(settings: dict[str, Any]) -> Limits:
    """``runtime.docker.{pids_limit, mem_limit, cpus, tmp_size}`` checked; defaults: 8192 pids, 90% of the host's memory."""
    block = settings.get("docker") if isinstance(settings.get("docker"), dict) else {}
    pids = block.get("pids_limit", DEFAULT_PIDS_LIMIT)
    if isinstance(pids, bool) or not isinstance(pids, int) or pids < 64:
        raise BadInput(f"runtime.docker.pids_limit: '{pids}' is not a whole number >= 64")
    memory = block.get("mem_limit")
    if memory is None:
        total = host_memory_bytes()
        memory = f"{int(total * 0.9) // (1 << 20)}m" if total else None
    elif memory == "none":
        memory = None
    elif not SIZE.fullmatch(str(memory)):
        raise BadInput(f"runtime.docker.mem_limit: '{memory}' is not a size like 64g or 'none'")
    cpus = block.get("cpus")
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int | float) or cpus <= 0):
        raise BadInput(f"runtime.docker.cpus: '{cpus}' is not a positive number")
    tmp_size = str(block.get("tmp_size", DEFAULT_TMP_SIZE))
    if not SIZE.fullmatch(tmp_size):
        raise BadInput(f"runtime.docker.tmp_size: '{tmp_size}' is not a size like 8g")
    return Limits(pids, str(memory) if memory else None, float(cpus) if cpus else None, tmp_size)


def cache_env(root: str = CACHE_MOUNT) -> dict[str, str]:
    """Compilation caches (Inductor/Triton, JAX/XLA, TF/XLA) under the cache volume."""
    return {
        "TORCHINDUCTOR_CACHE_DIR": f"{root}/inductor",
        "TRITON_CACHE_DIR": f"{root}/triton",
        "JAX_COMPILATION_CACHE_DIR": f"{root}/jax",
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={root}/tf-xla",
    }


def container_options(*, image: str, engine: str, run_id: str, run_dir: Path, dataset_dir: Path, spec_name: str,
                      result_name: str, user: str, gpus: GpuAccess, extra_env: dict[str, str] | None = None,
                      shm_size: str = DEFAULT_SHM_SIZE, name: str | None = None, limits: Limits | None = None,
                      cache_volume: str | None = CACHE_VOLUME) -> dict[str, Any]:
    """Everything a run's container is created with, as plain data (pure; no daemon needed).

    Returns {'create': kwargs of APIClient.create_container minus host_config,
             'host_config': kwargs of APIClient.create_host_config}.
    """
    limits = limits or Limits()
    caches = cache_env() if cache_volume else cache_env(f"{WORKDIR}/cache")
    env = {**FIXED_ENV, **caches, "HOME": WORKDIR, **without_internal(extra_env or {}), "BENCH_RUNTIME": "docker"}
    if gpus.mode == "none":
        # NVIDIA's images set NVIDIA_VISIBLE_DEVICES=all; with the nvidia runtime as the default
        # runtime that alone would expose every GPU. A CPU run gets none.
        env["NVIDIA_VISIBLE_DEVICES"] = "void"
    host_config = {
        **hardened_host_config(),
        "binds": {
            str(Path(dataset_dir).resolve()): {"bind": DATASET_MOUNT, "mode": "ro"},
            str(Path(run_dir).resolve()): {"bind": RUN_MOUNT, "mode": "rw"},
            **({cache_volume: {"bind": CACHE_MOUNT, "mode": "rw"}} if cache_volume else {}),
        },
        "ipc_mode": "private",
        "shm_size": shm_size,
        "ulimits": [dict(u) for u in ULIMITS],
        "device_requests": gpus.device_requests(),
        "read_only": True,
        "tmpfs": {WORKDIR: f"rw,exec,nosuid,nodev,size={limits.tmp_size},mode=1777"},
        "init": True,
        **limits.host_config(),
    }
    create = {
        "image": image,
        "command": ["--spec", f"{RUN_MOUNT}/{spec_name}", "--result", f"{RUN_MOUNT}/{result_name}"],
        "user": user,
        "environment": env,
        "working_dir": WORKDIR,
        "labels": {RUN_LABEL: run_id, ENGINE_LABEL: engine},
        "name": name or f"bench-{_safe_name(run_id)}-{uuid.uuid4().hex[:8]}",
        "detach": True,
        "stop_signal": "SIGTERM",
        "use_config_proxy": False,
    }
    return {"create": create, "host_config": host_config}


def applied_options(attrs: dict[str, Any]) -> dict[str, Any]:
    """The options that matter, as ``docker inspect`` reports them for a created container."""
    host = attrs.get("HostConfig") or {}
    config = attrs.get("Config") or {}
    return {
        "id": attrs.get("Id", "")[:12],
        "name": str(attrs.get("Name", "")).lstrip("/"),
        "user": config.get("User"),
        "network_mode": host.get("NetworkMode"),
        "privileged": host.get("Privileged"),
        "cap_drop": host.get("CapDrop"),
        "cap_add": host.get("CapAdd"),
        "security_opt": host.get("SecurityOpt"),
        "ipc_mode": host.get("IpcMode"),
        "shm_size": host.get("ShmSize"),
        "readonly_rootfs": host.get("ReadonlyRootfs"),
        "init": host.get("Init"),
        "pids_limit": host.get("PidsLimit"),
        "memory": host.get("Memory"),
        "nano_cpus": host.get("NanoCpus"),
        "tmpfs": host.get("Tmpfs"),
        "ulimits": [{"name": u.get("Name"), "soft": u.get("Soft"), "hard": u.get("Hard")} for u in host.get("Ulimits") or []],
        "device_requests": [{"driver": d.get("Driver"), "count": d.get("Count"), "device_ids": d.get("DeviceIDs"), "capabilities": d.get("Capabilities")}
                            for d in host.get("DeviceRequests") or []],
        "binds": host.get("Binds"),
        "labels": {k: v for k, v in (config.get("Labels") or {}).items() if k.startswith("bench.")},
    }


def image_facts(image: Any) -> dict[str, Any]:
    """Run-record facts of a local engine image: id, base and its digest, engine version, revision."""
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    facts: dict[str, Any] = {"image_id": image.id}
    if labels.get(LABEL_BASE_NAME):
        facts["base"] = labels[LABEL_BASE_NAME]
    if labels.get(LABEL_BASE_DIGEST):
        facts["base_digest"] = labels[LABEL_BASE_DIGEST]
        facts["base_digest_kind"] = "registry manifest"
    elif labels.get(LABEL_BASE_ID):
        facts["base_digest"] = labels[LABEL_BASE_ID]
        facts["base_digest_kind"] = "local image id (the base has no registry digest)"
    for key, label in (("engine_version", LABEL_VERSION), ("source_revision", LABEL_REVISION)):
        if labels.get(label):
            facts[key] = labels[label]
    return facts


def shm_size(settings: dict[str, Any]) -> str:
    """/dev/shm size: scenario ``runtime.docker.shm_size`` > settings > $BENCH_DOCKER_SHM_SIZE > 8g."""
    block = settings.get("docker") if isinstance(settings.get("docker"), dict) else {}
    value = str(block.get("shm_size") or settings.get("shm_size") or os.environ.get(SHM_ENV) or DEFAULT_SHM_SIZE).strip()
    if not SIZE.fullmatch(value):
        raise BadInput(f"docker.shm_size: '{value}' is not a size like 8g or 16384m")
    return value


def _host_gpu_count() -> int:
    return len(nvml_snapshot().get("gpus") or [])


class DockerRuntime(Runtime):
    name = "docker"

    def dataset_path(self, paths: RunPaths) -> str:
        return DATASET_MOUNT

    def spec_paths(self, paths: RunPaths) -> tuple[str, str]:
        return f"{RUN_MOUNT}/{paths.spec.relative_to(paths.run_dir).as_posix()}", f"{RUN_MOUNT}/{paths.result.relative_to(paths.run_dir).as_posix()}"

    # -- checks -------------------------------------------------------------------------
    def image_ref(self, engine: EngineInfo, settings: dict[str, Any]) -> str:
        if settings.get("image"):
            return str(settings["image"])
        from orchestrator.images.metadata import get_image_meta

        return get_image_meta(engine.name).tag

    def _gpus(self, client: Any, settings: dict[str, Any], device: str) -> GpuAccess:
        ids = parse_visible(settings.get("visible_devices"))
        if device == "cpu":
            return GpuAccess("none", why="--device cpu")
        support = gpu_support(client.info(), is_local_daemon())
        host = _host_gpu_count() if device == "auto" and not ids else 0
        return plan_gpus(device, settings.get("visible_devices"), host, support)

    def check(self, engine: EngineInfo, settings: dict[str, Any]) -> dict[str, Any]:
        ref = self.image_ref(engine, settings)
        client = connect()
        try:
            image = find_image(client, ref)
            if image is None:
                raise BadInput(f"engine '{engine.name}': docker image '{ref}' is not built (bench never pulls); run 'bench image build {engine.name}'")
            gpus = self._gpus(client, settings, settings.get("device") or "auto")
            shm = shm_size(settings)
            limits(settings)
            daemon = client.version().get("Version")
        finally:
            client.close()
        return {"name": self.name, "image": ref, **image_facts(image), "gpus": gpus.label(), "shm_size": shm, "daemon": daemon}

    def availability(self, engine: EngineInfo, settings: dict[str, Any]) -> tuple[bool, str]:
        """Like check(), and for --runtime auto also: a GPU host whose daemon cannot hand out GPUs -> local."""
        try:
            info = self.check(engine, settings)
        except BadInput as exc:
            return False, str(exc)
        if (settings.get("device") or "auto") == "auto" and info["gpus"].startswith("none") and NO_GPU_SUPPORT in info["gpus"]:
            return False, f"this host has GPUs but {NO_GPU_SUPPORT}"
        return True, f"image {info['image']} ({info['image_id'][:19]})"

    # -- execution ----------------------------------------------------------------------
    def execute(self, engine: EngineInfo, paths: RunPaths, settings: dict[str, Any], timeout_s: float, sink: LineSink) -> Execution:
        try:
            client = connect()
        except BadInput as exc:
            return Execution("error", None, str(exc))
        try:
            return self._execute(client, engine, paths, settings, timeout_s, sink)
        finally:
            client.close()

    def _execute(self, client: Any, engine: EngineInfo, paths: RunPaths, settings: dict[str, Any], timeout_s: float, sink: LineSink) -> Execution:
        import docker

        checked = settings.get("checked") or {}
        spec = json.loads(paths.spec.read_text())
        device = settings.get("device") or spec.get("device") or "auto"
        info: dict[str, Any] = {"name": self.name}
        try:
            ref = checked.get("image") or self.image_ref(engine, settings)
            image = find_image(client, checked.get("image_id") or ref)
            if image is None:
                return Execution("error", None, f"docker image '{ref}' is gone; run 'bench image build {engine.name}'", info)
            gpus = self._gpus(client, settings, device)
            shm = shm_size(settings)
            resources = limits(settings)
        except BadInput as exc:
            return Execution("error", None, str(exc), info)
        except Exception as exc:  # the daemon went away since check()
            return Execution("error", None, f"docker: {_reason(exc)}", info)
        info.update({"image": ref, **image_facts(image), "gpus": gpus.label()})
        spec_in, result_in = self.spec_paths(paths)
        paths.log.parent.mkdir(parents=True, exist_ok=True)
        with RunFolderAccess(paths.run_dir, image_user(image), paths.dataset) as access:
            info["user"] = access.user
            if access.note:
                info.setdefault("notes", []).append(access.note)
            options = container_options(
                image=image.id, engine=engine.name, run_id=str(spec.get("run_id") or paths.run_dir.name), run_dir=paths.run_dir,
                dataset_dir=paths.dataset, spec_name=spec_in.removeprefix(RUN_MOUNT + "/"), result_name=result_in.removeprefix(RUN_MOUNT + "/"),
                user=access.user, gpus=gpus, extra_env={str(k): str(v) for k, v in (settings.get("env") or {}).items()},
                shm_size=shm, limits=resources, cache_volume=cache_volume(client, access.user) if access.image_user else None,
            )
            return _Container(client.api, options, paths.log, sink, info).run(timeout_s, docker.errors.APIError)


def image_user(image: Any) -> str:
    """The image's ``USER`` as uid:gid, never root (65534:65534 when it has none, names root, or is not numeric)."""
    user = str(((getattr(image, "attrs", None) or {}).get("Config") or {}).get("User") or "")
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or int(uid) == 0 or (gid and (not gid.isdigit() or int(gid) == 0)):
        return NOBODY
    return f"{uid}:{gid or uid}"


def cache_volume(client: Any, user: str) -> str | None:
    """The compile-cache volume, its root owned by ``user`` (created when missing). None when its
    folder on the host cannot be reached from here (a remote or rootless daemon): caches then stay in /tmp."""
    try:
        try:
            volume = client.volumes.get(CACHE_VOLUME)
        except Exception:
            volume = client.volumes.create(CACHE_VOLUME, labels={RUN_LABEL: "compile-cache"})
        mountpoint = Path(volume.attrs["Mountpoint"])
        uid, gid = (int(part) for part in user.split(":"))
        stat = mountpoint.stat()
        if (stat.st_uid, stat.st_gid) != (uid, gid):
            os.chown(mountpoint, uid, gid)
        return CACHE_VOLUME
    except Exception:
        return None


class RunFolderAccess:
    """The container's user and its write access to the run folder, for the duration of a run.

    bench as root: the image's non-root user, the run folder (and what is in it) handed to that
    uid for the run and back to bench's afterwards, the dataset split made readable to all (it is
    mounted read-only; its files hold nothing secret). Otherwise the invoking uid:gid (not root),
    which owns the folder already; its compilation caches then stay in the container's tmpfs.
    """

    def __init__(self, run_dir: Path, user: str, dataset: Path | None = None) -> None:
        self.run_dir, self.dataset = run_dir, dataset
        self.image_user = os.getuid() == 0
        self.user = user if self.image_user else f"{os.getuid()}:{os.getgid()}"
        self.note: str | None = None

    def _chown(self, uid: int, gid: int) -> None:
        for path in (self.run_dir, *self.run_dir.rglob("*")):
            if not path.is_symlink():
                os.chown(path, uid, gid)

    def __enter__(self) -> RunFolderAccess:
        if self.image_user and self.dataset is not None and self.dataset.is_dir():  # the split: readable by the container's user
            for path in (self.dataset, *self.dataset.iterdir()):
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | (0o055 if path.is_dir() else 0o044))
        if self.image_user:
            uid, gid = (int(part) for part in self.user.split(":"))
            try:
                self._chown(uid, gid)
            except OSError as exc:  # e.g. root squashed on NFS: let the folder be written by anyone for the run
                self.run_dir.chmod(0o1777)
                self.note = f"run folder not handed to uid {uid} ({exc.strerror or exc}); made writable for the run instead"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.image_user:
            try:
                self._chown(os.getuid(), os.getgid())
            except OSError:
                pass
            self.run_dir.chmod(0o755)


# runc's "error setting rlimit type N": the RLIMIT_* numbers of the ulimits bench sets.
_RLIMIT_NAMES = {8: "memlock", 3: "stack"}


def _unsettable_ulimit(exc: Exception, ulimits: list[dict[str, Any]]) -> str | None:
    """The ulimit name a start failure blames on rlimit permissions, when bench set it."""
    match = re.search(r"error setting rlimit type (\d+): operation not permitted", str(getattr(exc, "explanation", None) or exc))
    name = _RLIMIT_NAMES.get(int(match.group(1))) if match else None
    return name if name and any(u["name"] == name for u in ulimits) else None


class _Container:
    """One container's life: create, start, stream, wait, stop, remove (always)."""

    def __init__(self, api: Any, options: dict[str, Any], log_path: Path, sink: LineSink, info: dict[str, Any]) -> None:
        self.api, self.options, self.log_path, self.sink, self.info = api, options, log_path, sink, info
        self.name = options["create"]["name"]
        self.cid: str | None = None
        self.reader: threading.Thread | None = None

    def run(self, timeout_s: float, api_error: type[Exception]) -> Execution:
        outcome = Execution("error", None, "the container did not start", self.info)
        watchdog = docker_watchdog.start(self.name)  # removes the container if bench dies first
        try:
            try:
                outcome = self._run(timeout_s)
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP (orchestrator.signals)
                code = self._stop()
                outcome = Execution("interrupted", code, f"{signals.interrupt_reason(exc)}; container stopped", self.info)
            except api_error as exc:
                outcome = Execution("error", None, f"docker: {getattr(exc, 'explanation', None) or exc}", self.info)
            except Exception as exc:  # the daemon went away (connection refused, reset, timed out)
                outcome = Execution("error", None, f"docker daemon lost during the run: {_reason(exc)}", self.info)
        finally:
            self._remove(outcome)
            docker_watchdog.release(watchdog)
        return outcome

    def _create_and_start(self) -> None:
        """Create and start; a daemon that may not raise an rlimit (no CAP_SYS_RESOURCE, as in some
        sandboxes) gets that ulimit dropped and a fresh container, and the record says so."""
        while True:
            create = dict(self.options["create"])
            image = create.pop("image")
            host_config = self.api.create_host_config(**self.options["host_config"])
            self.cid = self.api.create_container(image, host_config=host_config, **create)["Id"]
            self.info["container"] = applied_options(self.api.inspect_container(self.cid))
            try:
                self.api.start(self.cid)
                return
            except Exception as exc:
                dropped = _unsettable_ulimit(exc, self.options["host_config"]["ulimits"])
                if dropped is None:
                    raise
                self.api.remove_container(self.cid, force=True, v=True)
                self.cid = None
                self.options["host_config"]["ulimits"] = [u for u in self.options["host_config"]["ulimits"] if u["name"] != dropped]
                note = f"ulimit {dropped} not applied: the Docker daemon may not raise it (no CAP_SYS_RESOURCE)"
                self.info.setdefault("notes", []).append(note)
                self.sink(f"[bench] {note}")

    def _run(self, timeout_s: float) -> Execution:
        self._create_and_start()
        self.reader = threading.Thread(target=self._pump, name=f"logs-{self.name}", daemon=True)
        self.reader.start()
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.api.inspect_container(self.cid)["State"]
            if not state.get("Running"):
                self._join()
                code = state.get("ExitCode")
                detail = "the container was killed for exceeding its memory (OOM)" if state.get("OOMKilled") else None
                return Execution("exited", code, detail, self.info)
            if time.monotonic() >= deadline:
                code = self._stop()
                return Execution("timeout", code, f"exceeded the {timeout_s:g} s timeout; container stopped", self.info)
            time.sleep(POLL_S)

    def _pump(self) -> None:
        pending = b""
        with open(self.log_path, "a", encoding="utf-8", errors="replace") as log:

            def emit(raw: bytes) -> None:
                text = raw.decode("utf-8", "replace").rstrip("\r")
                log.write(text + "\n")
                log.flush()
                self.sink(text)

            try:
                for chunk in self.api.logs(self.cid, stream=True, follow=True, stdout=True, stderr=True):
                    pending += chunk
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        emit(line)
            except Exception:  # the stream ends with the container (or when it is removed)
                pass
            if pending:
                emit(pending)

    def _join(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=10)

    def _stop(self) -> int | None:
        """SIGTERM, SIGKILL after the grace period; the exit code when it could be read."""
        if self.cid is None:
            return None
        try:
            self.api.stop(self.cid, timeout=GRACE_S)
            self._join()
            return self.api.inspect_container(self.cid)["State"].get("ExitCode")
        except KeyboardInterrupt:
            return None
        except Exception:
            return None

    def _remove(self, outcome: Execution) -> None:
        """Remove the container (by id, or by name when Ctrl-C came before create returned)."""
        for attempt in range(3):
            try:
                self.api.remove_container(self.cid or self.name, force=True, v=True)
                break
            except KeyboardInterrupt:
                continue  # a second Ctrl-C must not leave the container behind
            except Exception as exc:
                if getattr(exc, "status_code", None) == 404:
                    break
                if attempt == 2:
                    note = f"could not remove container {self.name}: {exc}"
                    outcome.detail = f"{outcome.detail}; {note}" if outcome.detail else note
        self._join()


RUNTIME = DockerRuntime
