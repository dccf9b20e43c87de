"""The typed runtime interface: settings (RuntimeSettings), facts (RuntimeFacts, ImageFacts, ContainerOptions)."""

from __future__ import annotations

import pytest

from orchestrator.errors import BadInput
from orchestrator.imagebuild.facts import ImageFacts
from orchestrator.runtimes import RuntimeFacts, RuntimeSettings
from orchestrator.runtimes.runtime_facts import ContainerOptions


def test_settings_from_the_blocks_given() -> None:
    settings = RuntimeSettings.from_blocks({"device": "cuda", "image": "my/img:1", "interpreter": "/venv/bin/python", "visible_devices": "1",
                                            "docker": {"pids_limit": 512}, "slurm": {"partition": "gpu"}}, environ={})
    assert (settings.device, settings.image, settings.local.interpreter, settings.local.visible_devices) == ("cuda", "my/img:1", "/venv/bin/python", ("1",))
    assert settings.docker.pids_limit == 512 and settings.slurm.partition == "gpu" and settings.checked is None
    checked = settings.with_checked(RuntimeFacts("local", interpreter="/venv/bin/python"))
    assert checked.checked is not None and checked.gpu_request() == ("local", ("1",), None, True)
    assert RuntimeSettings().gpu_request().visible is None  # not given: the run's environment decides


@pytest.mark.parametrize(("given", "named"), [
    ({"device": "gpu"}, "--device"),
    ({"image": " "}, "image"),
    ({"image": "a\nb"}, "image"),
    ({"slurm": {"gpus": -1}}, "slurm.gpus"),
    ({"docker": {"pids_limit": 10}}, "runtime.docker.pids_limit"),
])
def test_a_bad_setting_is_refused_when_made(given: dict, named: str) -> None:
    with pytest.raises(BadInput) as caught:
        RuntimeSettings.from_blocks(given, environ={})
    assert str(caught.value).startswith(named)


def test_facts_merge_and_their_block() -> None:
    checked = RuntimeFacts("docker", image="bench/x:latest", image_facts=ImageFacts("sha256:1", base_digest="d", base_digest_kind="registry manifest"),
                           gpus="all via nvidia", shm_size="8g", notes=("a",))
    run = RuntimeFacts("docker", user="1000:1000", notes=("b",), container=ContainerOptions("abc", "bench-x", cap_drop=("ALL",)))
    doc = checked.merged(run).to_json()
    assert doc["image_id"] == "sha256:1" and doc["base_digest_kind"] == "registry manifest" and "base" not in doc
    assert doc["shm_size"] == "8g" and doc["user"] == "1000:1000" and doc["notes"] == ["a", "b"]
    assert doc["container"]["cap_drop"] == ["ALL"] and doc["container"]["ulimits"] == [] and doc["container"]["labels"] == {}
    assert RuntimeFacts("local", interpreter="/usr/bin/python3").to_json() == {"name": "local", "interpreter": "/usr/bin/python3"}


def test_facts_refuse_what_cannot_be() -> None:
    with pytest.raises(ValueError, match="name their runtime"):
        RuntimeFacts("")
    with pytest.raises(ValueError, match="image's id"):
        ImageFacts("")
    with pytest.raises(ValueError, match="what kind of digest"):
        ImageFacts("sha256:1", base_digest="d")


def test_an_nvml_snapshot_keeps_the_records_nvml_block_and_refuses_an_unexplained_absence():
    from orchestrator.host.gpus import DriverFacts, GpuFacts, NvmlSnapshot

    gpu = GpuFacts(0, "NVIDIA H200", "GPU-1", "0:6.0", "9.0", 150754820096, 700.0, 700.0, 1980, 3201, 1980, 3201, 1980, 1, 0, 1, True)
    doc = NvmlSnapshot(True, None, (gpu,), DriverFacts("580.159.04", "13.0")).to_json()
    assert list(doc) == ["available", "reason", "driver", "cuda_driver", "gpus"]
    assert list(doc["gpus"][0])[:3] == ["index", "name", "uuid"] and doc["gpus"][0]["energy_counter"] is True
    assert NvmlSnapshot(False, "no NVIDIA driver").to_json() == {"available": False, "reason": "no NVIDIA driver", "gpus": []}
    with pytest.raises(ValueError, match="reason"):
        NvmlSnapshot(False, None)
    with pytest.raises(ValueError, match="no GPU"):
        NvmlSnapshot(False, "gone", (gpu,))
