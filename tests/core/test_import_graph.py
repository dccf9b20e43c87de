"""The modules stand in layers: no import cycle among orchestrator/ and images/common/ (lazy imports count),
and none between the folders of orchestrator/ (imagebuild/, runtimes/, ...: one direction only, in LAYERS)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"orchestrator": ROOT / "orchestrator", "bench_engine": ROOT / "images" / "common" / "bench_engine"}
ENGINES = ("pytorch", "jax", "tensorflow", "opennn")  # images/<engine>/bench_<engine>: each acyclic over bench_engine
# The folders of orchestrator/, lowest first: each imports only folders before it (its own top-level modules,
# errors.py, jsonio.py, ..., are shared plumbing and no layer).
LAYERS = ("engines", "model", "host", "data", "imagebuild", "runtimes", "scenario", "artifacts", "judge", "run", "reports", "cli")


def module_files(packages: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``packages``."""
    out = {}
    for package, root in packages.items():
        for path in sorted(root.rglob("*.py")):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path, node: ast.AST, known: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    module = node.module or ""
    if node.level:
        base = name.split(".")
        if path.name != "__init__.py":
            base.pop()
        base = base[: len(base) - node.level + 1]
        module = ".".join([*base, module] if module else base)
    # `from package import submodule` depends on the submodule; `from module import name` on the module
    submodules = {f"{module}.{alias.name}" for alias in node.names} & set(known)
    return submodules if len(submodules) == len(node.names) else submodules | {module}


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``files`` it imports anywhere in its body (functions included)."""
    graph = {}
    for name, path in files.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            deps |= _imported(name, path, node, files)
        graph[name] = {dep for dep in deps if dep in files and dep != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def folder_graph(graph: dict[str, set[str]], package: str, root: Path) -> dict[str, set[str]]:
    """Folder -> the folders its modules import, for the folders (sub-packages) right under ``root``.

    A module of a nested folder counts for its top folder; the package's own modules are no folder.
    """

    def folder(module: str) -> str | None:
        parts = module.split(".")
        return f"{package}.{parts[1]}" if len(parts) > 1 and (root / parts[1]).is_dir() else None

    folders: dict[str, set[str]] = {}
    for module, deps in graph.items():
        source = folder(module)
        if source is not None:
            folders.setdefault(source, set()).update(target for dep in deps if (target := folder(dep)) not in (None, source))
    return folders


def test_no_import_cycle() -> None:
    graph = import_graph(module_files(PACKAGES))
    assert len(graph) > 60  # both packages were read
    assert cycles(graph) == []


def test_no_import_cycle_between_folders() -> None:
    graph = import_graph(module_files({"orchestrator": PACKAGES["orchestrator"]}))
    folders = folder_graph(graph, "orchestrator", PACKAGES["orchestrator"])
    assert {"orchestrator.imagebuild", "orchestrator.runtimes", "orchestrator.cli"} <= set(folders)
    assert cycles(folders) == []


def test_folders_import_only_the_layers_below() -> None:
    """Every folder of orchestrator/ is in LAYERS and imports only folders listed before it."""
    graph = import_graph(module_files({"orchestrator": PACKAGES["orchestrator"]}))
    folders = folder_graph(graph, "orchestrator", PACKAGES["orchestrator"])
    assert {name.removeprefix("orchestrator.") for name in folders} == set(LAYERS)  # a new folder takes its place in LAYERS
    rank = {layer: position for position, layer in enumerate(LAYERS)}
    upward = sorted(f"{source} -> {target}" for source, targets in folders.items() for target in targets
                    if rank[target.removeprefix("orchestrator.")] >= rank[source.removeprefix("orchestrator.")])
    assert upward == []


def test_no_import_cycle_in_an_engine_package() -> None:
    for engine in ENGINES:
        package = f"bench_{engine}"
        graph = import_graph(module_files({package: ROOT / "images" / engine / package, "bench_engine": PACKAGES["bench_engine"]}))
        assert sum(name.startswith(package) for name in graph) > 5, package  # the engine's modules were read
        assert cycles(graph) == [], package


def test_a_lazy_import_back_is_a_cycle(tmp_path: Path) -> None:
    """The check can fail: a function-level import that closes a loop is found, a one-way import is not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("thing = 1\n\ndef late():\n    from . import c\n")
    (package / "c.py").write_text("import pkg.d\n")
    (package / "d.py").write_text("def back():\n    from pkg import b\n")
    graph = import_graph(module_files({"pkg": package}))
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.b", "pkg.c", "pkg.d"]]
    (package / "d.py").write_text("value = 2\n")
    assert cycles(import_graph(module_files({"pkg": package}))) == []


def test_a_folder_cycle_is_refused(tmp_path: Path) -> None:
    """Folders that import each other are a cycle even when their modules are not (b -> c, not c -> b)."""
    package = tmp_path / "pkg"
    for folder in (package, package / "x", package / "y", package / "y" / "deep"):
        folder.mkdir()
        (folder / "__init__.py").write_text("")
    (package / "util.py").write_text("value = 1\n")  # the package's own module: shared, no folder
    (package / "x" / "a.py").write_text("from pkg.y.deep import b\nfrom pkg import util\n")
    (package / "y" / "deep" / "b.py").write_text("import pkg.util\n\ndef late():\n    from pkg.x import c\n")
    (package / "x" / "c.py").write_text("thing = 2\n")
    graph = import_graph(module_files({"pkg": package}))
    assert cycles(graph) == []
    assert folder_graph(graph, "pkg", package) == {"pkg.x": {"pkg.y"}, "pkg.y": {"pkg.x"}}
    assert cycles(folder_graph(graph, "pkg", package)) == [["pkg.x", "pkg.y"]]
    (package / "y" / "deep" / "b.py").write_text("import pkg.util\n")
    graph = import_graph(module_files({"pkg": package}))
    assert cycles(folder_graph(graph, "pkg", package)) == []
