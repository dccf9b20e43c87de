"""The ``bench`` root command and its command groups, registered explicitly (``COMMAND_GROUPS``).

Exit codes: 0 success; 1 some runs failed or were invalid; 2 bad input; 130 interrupted (143 SIGTERM, 129 SIGHUP).
Shell completion: ``bench --install-completion`` (or ``--show-completion`` to install it by hand).
"""

from __future__ import annotations

import os
import signal
import sys

import typer
import typer.main

from orchestrator import __version__
from orchestrator.cli import data_cmd, env_cmd, image_cmd, results_cmd, results_history_cmd, results_output_cmd, scenario_cmd, scenario_resume_cmd
from orchestrator.cli.console import err
from orchestrator.envvars import check_environment
from orchestrator.errors import BadInput, Interrupted, one_line
from orchestrator.signals import exit_status, ignore_from_now, received, termination_handled
from orchestrator.terminal import markup

app = typer.Typer(
    name="bench",
    help="Run deep-learning benchmark scenarios across framework engines, with parity checks and hashed artifacts.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bench {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")) -> None:
    """bench: containerized multi-framework deep-learning benchmarks."""


# Commands defined in a module of their own and attached here to their group: (group, name, function).
GROUP_COMMANDS: tuple[tuple[typer.Typer, str, object], ...] = (
    (results_cmd.results_app, "compare", results_output_cmd.compare),
    (results_cmd.results_app, "report", results_output_cmd.report),
    (results_cmd.results_app, "archive", results_output_cmd.archive),
    (results_cmd.results_app, "publish", results_output_cmd.publish),
    (results_cmd.results_app, "list", results_history_cmd.list_artifacts),
    (results_cmd.results_app, "history", results_history_cmd.history),
    (scenario_cmd.scenario_app, "resume", scenario_resume_cmd.resume_cmd),
)
for _group, _command, _function in GROUP_COMMANDS:
    _group.command(_command)(_function)

# The command groups of ``bench``, in the order its help lists them.
COMMAND_GROUPS: tuple[tuple[str, typer.Typer], ...] = (
    ("data", data_cmd.data_app),
    ("env", env_cmd.env_app),
    ("image", image_cmd.image_app),
    ("results", results_cmd.results_app),
    ("scenario", scenario_cmd.scenario_app),
)

for _name, _group in COMMAND_GROUPS:
    app.add_typer(_group, name=_name)


PROG_NAME = "bench"
COMPLETE_VAR = "_BENCH_COMPLETE"  # set by the shell's completion script (click's _<PROG_NAME>_COMPLETE): bench only lists completions


def command() -> typer.main.TyperGroup:
    """bench's command tree as click runs it, every flag without a type in ``--help`` (typer's rich help would show ``<bool>``)."""
    root = typer.main.get_command(app)
    _untyped_flags(root)
    return root


def _untyped_flags(command: object) -> None:
    """An empty metavar on every flag of ``command`` and its subcommands, --help included (a flag takes no value)."""
    params = list(getattr(command, "params", []))
    help_option = command.get_help_option(typer.Context(command))  # type: ignore[attr-defined]  # made once, kept by the command
    for param in [*params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        _untyped_flags(sub)


def main() -> None:
    """Console-script entry: turn bad input and interrupts into one line and an exit code.

    SIGTERM and SIGHUP are handled like Ctrl-C (orchestrator.signals); the exit status is 128 + the signal.
    """
    with termination_handled():
        _main()


def entry() -> None:
    """The ``bench`` console script and ``python -m orchestrator``: :func:`main`, then a late SIGINT/SIGTERM/SIGHUP
    (after the handlers are gone, everything written) is ignored while the interpreter exits instead of killing it."""
    try:
        main()
    finally:
        ignore_from_now()


def _main() -> None:
    try:
        if COMPLETE_VAR not in os.environ:  # completing a word: no error line may reach the shell
            check_environment()  # every BENCH_* variable, like a flag, before anything runs
        # returns typer.Exit's code in non-standalone mode; named bench however started (python -m orchestrator), so that
        # usage lines say bench and the completion variable is always COMPLETE_VAR
        code = command()(standalone_mode=False, prog_name=PROG_NAME)
        if code == 130 and received() is not None:  # typer turns a KeyboardInterrupt into a silent Exit(130)
            raise Interrupted()
        sys.exit(code if isinstance(code, int) else 0)
    except BadInput as exc:
        # one line, whatever the message quotes of the input (a value with a newline, say)
        err.print(f"[red]error:[/] {markup(one_line(str(exc)))}", soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, Interrupted):
        signum = received()
        err.print("[magenta]interrupted[/]" + (f" ({signal.Signals(signum).name})" if signum and signum != signal.SIGINT else ""))
        sys.exit(exit_status())
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:  # click turns a KeyboardInterrupt (Ctrl-C, SIGTERM, SIGHUP) inside a command into Abort
        signum = received()
        err.print("[magenta]aborted[/]" + (f" ({signal.Signals(signum).name})" if signum and signum != signal.SIGINT else ""))
        sys.exit(exit_status())
    except Exception as exc:  # click usage errors (typer bundles its own click) and the unexpected
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("BENCH_DEBUG"):
            raise
        err.print(f"[red]internal error:[/] {exc.__class__.__name__}: {markup(one_line(str(exc)))} (set BENCH_DEBUG=1 for the traceback)")
        sys.exit(1)
