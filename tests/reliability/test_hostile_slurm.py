"""Slurm job-script injection: every value that reaches a job script is checked or refused (exit 2),
and values that may hold spaces are quoted the way sbatch and bash read them."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.errors import BadInput
from orchestrator.runtimes.slurm_job import JobRequest, job_script, slurm_settings
from tests.reliability.hostile_support import FAKE_SCENARIO, call, fake_engines, save_figures, timed

__all__ = ["fake_engines"]
INJECT = "\ntouch {marker}\n"


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    save_figures()


def sbatch_argument(text: str) -> tuple[str, str]:
    """One argument of an #SBATCH line as sbatch's _get_argument (src/sbatch/opt.c) reads it: quotes group,
    a backslash escapes, an unquoted '#' ends the line. Returns (argument, rest of the line)."""
    out, quote, escape, i = [], "", False, 0
    text = text.lstrip()
    while i < len(text) and (quote or not text[i].isspace()) and text[i] != "\n":
        ch = text[i]
        i += 1
        if escape:
            escape = False
        elif ch == "\\":
            escape = True
            continue
        elif quote:
            if ch == quote:
                quote = ""
                continue
        elif ch in "\"'":
            quote = ch
            continue
        elif ch == "#":
            break
        out.append(ch)
    return "".join(out), text[i:]


def sbatch_directives(script: str) -> list[str]:
    """The options sbatch takes from the script: #SBATCH lines up to the first command."""
    options = []
    for line in script.splitlines():
        if line.startswith("#SBATCH"):
            rest = line[len("#SBATCH"):]
            while rest.strip():
                argument, rest = sbatch_argument(rest)
                if not argument:
                    break
                options.append(argument)
        elif line.strip() and not line.startswith("#"):
            break
    return options


def _job(tmp_path: Path, folder: str = "runs/r1", **kw) -> JobRequest:
    run = tmp_path / folder
    base = dict(job_name="bench-A-r1", workdir=run, output=run / "engine.log", spec=run / "spec.json", result=run / "result.json",
                dataset=tmp_path / "data", module="echo_engine", interpreter=sys.executable, python_path=[tmp_path / "mod"],
                env={"PYTHONUNBUFFERED": "1"}, comment="run r1")
    base.update(kw)
    return JobRequest(**base)


HOSTILE_SETTINGS = {
    "account newline": {"account": "acct" + INJECT},
    "partition newline": {"partition": "gpu" + INJECT},
    "time newline": {"time": "10" + INJECT},
    "time text": {"time": "$(touch {marker})"},
    "account space": {"account": "a b"},
    "account quote": {"account": "a'b"},
    "image newline": {"image": "docker://x" + INJECT, "mode": "container"},
    "sbatch newline": {"sbatch_args": ["--comment=x" + INJECT]},
    "sbatch carriage return": {"sbatch_args": ["--comment=x\rtouch {marker}"]},
    "sbatch positional script": {"sbatch_args": "--exclusive /tmp/evil.sh"},
    "sbatch wrap": {"sbatch_args": "--wrap='touch {marker}'"},
    "sbatch wrap prefix": {"sbatch_args": "--wra='touch {marker}'"},
    "sbatch output prefix": {"sbatch_args": "--out=/etc/x"},
    "sbatch chdir short": {"sbatch_args": "-D/tmp"},
    "sbatch bundled short": {"sbatch_args": "-vJname"},
    "shared dir newline": {"shared_dir": "/scratch/x" + INJECT},
    "shared dir percent": {"shared_dir": "/scratch/%j"},
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SETTINGS))
def test_hostile_settings_are_refused(case: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    given = {k: (v.replace("{marker}", str(marker)) if isinstance(v, str) else [a.replace("{marker}", str(marker)) for a in v])
             for k, v in HOSTILE_SETTINGS[case].items()}
    with timed("slurm: hostile settings"), pytest.raises(BadInput, match=r"^slurm\.(account|partition|time|image|sbatch_args|shared_dir): "):
        slurm_settings({"slurm": given}, environ={})
    key = next(iter(given))
    if isinstance(given[key], str):  # the same through the environment variable
        with pytest.raises(BadInput, match=rf"^BENCH_SLURM_{key.upper()}: "):
            slurm_settings({}, environ={f"BENCH_SLURM_{key.upper()}": given[key] + "x"})


@pytest.mark.parametrize(("option", "value"), [("--slurm-account", "acct\ntouch {marker}"), ("--slurm-partition", "p\ntouch {marker}"),
                                               ("--slurm-time", "1\ntouch {marker}"), ("--slurm-sbatch-args", "--wrap=touch {marker}")])
def test_cli_refuses_injection_with_exit_2(option: str, value: str, tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    marker = tmp_path / "pwned"
    with timed("slurm: hostile settings"):
        code, _, err = call(capsys, monkeypatch, "scenario", "run", str(FAKE_SCENARIO), "--runtime", "slurm", "--out", str(tmp_path / "r"),
                            option, value.replace("{marker}", str(marker)))
    assert code == 2 and "slurm." in err
    assert not marker.exists() and not (tmp_path / "r").exists()  # refused before any artifact or job


def test_scenario_runtime_block_injection_is_refused(tmp_path: Path, capsys, monkeypatch, fake_engines) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(FAKE_SCENARIO.read_text() + 'runtime:\n  slurm:\n  "account": "acct\\ntouch /tmp/x"\n'.replace("\n  \"", "\n    \""))
    code, _, err = call(capsys, monkeypatch, "scenario", "run", str(scenario), "--runtime", "slurm", "--out", str(tmp_path / "r"))
    assert code == 2 and "slurm.account" in err


@pytest.mark.parametrize("field", ["env value", "env name", "workdir", "output", "interpreter", "job name", "mount comma"])
def test_hostile_job_values_are_refused(field: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    change = {
        "env value": {"env": {"X": f"1\ntouch {marker}"}},
        "env name": {"env": {"X;touch": "1"}},
        "workdir": {"workdir": tmp_path / f"a\ntouch {marker}"},
        "output": {"output": tmp_path / "out\n#SBATCH --uid=0"},
        "interpreter": {"interpreter": f"/usr/bin/python3\ntouch {marker}"},
        "job name": {"job_name": "bench\n#SBATCH --uid=0"},
        "mount comma": {"mode": "container", "launcher": "pyxis", "image": "x", "dataset": tmp_path / "d,/etc:/mnt"},
    }[field]
    with timed("slurm: hostile job values"), pytest.raises(BadInput):
        job_script(_job(tmp_path, **change))


def test_paths_with_spaces_and_shell_text_work(tmp_path: Path) -> None:
    """A run folder with spaces, quotes and $(...) in its path: sbatch reads the exact paths from the
    #SBATCH lines, and bash runs the engine there with nothing of the path executed."""
    marker = tmp_path / "pwned"
    folder = f"my results/it's \"quoted\" $(touch {marker}) `touch {marker}`/run 1"
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "echo_engine.py").write_text(
        "import json, os, sys\njson.dump({'argv': sys.argv[1:], 'cwd': os.getcwd()}, open(sys.argv[-1], 'w'))\n")
    job = _job(tmp_path, folder=folder, env={"NOTE": "a b; touch " + str(marker) + " $(touch " + str(marker) + ")"})
    job.workdir.mkdir(parents=True)
    with timed("slurm: scripts with spaces"):
        script = job_script(job, ["--comment=two words", "--qos=high"])
    options = sbatch_directives(script)
    assert f"--output={job.output}" in options and f"--chdir={job.workdir}" in options
    assert "--job-name=bench-A-r1" in options
    path = tmp_path / "job.sh"
    path.write_text(script)
    proc = subprocess.run(["bash", str(path)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(job.result.read_text())
    assert seen["cwd"] == str(job.workdir) and seen["argv"] == ["--spec", str(job.spec), "--result", str(job.result)]
    assert not marker.exists()
    assert "# submitted with: sbatch --parsable " + " ".join(shlex.quote(a) for a in ["--comment=two words", "--qos=high"]) in script
