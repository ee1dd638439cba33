"""The code's shape: data flows one way (scenario → build → run → observe → result).

Every import counts, those inside functions and under TYPE_CHECKING too: a lazy import is still a
dependency, and a circle of them means two modules that cannot be understood one without the
other.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "simapf"
ROOT = "simapf"
MOST_AT_ROOT = 10  # modules directly in simapf/, its __init__ included: the rest live in rooms

# The floors, from the ground up. A module imports from its own floor's rooms or from below,
# never from above. The ground floor is the modules directly in simapf/ that serve everyone,
# and the schema every floor reads a run's summary through; the top is the command line and the package's front door (simapf/__init__.py).
GROUND = {"errors", "files", "messages", "quantities", "version", "progress", "provenance", "compiled_core",
          "schema"}
FLOORS = [
    GROUND,
    {"engine"},  # the clock and its events
    {"apf"},  # API Priority and Fairness, as upstream's queueset runs it
    {"server"},  # the apiserver's resource model
    {"scenario"},  # a scenario file, checked and resolved
    {"workload"},  # clients and events
    {"uncertainty"},  # figures, model error and intervals: what a run's summary says of its trust
    {"simulation"},  # one run: built, run, observed, its result and the result cache
    {"outputs"},  # a run's directory, figures and exports
    {"bench"},  # the same scenario on a real kube-apiserver, written as a run is
    {"jobs"},  # long work's estimates, budgets and workers
    {"sweeps"},  # many runs: sweeps, and a run's parameter draws
    {"comparison", "search", "calibrate"},  # what many runs are for
    {"figures"},  # `simapf figures`, drawn from all of the above
    {"cli", ROOT},  # the command line, and the package's front door
]


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
                # `from p import m` of a submodule m imports p.m; of any other name, p itself
                subs = [f"{target}.{a.name}" for a in node.names]
                targets = subs + ([target] if any(t not in paths for t in subs) else [])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            # A package's own ancestors are not counted against it, but for the root: importing
            # `simapf` runs its __init__, whose lazy attributes reach most of the package.
            graph[name] |= {t for t in targets if t in paths and t != name
                            and (t == ROOT or not name.startswith(t + "."))}  # fmt: skip
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


def room_of(module: str) -> str:
    """The room (a folder of simapf, or a module at its root) a module lives in."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def back_arrows(graph: dict[str, set[str]], floors: list[set[str]] = FLOORS) -> list[tuple[str, str]]:
    """(importer, imported) for every import from a lower floor's room to a higher one's, or
    between two rooms of one floor above the ground (rooms that share a floor stay apart)."""
    floor = {room: i for i, rooms in enumerate(floors) for room in rooms}
    found = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            ra, rb = room_of(a), room_of(b)
            if ra != rb and (floor[rb] > floor[ra] or (floor[rb] == floor[ra] and floor[ra] > 0)):
                found.append((a, b))
    return found


def test_every_room_is_on_a_floor():
    placed = set().union(*FLOORS)
    assert {room_of(m) for m in import_graph()} - placed == set()


def test_the_checker_finds_a_back_arrow():
    floors = [{"low"}, {"mid", "side"}, {"high"}]
    graph = {"simapf.low.a": {"simapf.mid.b"}, "simapf.mid.b": {"simapf.low.a", "simapf.side.c"},
             "simapf.side.c": set(), "simapf.high.d": {"simapf.mid.b", "simapf.low.a"}}  # fmt: skip
    assert back_arrows(graph, floors) == [("simapf.low.a", "simapf.mid.b"), ("simapf.mid.b", "simapf.side.c")]


def test_no_import_runs_back_up_the_floors():
    # Lazy imports count: a function that imports from above still ties its floor to that one.
    assert back_arrows(import_graph()) == []


def test_the_checker_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    assert circles(import_graph()) == []


def test_a_module_that_imports_the_root_is_in_a_circle_through_it():
    # simapf/__init__.py imports (lazily) the front doors: a module below them that imports
    # `simapf` for a name (its version, `simapf.run`) imports itself back through the root.
    graph = import_graph()
    graph["simapf.simulation.collect"] = graph["simapf.simulation.collect"] | {ROOT}
    assert any(ROOT in c and "simapf.simulation.collect" in c for c in circles(graph))


def test_the_package_root_holds_few_modules():
    at_root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(at_root) <= MOST_AT_ROOT, at_root


def test_building_a_run_does_not_reach_back_into_loading():
    # The runner builds from the resolved scenario; what loading resolves is not done twice.
    graph = import_graph()
    assert "simapf.scenario.load" in graph["simapf.simulation.runner"]  # for LoadedScenario and load_scenario
    source = (PACKAGE / "simulation" / "runner.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "simapf.scenario.load" for a in node.names}  # fmt: skip
    assert imported == {"LoadedScenario", "load_scenario"}
    for module in ("simapf.workload.events", "simapf.simulation.collect", "simapf.simulation.result", "simapf.outputs.figures"):
        assert "simapf.simulation.runner" not in graph[module], module


def test_every_module_imports():
    # The fast suite reaches every module at least this far, even those only slow checks run
    # (the compiled core's builder, the calibration report): a module that no longer imports
    # fails here, not first in CI's long checks.
    import importlib

    for name in sorted(import_graph()):
        importlib.import_module(name)
