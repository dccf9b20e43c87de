"""Runtime settings as typed classes (orchestrator/runtimes/runtime_settings.py): each field's type, default,
check, environment variable and command-line option declared once, beside its runtime."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from orchestrator.errors import BadInput
from orchestrator.runtimes.docker_settings import DockerSettings, docker_settings
from orchestrator.runtimes.local_settings import LocalSettings, local_settings
from orchestrator.runtimes.runtime_settings import declarations, flagged, setting
from orchestrator.runtimes.slurm_settings import KEYS, SlurmSettings, slurm_settings


@pytest.mark.parametrize(("cls", "given", "named"), [
    (SlurmSettings, {"gpus": -1}, "slurm.gpus: -1 is negative"),
    (SlurmSettings, {"gpus": "many"}, "slurm.gpus: 'many' is not a GPU count"),
    (SlurmSettings, {"mode": "cloud"}, "slurm.mode: 'cloud' is not one of local, container"),
    (SlurmSettings, {"partition": "gpu\n#SBATCH --x"}, "slurm.partition:"),
    (SlurmSettings, {"sbatch_args": "--output=/tmp/x"}, "slurm.sbatch_args:"),
    (SlurmSettings, {"shared_dir": "/nfs/a:b"}, "slurm.shared_dir:"),
    (SlurmSettings, {"poll_s": 0}, "slurm.poll_s: 0 is outside"),
    (DockerSettings, {"pids_limit": 10}, "runtime.docker.pids_limit: '10' is not a whole number >= 64"),
    (DockerSettings, {"pids_limit": True}, "runtime.docker.pids_limit:"),
    (DockerSettings, {"mem_limit": "lots"}, "runtime.docker.mem_limit:"),
    (DockerSettings, {"cpus": 0}, "runtime.docker.cpus:"),
    (DockerSettings, {"shm_size": "lots"}, "docker.shm_size: 'lots' is not a size like 8g or 16384m"),
    (LocalSettings, {"interpreter": "python3\n--x"}, "local.interpreter: 'python3\\n--x' is not an interpreter"),
    (LocalSettings, {"interpreter": "  "}, "local.interpreter:"),
    (LocalSettings, {"interpreter": 3}, "local.interpreter:"),
    (LocalSettings, {"env": ["A=1"]}, "local.env: give a mapping"),
    (LocalSettings, {"visible_devices": "0,\x7f"}, "local.visible_devices:"),
])
def test_a_bad_value_is_refused_when_made_naming_the_field(cls: type, given: dict[str, Any], named: str) -> None:
    with pytest.raises(BadInput) as caught:
        cls(**given)
    assert str(caught.value).startswith(named), str(caught.value)


def test_values_are_kept_normalised_and_frozen() -> None:
    cfg = SlurmSettings(gpus="3", sbatch_args="--exclusive --mem=4G", shared_dir="~/stage", mode="container", poll_s=1)
    assert cfg.gpus == 3 and cfg.sbatch_args == ("--exclusive", "--mem=4G") and cfg.poll_s == 1.0
    assert isinstance(cfg.shared_dir, Path) and cfg.shared_dir.is_absolute() and "~" not in str(cfg.shared_dir)
    assert SlurmSettings(gpus="AUTO").gpus == "auto" and SlurmSettings() == slurm_settings({}, environ={})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.gpus = 4  # type: ignore[misc]
    assert DockerSettings(cpus=2).cpus == 2.0 and DockerSettings().shm_size == "8g"
    local = local_settings({"interpreter": "/venv/bin/python", "env": {"A": 1}, "visible_devices": "2, 3", "slurm": {}, "device": "cpu"})
    assert local == LocalSettings(interpreter="/venv/bin/python", env=(("A", "1"),), visible_devices=("2", "3"))
    assert local.environment() == {"A": "1"} and local_settings({}) == LocalSettings() and LocalSettings(visible_devices="all").visible_devices == ()


def test_each_value_is_refused_under_the_name_it_came_by() -> None:
    with pytest.raises(BadInput, match=r"^BENCH_SLURM_GPUS: 'x' is not"):
        slurm_settings({}, environ={"BENCH_SLURM_GPUS": "x"})
    with pytest.raises(BadInput, match=r"^slurm\.gpus: 'x' is not"):
        slurm_settings({"slurm": {"gpus": "x"}}, environ={"BENCH_SLURM_GPUS": "2"})
    with pytest.raises(BadInput, match=r"^slurm\.bogus: not a setting of the slurm runtime \(known: partition, "):
        slurm_settings({"slurm": {"bogus": 1}}, environ={})
    assert slurm_settings({"slurm": {"gpus": 1}}, environ={"BENCH_SLURM_GPUS": "2", "BENCH_SLURM_TIME": " 30 "}) == SlurmSettings(gpus=1, time="30")
    assert docker_settings({"shm_size": "4g"}, environ={"BENCH_DOCKER_SHM_SIZE": "2g"}).shm_size == "4g"
    assert docker_settings({}, environ={"BENCH_DOCKER_SHM_SIZE": "2g"}).shm_size == "2g"


def test_every_environment_variable_is_in_benchs_registry() -> None:
    from orchestrator.envvars import USER

    registered = {var.name for var in USER}
    declared = {decl.env for cls in (SlurmSettings, DockerSettings, LocalSettings) for decl in declarations(cls).values() if decl.env}
    assert declared and declared <= registered, declared - registered
    assert tuple(f"BENCH_SLURM_{key.upper()}" for key in KEYS) == tuple(declarations(SlurmSettings)[k].env for k in KEYS)


def _options(command: str, prefix: str = "--slurm") -> list[tuple[tuple[str, ...], str | None, bool]]:
    from orchestrator.cli.app import app

    scenario = typer.main.get_command(app).commands["scenario"]
    return [(tuple(p.opts), p.help, p.required) for p in scenario.commands[command].params if any(o.startswith(prefix) for o in p.opts)]


def _slurm_options(command: str) -> list[tuple[tuple[str, ...], str | None, bool]]:
    return _options(command)


def test_run_and_resume_take_python_from_the_local_settings() -> None:
    """--python is LocalSettings.interpreter's flag: the same option, with the same help, in both commands."""
    declared = [((decl.flag,), decl.help, False) for decl in flagged(LocalSettings).values()]
    assert declared == [(("--python",), declarations(LocalSettings)["interpreter"].help, False)]
    assert _options("run", "--python") == declared and _options("resume", "--python") == declared


def test_a_bad_python_is_refused_before_anything_runs(capsys, monkeypatch, tmp_path) -> None:
    from tests.core.cli_helpers import FAKE_SCENARIO, run_cli, use_fake_engines

    use_fake_engines(monkeypatch)
    for command in (["scenario", "run", str(FAKE_SCENARIO), "--out", str(tmp_path)], ["scenario", "resume", str(tmp_path / "none")]):
        code, _, err = run_cli(capsys, monkeypatch, *command, "--python", "python3\x01")
        assert code == 2 and "local.interpreter: 'python3\\x01' is not an interpreter" in err, (command, err)
    assert not any(tmp_path.iterdir())


def test_run_and_resume_take_their_slurm_options_from_the_one_declaration() -> None:
    """A field of SlurmSettings with a flag is an option of both commands, with the field's help; no other --slurm-* option."""
    declared = [((decl.flag,), decl.help, False) for decl in flagged(SlurmSettings).values()]
    assert len(declared) == 9
    assert _slurm_options("run") == declared and _slurm_options("resume") == declared
    for name, decl in flagged(SlurmSettings).items():  # each option's help names its fallback
        assert decl.flag == "--slurm-" + name.replace("_", "-") and f"env {decl.env}" in decl.help


def test_a_field_given_a_flag_becomes_an_option() -> None:
    """The decorator is generic: a new field with a flag needs no change to the commands."""
    from orchestrator.cli.slurm_options import settings_flags

    @dataclasses.dataclass(frozen=True)
    class Toy:
        size: int | None = setting(None, lambda v, w: int(v), env="TOY_SIZE", flag="--toy-size", help="toy: size.")
        name: str | None = setting(None, lambda v, w: v, flag="--toy-name", help="toy: name.")
        hidden: str | None = setting(None, lambda v, w: v)  # no flag: scenario and environment only

    seen: list[Any] = []
    app = typer.Typer(add_completion=False)

    @app.command()
    @settings_flags(Toy, "toy", lambda **given: {k: v for k, v in given.items() if v is not None})
    def main(verbose: bool = typer.Option(False, "--verbose"), toy: dict[str, Any] | None = None) -> None:
        seen.append((verbose, toy))

    params = typer.main.get_command(app).params
    assert [p.opts for p in params] == [["--verbose"], ["--toy-size"], ["--toy-name"]]
    result = CliRunner().invoke(app, ["--toy-name", "x", "--verbose"])
    assert result.exit_code == 0, result.output
    assert seen == [(True, {"name": "x"})]


def test_the_command_lines_python_wins_over_the_scenarios_interpreter(tmp_path: Path) -> None:
    """--python over engines.<name>.interpreter (command line over scenario); the scenario's own applies without it."""
    from orchestrator.run.execute import RunOptions, engine_runtime_settings
    from orchestrator.scenario.load import load_scenario

    source = Path(__file__).resolve().parents[2] / "scenarios" / "cifar_resnet50.yaml"
    text = source.read_text().replace("  pytorch:\n    options:", "  pytorch:\n    interpreter: /from/the/scenario/python\n    options:", 1)
    assert "/from/the/scenario/python" in text
    scenario_file = tmp_path / "scenario.yaml"
    scenario_file.write_text(text)
    scenario = load_scenario(scenario_file)
    given = engine_runtime_settings(scenario, "pytorch", RunOptions(settings={"interpreter": "/from/the/command/line"}))
    assert given.local.interpreter == "/from/the/command/line"
    assert engine_runtime_settings(scenario, "pytorch", RunOptions()).local.interpreter == "/from/the/scenario/python"
