"""Clients take time too: every response is processed client-side (`processing`) before the
client acts on it; a client-side token bucket can be switched off; a selector may match nothing."""

import math
from pathlib import Path

import pytest
from wlhelp import CONFIGMAPS, Probe, closed_loop, discovery, open_loop, scenario, simulate, simulation

import simapf
from simapf.apf.types import NS_PER_S, RequestAttributes
from simapf.scenario.load import load_scenario
from simapf.scenario.schema.clients import (
    GO_RESPONSE_S,
    INDEXER_S_PER_OBJECT,
    JSON_DECODE_S_PER_BYTE,
    PROTOBUF_DECODE_S_PER_BYTE,
    ClientProcessing,
)
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath
from simapf.server.runtime import OK, REJECTED, ServerRequest
from simapf.simulation.summary_text import format_summary
from simapf.workload.clientgo import ClientStats, Requester, ResponseProcessor

ROOT = Path(__file__).resolve().parents[2]
NONE = {"per_response_s": 0, "per_object_s": 0, "per_byte_s": 0}
LIST_NS0 = {"verb": "list", "resource": "configmaps", "namespace": "ns-0"}


# ------------------------------------------------------------------------- the field


def test_processing_is_off_unless_asked_for_and_then_takes_the_kinds_priors():
    sc = load_scenario(scenario(
        closed_loop("plain", request=LIST_NS0),
        closed_loop("priors", request=LIST_NS0, processing={}),
        {"name": "pods", "kind": "informer", "resource": "configmaps", "encoding": "protobuf",
         "identity": {"user": "x"}, "processing": {"workers": 3}},
        discovery(processing={"per_byte_s": 0}),
    )).scenario  # fmt: skip
    plain, priors, informer, kubectl = sc.clients
    assert plain.processing is None
    p = priors.processing
    assert (p.per_response_s, p.per_object_s, p.per_byte_s, p.workers) == (GO_RESPONSE_S, 0.0, JSON_DECODE_S_PER_BYTE, 8)
    p = informer.processing  # protobuf decodes faster; an informer decodes in one goroutine unless told
    assert (p.per_object_s, p.per_byte_s, p.workers) == (INDEXER_S_PER_OBJECT, PROTOBUF_DECODE_S_PER_BYTE, 3)
    assert kubectl.processing.per_byte_s == 0 and kubectl.processing.per_response_s > 1e-3
    with pytest.raises(Exception, match="workers"):
        load_scenario(scenario(closed_loop(request=LIST_NS0, processing={"workers": 0})))


# ------------------------------------------------------------------------- closed loop: Little's law


def _closed_loop_rate(per_object_s: float, users: int, think_s: float, duration_s: float):
    proc = {**NONE, "per_object_s": per_object_s, "workers": 1}
    sim, result = simulate(scenario(closed_loop(count=users, think_s=think_s, request=LIST_NS0, processing=proc),
                                    duration_s=duration_s))  # fmt: skip
    df = result.requests
    first = df[(df["client"] == "users") & (df["attempt"] == 0)]
    assert (first["outcome"] == "ok").all()
    response_s = float((first["done_s"] - first["received_s"]).mean())
    objects = sim.cluster.inventory.get("configmaps").in_namespace("ns-0")[0]
    return len(first), response_s, objects


def test_a_closed_loop_users_rate_falls_as_per_object_processing_grows():
    users, think_s, duration_s = 4, 0.5, 60.0
    counts = []
    for per_object_s in (0.0, 0.01, 0.04):
        n, response_s, objects = _closed_loop_rate(per_object_s, users, think_s, duration_s)
        assert objects == 25
        # Little's law: each user completes one request per response + processing + think time.
        cycle_s = response_s + per_object_s * objects + think_s
        expected = users * (math.floor(duration_s / cycle_s) + 1)  # the first goes out at 0
        assert abs(n - expected) <= users, (per_object_s, n, expected)
        counts.append(n)
    assert counts[0] > 1.4 * counts[1] > 1.4 * 1.4 * counts[2]


# ------------------------------------------------------------------------- discovery


def _discovery_duration(extra: int, processing) -> float:
    client = discovery(extra_group_versions=extra, interval_s=10_000, discovery_rate_limit="disabled",
                       processing=processing)  # fmt: skip
    sim, _ = simulate(scenario(client, duration_s=60, resources=[CONFIGMAPS], records=False))
    stats = sim.groups["kubectl"].stats
    assert stats.runs == 1 and stats.throttle_wait_ns == 0
    return stats.run_durations_ns[0] / NS_PER_S


def test_a_discovery_run_takes_longer_by_the_processing_of_its_responses_over_the_workers():
    extra, per_response_s, workers = 200, 0.02, 4
    plain = _discovery_duration(extra, None)
    slow = _discovery_duration(extra, {**NONE, "per_response_s": per_response_s, "workers": workers})
    # /api and /apis on two workers, then 1 + extra group-versions four at a time.
    exact = per_response_s * (1 + math.ceil((1 + extra) / workers))
    assert slow - plain == pytest.approx(exact, abs=0.03)
    assert slow - plain == pytest.approx(extra * per_response_s / workers, rel=0.1)


def _discovery_run_s(extra: int, version: str, **kw) -> float:
    client = discovery(extra_group_versions=extra, interval_s=10_000, discovery_rate_limit="disabled", **kw)
    sim, _ = simulate(scenario(client, duration_s=60, resources=[CONFIGMAPS], records=False,
                               kubernetes={"version": version}))  # fmt: skip
    return sim.groups["kubectl"].stats.run_durations_ns[0] / NS_PER_S


def test_kubectl_before_1_25_writes_each_discovery_response_to_its_cache_one_sync_at_a_time():
    from simapf.scenario.schema import DISCOVERY_CACHE_FSYNC_S

    extra = 300
    old, new = _discovery_run_s(extra, "1.24"), _discovery_run_s(extra, "v1.25.0")
    # /api and /apis, then v1 and the extra group-versions: every successful response waits for
    # the one cache lock; the parallel processing (none here) adds nothing.
    assert old - new == pytest.approx((3 + extra) * DISCOVERY_CACHE_FSYNC_S, rel=0.01)
    assert new < 0.1
    # The field overrides the version; a sync wait holds no worker, so 8 workers' processing of
    # 2 ms a response hides behind a 10 ms sync almost entirely.
    both = _discovery_run_s(extra, "1.22", cache_fsync_s=0.01,
                            processing={**NONE, "per_response_s": 0.002, "workers": 8})
    assert both == pytest.approx((3 + extra) * 0.01, rel=0.02)
    assert load_scenario(scenario(discovery(), kubernetes={"version": "1.37"})).scenario.clients[0].cache_fsync_s == 0


def test_the_summary_reports_the_processing_time_and_discovery_runs_include_it():
    proc = {**NONE, "per_response_s": 0.01, "workers": 1}
    client = discovery(extra_group_versions=9, interval_s=10_000, processing=proc)
    _, result = simulate(scenario(client, duration_s=30, resources=[CONFIGMAPS], records=False))
    row = result.summary["clients"][0]
    assert row["processing_busy_s"] == pytest.approx(0.01 * 12)  # /api, /apis, v1 and 9 extra
    assert row["run_p50_s"] > 0.12
    assert "120.0 ms processing responses client-side" in format_summary(result.summary)


def test_a_429_costs_only_the_per_response_time():
    proc = ResponseProcessor(ClientProcessing(per_response_s=1e-3, per_object_s=1e-3, per_byte_s=1e-6, workers=1))
    cost = RequestCost(ServingPath.CACHE, ResponseShape(1000.0, 10, Encoding.JSON))
    ok, rejected = (ServerRequest(RequestAttributes(user="u", verb="list"), cost, None, None, 0, None) for _ in range(2))
    ok.outcome, rejected.outcome = OK, REJECTED
    assert proc.take(rejected, 0) == (NS_PER_S // 1000, NS_PER_S // 1000)
    work = int((1e-3 + 10e-3 + 1e-3) * NS_PER_S)
    # One worker: the successful response waits for the 429's millisecond.
    assert proc.take(ok, 0) == (NS_PER_S // 1000 + work, work)


def test_instances_of_one_program_share_its_cores():
    """Each instance decodes in its own goroutine, but three of them in one program of two cores
    take turns: the third response waits for the first core to be free."""
    spec = ClientProcessing(per_response_s=1.0, per_object_s=0.0, per_byte_s=0.0, workers=1)
    cores = [0, 0]
    procs = [ResponseProcessor(spec, cores=cores) for _ in range(3)]
    rec = ServerRequest(RequestAttributes(user="u", verb="list"), None, None, None, 0, None)
    rec.outcome = OK
    assert [p.take(rec, 0)[0] for p in procs] == [NS_PER_S, NS_PER_S, 2 * NS_PER_S]
    alone = [ResponseProcessor(spec) for _ in range(3)]  # three programs: no waiting
    assert [p.take(rec, 0)[0] for p in alone] == [NS_PER_S] * 3


def test_a_watchlist_stream_is_held_by_the_server_while_its_informer_decodes_it():
    """The initial events are out: the server holds the watch from then on, while the informers of
    one two-core program decode their 40 MB of JSON one after another (~1.8 s each)."""
    secrets = {"name": "secrets", "count": 40, "namespaces": 1, "object_size": {"mean_bytes": 1_000_000}}
    client = {"name": "informers", "kind": "informer", "count": 6, "resource": "secrets", "namespace": "ns-0",
              "encoding": "json", "list": {"mode": "watchlist"}, "identity": {"user": "i-{i}"},
              "processing": {"shared_cores": 2}}  # fmt: skip
    sc = scenario(client, duration_s=20.0, resources=[secrets])
    sc["kubernetes"] = {"feature_gates": {"WatchList": True, "WatchListClient": True}}
    sim = simulation(sc)
    for group in sim.groups.values():
        group.start()
    sim.env.run(until=3 * NS_PER_S)  # every stream is out; four informers are still decoding
    group = sim.groups["informers"]
    assert sim.cluster.open_watches() == 6
    assert sum(inst.watching for inst in group.instances) == 2
    sim.env.run(until=10 * NS_PER_S)
    assert sum(inst.watching for inst in group.instances) == 6


# ------------------------------------------------------------------------- no token bucket


def _burst(rate_limit, n: int = 1000, duration_s: float = 200.0) -> tuple[list[float], ClientStats]:
    """n GETs asked for at once by one requester with `rate_limit` (read by the scenario schema):
    when each first attempt went out (s)."""
    client = open_loop("burst", rate_per_s=1e-6, arrivals="constant", rate_limit=rate_limit,
                       retry={"max_retries": 0})  # fmt: skip
    sim = simulation(scenario(client, duration_s=duration_s, records=False))
    probe = Probe(sim)
    spec = sim.scenario.clients[0]
    stats = ClientStats()
    requester = Requester(sim.cluster, sim.ctx.clock, spec.retry, spec.rate_limit, stats, "burst")
    attrs = RequestAttributes(user="burst", verb="get", resource="configmaps", namespace="ns-0", name="obj-1")
    for _ in range(n):
        requester.do(attrs, "json", lambda rec: None)
    sim.run()
    sent = sorted(a.sent_s for a in probe.attempts if a.client == "burst" and a.attempt == 0)
    assert len(sent) == n
    return sent, stats


@pytest.mark.parametrize("rate_limit", ["disabled", {"qps": 0}, {"qps": -1, "burst": 10}])
def test_a_disabled_token_bucket_sends_a_burst_of_a_thousand_at_once(rate_limit):
    sent, stats = _burst(rate_limit, duration_s=5.0)
    assert sent[0] == sent[-1] == 0.0
    assert stats.throttle_wait_ns == 0


def test_qps_5_burst_10_sends_a_thousand_over_198_seconds():
    sent, stats = _burst({"qps": 5, "burst": 10})
    assert sent[:10] == [0.0] * 10
    assert sent[-1] == pytest.approx((1000 - 10) / 5, abs=1e-6)
    assert stats.throttle_wait_ns > 0


@pytest.mark.parametrize("limit", ["disabled", {"qps": 0}])
def test_a_disabled_discovery_token_bucket_sends_every_group_version_at_once(probe_run, limit):
    client = discovery(extra_group_versions=997, interval_s=10_000, discovery_rate_limit=limit, retry={"max_retries": 0})
    sim, _, probe = probe_run(scenario(client, duration_s=20, resources=[CONFIGMAPS], records=False))
    first = [a for a in probe.attempts if a.attempt == 0]
    assert len(first) == 1000  # /api, /apis and 998 group-versions
    gvs = sorted(a.sent_s for a in first if a.path not in ("/api", "/apis"))
    assert gvs[0] == gvs[-1]
    assert sim.groups["kubectl"].stats.throttle_wait_ns == 0


def test_a_token_bucket_needs_a_burst_only_when_it_limits():
    with pytest.raises(Exception, match="burst is required"):
        load_scenario(scenario(closed_loop(request=LIST_NS0, rate_limit={"qps": 5})))
    sc = load_scenario(scenario(closed_loop(request=LIST_NS0)), ["clients.users.rate_limit=disabled"]).scenario
    assert sc.clients[0].rate_limit.enabled is False


# ------------------------------------------------------------------------- selectivity 0


ETCD_ONLY = [{**CONFIGMAPS, "watch_cache": False}]


def _shapes(sim):
    seen = []
    send = sim.cluster.send

    def recording(attrs, encoding, on_done, **kw):
        def done(rec):
            seen.append(rec)
            on_done(rec)

        send(attrs, encoding, done, **kw)

    sim.cluster.send = recording
    return seen


@pytest.mark.parametrize("limit", [0, 10])
def test_a_selector_that_matches_nothing_lists_from_etcd_and_returns_nothing(limit):
    request = {**LIST_NS0, "options": {"label_selector": "app=none", "selectivity": 0, "limit": limit}}
    sim = simulation(scenario(closed_loop(request=request, think_s=1.0), duration_s=3.5, resources=ETCD_ONLY))
    seen = _shapes(sim)
    sim.run()
    assert len(seen) == 4  # one page each: nothing matches, so there is no second page
    n_all = sim.cluster.inventory.get("configmaps").in_namespace("ns-0")[0]
    for rec in seen:
        assert rec.outcome == "ok"
        shape = rec.cost.shape
        assert rec.cost.path.name == "ETCD"
        assert shape.objects_returned == 0 and shape.response_bytes == 0
        assert shape.n_read == n_all  # the server still reads everything to filter it


def test_an_informer_whose_selector_matches_nothing_syncs_and_watches():
    informer = {"name": "none", "kind": "informer", "resource": "configmaps", "identity": {"user": "x"},
                "label_selector": "app=none", "selectivity": 0, "list": {"mode": "paged", "page_size": 10}}  # fmt: skip
    sim, _ = simulate(scenario(informer, duration_s=5, resources=ETCD_ONLY))
    stats = sim.groups["none"].stats
    assert stats.lists == 1 and stats.relists == 0
    assert sim.groups["none"].instances[0].watching


# ------------------------------------------------------------------------- zero = as before


def test_zero_processing_leaves_a_shipped_scenarios_summary_identical():
    short = {"run.duration_s": 40, "events.0.at_s": 15, "events.0.duration_s": 10}
    path = ROOT / "scenarios" / "relist-storm.yaml"
    names = [c.name for c in simapf.load_scenario(path, short).scenario.clients]
    # null: no processing at all, the behaviour of scenarios written before the field existed.
    base = simapf.run(simapf.load_scenario(path, {**short, **{f"clients.{n}.processing": None for n in names}}))
    zero = {**short, **{f"clients.{n}.processing": dict(NONE) for n in names}}
    loaded = simapf.load_scenario(path, zero)
    assert all(c.processing is not None and c.processing.zero for c in loaded.scenario.clients)
    again = simapf.run(loaded)
    a, b = _comparable(base.summary), _comparable(again.summary)
    assert a == b
    # And it is not a summary that could not tell: processing for real moves it, the kinds'
    # priors (a field left out) included.
    slow = simapf.run(simapf.load_scenario(path, {**short, "clients.kubectl-users.processing": {"per_response_s": 2}}))
    assert _comparable(slow.summary) != a
    assert _comparable(simapf.run(simapf.load_scenario(path, short)).summary) != a


def _comparable(summary: dict) -> dict:
    """The summary without what may differ between equal runs: wall time, and the scenario as
    written (here it differs by the `processing` settings themselves), with its hash."""
    s = dict(summary)
    s.pop("wall_s")
    s.pop("scenario", None)
    s["provenance"] = {k: v for k, v in s["provenance"].items() if k != "scenario_sha256"}
    return s


def test_processing_keeps_a_run_deterministic_for_its_seed():
    def once():
        sc = scenario(closed_loop(count=3, think_s=0.2, think="exponential", request=LIST_NS0, processing={}),
                      discovery(extra_group_versions=30, interval_s=2, processing={"workers": 2}),
                      duration_s=20, records=False)  # fmt: skip
        return _comparable(simulate(sc)[1].summary)

    a = once()
    assert a == once()
    assert {c["client"] for c in a["clients"] if c.get("processing_busy_s")} == {"users", "kubectl"}
