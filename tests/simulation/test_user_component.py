"""A user's own component, added to a run as a SimPy process the way docs/extending.md says:
build the `Simulation`, start a process on its environment, and let it act through the model's
public verbs (`cluster.send`, `server.snapshot`, `server.kill`)."""

from __future__ import annotations

import re
from pathlib import Path

from simapf.apf.types import NS_PER_S, ListOptions, RequestAttributes
from simapf.simulation.runner import Simulation, load

from builders import open_loop, scenario

SCENARIO = scenario(open_loop(rate_per_s=5.0), duration_s=20.0, apiserver={"restart_s": 5.0})


def relister(sim: Simulation, period_s: float, seen: list):
    """A controller that LISTs every configmap each `period_s` and waits for each answer: the
    answer is a SimPy event the completion callback triggers."""
    env = sim.env
    attrs = RequestAttributes(user="system:serviceaccount:kube-system:my-controller", groups=("system:serviceaccounts",),
                              verb="list", resource="configmaps", list_options=ListOptions())  # fmt: skip
    while True:
        answered = env.event()
        sim.cluster.send(attrs, "json", answered.succeed, tag=("my-controller", 0))
        rec = yield answered
        seen.append((env.now, rec.outcome, rec.done_ns - rec.received_ns, sim.server.snapshot()))
        yield env.timeout(int(period_s * NS_PER_S))


def killer(sim: Simulation, at_s: float):
    """An operator that kills the apiserver once, at `at_s`."""
    yield sim.env.timeout(int(at_s * NS_PER_S))
    sim.server.kill("killed-by-test")


def test_a_user_process_sends_requests_that_the_run_serves_and_records():
    seen: list = []
    sim = Simulation(load(SCENARIO))
    sim.env.process(relister(sim, 2.0, seen))
    result = sim.run()

    # One LIST every 2 s from t=0, each answered at once, in a run of 20 s: 10 of them.
    assert len(seen) == 10
    assert all(outcome == "ok" for _, outcome, _, _ in seen)
    assert all(latency_ns > 0 for _, _, latency_ns, _ in seen)
    # The process runs on the run's clock: each answer comes after the request it waited for.
    times = [t for t, _, _, _ in seen]
    assert all(b - a >= 2 * NS_PER_S for a, b in zip(times, times[1:]))
    # The run records them with the rest, under the tag's client name.
    mine = result.requests[result.requests["client"] == "my-controller"]
    assert len(mine) == 10 and set(mine["verb"]) == {"list"}
    plain = Simulation(load(SCENARIO)).run()
    assert _lists(result) == _lists(plain) + 10


def test_a_user_process_can_kill_the_server_and_the_run_sees_it():
    sim = Simulation(load(SCENARIO))
    sim.env.process(killer(sim, 5.0))
    result = sim.run()
    plain = Simulation(load(SCENARIO)).run()
    assert _process(plain)["kills"] == 0
    # Down from the kill at 5 s for apiserver.restart_s (5 s), then up again.
    assert _process(result)["kills"] == 1 and _process(result)["down_s"] == 5.0
    assert [d["reason"] for d in result.summary["deaths"]] == ["killed-by-test"]
    assert _process(result)["restarts"] == 1  # and it came back, as the scenario's apiserver does


def test_the_documented_example_runs_as_written(monkeypatch):
    root = Path(__file__).parents[2]
    doc = (root / "docs" / "extending.md").read_text()
    monkeypatch.chdir(root)
    (example,) = re.findall(r"```python\n(.*?)```", doc, re.S)
    scope: dict = {}
    exec(compile(example, "docs/extending.md", "exec"), scope)
    mine = scope["mine"]
    # One LIST of Secrets every 30 s or so, whenever the network is up (the scenario's outage
    # refuses the connection before the apiserver sees a request, so none is recorded then).
    sc = scope["sim"].scenario
    assert set(mine["verb"]) == {"list"} and set(mine["resource"]) == {"secrets"}
    assert (mine["received_s"].diff().dropna() >= 30.0).all()
    (outage,) = sc.events
    assert len(mine) >= (sc.run.duration_s - outage.duration_s) // 31


def _lists(result) -> int:
    return int((result.requests["verb"] == "list").sum())


def _process(result) -> dict:
    return result.summary["process"]
