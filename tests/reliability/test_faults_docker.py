"""The Docker daemon stopped mid-scenario (docker runtime against an emulated daemon, in process:
its "containers" are the fake engines run as host processes, so no daemon or image is needed).
The daemon goes away while the second run's container runs (its container dies with it, as
without live-restore): that run is recorded failed, bench does not crash, the artifact validates,
and resume, the daemon back, completes the matrix keeping the first run's measurement."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from orchestrator.artifacts import validate_artifact
from orchestrator.engines.registry import discover
from orchestrator.errors import BadInput
from tests.core.cli_helpers import run_cli, use_fake_engines
from tests.docker.conftest import FakeAPI, FakeClient
from tests.reliability.faults_helpers import RUN_IDS, SELECT, figures_fixture, measured, records, the_artifact, write_scenario

figures = figures_fixture("docker")


class EngineDaemon(FakeAPI):
    """A daemon whose containers are host processes of the engine (mounts translated to host paths)."""

    def __init__(self, stop_during: str | None, folder: Path) -> None:
        super().__init__()
        self.stop_during, self.folder, self.down = stop_during, folder, False
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, cid: str) -> None:
        spec = self.containers[cid]
        mounts = {v["bind"]: k for k, v in spec["host_config"]["binds"].items()}
        command = spec["command"]
        run_dir = Path(mounts["/bench/run"])
        document = json.loads((run_dir / Path(command[1]).name).read_text())
        document["parity"]["dataset"]["path"] = mounts["/bench/dataset"]
        host_spec = self.folder / f"{cid[-6:]}.json"
        host_spec.write_text(json.dumps(document))
        engine = discover()[spec["labels"]["bench.engine"]]
        env = {"PYTHONPATH": ":".join(map(str, engine.python_path())), "PATH": "/usr/bin:/bin"}
        self.procs[cid] = subprocess.Popen([sys.executable, "-m", engine.module, "--spec", str(host_spec), "--result",
                                            str(run_dir / Path(command[3]).name)], env=env, cwd=run_dir)
        self.calls.append(("start", cid))
        if spec["labels"]["bench.run"] == self.stop_during:
            self.down = True  # the daemon stops now, and its containers with it
            self.procs[cid].kill()

    def inspect_container(self, cid: str) -> dict[str, Any]:
        if self.down:
            raise requests.exceptions.ConnectionError("('Connection aborted.', ConnectionRefusedError(111, 'Connection refused'))")
        attrs = super().inspect_container(cid)
        proc = self.procs.get(cid)
        if proc is not None:
            code = proc.poll()
            attrs["State"] = {"Running": code is None, "ExitCode": code, "OOMKilled": False}
        return attrs

    def remove_container(self, cid: str, force: bool = False, v: bool = False) -> None:
        if self.down:
            raise requests.exceptions.ConnectionError("Connection refused")
        super().remove_container(cid, force, v)


def _install(monkeypatch, daemon: EngineDaemon) -> None:
    import orchestrator.runtimes.docker as runtime
    import orchestrator.runtimes.docker_gpus as gpus

    client = FakeClient(api=daemon)

    def connect(*args: Any, **kwargs: Any) -> FakeClient:
        if daemon.down:
            raise BadInput("Docker daemon unreachable at unix:///var/run/docker.sock: connection refused (is dockerd running?)")
        return client

    monkeypatch.setattr(runtime, "connect", connect)
    monkeypatch.setattr(gpus, "is_local_daemon", lambda: False)
    monkeypatch.setattr(gpus, "host_gpu_count", lambda: 0)
    monkeypatch.setattr(runtime.DockerRuntime, "image_ref", lambda self, engine, settings: "bench/pytorch:latest")
    monkeypatch.setattr(runtime.docker_watchdog, "start", lambda name: None)  # no real daemon to clean up


def test_docker_daemon_stopped_mid_scenario(tmp_path: Path, data_dir: Path, monkeypatch, capsys, figures) -> None:
    use_fake_engines(monkeypatch)
    scenario = write_scenario(tmp_path)
    out = tmp_path / "out"
    daemon = EngineDaemon(stop_during=RUN_IDS[1], folder=tmp_path)
    _install(monkeypatch, daemon)
    clock = time.monotonic()
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "run", str(scenario), "--runtime", "docker", "--device", "cpu",
                           "--out", str(out), *SELECT)
    seconds = time.monotonic() - clock
    assert code == 1, err
    assert "internal error" not in err and "Traceback" not in err
    artifact = the_artifact(out)
    runs = records(artifact)
    assert runs[RUN_IDS[0]]["status"] == "ok" and runs[RUN_IDS[0]]["runtime"]["name"] == "docker"
    assert runs[RUN_IDS[1]]["status"] == "failed" and "docker daemon lost during the run" in runs[RUN_IDS[1]]["reason"], runs[RUN_IDS[1]]
    assert validate_artifact(artifact) == []
    before = measured(artifact)
    assert list(before) == [RUN_IDS[0]]
    _install(monkeypatch, EngineDaemon(stop_during=None, folder=tmp_path))  # the daemon is back
    code, _, err = run_cli(capsys, monkeypatch, "scenario", "resume", str(artifact), "--json")
    assert code == 0, err
    runs = records(artifact)
    assert {r["status"] for r in runs.values()} == {"ok"} and sorted(runs) == sorted(RUN_IDS)
    assert measured(artifact)[RUN_IDS[0]] == before[RUN_IDS[0]]
    assert validate_artifact(artifact) == []
    figures.add("docker daemon stopped mid-scenario", "run failed (not a crash), valid, 1 measured kept, resumed", seconds)
