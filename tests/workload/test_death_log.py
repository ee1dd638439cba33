"""The replicas' deaths: one log, written by the cluster from its one death hook, and handed to
its observers once the apiserver, the balancer and the watches have all done their part."""

from __future__ import annotations

from simapf.apf.types import NS_PER_S
from simapf.simulation.runner import Simulation, load

from builders import informer, open_loop, scenario

SCENARIO = scenario(informer(count=3), open_loop(rate_per_s=5.0), duration_s=12.0, apiserver={"restart_s": 3.0})


def test_a_kill_is_logged_once_and_observers_hear_of_it_after_the_bookkeeping():
    sim = Simulation(load(SCENARIO))
    heard: list = []
    before: list[int] = []

    def look_then_kill():
        yield sim.env.timeout(5 * NS_PER_S)
        before.append(sim.cluster.open_watches(0))
        sim.server.kill("killed-by-test")

    def observer(death):
        # What the observer sees is the state after the death: the apiserver has failed its
        # requests, the balancer has closed its connections, the watches are broken.
        heard.append((death, sim.server.up, sim.cluster.open_watches(0), sim.cluster.balancer.connections[0]))

    sim.cluster.on_replica_death(observer)
    sim.env.process(look_then_kill())
    result = sim.run()

    assert len(sim.cluster.deaths) == 1 and len(heard) == 1
    death, up, watches_after, connections_after = heard[0]
    assert death is sim.cluster.deaths[0]
    assert (death.replica, death.at_s, death.reason) == (0, 5.0, "killed-by-test")
    assert before[0] == 3 and death.open_watches == 3  # each informer's watch, counted before they broke
    assert (up, watches_after, connections_after) == (False, 0, 0)
    assert death.rss_bytes is None and death.demand_bytes is None  # not an OOM kill
    # The summary's deaths are the log's, and its kill count agrees with the process's own.
    assert result.summary["deaths"] == [death.as_dict()]
    assert result.summary["process"]["kills"] == 1 and result.summary["process"]["oom_kills"] == 0
