"""The code's shape: data flows one way (scenario → build → run → observe → result).

Every import counts, those inside functions and under TYPE_CHECKING too: a lazy import is still a
dependency, and a circle of them means two modules that cannot be understood one without the
other.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "simapf"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """simapf's modules and the simapf modules each imports (a package's own submodules, which
    importing it loads, are not counted against it)."""
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in paths and t != name and not name.startswith(t + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    assert circles(import_graph()) == []


def test_building_a_run_does_not_reach_back_into_loading():
    # The runner builds from the resolved scenario; what loading resolves is not done twice.
    graph = import_graph()
    assert "simapf.scenario.load" in graph["simapf.runner"]  # for LoadedScenario and load_scenario
    source = (PACKAGE / "runner.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "simapf.scenario.load" for a in node.names}  # fmt: skip
    assert imported == {"LoadedScenario", "load_scenario"}
    for module in ("simapf.workload.events", "simapf.collect", "simapf.result", "simapf.figures"):
        assert "simapf.runner" not in graph[module], module


def test_every_module_imports():
    # The fast suite reaches every module at least this far, even those only slow checks run
    # (the compiled core's builder, the calibration report): a module that no longer imports
    # fails here, not first in CI's long checks.
    import importlib

    for name in sorted(import_graph()):
        importlib.import_module(name)
