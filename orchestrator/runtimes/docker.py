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

This module holds the runtime and the container's lifecycle; each other job has its module:
``docker_gpus`` (GPU planning), ``docker_limits`` (resource limits, ulimits, /dev/shm),
``docker_security`` (least privilege, the inspected options), ``docker_options`` (the container's
options as data), ``docker_ownership`` (its user, the run folder's and cache volume's owner),
``docker_watchdog``; the daemon client is :mod:`orchestrator.docker_client` and the image's
facts :mod:`orchestrator.imagebuild.facts`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator import signals
from orchestrator.docker_client import NO_GPU_SUPPORT, _reason, connect, find_image
from orchestrator.engines.registry import EngineInfo
from orchestrator.errors import BadInput
from orchestrator.imagebuild.facts import image_facts
from orchestrator.runtimes import docker_watchdog
from orchestrator.runtimes.base import Execution, LineSink, RunPaths, Runtime
from orchestrator.runtimes.docker_gpus import gpu_access
from orchestrator.runtimes.docker_limits import limits, unsettable_ulimit
from orchestrator.runtimes.docker_options import DATASET_MOUNT, RUN_MOUNT, container_options
from orchestrator.runtimes.docker_ownership import RunFolderAccess, cache_volume, image_user
from orchestrator.runtimes.docker_security import applied_options
from orchestrator.runtimes.engine_settings import RuntimeSettings
from orchestrator.runtimes.runtime_facts import RuntimeFacts

GRACE_S = 10
POLL_S = 0.25


class DockerRuntime(Runtime):
    name = "docker"

    def dataset_path(self, paths: RunPaths) -> str:
        return DATASET_MOUNT

    def spec_paths(self, paths: RunPaths) -> tuple[str, str]:
        return f"{RUN_MOUNT}/{paths.spec.relative_to(paths.run_dir).as_posix()}", f"{RUN_MOUNT}/{paths.result.relative_to(paths.run_dir).as_posix()}"

    # -- checks -------------------------------------------------------------------------
    def image_ref(self, engine: EngineInfo, settings: RuntimeSettings) -> str:
        if settings.image:
            return settings.image
        from orchestrator.imagebuild.metadata import get_image_meta

        return get_image_meta(engine.name).tag

    def check(self, engine: EngineInfo, settings: RuntimeSettings) -> RuntimeFacts:
        ref = self.image_ref(engine, settings)
        client = connect()
        try:
            image = find_image(client, ref)
            if image is None:
                raise BadInput(f"engine '{engine.name}': docker image '{ref}' is not built (bench never pulls); run 'bench image build {engine.name}'")
            gpus = gpu_access(client, settings.local.visible_devices, settings.device)
            limits(settings.docker)
            daemon = client.version().get("Version")
        finally:
            client.close()
        return RuntimeFacts(self.name, image=ref, image_facts=image_facts(image), gpus=gpus.label(), shm_size=settings.docker.shm_size,
                            daemon=str(daemon) if daemon else None)

    def availability(self, engine: EngineInfo, settings: RuntimeSettings) -> tuple[bool, str]:
        """Like check(), and for --runtime auto also: a GPU host whose daemon cannot hand out GPUs -> local."""
        try:
            info = self.check(engine, settings)
        except BadInput as exc:
            return False, str(exc)
        label = str(info.gpus)
        if settings.device == "auto" and label.startswith("none") and NO_GPU_SUPPORT in label:
            return False, f"this host has GPUs but {NO_GPU_SUPPORT}"
        image_id = info.image_facts.image_id if info.image_facts else ""
        return True, f"image {info.image} ({image_id[:19]})"

    # -- execution ----------------------------------------------------------------------
    def execute(self, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings, timeout_s: float, sink: LineSink) -> Execution:
        try:
            client = connect()
        except BadInput as exc:
            return Execution("error", None, str(exc))
        try:
            return self._execute(client, engine, paths, settings, timeout_s, sink)
        finally:
            client.close()

    def _execute(self, client: Any, engine: EngineInfo, paths: RunPaths, settings: RuntimeSettings, timeout_s: float, sink: LineSink) -> Execution:
        import docker

        checked = settings.checked or RuntimeFacts(self.name)
        spec = json.loads(paths.spec.read_text())
        device = settings.device if settings.device != "auto" else spec.get("device") or "auto"
        info = RuntimeFacts(self.name)
        try:
            ref = checked.image or self.image_ref(engine, settings)
            image = find_image(client, checked.image_facts.image_id if checked.image_facts else ref)
            if image is None:
                return Execution("error", None, f"docker image '{ref}' is gone; run 'bench image build {engine.name}'", info)
            gpus = gpu_access(client, settings.local.visible_devices, device)
            resources = limits(settings.docker)
        except BadInput as exc:
            return Execution("error", None, str(exc), info)
        except Exception as exc:  # the daemon went away since check()
            return Execution("error", None, f"docker: {_reason(exc)}", info)
        spec_in, result_in = self.spec_paths(paths)
        paths.log.parent.mkdir(parents=True, exist_ok=True)
        with RunFolderAccess(paths.run_dir, image_user(image), paths.dataset) as access:
            info = RuntimeFacts(self.name, image=ref, image_facts=image_facts(image), gpus=gpus.label(), user=access.user,
                                notes=(access.note,) if access.note else ())
            options = container_options(
                image=image.id, engine=engine.name, run_id=str(spec.get("run_id") or paths.run_dir.name), run_dir=paths.run_dir,
                dataset_dir=paths.dataset, spec_name=spec_in.removeprefix(RUN_MOUNT + "/"), result_name=result_in.removeprefix(RUN_MOUNT + "/"),
                user=access.user, gpus=gpus, extra_env=settings.local.environment(),
                shm_size=settings.docker.shm_size, limits=resources, cache_volume=cache_volume(client, access.user) if access.image_user else None,
            )
            return _Container(client.api, options, paths.log, sink, info).run(timeout_s, docker.errors.APIError)

class _Container:
    """One container's life: create, start, stream, wait, stop, remove (always)."""

    def __init__(self, api: Any, options: dict[str, Any], log_path: Path, sink: LineSink, info: RuntimeFacts) -> None:
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
            self.info = replace(self.info, container=applied_options(self.api.inspect_container(self.cid)))
            try:
                self.api.start(self.cid)
                return
            except Exception as exc:
                dropped = unsettable_ulimit(exc, self.options["host_config"]["ulimits"])
                if dropped is None:
                    raise
                self.api.remove_container(self.cid, force=True, v=True)
                self.cid = None
                self.options["host_config"]["ulimits"] = [u for u in self.options["host_config"]["ulimits"] if u["name"] != dropped]
                note = f"ulimit {dropped} not applied: the Docker daemon may not raise it (no CAP_SYS_RESOURCE)"
                self.info = self.info.noted(note)
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
