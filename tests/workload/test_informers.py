"""Informers as client-go's reflector runs them: list then watch, re-watch with backoff while the
apiserver is unreachable, resume after a short outage, relist after a 410 or a restart."""

import pytest
from wlhelp import informer, outage, scenario

NO_WATCHLIST = {"feature_gates": {"WatchListClient": False}}
HISTORY_S = 75.0  # the watch cache's event history (eventFreshDuration)


def _informer_scenario(count=3, events=(), duration_s=200.0, watchlist=False, **kw):
    kw.setdefault("watch_timeout_s", 10_000)  # no routine re-watches in the way
    extra = {} if watchlist else {"kubernetes": NO_WATCHLIST}
    return scenario(informer(count=count, **kw), duration_s=duration_s, events=events, **extra)


def _is_relist(a):
    return a.verb == "list" or (a.verb == "watch" and a.opts.send_initial_events)


def test_informer_lists_from_the_cache_then_watches(probe_run):
    sim, result, probe = probe_run(_informer_scenario(count=2, duration_s=20.0))
    for user, attempts in probe.by_user().items():
        assert [a.verb for a in attempts] == ["list", "watch"]
        lst, watch = attempts
        # client-go's first list: resourceVersion=0, whatever the cache holds.
        assert lst.opts.resource_version == "0" and lst.outcome == "ok"
        # The watch starts from the list's resourceVersion when the list is done.
        assert watch.opts.resource_version not in (None, "", "0")
        assert watch.sent_s == pytest.approx(lst.done_s, abs=1e-9) and watch.outcome == "ok"
    assert sim.cluster.open_watches() == 2
    stats = sim.groups["informers"].stats
    assert (stats.lists, stats.relists, stats.watch_breaks) == (2, 0, 0)


def test_informer_with_watchlist_streams_its_initial_list(probe_run):
    sim, result, probe = probe_run(_informer_scenario(count=2, duration_s=20.0, watchlist=True))
    for user, attempts in probe.by_user().items():
        # One WATCH with sendInitialEvents=true: the stream goes on as the watch, no LIST.
        assert len(attempts) == 1
        (a,) = attempts
        assert a.verb == "watch" and a.opts.send_initial_events is True
        assert a.opts.resource_version_match == "NotOlderThan"
    assert sim.cluster.open_watches() == 2


def test_watches_end_by_timeout_and_resume_without_a_relist(probe_run):
    timeout = 10.0
    sim, result, probe = probe_run(_informer_scenario(count=2, duration_s=100.0, watch_timeout_s=timeout))
    for user, attempts in probe.by_user().items():
        watches = [a for a in attempts if a.verb == "watch"]
        gaps = [b.sent_s - a.done_s for a, b in zip(watches, watches[1:])]
        # client-go: each watch lasts timeout x (1 + U[0,1)), then a new one from the last RV.
        assert len(watches) >= 100.0 / (2 * timeout)
        assert all(timeout <= g < 2 * timeout for g in gaps)
    stats = sim.groups["informers"].stats
    assert stats.lists == 2 and stats.relists == 0


def test_default_watch_timeout_is_client_gos_five_to_ten_minutes(probe_run):
    sc = scenario(informer(count=2), duration_s=3000.0, kubernetes=NO_WATCHLIST)
    sim, result, probe = probe_run(sc)
    gaps = []
    for user, attempts in probe.by_user(verb="watch").items():
        gaps += [b.sent_s - a.done_s for a, b in zip(attempts, attempts[1:])]
    # reflector.go: timeoutSeconds = minWatchTimeout x (1 + U[0,1)), minWatchTimeout = 5 min.
    assert len(gaps) >= 2 * 3000 / 600 - 2
    assert all(300.0 <= g < 600.0 for g in gaps)
    assert max(gaps) - min(gaps) > 100.0


def test_outage_breaks_watches_and_refused_rewatches_back_off(probe_run):
    start, length, count = 20.0, 200.0, 20
    sc = _informer_scenario(count=count, duration_s=300.0, events=[outage(start, length, relist="never")])
    sim, result, probe = probe_run(sc)
    watching = result.metric("apiserver_longrunning_requests")
    assert watching[start - 1] == count and watching[start + 1] == 0 and watching[start + length - 1] == 0
    assert sim.groups["informers"].stats.watch_breaks == count

    ratios = []
    for user, attempts in probe.by_user().items():
        rewatches = [a for a in attempts if a.sent_s >= start]
        refused = [a for a in rewatches if a.sent_s < start + length]
        assert all(a.verb == "watch" and a.outcome == "unavailable" for a in refused)
        # The stream closed: client-go re-watches at once, and backs off only after a refusal.
        assert refused[0].sent_s == start
        first_ok = rewatches[len(refused)]
        assert first_ok.outcome == "ok" and first_ok.sent_s >= start + length
        times = [a.sent_s for a in refused] + [first_ok.sent_s]
        for k, (a, b) in enumerate(zip(times, times[1:])):
            d = min(0.8 * 2**k, 30.0)  # wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)
            assert d - 1e-9 <= b - a < 2 * d
            ratios.append((b - a) / d)
        # Over 200 s the waits reach the cap: 0.8 .. 25.6 take at most 100.8 s.
        assert len(times) >= 8
    # The jitter is spread over [d, 2d), not stuck at an end.
    assert min(ratios) < 1.1 and max(ratios) > 1.9
    # relist: never: the watches resumed; nothing was listed again.
    assert sim.groups["informers"].stats.relists == 0
    assert sim.cluster.open_watches() == count


def test_short_outage_resumes_the_watch_without_a_relist(probe_run):
    start, length = 20.0, 20.0  # reconnects come within 49.6 s of the break: inside the history
    sim, result, probe = probe_run(_informer_scenario(count=10, events=[outage(start, length)]))
    stats = sim.groups["informers"].stats
    assert stats.watch_breaks == 10 and stats.gone == 0 and stats.relists == 0 and stats.lists == 10
    for user, attempts in probe.by_user().items():
        after = [a for a in attempts if a.sent_s >= start + length]
        assert after and not any(_is_relist(a) for a in after)
        assert after[0].verb == "watch" and after[0].outcome == "ok"
        assert after[0].sent_s - start <= HISTORY_S
    assert sim.cluster.open_watches() == 10


def test_outage_longer_than_the_watch_history_ends_in_410_and_a_relist(probe_run):
    start, length, count = 20.0, 100.0, 10
    sim, result, probe = probe_run(_informer_scenario(count=count, duration_s=250.0, events=[outage(start, length)]))
    stats = sim.groups["informers"].stats
    assert stats.gone == count and stats.relists == count and stats.lists == 2 * count
    for user, attempts in probe.by_user().items():
        after = [a for a in attempts if a.sent_s >= start + length]
        gone, relist, rewatch = after[:3]
        assert gone.verb == "watch" and gone.outcome == "gone"
        # client-go after a watch's 410: a LIST at the last resourceVersion, unpaged, so the
        # watch cache serves it (reflector.go list(): pager.PageSize = 0 for RV != "", "0").
        assert relist.verb == "list" and relist.outcome == "ok"
        assert relist.opts.resource_version not in (None, "", "0") and relist.opts.limit == 0
        # The ListAndWatch ended: the relist waits one more backoff step (>= 30 s by now).
        assert relist.sent_s - gone.done_s >= 30.0
        assert rewatch.verb == "watch" and rewatch.outcome == "ok"
        assert len(after) == 3
    # The 410s are counted as such, not as successes.
    codes = result.series[(result.series["metric"] == "apiserver_request_total") & (result.series["verb"] == "watch")]
    assert codes[codes["code"] == "410"]["value"].max() == count
    assert sim.cluster.open_watches() == count


@pytest.mark.parametrize("length, relist, relists", [(10.0, "always", 1), (150.0, "never", 0), (10.0, "auto", 0),
                                                     (150.0, "auto", 1)])  # fmt: skip
def test_outage_relist_policy(probe_run, length, relist, relists):
    count = 4
    sc = _informer_scenario(count=count, duration_s=300.0, events=[outage(20.0, length, relist=relist)])
    sim, result, probe = probe_run(sc)
    stats = sim.groups["informers"].stats
    assert stats.relists == relists * count and stats.gone == relists * count
    assert sim.cluster.open_watches() == count


def test_restart_makes_informers_relist(probe_run):
    at, restart_s, count = 20.0, 5.0, 6
    sc = _informer_scenario(count=count, duration_s=150.0, events=[{"kind": "restart", "at_s": at}])
    sc["apiserver"] = {"restart_s": restart_s}
    sim, result, probe = probe_run(sc)
    stats = sim.groups["informers"].stats
    assert stats.watch_breaks == count
    # The new process's watch cache starts at etcd's current revision: a watch from the old
    # resourceVersion gets 410, however short the restart, and the informer lists again.
    assert stats.gone == count and stats.relists == count
    for user, attempts in probe.by_user().items():
        down = [a for a in attempts if at <= a.sent_s < at + restart_s]
        # A dead process refuses connections (no 429 from its empty caches).
        assert down and all(a.outcome == "unavailable" and a.reason == "down" for a in down)
        assert down[0].sent_s == at
        assert any(a.verb == "list" and a.sent_s > at for a in attempts)
    assert sim.cluster.open_watches() == count


def test_watchlist_informers_relist_with_a_watchlist(probe_run):
    start, length, count = 20.0, 100.0, 3
    sc = _informer_scenario(count=count, duration_s=250.0, watchlist=True, events=[outage(start, length)])
    sim, result, probe = probe_run(sc)
    assert sim.groups["informers"].stats.relists == count
    for user, attempts in probe.by_user().items():
        relists = [a for a in attempts if a.sent_s > start and _is_relist(a)]
        assert len(relists) == 1 and relists[0].verb == "watch" and relists[0].outcome == "ok"
        assert not any(a.verb == "list" for a in attempts)


def test_client_gates_event_switches_the_next_relist_to_watchlist(probe_run):
    count = 3
    events = [{"kind": "client_gates", "at_s": 10.0, "WatchListClient": True}, outage(20.0, 100.0)]
    sim, result, probe = probe_run(_informer_scenario(count=count, duration_s=250.0, events=events))
    for user, attempts in probe.by_user().items():
        assert attempts[0].verb == "list"  # before the upgrade
        relists = [a for a in attempts if a.sent_s > 20.0 and _is_relist(a)]
        assert len(relists) == 1 and relists[0].verb == "watch" and relists[0].opts.send_initial_events


def test_namespaced_informer_watches_its_own_namespace(probe_run):
    sim, result, probe = probe_run(_informer_scenario(count=3, duration_s=10.0, namespace="ns-{i}"))
    for user, attempts in probe.by_user().items():
        i = user.rsplit("-", 1)[1]
        assert {a.namespace for a in attempts} == {f"ns-{i}"}


def test_informers_synced_at_the_start_watch_without_listing(probe_run):
    # A cluster in its steady state: every informer has listed and watches; the run starts there.
    timeout = 10.0
    sim, result, probe = probe_run(_informer_scenario(count=20, duration_s=15.0, watch_timeout_s=timeout,
                                                      synced_at_run_start=True))  # fmt: skip
    stats = sim.groups["informers"].stats
    assert (stats.lists, stats.relists, stats.watch_breaks) == (0, 0, 0)
    attempts = [a for user in probe.by_user().values() for a in user]
    assert attempts and all(a.verb == "watch" and a.opts.send_initial_events is None for a in attempts)
    # Their watches were open from the start, opened at random moments of their time-outs: the
    # re-watches are spread over the first 2 x timeout, not due together.
    first = sorted(min(a.sent_s for a in user) for user in probe.by_user().values())
    assert first[0] < timeout / 2 and len(set(round(t, 3) for t in first)) == len(first)
    assert len(first) < 20  # some have not timed out yet
    assert sim.cluster.open_watches() == 20


def test_synced_informers_started_later_list_first(probe_run):
    sim, result, probe = probe_run(_informer_scenario(count=2, duration_s=20.0, synced_at_run_start=True,
                                                      start={"at_s": 5.0}))  # fmt: skip
    assert sim.groups["informers"].stats.lists == 2
    for attempts in probe.by_user().values():
        assert [a.verb for a in attempts] == ["list", "watch"]
