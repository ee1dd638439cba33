"""Several apiserver replicas behind a load balancer: connections, deaths, and where clients go.

Each replica is a whole apiserver (its own APF, memory, OOM kills); a client instance keeps one
connection to one replica until that replica's process dies (or sends a GOAWAY), and the load
balancer's health checks notice a death or a return only `health_check_s` later.
"""

from __future__ import annotations

import numpy as np
import pytest

from simapf import load_scenario, run
from simapf.simulation.runner import Simulation
from simapf.server.params import ServerParams

WATCH_BYTES = ServerParams().request_memory.watch_held_bytes
KILL_S = 60.0


def _cluster(replicas: int = 3, **apiserver) -> dict:
    """60 informers watching ConfigMaps, writers changing them, and readers listing them."""
    return {
        "name": "replicas",
        "run": {"duration_s": 120, "seed": 3, "scrape_interval_s": 1},
        "apiserver": {"replicas": replicas, "restart_s": 90, **apiserver},
        "resources": [{"name": "configmaps", "count": 2000, "namespaces": 20, "object_size": {"mean_bytes": "4Ki"}}],
        "clients": [
            {"name": "informers", "kind": "informer", "count": 60, "resource": "configmaps",
             "identity": {"service_account": "ops/informer-{i}"}, "start": {"spread_s": 10}},
            {"name": "writers", "kind": "mutator", "count": 3, "resource": "configmaps", "rate_per_s": 5,
             "identity": {"service_account": "ops/writer"}},
            {"name": "readers", "kind": "open_loop", "count": 9, "rate_per_s": 2,
             "identity": {"user": "reader-{i}"}, "request": {"verb": "get", "resource": "configmaps", "namespace": "random"}},
        ],
        "events": [{"at_s": KILL_S, "kind": "restart", "replica": 0}],
    }  # fmt: skip


def _at(result, metric: str, t: float) -> dict[str, float]:
    wide = result.wide(metric, by="replica")
    return wide.loc[t].to_dict()


def test_killing_one_of_three_moves_its_clients_and_raises_the_others_memory():
    result = run(_cluster())
    s = result.summary
    instances = 60 + 3 + 9
    before = _at(result, "simapf_client_connections", KILL_S - 1)
    assert sum(before.values()) == instances
    assert min(before.values()) >= instances // 3 - 1  # round robin: a third each
    after = _at(result, "simapf_client_connections", KILL_S + 30)
    assert after["0"] == 0  # the killed replica is still down (restart_s 90)
    assert after["1"] + after["2"] == instances  # every client reconnected to the two others
    # Its watches reopened on the others, which now hold their memory.
    watches_before = _at(result, "apiserver_longrunning_requests", KILL_S - 1)
    watches_after = _at(result, "apiserver_longrunning_requests", KILL_S + 30)
    assert watches_after["1"] + watches_after["2"] == 60
    assert watches_after["1"] > watches_before["1"] and watches_after["2"] > watches_before["2"]
    held_before = _at(result, "simapf_inflight_live_bytes", KILL_S - 1)
    held_after = _at(result, "simapf_inflight_live_bytes", KILL_S + 30)
    for r in ("1", "2"):
        moved = watches_after[r] - watches_before[r]
        assert held_after[r] - held_before[r] >= 0.9 * moved * WATCH_BYTES
    live = result.wide("simapf_live_bytes", by="replica")
    for r in ("1", "2"):
        assert live.loc[KILL_S + 5 : KILL_S + 30, r].min() > live.loc[KILL_S - 25 : KILL_S - 1, r].max()
    # The death is reported with what it held.
    (death,) = s["deaths"]
    assert death["replica"] == 0 and death["reason"] == "restart" and death["at_s"] == KILL_S
    assert death["connections"] == before["0"] and death["open_watches"] == watches_before["0"]
    # The others' watch caches reach back before the informers' resourceVersions: they resume
    # their watches there without relisting.
    informers = next(c for c in s["clients"] if c["client"] == "informers")
    assert informers["relists"] == 0 and informers["gone_410"] == 0
    assert s["replicas"][0]["kills"] == 1 and s["replicas"][1]["kills"] == 0


def test_one_replica_restarted_makes_its_informers_relist():
    """With one replica there is nowhere to go: the new process's watch cache starts empty,
    so every informer's watch is answered 410 and it relists."""
    result = run(_cluster(replicas=1, restart_s=5))
    informers = next(c for c in result.summary["clients"] if c["client"] == "informers")
    assert informers["gone_410"] == 60 and informers["relists"] == 60


def test_a_dead_replica_gets_new_connections_until_the_health_checks_notice():
    """Reconnecting clients are sent to the dead replica, and refused, for health_check_s."""
    slow = run(_cluster(load_balancer={"policy": "least-connections", "health_check_s": 20}))
    quick = run(_cluster(load_balancer={"policy": "least-connections", "health_check_s": 0}))
    refused = [r.summary["replicas"][0]["requests"]["unavailable"] for r in (slow, quick)]
    # least-connections sends every reconnect to the replica with none: the dead one.
    assert refused[0] > 50 and refused[1] == 0
    # Once noticed, nothing more goes there.
    codes = slow.series[(slow.series["metric"] == "simapf_client_connections") & (slow.series["replica"] == "0")]
    assert codes[codes["time_s"] > KILL_S]["value"].max() == 0


@pytest.mark.parametrize("policy", ["round-robin", "least-connections", "random"])
def test_every_policy_spreads_connections_over_the_replicas(policy):
    sc = _cluster(replicas=4, load_balancer={"policy": policy})
    sc["events"] = []
    conns = [r["connections_at_end"] for r in run(sc).summary["replicas"]]
    assert sum(conns) == 72
    if policy == "random":
        assert min(conns) >= 5  # a flow hash: uneven, but every replica gets some
    else:
        assert max(conns) - min(conns) <= 1


def test_goaway_moves_clients_back_to_a_restarted_replica():
    """A restarted replica gets no connections back on its own; --goaway-chance makes clients
    reconnect now and then, which spreads them over every replica again."""
    sc = _cluster(restart_s=5)
    stuck = run(sc).summary
    sc["apiserver"]["goaway_chance"] = 0.02
    spread = run(sc).summary
    assert stuck["replicas"][0]["connections_at_end"] == 0 and stuck["load_balancer"]["goaways"] == 0
    # Only the 12 readers and writers get GOAWAYs (never a watch): about a third of them land on
    # the restarted replica.
    assert spread["replicas"][0]["connections_at_end"] >= 2 and spread["load_balancer"]["goaways"] > 0


def test_open_watches_hold_their_memory_and_free_it_when_closed():
    sim = Simulation(load_scenario(_cluster(replicas=1)))
    model = sim.server.model
    for group in sim.groups.values():
        group.start()
    sim.env.run(until=30 * 10**9)
    assert sim.cluster.open_watches() == 60
    held = model.memory.inflight_live
    watches = list(sim.cluster._watches[0]["configmaps"])
    # Each holds its structures and, once it has sent an event, two buffers of the largest.
    assert all(w.held >= WATCH_BYTES for w in watches) and any(w.held > WATCH_BYTES for w in watches)
    closing = sum(w.held for w in watches[:20])
    for w in watches[:20]:
        sim.cluster.close_watch(w)
    assert held - model.memory.inflight_live == pytest.approx(closing)


def test_replicas_are_deterministic():
    sc = _cluster(load_balancer={"policy": "random"}, goaway_chance=0.01)
    a, b = run(sc), run(sc)
    a.summary.pop("wall_s"), b.summary.pop("wall_s")
    assert a.summary == b.summary


def test_the_shipped_ha_storm_cascades_and_fits_with_more_memory():
    """scenarios/ha-relist-storm.yaml, as its comments describe it."""
    s = run("scenarios/ha-relist-storm.yaml").summary
    deaths = s["deaths"]
    assert {d["reason"] for d in deaths} == {"oom"}
    cascade, later = deaths[:3], deaths[3:]
    assert sorted(d["replica"] for d in cascade) == [0, 1, 2]
    assert cascade[0]["at_s"] > 270  # in the storm after the outage
    assert cascade[-1]["at_s"] - cascade[0]["at_s"] < 10  # within seconds of each other
    # Restarted, each replica takes its share of the relists again and dies again.
    assert sorted(d["replica"] for d in later) == [0, 1, 2] and all(d["at_s"] > cascade[-1]["at_s"] + 30 for d in later)
    deaths = cascade
    # Each death after the first held more clients than the replica had before the storm:
    # the dead one's clients had moved to it.
    assert deaths[0]["connections"] < deaths[1]["connections"] < deaths[2]["connections"]
    assert deaths[2]["connections"] > 0.4 * 352
    roomy = run("scenarios/ha-relist-storm.yaml", ["apiserver.memory_limit_bytes=7Gi"]).summary
    assert roomy["deaths"] == [] and roomy["memory"]["peak_rss_bytes"] < 7 * 2**30
    # Each replica alone took about a third of the storm: under what one replica takes.
    single = run("scenarios/ha-relist-storm.yaml", ["apiserver.replicas=1", "apiserver.memory_limit_bytes=64Gi"]).summary
    assert roomy["memory"]["peak_rss_bytes"] < 0.8 * single["memory"]["peak_rss_bytes"]
    assert np.isfinite(single["memory"]["peak_rss_bytes"])
    # Encoded item by item, every replica needs a fraction of that.
    streamed = run("scenarios/ha-relist-storm.yaml", ["kubernetes.feature_gates.StreamingCollectionEncodingToJSON=true"]).summary
    assert streamed["deaths"] == [] and streamed["memory"]["peak_rss_bytes"] < 0.4 * roomy["memory"]["peak_rss_bytes"]


def test_a_network_failure_breaks_every_connection():
    sc = _cluster()
    sc["events"] = [{"at_s": 40, "kind": "outage", "duration_s": 20}]
    result = run(sc)
    during = _at(result, "simapf_client_connections", 50)
    after = _at(result, "simapf_client_connections", 100)
    assert sum(during.values()) == 0
    assert sum(after.values()) == 72 and min(after.values()) >= 72 // 3 - 1


def test_a_watch_whose_memory_kills_its_replica_breaks_after_it_opened():
    """Opening a watch holds its memory, which can be the allocation that OOM-kills the replica.
    The watch then breaks once its client holds it, not from inside the call that opens it (a
    random scenario found this: 47 clients watching on three 600Mi replicas in a crash loop)."""
    sc = {
        "name": "watch-oom", "run": {"duration_s": 15, "seed": 332686750},
        "kubernetes": {"feature_gates": {"WatchListClient": False, "ConsistentListFromCache": True,
                                         "StreamingCollectionEncodingToJSON": False}},
        "apiserver": {"cores": 8, "memory_limit_bytes": "600Mi", "restart_s": 0, "replicas": 3,
                      "load_balancer": {"policy": "least-connections", "health_check_s": 0}},
        "apf": {"estimator": {"list_policy": "size-based"}},
        "resources": [
            {"name": "configmaps", "count": 244, "namespaces": 11,
             "object_size": {"mean_bytes": 40000, "distribution": "constant"}},
            {"name": "secrets", "count": 23, "namespaces": 3, "object_size": {"mean_bytes": 4096, "distribution": "lognormal"}},
        ],
        "clients": [
            {"name": "c0", "kind": "open_loop", "count": 26, "identity": {"user": "u{i}"}, "rate_per_s": 27.91790205958731,
             "request": {"verb": "watch", "resource": "configmaps", "encoding": "cbor"}},
            {"name": "c1", "kind": "open_loop", "count": 21, "identity": {"user": "u{i}"}, "rate_per_s": 49.0,
             "start": {"at_s": 3, "spread_s": 3}, "request": {"verb": "watch", "resource": "secrets", "encoding": "cbor"}},
        ],
    }  # fmt: skip
    result = run(sc)
    s = result.summary
    assert s["process"]["oom_kills"] > 0
    assert s["requests"]["total"] == sum(s["requests"]["by_outcome"].values())
    assert result.wide("process_resident_memory_bytes", by="replica").max().max() <= 600 * 2**20
