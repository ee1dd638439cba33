"""Random valid scenarios (hypothesis): every one runs to its end in bounded wall time, accounts
for every request, keeps every replica's RSS at or under its limit, never counts more client
connections than there are client instances, and gives the same summary twice.

Slow: 1,000 scenarios of 5 to 30 simulated seconds (`pytest -m slow` and CI run it).
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simapf

pytestmark = pytest.mark.slow

WALL_BUDGET_S = 30.0  # a run of at most 30 simulated seconds takes well under this

RESOURCES = ["configmaps", "secrets", "pods", "widgets"]


@st.composite
def scenarios(draw) -> dict:
    duration = draw(st.integers(5, 30))
    n_res = draw(st.integers(1, 3))
    resources = []
    for name in RESOURCES[:n_res]:
        resources.append({
            "name": name, "group": "example.com" if name == "widgets" else "",
            "count": draw(st.integers(0, 3000)), "namespaces": draw(st.integers(1, 20)),
            "converts": name == "pods",
            "object_size": {"mean_bytes": draw(st.sampled_from([512, 4096, 40_000, 300_000])),
                            "distribution": draw(st.sampled_from(["constant", "lognormal", "exponential"]))},
        })  # fmt: skip
    names = [r["name"] for r in resources]
    clients = []
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["open_loop", "closed_loop", "informer", "mutator", "discovery"]))
        base = {"name": f"c{i}", "kind": kind, "count": draw(st.integers(0, 30)),
                "identity": draw(st.sampled_from([{"user": "u{i}"}, {"service_account": "ns/sa-{i}"},
                                                  {"user": "admin", "groups": ["system:masters"]}])),
                "start": {"at_s": draw(st.integers(0, 3)), "spread_s": draw(st.integers(0, 5))}}  # fmt: skip
        resource = draw(st.sampled_from(names))
        request = {"verb": draw(st.sampled_from(["list", "get", "watch"])), "resource": resource,
                   "options": {"resource_version": draw(st.sampled_from([None, "0"])),
                               "limit": draw(st.sampled_from([0, 500]))},
                   "encoding": draw(st.sampled_from(["json", "protobuf", "cbor"]))}  # fmt: skip
        if kind == "open_loop":
            base.update(rate_per_s=draw(st.floats(0.1, 50)), request=request)
        elif kind == "closed_loop":
            base.update(think_time={"mean_s": draw(st.sampled_from([0.0, 0.1, 1.0]))}, request=request)
        elif kind == "informer":
            base.update(resource=resource)
        elif kind == "mutator":
            base.update(resource=resource, rate_per_s=draw(st.floats(0.1, 20)))
        else:
            base.update(interval_s=draw(st.sampled_from([1.0, 10.0])), extra_group_versions=draw(st.integers(0, 300)))
        clients.append(base)
    events = []
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, duration - 1))
        kind = draw(st.sampled_from(["outage", "restart", "ramp"] if clients else ["outage", "restart"]))
        if kind == "outage":
            events.append({"at_s": at, "kind": "outage", "duration_s": draw(st.integers(1, 20))})
        elif kind == "restart":
            events.append({"at_s": at, "kind": "restart"})
        else:
            events.append({"at_s": at, "kind": "ramp", "client": draw(st.sampled_from([c["name"] for c in clients])),
                           "to_count": draw(st.integers(0, 40)), "over_s": draw(st.integers(0, 5))})  # fmt: skip
    seed = draw(st.integers(0, 2**31))
    feature_gates = {"WatchListClient": draw(st.booleans()), "ConsistentListFromCache": draw(st.booleans()),
                     "StreamingCollectionEncodingToJSON": draw(st.booleans())}  # fmt: skip
    apiserver = {"cores": draw(st.sampled_from([2, 8, 16])),
                 "memory_limit_bytes": draw(st.sampled_from([None, "600Mi", "2Gi", "8Gi"])),
                 "restart_s": draw(st.sampled_from([0, 1, 10]))}  # fmt: skip
    list_policy = draw(st.sampled_from(["upstream", "size-based", "count-based", "etcd-uncapped", "streamed-cache-cap"]))
    # Drawn last, so that the scenarios drawn before replicas existed stay as they were.
    replicas = draw(st.sampled_from([1, 1, 2, 3]))
    if replicas > 1:
        apiserver.update(replicas=replicas, goaway_chance=draw(st.sampled_from([0.0, 0.02])),
                         load_balancer={"policy": draw(st.sampled_from(["round-robin", "least-connections", "random"])),
                                        "health_check_s": draw(st.sampled_from([0, 10]))})  # fmt: skip
        for e in events:
            if e["kind"] == "restart":
                e["replica"] = draw(st.integers(0, replicas - 1))
    return {
        "name": "random", "run": {"duration_s": duration, "seed": seed},
        "kubernetes": {"feature_gates": feature_gates},
        "apiserver": apiserver,
        "apf": {"estimator": {"list_policy": list_policy}},
        "resources": resources, "clients": clients, "events": sorted(events, key=lambda e: e["at_s"]),
    }  # fmt: skip


def _stable(summary: dict) -> dict:
    s = dict(summary)
    s.pop("wall_s")
    return s


@settings(max_examples=int(__import__("os").environ.get("SIMAPF_RANDOM_SCENARIOS", "1000")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(scenarios())
def test_a_random_valid_scenario_runs_accounts_for_its_requests_and_keeps_to_its_limit(sc):
    loaded = simapf.load_scenario(sc)
    started = time.perf_counter()
    result = simapf.run(loaded)
    assert time.perf_counter() - started < WALL_BUDGET_S  # progress: no livelock
    s = result.summary
    outcomes = s["requests"]["by_outcome"]
    assert s["requests"]["total"] == sum(outcomes.values())  # every request ended one way
    assert all(v >= 0 for v in outcomes.values())
    for c in s["clients"]:  # every attempt ended one way, or is still under way
        assert c["attempts"] == sum(c["outcomes"].values()) + c["retries_after_429"] + c["in_flight_at_end"], c
        assert min(c["outcomes"].values(), default=0) >= 0 and c["in_flight_at_end"] >= 0
        per_verb = c["attempts_by_verb"]
        for verb, v in per_verb.items():
            assert v["attempts"] == v["outcomes"] + v["retries_after_429"] + v["in_flight_at_end"], (c["client"], verb, v)
            # The finished ones are the client's logical requests of that verb, as client_latency counts them.
            assert v["outcomes"] - v["abandoned"] == c["by_verb"].get(verb, {}).get("requests", 0), (c["client"], verb)
        assert sum(v["attempts"] for v in per_verb.values()) == c["attempts"]
        assert sum(v["in_flight_at_end"] for v in per_verb.values()) == c["in_flight_at_end"]
        assert sum(v["outcomes"] for v in per_verb.values()) == sum(c["outcomes"].values())
    limit = s["memory"]["memory_limit_bytes"]
    rss = result.wide("process_resident_memory_bytes", by="replica")  # a column per replica
    if limit is not None:
        assert rss.max().max() <= limit * (1 + 1e-9)  # never above the limit: a crossing is an OOM kill
    for r in s["replicas"]:
        assert r["down_s"] <= sc["run"]["duration_s"] + 1e-9
        assert r["connections_at_end"] >= 0
    # At most one connection per client instance running at the end.
    assert sum(r["connections_at_end"] for r in s["replicas"]) <= sum(c["instances"] for c in s["clients"])
    # Determinism: a sample of them, run again, give the same summary.
    if sc["run"]["seed"] % 10 == 0:
        assert _stable(simapf.run(simapf.load_scenario(sc)).summary) == _stable(s)
