"""Host provenance (orchestrator/host/provenance.py) read from fake /proc and /sys trees, and its place in run.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.artifacts import validate_artifact
from orchestrator.host import provenance
from orchestrator.host.provenance import cpu_list, describe_host, run_host
from orchestrator.run import execute
from orchestrator.schemas import SchemaError, validate
from tests.core.cli_helpers import FAKE_SCENARIO, run_cli

CPUINFO_X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9654   96-Core Processor
flags\t\t: fpu vme sse4_2 avx avx2 fma avx512f avx512_bf16 avx512_vnni

processor\t: 1
model name\t: AMD EPYC 9654   96-Core Processor
flags\t\t: fpu vme sse4_2 avx avx2 fma avx512f avx512_bf16 avx512_vnni
"""
EPYC_FLAGS = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"]
CPUINFO_POWER = "processor\t: 0\ncpu\t\t: POWER9 (raw), altivec supported\nclock\t\t: 3800.000000MHz\n"


def fake_root(tmp_path: Path, governors: dict[int, str] | None = None, cpuinfo: str = CPUINFO_X86, loadavg: str | None = "0.52 1.25 3.00 2/345 6789\n",
              boost: str | None = None, no_turbo: str | None = None, driver: str = "acpi-cpufreq") -> Path:
    """A /proc and /sys tree: ``governors`` is cpu index -> scaling governor (no cpufreq folder without one)."""
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc/cpuinfo").write_text(cpuinfo)
    if loadavg is not None:
        (root / "proc/loadavg").write_text(loadavg)
    cpu = root / "sys/devices/system/cpu"
    cpu.mkdir(parents=True)
    for index, governor in (governors or {}).items():
        (cpu / f"cpu{index}/cpufreq").mkdir(parents=True)
        (cpu / f"cpu{index}/cpufreq/scaling_governor").write_text(governor + "\n")
        (cpu / f"cpu{index}/cpufreq/scaling_driver").write_text(driver + "\n")
    if boost is not None:
        (cpu / "cpufreq").mkdir(exist_ok=True)
        (cpu / "cpufreq/boost").write_text(boost + "\n")
    if no_turbo is not None:
        (cpu / "intel_pstate").mkdir()
        (cpu / "intel_pstate/no_turbo").write_text(no_turbo + "\n")
    return root


def test_cpu_list_notation() -> None:
    assert cpu_list([5, 0, 1, 2, 8, 9]) == "0-2,5,8-9"
    assert cpu_list([3]) == "3" and cpu_list([]) == ""


def test_reads_a_linux_host(tmp_path: Path) -> None:
    root = fake_root(tmp_path, {0: "performance", 1: "performance", 2: "powersave", 3: "performance"}, boost="1")
    host = run_host(root, lambda: {0, 1, 2})  # cpu 3 is outside the affinity: its governor does not count
    assert host.to_json() == {"cpu_model": "AMD EPYC 9654 96-Core Processor", "cpu_flags": EPYC_FLAGS, "cpu_count": 2,
                    "cpu_affinity": "0-2", "cpu_affinity_count": 3,
                    "governors": {"performance": "0-1", "powersave": "2"}, "scaling_driver": "acpi-cpufreq",
                    "boost": True, "boost_source": "cpufreq/boost", "load_avg": [0.52, 1.25, 3.0]}
    assert describe_host(host) == ("AMD EPYC 9654 96-Core Processor; flags sse4_2 avx avx2 fma avx512f avx512_vnni avx512_bf16; "
                                   "affinity 0-2 (3 CPUs); governor performance (0-1), powersave (2); boost on; load 0.52/1.25/3.00")


def test_intel_pstate_no_turbo_wins(tmp_path: Path) -> None:
    root = fake_root(tmp_path, {0: "powersave"}, boost="1", no_turbo="1", driver="intel_pstate")
    host = run_host(root, lambda: {0})
    assert (host.boost, host.boost_source, host.scaling_driver) == (False, "intel_pstate/no_turbo", "intel_pstate")


def test_other_cpu_model_fields(tmp_path: Path) -> None:
    assert run_host(fake_root(tmp_path, cpuinfo=CPUINFO_POWER), lambda: {0}).cpu_model == "POWER9 (raw), altivec supported"


def test_unreadable_host_is_all_none(tmp_path: Path) -> None:
    def no_affinity() -> set[int]:
        raise OSError("not on this platform")

    empty = tmp_path / "empty"
    empty.mkdir()
    host = run_host(empty, no_affinity)
    assert set(host.to_json()) == {"cpu_model", "cpu_flags", "cpu_count", "cpu_affinity", "cpu_affinity_count", "governors", "scaling_driver", "boost",
                         "boost_source", "load_avg"}
    assert all(value is None for value in host.to_json().values())
    assert describe_host(host) == "?; flags ?; affinity ?; governor ?; boost ?; load ?"
    # a container: cpuinfo without a model line, a garbled loadavg, governors of CPUs found by listing /sys
    root = fake_root(tmp_path, {0: "schedutil", 1: "schedutil"}, cpuinfo="processor\t: 0\n", loadavg="garbage")
    host = run_host(root, lambda: None)
    assert host.cpu_model is None and host.load_avg is None and host.cpu_affinity is None and host.cpu_flags is None
    assert host.governors == (("schedutil", "0-1"),)


def test_the_real_host_never_raises() -> None:
    host = run_host()
    validate({**_record(), "host": host.to_json()}, "run-record")


def _record() -> dict:
    return {"schema_version": 1, "run_id": "r", "engine": "e", "precision": "fp32", "path": "optimized", "batch_per_device": 1,
            "devices": 1, "repeat": 1, "status": "ok", "reason": None, "exit_code": 0, "runtime": {"name": "local"},
            "started_at": "t", "finished_at": "t", "wall_s": 1.0, "parity": {"checked": True, "ok": True, "mismatches": []}, "throughput": 1.0}


def test_schema_host_block_is_optional_and_checked(tmp_path: Path) -> None:
    validate(_record(), "run-record")  # records written before the host block still validate
    validate({**_record(), "host": run_host(tmp_path).to_json()}, "run-record")  # every fact unknown
    with pytest.raises(SchemaError):
        validate({**_record(), "host": {"load_avg": [1.0, 2.0]}}, "run-record")
    with pytest.raises(SchemaError):
        validate({**_record(), "host": {"boost": "yes"}}, "run-record")


@pytest.mark.usefixtures("fake_engines")
def test_every_started_run_records_its_host(capsys, monkeypatch, tmp_path) -> None:
    root = fake_root(tmp_path, {0: "performance", 1: "performance"}, boost="0")
    calls = []

    def fake_host() -> dict:
        calls.append(1)
        return provenance.run_host(root, lambda: {0, 1})

    monkeypatch.setattr(execute, "run_host", fake_host)
    code, out, err = run_cli(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "local", "--out", str(tmp_path / "out"),
                             "--json", "--engines", "fake", "--precisions", "fp32")
    assert code == 0, err
    artifact = Path(json.loads(out)["artifact"])
    assert validate_artifact(artifact) == []
    records = [json.loads(p.read_text()) for p in sorted(artifact.glob("runs/*/run.json"))]
    assert records and len(calls) == len(records)
    for record in records:
        end = record["host"].pop("load_avg_end")  # read from this host as the run ended
        assert end is None or len(end) == 3
        assert record["host"] == {"cpu_model": "AMD EPYC 9654 96-Core Processor", "cpu_flags": EPYC_FLAGS, "cpu_count": 2,
                                  "cpu_affinity": "0-1", "cpu_affinity_count": 2,
                                  "governors": {"performance": "0-1"}, "scaling_driver": "acpi-cpufreq", "boost": False,
                                  "boost_source": "cpufreq/boost", "load_avg": [0.52, 1.25, 3.0]}


CPUINFO_SAPPHIRE = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu sse4_2 avx avx2 fma f16c avx_vnni avx512f "
                    "avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8\n")
CPUINFO_ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sha2 asimdhp asimddp sve sve2 i8mm bf16\nCPU implementer\t: 0x41\n"


@pytest.mark.parametrize(("cpuinfo", "flags"), [
    (CPUINFO_SAPPHIRE, ["sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                        "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"]),
    (CPUINFO_ARM, ["asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm"]),
    ("processor\t: 0\nflags\t\t: fpu vme de pse\n", []),  # an old x86: a flags line without any of the speed flags
    (CPUINFO_POWER, None),  # no flags line at all
])
def test_cpu_flags_from_a_fake_cpuinfo(tmp_path: Path, cpuinfo: str, flags: list[str] | None) -> None:
    host = run_host(fake_root(tmp_path, cpuinfo=cpuinfo), lambda: {0})
    assert host.to_json()["cpu_flags"] == flags and host.cpu_count == 1
    validate({**_record(), "host": host.to_json()}, "run-record")


def test_speed_flags_of_a_text() -> None:
    from orchestrator.host.cpuflags import speed_flags

    assert speed_flags("flags : avx2 amx_tile avx512_bf16 avx2\nflags : sse4_2\n") == ["avx2", "avx512_bf16", "amx_tile"]  # first CPU only
    assert speed_flags("") is None


def test_finish_host_adds_the_load_at_the_end(tmp_path: Path) -> None:
    root = fake_root(tmp_path, loadavg="4.50 2.00 1.00 1/2 3\n")
    host = provenance.finish_host(run_host(root, lambda: {0}), root)
    assert host.load_avg == host.load_avg_end == (4.5, 2.0, 1.0)
    validate({**_record(), "host": host.to_json()}, "run-record")
    with pytest.raises(SchemaError):
        validate({**_record(), "host": {**host.to_json(), "cpu_flags": "avx2"}}, "run-record")
    with pytest.raises(SchemaError):
        validate({**_record(), "host": {**host.to_json(), "load_avg_end": [1.0]}}, "run-record")


def test_an_affinity_comes_with_its_count() -> None:
    from orchestrator.host.provenance import HostState

    with pytest.raises(ValueError, match="affinity"):
        HostState(cpu_affinity="0-1")
