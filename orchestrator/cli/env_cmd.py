"""``bench env``: host, CPU state (model, governor, boost, load, affinity), GPUs (NVML), Docker, and the engines usable by the local runtime."""

from __future__ import annotations

from typing import Any

import typer

from orchestrator.cli.console import out, print_json
from orchestrator.cli.results_view import WideOption, rich_table
from orchestrator.engines.registry import discover
from orchestrator.host.hostinfo import host_facts
from orchestrator.host.provenance import describe_host, run_host
from orchestrator.reports.model import Table
from orchestrator.reports.views import Field, view
from orchestrator.terminal import markup

env_app = typer.Typer(help="Host facts and per-engine environments.", invoke_without_command=True)


def engine_status() -> list[dict]:
    from orchestrator.runtimes.local import probe_framework, resolve_interpreter
    from orchestrator.runtimes.local_settings import LocalSettings

    rows = []
    for name, engine in discover().items():
        try:
            interpreter = resolve_interpreter(engine, LocalSettings())
            ok, detail = probe_framework(interpreter, engine)
        except Exception as exc:
            interpreter, ok, detail = "-", False, str(exc)
        rows.append({"engine": name, "framework": engine.framework, "interpreter": interpreter, "usable": ok,
                     "version" if ok else "reason": detail})
    return rows


def docker_status() -> dict:
    try:
        from orchestrator.docker_client import daemon_status
    except ImportError:
        return {"reachable": False, "reason": "docker runtime not installed"}
    return daemon_status().to_json()


@env_app.callback()
def env(ctx: typer.Context, wide: bool = WideOption, as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Show host, Python, GPUs through NVML, Docker reachability and usable engines."""
    if ctx.invoked_subcommand:
        return
    facts = host_facts()
    cpu = run_host()
    facts["cpu"] = cpu.to_json()
    facts["docker"] = docker_status()
    facts["engines"] = engine_status()
    if as_json:
        print_json(facts)
        return
    out.print(f"[bold]host[/] {markup(facts['hostname'])}  {markup(facts['os'])}  {facts['cpu_count']} CPUs  "
              f"Python {markup(facts['python'])}  bench {facts['bench_version']}")
    out.print(f"[bold]CPU[/] {markup(describe_host(cpu))}")
    nvml = facts["nvml"]
    if nvml["available"] and nvml["gpus"]:
        out.print(f"[bold]GPUs[/] driver {markup(nvml['driver'])}, CUDA driver {markup(nvml['cuda_driver'])}")
        for gpu in nvml["gpus"]:
            memory = gpu["memory_total_bytes"] / 2**30 if gpu["memory_total_bytes"] else 0
            out.print(f"  {gpu['index']}: {markup(gpu['name'])} {memory:.0f} GiB  {markup(gpu['uuid'])}")
    else:
        out.print(f"[bold]GPUs[/] none ({markup(nvml.get('reason') or 'NVML reports no devices')})")
    docker = facts["docker"]
    reach = f"reachable, server {docker.get('version')}" if docker.get("reachable") else f"not reachable ({docker.get('reason')})"
    out.print("[bold]Docker[/] " + markup(reach))
    out.print(rich_table(engines_table(facts["engines"], wide), wide))


def engines_table(rows: list[dict[str, Any]], wide: bool) -> Table:
    """The engines the local runtime can use: engine, framework, usable, version or why not, interpreter."""
    fields = [Field("engine", lambda r: r["engine"]), Field("framework", lambda r: r["framework"]),
              Field("usable", lambda r: "yes" if r["usable"] else "no", status=True),
              Field("version / reason", lambda r: r.get("version") or r.get("reason", ""), clip=True),
              Field("interpreter", lambda r: r["interpreter"], clip=True)]
    return view("engines", "engines (local runtime)", fields, rows, wide)


@env_app.command("create")
def create(engine: str = typer.Argument(..., help="Engine whose pinned requirements to install (or, for OpenNN, to compile)."),
           system_site_packages: bool = typer.Option(False, "--system-site-packages", help="Let the env see the host's packages."),
           cuda: bool = typer.Option(False, "--cuda", help="Compiled engines: the CUDA build (default: CPU)."),
           vendor: str | None = typer.Option(None, "--vendor", help="Compiled engines: folder with the pinned source archives (default $BENCH_OPENNN_VENDOR)."),
           cuda_arch: str = typer.Option("90", "--cuda-arch", help="Compiled engines: CMAKE_CUDA_ARCHITECTURES."),
           cudnn_root: str | None = typer.Option(None, "--cudnn-root", help="Compiled engines: cuDNN folder (default: the nvidia-cudnn wheel)."),
           deps_prefix: str | None = typer.Option(None, "--deps-prefix", help="Compiled engines: root of unpacked zlib/libjpeg .deb files."),
           jobs: int | None = typer.Option(None, "--jobs", min=1, help="Compiled engines: parallel compile jobs.")) -> None:
    """Create (or update) bench's own environment for ENGINE; the local runtime then uses it.

    Python engines get a venv with their pinned requirements; OpenNN is compiled once
    (library + driver) into ~/.cache/bench/opennn/<checksums>/."""
    from orchestrator.engines.registry import get_engine

    if get_engine(engine).build:
        from orchestrator.opennn_build import BuildRequest, build

        driver = build(BuildRequest(cuda=cuda, vendor=vendor, cuda_arch=cuda_arch, cudnn_root=cudnn_root, deps_prefix=deps_prefix, jobs=jobs))
        out.print(f"[green]ready[/]: {markup(engine)} -> {markup(driver)}")
        return
    from orchestrator.engines.venvs import create_env

    python = create_env(engine, system_site_packages)
    out.print(f"[green]ready[/]: {markup(engine)} -> {markup(python)}")
