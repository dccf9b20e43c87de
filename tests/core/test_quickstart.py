"""The README's quick start: a venv first, and its test command is the one CI runs (.ci/run)."""

from __future__ import annotations

import re

from tests.conftest import REPO


def quick_start_commands() -> list[str]:
    """The bash blocks of README's "Quick start" section, in order."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_the_first_command_makes_the_venv_before_it_installs() -> None:
    first = quick_start_commands()[0]
    assert first.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install -e \".[engines,dev]\"")
    assert first.endswith("--smoke")


def test_the_readme_says_how_to_get_the_cpu_torch() -> None:
    """The CPU-only install is a command of its own (PyTorch's CPU index), beside the default one."""
    cpu = [command for command in quick_start_commands() if "download.pytorch.org/whl/cpu" in command]
    assert cpu and cpu[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install -e \".[engines,dev]\"")


def test_the_test_command_is_what_ci_runs() -> None:
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert "python3 -m pytest" in quick_start_commands() and ci[-1] == "python3 -m pytest"
