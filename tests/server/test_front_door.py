"""The apiserver's front door: outside simapf.server, code asks a `SimulatedAPIServer` through its
verbs and reads its `snapshot()`; nothing reaches into its resource model (`.model`). The
cluster's observers are a list, and the recorder learns a request's exemption from the request."""

from __future__ import annotations

import ast
from pathlib import Path

from simapf.apf.types import NS_PER_S, RequestAttributes
from simapf.engine.environment import Environment
from simapf.server.params import ServerParams
from simapf.server.runtime import OK, SimulatedAPIServer

PACKAGE = Path(__file__).resolve().parents[2] / "simapf"
SERVER = PACKAGE / "server"
MS = 1_000_000


def _attribute_uses(path: Path, names: set[str]) -> list[str]:
    """Where `path` reads an attribute called one of `names`: "file:line expression"."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {ast.unparse(node)}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in names]  # fmt: skip


def test_no_code_outside_the_server_package_reaches_into_an_apiservers_model():
    """`server.model` is simapf.server's own: the rest of simapf uses the apiserver's verbs
    (kill, on_death, install_crds, hold, ...) and its snapshot."""
    outside = [p for p in PACKAGE.rglob("*.py") if SERVER not in p.parents]
    assert len(outside) > 50  # the package is where this test thinks it is
    uses = [use for path in outside for use in _attribute_uses(path, {"model"})]
    assert uses == []


def test_the_recorder_and_collect_read_no_apf_state():
    """They read snapshots: per-level gauges and counters come from `SimulatedAPIServer.snapshot`,
    a request's exemption from the request; neither walks the apiserver's APF controller."""
    uses = [use for name in ("simulation/observe.py", "simulation/collect.py")
            for use in _attribute_uses(PACKAGE / name, {"apf", "queueset"})]  # fmt: skip
    assert uses == []


def _server(**kwargs) -> tuple[Environment, SimulatedAPIServer]:
    env = Environment()
    params = ServerParams(cpu={"cores": 4, "usable_cores": 4}, process={"restart_s": 1})
    return env, SimulatedAPIServer(env.clock, params=params, **kwargs)


def _attrs(user: str, groups: tuple[str, ...]) -> RequestAttributes:
    return RequestAttributes(user=user, groups=groups, verb="get", resource="configmaps", namespace="default")


def test_a_request_carries_whether_an_exempt_level_dispatched_it():
    env, server = _server()
    done = []
    server.submit(_attrs("admin", ("system:masters", "system:authenticated")), service_ns=MS, on_done=done.append)
    server.submit(_attrs("someone", ("system:authenticated",)), service_ns=MS, on_done=done.append)
    env.run(until=NS_PER_S)
    exempt = {rec.attrs.user: (rec.outcome, rec.priority_level, rec.exempt) for rec in done}
    assert exempt == {"admin": (OK, "exempt", True), "someone": (OK, "global-default", False)}


def test_death_hooks_run_in_order_and_the_snapshot_counts_the_death():
    env, server = _server()
    heard = []
    server.on_death(lambda now: heard.append(("first", now, server.up)))
    server.on_death(lambda now: heard.append(("second", now, server.snapshot().last_down_reason)))
    server.on_restart(lambda now: heard.append(("back", now, server.up)))
    before = server.snapshot()
    env.run(until=NS_PER_S // 2)
    server.kill("restart")
    env.run(until=2 * NS_PER_S)
    after = server.snapshot()
    half = NS_PER_S // 2
    assert heard == [("first", half, False), ("second", half, "restart"), ("back", half + NS_PER_S, True)]
    assert (before.kills, before.restarts, before.down_ns) == (0, 0, 0)
    assert (after.kills, after.restarts, after.down_ns, after.oom_kills) == (1, 1, NS_PER_S, 0)
    assert [g.name for g in after.levels] == list(server.apf.levels)


def test_a_snapshot_is_a_copy_of_the_counters():
    env, server = _server()
    snap = server.snapshot()
    server.submit(_attrs("someone", ("system:authenticated",)), service_ns=MS)
    env.run(until=NS_PER_S)
    assert snap.completed[OK] == 0 and snap.dispatched_by_flow == {}
    now = server.snapshot()
    assert now.completed[OK] == 1 and sum(now.dispatched_by_flow.values()) == 1


def test_every_cluster_observer_sees_every_answered_request():
    from simapf.simulation.runner import Simulation
    from simapf.scenario import load_scenario

    sim = Simulation(load_scenario(PACKAGE.parent / "scenarios" / "list-experiment.yaml", {"run.duration_s": 2}))
    assert isinstance(sim.cluster.observers, list) and len(sim.cluster.observers) == 1  # the recorder's
    seen: list = []
    sim.cluster.observers.append(seen.append)
    result = sim.run()
    assert len(seen) > 100 and len({id(rec) for rec in seen}) == len(seen)
    assert len(seen) == result.summary["requests"]["total"]  # every answer, once
    assert sum(sim.recorder.request_counts.values()) == len(seen) - result.summary["requests"]["by_outcome"]["unavailable"]
