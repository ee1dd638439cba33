"""Writers change the cluster's inventory and their events reach the watches that select them."""

import pytest
from wlhelp import informer, mutator, outage, scenario, simulate

NO_WATCHLIST = {"feature_gates": {"WatchListClient": False}}


def _writes(result, client="writers"):
    df = result.requests
    return df[(df["client"] == client) & (df["verb"] != "watch") & (df["verb"] != "list")]


def test_creates_and_deletes_change_the_inventory():
    mix = {"create": 3.0, "delete": 1.0, "update": 1.0}
    sim, result = simulate(scenario(mutator(rate_per_s=20.0, mix=mix), duration_s=20.0))
    ok = _writes(result)
    ok = ok[ok["outcome"] == "ok"]
    creates = int((ok["verb"] == "create").sum())
    deletes = int((ok["verb"] == "delete").sum())
    assert creates > deletes > 0 and (ok["verb"] == "update").sum() > 0
    objs = sim.inventory.get("configmaps")
    assert objs.total()[0] == 100 + creates - deletes
    # Per namespace too: each write went to the namespace it named.
    for i, ns in enumerate(objs.namespaces):
        in_ns = ok[ok["namespace"] == ns]
        expected = 25 + int((in_ns["verb"] == "create").sum()) - int((in_ns["verb"] == "delete").sum())
        assert objs.counts[i] == expected
    # The series the apiserver exports follows the count.
    stored = result.metric("apiserver_storage_objects", resource="configmaps")
    assert stored.iloc[0] == 100 and stored.iloc[-1] == 100 + creates - deletes


def test_the_verb_mix_is_respected():
    mix = {"create": 1.0, "update": 6.0, "patch": 2.0, "delete": 1.0}
    sim, result = simulate(scenario(mutator(rate_per_s=50.0, mix=mix, count=2), duration_s=40.0))
    df = _writes(result)
    n = len(df)
    for verb, w in mix.items():
        p = w / sum(mix.values())
        k = int((df["verb"] == verb).sum())
        # Binomial(n, p): within 4 standard deviations.
        assert abs(k - n * p) <= 4 * (n * p * (1 - p)) ** 0.5


def test_failed_writes_do_not_change_the_inventory():
    # The network is down for the whole run: every create is refused.
    sc = scenario(mutator(rate_per_s=20.0, mix={"create": 1.0}, start={"at_s": 1.0}), duration_s=10.0,
                  events=[outage(0.5, 20.0)])  # fmt: skip
    sim, result = simulate(sc)
    stats = sim.groups["writers"].stats
    assert stats.outcomes.get("unavailable", 0) > 100 and stats.outcomes.get("ok", 0) == 0
    assert sim.inventory.get("configmaps").total()[0] == 100


def test_writes_reach_every_watch_that_selects_them():
    # Six informers over all namespaces and two on ns-0; the writes start once they all watch.
    sc = scenario(
        informer("all", count=6, watch_timeout_s=10_000),
        informer("ns0", count=2, namespace="ns-0", watch_timeout_s=10_000),
        mutator(rate_per_s=30.0, mix={"create": 1.0, "update": 2.0, "delete": 1.0}, start={"at_s": 2.0}),
        duration_s=20.0, kubernetes=NO_WATCHLIST,
    )  # fmt: skip
    sim, result = simulate(sc)
    assert sim.cluster.open_watches() == 8
    ok = _writes(result)
    ok = ok[ok["outcome"] == "ok"]
    in_ns0 = int((ok["namespace"] == "ns-0").sum())
    assert 0 < in_ns0 < len(ok)
    # One event per successful write to each watch that selects it.
    assert sim.cluster.watch_events_total == 6 * len(ok) + 2 * in_ns0


def test_a_selector_watch_receives_its_share_of_events():
    sc = scenario(
        informer("picky", count=4, label_selector="app=x", selectivity=0.25, watch_timeout_s=10_000),
        mutator(rate_per_s=20.0, start={"at_s": 2.0}),
        duration_s=10.0, kubernetes=NO_WATCHLIST,
    )  # fmt: skip
    sim, result = simulate(sc)
    ok = _writes(result)
    n = int((ok["outcome"] == "ok").sum())
    assert n > 0
    assert sim.cluster.watch_events_total == pytest.approx(4 * 0.25 * n)


def test_no_events_while_the_watches_are_broken():
    sc = scenario(
        informer("all", count=3, watch_timeout_s=10_000),
        mutator(rate_per_s=30.0, start={"at_s": 2.0}),
        duration_s=10.0, kubernetes=NO_WATCHLIST, events=[outage(5.0, 10.0)],
    )  # fmt: skip
    sim, result = simulate(sc)
    ok = _writes(result)
    ok = ok[ok["outcome"] == "ok"]
    # Writes succeed only before the outage (t < 5); their events went to the 3 watches.
    assert (ok["done_s"] < 5.0).all()
    assert sim.cluster.watch_events_total == 3 * len(ok)
    assert sim.cluster.open_watches() == 0


def test_a_write_whose_response_is_lost_was_still_committed():
    # Every write takes 2 s in the apiserver; the network fails at 5 s, so the writes sent in
    # (3, 5) are committed while their responses are lost on the way back.
    from wlhelp import simulation

    from simapf.apf.types import NS_PER_S

    sc = scenario(mutator(rate_per_s=20.0, mix={"create": 1.0}), duration_s=12.0, events=[outage(5.0, 20.0)])
    sim = simulation(sc)
    submit = sim.server.submit
    sim.server.submit = lambda attrs, cost=None, on_done=None, service_ns=None, tag=None, link=None: submit(
        attrs, None, on_done, service_ns=2 * NS_PER_S, tag=tag)  # fmt: skip
    result = sim.run()
    df = _writes(result)
    committed = int((df["outcome"] == "ok").sum())
    stats = sim.groups["writers"].stats
    assert stats.outcomes.get("failed", 0) > 10  # the client saw an error ...
    assert committed > stats.outcomes.get("ok", 0)
    assert sim.inventory.get("configmaps").total()[0] == 100 + committed  # ... but the object exists
