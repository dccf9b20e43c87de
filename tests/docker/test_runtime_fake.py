"""The docker runtime against a fake Docker SDK client: check() errors, and the container's life
(success, failure, timeout, Ctrl-C, a daemon that cannot raise rlimits): always removed."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from orchestrator.engines.registry import get_engine
from orchestrator.errors import BadInput
from orchestrator.imagebuild.facts import ImageFacts
from orchestrator.runtimes import RuntimeFacts, RuntimeSettings
from orchestrator.runtimes.base import RunPaths
from orchestrator.runtimes.docker import DockerRuntime
from tests.docker.conftest import FakeAPI, FakeAPIError, FakeClient

IMAGE_ID = "sha256:" + "a" * 64


@pytest.fixture()
def paths(tmp_path: Path) -> RunPaths:
    run = tmp_path / "runs" / "pytorch-fp32-optimized-b32-d1-r1"
    run.mkdir(parents=True)
    (tmp_path / "data").mkdir()
    spec = run / "spec.json"
    spec.write_text(json.dumps({"run_id": "pytorch-fp32-optimized-b32-d1-r1", "device": "cpu"}))
    return RunPaths(run, spec, run / "result.json", run / "engine.log", tmp_path / "data")


def _execute(paths: RunPaths, settings: RuntimeSettings | None = None, timeout_s: float = 30.0):
    lines: list[str] = []
    execution = DockerRuntime().execute(get_engine("pytorch"), paths, settings or RuntimeSettings(), timeout_s, lines.append)
    return execution, lines


# -- check(): the one-line errors -----------------------------------------------------------

def test_daemon_unreachable_is_one_line_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    def refuse(**kwargs):
        raise docker.errors.DockerException("Error while fetching server API version") from requests.exceptions.ConnectionError(
            FileNotFoundError(2, "No such file or directory"))

    monkeypatch.setattr(docker, "from_env", refuse)
    with pytest.raises(BadInput) as err:
        DockerRuntime().check(get_engine("pytorch"), RuntimeSettings.from_blocks({}))
    message = str(err.value)
    assert message.startswith("Docker daemon unreachable at ") and "no Docker socket" in message and "\n" not in message
    ok, why = DockerRuntime().availability(get_engine("pytorch"), RuntimeSettings.from_blocks({}))
    assert not ok and "unreachable" in why


def test_missing_image_says_which_build_to_run(fake_docker) -> None:
    fake_docker(FakeClient(images={}))
    with pytest.raises(BadInput, match=r"docker image 'bench/pytorch:latest' is not built \(bench never pulls\); run 'bench image build pytorch'"):
        DockerRuntime().check(get_engine("pytorch"), RuntimeSettings.from_blocks({}))


def test_scenario_image_setting_is_used(fake_docker) -> None:
    fake_docker(FakeClient(images={}))
    with pytest.raises(BadInput, match="'my/own:image' is not built"):
        DockerRuntime().check(get_engine("pytorch"), RuntimeSettings.from_blocks({"image": "my/own:image"}))


@pytest.mark.parametrize("settings", [{"device": "cuda"}, {"visible_devices": "0,1"}])
def test_gpus_requested_without_nvidia_runtime(fake_docker, settings) -> None:
    fake_docker(FakeClient(runtimes={"runc": {}}), host_gpus=2)
    with pytest.raises(BadInput, match="the Docker daemon has no NVIDIA runtime or CDI device"):
        DockerRuntime().check(get_engine("pytorch"), RuntimeSettings.from_blocks(settings))


def test_check_names_image_base_digest_and_gpus(fake_docker) -> None:
    fake_docker(FakeClient(runtimes={"runc": {}, "nvidia": {}}), host_gpus=2)
    info = DockerRuntime().check(get_engine("pytorch"), RuntimeSettings.from_blocks({"device": "cuda", "visible_devices": "1"}))
    doc = info.to_json()
    assert doc["name"] == "docker" and doc["image"] == "bench/pytorch:latest" and doc["image_id"] == IMAGE_ID
    assert doc["base_digest"] == "sha256:" + "b" * 64 and doc["base_digest_kind"] == "registry manifest"
    assert doc["gpus"] == "1 via nvidia" and doc["source_revision"] == "abc123"


def test_auto_prefers_local_on_a_gpu_host_without_nvidia_runtime(fake_docker) -> None:
    fake_docker(FakeClient(runtimes={"runc": {}}), host_gpus=2)
    ok, why = DockerRuntime().availability(get_engine("pytorch"), RuntimeSettings.from_blocks({"device": "auto"}))
    assert not ok and "no NVIDIA runtime" in why
    fake_docker(FakeClient(runtimes={"runc": {}}), host_gpus=0)
    assert DockerRuntime().availability(get_engine("pytorch"), RuntimeSettings.from_blocks({"device": "auto"}))[0]


# -- execute(): the container's life ----------------------------------------------------------

def _removed_all(api: FakeAPI) -> bool:
    created = [cid for kind, cid in api.calls if kind == "create"]
    return bool(created) and all(("remove", cid) in api.calls for cid in created) and not api.containers


def test_success_streams_logs_records_options_and_removes(fake_docker, paths: RunPaths) -> None:
    client = fake_docker(FakeClient(api=FakeAPI(exit_code=0)))
    execution, lines = _execute(paths)
    assert execution.outcome == "exited" and execution.exit_code == 0
    assert lines == ["hello", "partial", "end"]
    assert paths.log.read_text() == "hello\npartial\nend\n"
    assert _removed_all(client.api)
    info = execution.info.to_json()
    assert info["image_id"] == IMAGE_ID and info["base_digest"] == "sha256:" + "b" * 64
    container = info["container"]
    assert container["network_mode"] == "none" and container["cap_drop"] == ["ALL"] and container["privileged"] is False
    assert container["security_opt"] == ["no-new-privileges:true"] and container["labels"]["bench.run"] == paths.run_dir.name
    assert any(bind.endswith(":/bench/dataset:ro") for bind in container["binds"])
    created = next(iter(client.api.calls))
    assert created[0] == "create"


def test_failure_exit_code_passes_through(fake_docker, paths: RunPaths) -> None:
    client = fake_docker(FakeClient(api=FakeAPI(exit_code=1)))
    execution, _ = _execute(paths)
    assert (execution.outcome, execution.exit_code) == ("exited", 1)
    assert _removed_all(client.api)


def test_timeout_stops_and_removes(fake_docker, paths: RunPaths) -> None:
    client = fake_docker(FakeClient(api=FakeAPI(run_polls=10_000)))
    execution, _ = _execute(paths, timeout_s=0.3)
    assert execution.outcome == "timeout" and "timeout" in execution.detail
    assert ("stop", next(cid for kind, cid in client.api.calls if kind == "create")) in client.api.calls
    assert _removed_all(client.api)


def test_ctrl_c_stops_removes_and_reports_interrupted(fake_docker, paths: RunPaths) -> None:
    client = fake_docker(FakeClient(api=FakeAPI(run_polls=10_000, interrupt_on_poll=2)))
    execution, _ = _execute(paths)
    assert execution.outcome == "interrupted" and "Ctrl-C" in execution.detail
    assert any(kind == "stop" for kind, _ in client.api.calls)
    assert _removed_all(client.api)


def test_daemon_without_cap_sys_resource_drops_memlock_and_says_so(fake_docker, paths: RunPaths) -> None:
    error = FakeAPIError("failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: "
                         "error during container init: error setting rlimits for ready process: error setting rlimit type 8: operation not permitted")
    client = fake_docker(FakeClient(api=FakeAPI(start_errors=[error])))
    execution, lines = _execute(paths)
    assert execution.outcome == "exited" and execution.exit_code == 0
    assert [u[0] for u in execution.info.container.ulimits] == ["stack"]
    assert "ulimit memlock not applied" in execution.info.notes[0] and lines[0].startswith("[bench] ulimit memlock")
    assert _removed_all(client.api) and len([c for c in client.api.calls if c[0] == "create"]) == 2


def test_create_error_is_an_error_execution(fake_docker, paths: RunPaths) -> None:
    api = FakeAPI()

    def broken(*args, **kwargs):
        raise docker.errors.APIError("500 Server Error", explanation="could not select device driver \"nvidia\" with capabilities: [[gpu]]")

    api.create_container = broken
    fake_docker(FakeClient(api=api))
    execution, _ = _execute(paths)
    assert execution.outcome == "error" and "could not select device driver" in execution.detail


def test_image_gone_before_the_run(fake_docker, paths: RunPaths) -> None:
    fake_docker(FakeClient(images={}))
    checked = RuntimeFacts("docker", image="bench/pytorch:latest", image_facts=ImageFacts(IMAGE_ID))
    execution, _ = _execute(paths, RuntimeSettings().with_checked(checked))
    assert execution.outcome == "error" and "bench image build pytorch" in execution.detail
