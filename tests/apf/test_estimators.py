"""Work estimators against apf-mechanics.md §5 and upstream k8s.io/apiserver tests.

Where a row cites upstream, the expected value is the one upstream's own test asserts
(list_work_estimator_test.go `TestListWorkEstimator`, width_test.go `TestWorkEstimator`).
Other expected values come from the reference's worked examples or are worked by hand from
the formulas it states; the arithmetic is written out next to them.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simapf.apf.estimators import (
    BorrowingAwareListPolicy,
    ConstantListPolicy,
    CountBasedListPolicy,
    EstimationContext,
    EstimatorConfigError,
    EtcdUncappedListPolicy,
    ListWorkPolicy,
    MutatingEstimatorConfig,
    ObjectStats,
    SizeBasedListPolicy,
    StaticObjectStats,
    StreamedCacheCapListPolicy,
    UpstreamListPolicy,
    WatchInitConfig,
    WatchTracker,
    WorkEstimator,
    duration_per_seat_ns,
    field_selector_exact_value,
    initial_only,
    list_policy_names,
    make_list_policy,
    seats_times_duration,
    served_from_cache_by_estimator,
)
from simapf.apf.types import ListOptions, RequestAttributes, WorkEstimate

MS = 1_000_000

# PLmaxSeats of the bootstrap levels at ServerCL 600 (apf-mechanics.md §4.3).
WORKLOAD_LOW = 37
GLOBAL_DEFAULT = 8
NODE_HIGH = 15
EXEMPT = 0

# §5.3 examples: 5000 pods of 4 kB (decimal: "2 MB" for 500 of them).
PODS = ObjectStats(object_count=5000, average_object_size_bytes=4000)


def pods_stats(stats: ObjectStats | None = PODS) -> StaticObjectStats:
    src = StaticObjectStats()
    src.set("", "pods", stats)
    return src


def ctx_for(pl_max_seats: int, stats: ObjectStats | None = PODS, **kw) -> EstimationContext:
    return EstimationContext(object_stats=pods_stats(stats), pl_max_seats=pl_max_seats, **kw)


def pods(verb: str = "list", *, name: str = "", namespace: str = "", **opts) -> RequestAttributes:
    return RequestAttributes(user="u", verb=verb, resource="pods", name=name, namespace=namespace,
                             list_options=ListOptions(**opts))


# --------------------------------------------------------------------------------------------
# §5.3 worked examples (size-based, the default)


def test_cache_list_of_20mb_is_capped_at_1mb_10_seats():
    we = WorkEstimator()
    assert we.estimate(pods(resource_version="0"), ctx_for(WORKLOAD_LOW)) == WorkEstimate(10, 0, 0)


@pytest.mark.parametrize("pl, expected", [(WORKLOAD_LOW, 20), (GLOBAL_DEFAULT, 8)])
def test_continue_page_of_500_is_storage_2mb(pl, expected):
    # 500 x 4 kB = 2 MB -> 20 seats; workload-low's cap 37 lets it through, global-default's 8 does not.
    we = WorkEstimator()
    est = we.estimate(pods(limit=500, continue_token="tok"), ctx_for(pl))
    assert est == WorkEstimate(expected)


@pytest.mark.parametrize("pl, expected", [(WORKLOAD_LOW, 37), (GLOBAL_DEFAULT, 8), (EXEMPT, 100), (184, 100)])
def test_selector_exact_list_counts_whole_resource_capped(pl, expected):
    # max(5000, 5000 // 2) x 4 kB = 20 MB -> 200 seats -> min(cap, 100).
    we = WorkEstimator()
    est = we.estimate(pods(label_selector="app=x", resource_version="123", resource_version_match="Exact"),
                      ctx_for(pl))
    assert est.initial_seats == expected


def test_selector_on_storage_counts_half_the_resource_when_limit_is_small():
    # limit 100 with a selector: max(100, 5000 // 2) = 2500 objects x 4 kB = 10 MB -> 100 seats.
    we = WorkEstimator()
    est = we.estimate(pods(label_selector="a=b", limit=100, continue_token="t"), ctx_for(EXEMPT))
    assert est.initial_seats == 100
    # without the selector only the page counts: 100 x 4 kB = 400 kB -> 4 seats.
    assert we.estimate(pods(limit=100, continue_token="t"), ctx_for(EXEMPT)).initial_seats == 4


@pytest.mark.parametrize("stats", [None, ObjectStats(0, 0, "not-found"), ObjectStats(99999, 4000, "not-found")])
def test_not_found_costs_one_seat(stats):
    we = WorkEstimator()
    assert we.estimate(pods(label_selector="a=b", resource_version_match="Exact", resource_version="5"),
                       ctx_for(WORKLOAD_LOW, stats)) == WorkEstimate(1)


def test_no_stats_source_costs_one_seat():
    we = WorkEstimator()
    assert we.estimate(pods(), EstimationContext(pl_max_seats=WORKLOAD_LOW)) == WorkEstimate(1)


@pytest.mark.parametrize(
    "pl, opts, expected",
    [
        (WORKLOAD_LOW, {"limit": 500, "continue_token": "t"}, 37),  # storage: the level's cap
        (EXEMPT, {"limit": 500, "continue_token": "t"}, 100),  # no level cap: the global one
        (WORKLOAD_LOW, {"resource_version": "0"}, 10),  # cache: 1 MB at most (§9 item 15)
        (GLOBAL_DEFAULT, {"resource_version": "0"}, 8),
    ],
)
def test_stale_stats_cost_the_cap(pl, opts, expected):
    we = WorkEstimator()
    stale = ObjectStats(10, 10, "stale")  # numbers ignored when stale
    assert we.estimate(pods(**opts), ctx_for(pl, stale)).initial_seats == expected


def test_named_list_counts_one_object():
    we = WorkEstimator()
    named = pods(name="web-1", limit=500, resource_version="0")
    assert we.estimate(named, ctx_for(WORKLOAD_LOW)) == WorkEstimate(1)
    # named, storage, with a selector: still 1 object
    named_storage = pods(name="web-1", field_selector="metadata.name=web-1", resource_version_match="Exact",
                         resource_version="7")
    assert we.estimate(named_storage, ctx_for(WORKLOAD_LOW)) == WorkEstimate(1)
    # stale stats: 1 object of 1.5 MB -> 15 seats, then the level's cap (kubernetes#133061)
    stale = ObjectStats(0, 0, "stale")
    assert we.estimate(named_storage, ctx_for(WORKLOAD_LOW, stale)).initial_seats == 15
    assert we.estimate(named_storage, ctx_for(GLOBAL_DEFAULT, stale)).initial_seats == 8


def test_unknown_average_size_counts_1_5_mb_per_object():
    we = WorkEstimator()
    # 10 objects x 1.5 MB = 15 MB from storage -> 150 -> global cap 100
    est = we.estimate(pods(limit=10, continue_token="t"), ctx_for(EXEMPT, ObjectStats(10, 0)))
    assert est.initial_seats == 100
    # 3 objects x 1.5 MB = 4.5 MB -> 45
    assert we.estimate(pods(limit=3, continue_token="t"), ctx_for(EXEMPT, ObjectStats(10, -1))).initial_seats == 45
    # an empty resource stays at the 1-seat floor
    assert we.estimate(pods(limit=3, continue_token="t"), ctx_for(EXEMPT, ObjectStats(0, 0))).initial_seats == 1


# Upstream list_work_estimator_test.go TestListWorkEstimator: (total size, count, limit,
# label selector, from cache, expected count-based seats, expected size-based seats), before the
# clamp to [1, cap]. Average size is total // count as there.
UPSTREAM_LIST_TABLE = [
    (100_000 - 1, 99, 0, "", False, 2, 1),
    (100_000 - 1, 10, 0, "", False, 1, 1),
    (100_000 - 1, 99, 0, "", True, 1, 1),
    (100_000 - 1, 10, 0, "", True, 1, 1),
    (1_000_000 - 1, 1000, 0, "", False, 20, 10),
    (1_000_000 - 1, 1000, 100, "", False, 2, 1),
    (1_000_000 - 1, 1000, 100, "a", False, 11, 5),
    (1_000_000 - 1, 1000, 0, "", True, 10, 10),
    (1_000_000 - 1, 1000, 100, "", True, 10, 1),
    (1_000_000 - 1, 1000, 100, "a", True, 10, 1),
    (1_000_000 - 1, 99, 0, "", False, 2, 10),
    (1_000_000 - 1, 99, 10, "", False, 1, 2),
    (1_000_000 - 1, 99, 10, "a", False, 2, 5),
    (1_000_000 - 1, 99, 0, "", True, 1, 10),
    (10_000_000 - 1, 1000, 0, "", False, 20, 100),
    (10_000_000 - 1, 1000, 100, "", False, 2, 10),
    (10_000_000 - 1, 1000, 100, "a", False, 11, 50),
    (10_000_000 - 1, 1000, 0, "", True, 10, 10),
    (10_000_000 - 1, 1000, 100, "", True, 10, 10),
    (10_000_000 - 1, 1000, 100, "a", True, 10, 10),
    (10_000_000 - 1, 99, 0, "", False, 2, 100),
    (10_000_000 - 1, 99, 10, "", False, 1, 11),
    (10_000_000 - 1, 99, 10, "a", False, 2, 50),
    (10_000_000 - 1, 99, 0, "", True, 1, 10),
    (10_000_000 - 1, 99, 10, "", True, 1, 10),
    (10_000_000 - 1, 99, 10, "a", True, 1, 10),
]


@pytest.mark.parametrize("total, count, limit, selector, from_cache, by_count, by_size", UPSTREAM_LIST_TABLE)
def test_upstream_list_formula_table(total, count, limit, selector, from_cache, by_count, by_size):
    ctx = ctx_for(EXEMPT, ObjectStats(count, total // count))
    attrs = pods(limit=limit, label_selector=selector)
    # Caps lifted so the raw formula shows (upstream's table tests the formulas before the clamp).
    assert CountBasedListPolicy(max_list_seats=1000).estimate(attrs, ctx, from_cache).initial_seats == by_count
    assert SizeBasedListPolicy(max_list_seats=1000).estimate(attrs, ctx, from_cache).initial_seats == by_size


# --------------------------------------------------------------------------------------------
# Legacy count-based formula through the dispatcher: upstream width_test.go rows (maxSeats 10).
# Those rows predate consistent reads from the cache, so RV-unset LISTs were storage-served
# there: they run with etcd_supports_progress_notify=False.


def events(verb: str = "list", *, name: str = "", **opts) -> RequestAttributes:
    return RequestAttributes(user="u", verb=verb, api_group="foo.bar", resource="events", name=name,
                             list_options=ListOptions(**opts))


def legacy_ctx(count: int | None, state: str = "ok", pl: int = 10, **kw) -> EstimationContext:
    src = StaticObjectStats()
    if count is not None:
        src.set("foo.bar", "events", ObjectStats(count, 0, state))
    return EstimationContext(object_stats=src, pl_max_seats=pl, size_based_list_cost_estimate=False,
                             etcd_supports_progress_notify=False, **kw)


@pytest.mark.parametrize(
    "attrs, count, state, pl, expected",
    [
        (events(limit=399, resource_version="1"), 699, "ok", 10, 8),
        (events(resource_version="1"), 699, "ok", 10, 7),
        (events(limit=399), 699, "ok", 10, 8),
        (events(), 399, "ok", 10, 8),
        (events(), None, "ok", 10, 1),
        (events(continue_token="token", limit=399), 699, "ok", 10, 8),
        (events(limit=299, resource_version="0"), 399, "ok", 10, 4),
        (events(resource_version="0"), 799, "ok", 10, 8),
        (events(resource_version="foo", resource_version_match="Exact", limit=399), 699, "ok", 10, 8),
        (events(resource_version="foo", resource_version_match="NotOlderThan"), 799, "ok", 10, 8),
        (events(resource_version="foo"), 1999, "ok", 10, 10),
        (events(resource_version="foo"), 1999, "ok", 5, 5),
        (events(resource_version="0", limit=799), None, "ok", 10, 1),
        (events(limit=499), 799, "stale", 10, 10),
        (events(limit=499), 799, "not-found", 10, 1),
        (events(name="test", field_selector="metadata.name=test"), 799, "ok", 10, 1),
        (events(name="test", field_selector="metadata.name=test", limit=500, resource_version="0"), 799, "ok", 10, 1),
        (events("watch", send_initial_events=True), 799, "ok", 10, 8),
        (events("get"), 799, "ok", 10, 1),
    ],
)
def test_upstream_width_rows_count_based(attrs, count, state, pl, expected):
    we = WorkEstimator()  # follows the gate: count-based here
    assert we.estimate(attrs, legacy_ctx(count, state, pl)) == WorkEstimate(expected)


def test_count_based_cap_is_10_even_when_the_level_allows_more():
    # gate off: storage page of 500 -> 2 x 500 = 1000 objects -> 10 seats; never above 10.
    we = WorkEstimator()
    ctx = ctx_for(WORKLOAD_LOW, size_based_list_cost_estimate=False)
    assert we.estimate(pods(label_selector="a=b", resource_version_match="Exact", resource_version="1"),
                       ctx).initial_seats == 10
    assert CountBasedListPolicy().seat_cap(ctx, False) == 10


def test_consistent_list_is_cache_served_with_progress_notify():
    # Same rows as above with a modern etcd: RV unset is a cache list, so count objects, not 2 x limit.
    we = WorkEstimator()
    ctx = legacy_ctx(699)
    ctx.etcd_supports_progress_notify = True
    assert we.estimate(events(limit=399), ctx).initial_seats == 7  # ceil(699 / 100), not 2 x 399 / 100
    ctx.object_stats.set("foo.bar", "events", ObjectStats(399, 0))
    assert we.estimate(events(), ctx).initial_seats == 4  # ceil(399 / 100), not 8


# --------------------------------------------------------------------------------------------
# §5.3 serving table, one row each


@pytest.mark.parametrize(
    "opts, progress_notify, from_cache",
    [
        ({"resource_version_match": "NotOlderThan", "resource_version": "5", "limit": 10}, True, True),
        ({"resource_version_match": "NotOlderThan", "continue_token": "t"}, True, True),
        ({"resource_version_match": "Exact", "resource_version": "5"}, True, False),
        ({"resource_version_match": "Bogus", "resource_version": "5"}, True, False),
        ({"continue_token": "t", "resource_version": "0"}, True, False),
        ({"limit": 500, "resource_version": "12345"}, True, False),
        ({"resource_version": ""}, True, True),
        ({"resource_version": None, "limit": 500}, True, True),
        ({"resource_version": ""}, False, False),
        ({"limit": 500}, False, False),
        ({"resource_version": "0", "limit": 500}, False, True),
        ({"resource_version": "0"}, True, True),
        ({"resource_version": "12345"}, False, True),
    ],
)
def test_serving_table(opts, progress_notify, from_cache):
    assert served_from_cache_by_estimator(ListOptions(**opts), progress_notify) is from_cache


# --------------------------------------------------------------------------------------------
# §5.4 WATCH initialisation


def test_watch_from_known_rv_without_initial_events_is_one_seat():
    we = WorkEstimator()
    huge = ObjectStats(1_000_000, 50_000)
    assert we.estimate(pods("watch", resource_version="12345"), ctx_for(WORKLOAD_LOW, huge)) == WorkEstimate(1)
    assert we.estimate(pods("watch", resource_version="12345", send_initial_events=False),
                       ctx_for(WORKLOAD_LOW, huge)) == WorkEstimate(1)


@pytest.mark.parametrize("rv", ["0", "", None])
def test_legacy_watch_costed_as_cache_list(rv):
    we = WorkEstimator()
    # 5000 x 4 kB from the cache -> capped at 1 MB -> 10 seats
    assert we.estimate(pods("watch", resource_version=rv), ctx_for(WORKLOAD_LOW)) == WorkEstimate(10)
    # and with 100 pods: 400 kB -> 4 seats
    assert we.estimate(pods("watch", resource_version=rv), ctx_for(WORKLOAD_LOW, ObjectStats(100, 4000))) \
        == WorkEstimate(4)


def test_watch_with_initial_events_always_counts_as_cache():
    we = WorkEstimator()
    # options that would send a LIST to storage (Exact, selector) still cost a cache list for a watch
    w = pods("watch", send_initial_events=True, resource_version="5", resource_version_match="Exact",
             label_selector="a=b")
    assert we.estimate(w, ctx_for(WORKLOAD_LOW)) == WorkEstimate(10)


def test_watch_list_gate_off_is_one_seat():
    we = WorkEstimator()
    ctx = ctx_for(WORKLOAD_LOW, watch_list=False)
    assert we.estimate(pods("watch", send_initial_events=True), ctx) == WorkEstimate(1)
    assert we.estimate(pods("watch", resource_version="0"), ctx) == WorkEstimate(1)


def test_legacy_watch_costing_can_be_switched_off():
    we = WorkEstimator(watch=WatchInitConfig(cost_legacy_watches=False))
    assert we.estimate(pods("watch", resource_version="0"), ctx_for(WORKLOAD_LOW)) == WorkEstimate(1)
    assert we.estimate(pods("watch", send_initial_events=True), ctx_for(WORKLOAD_LOW)) == WorkEstimate(10)


# --------------------------------------------------------------------------------------------
# §5.5 mutating requests


def tracked(n: int, group: str = "foo.bar", resource: str = "foos") -> WatchTracker:
    t = WatchTracker()
    if n:
        t.add(group, resource, n=n)
    return t


def foos(verb: str = "create", **kw) -> RequestAttributes:
    return RequestAttributes(user="u", verb=verb, api_group="foo.bar", resource="foos", **kw)


@pytest.mark.parametrize(
    "verb, watches, pl, expected",
    [
        ("create", 25, 10, WorkEstimate(1, 3, 5 * MS)),  # §5.5 example
        ("create", 1000, GLOBAL_DEFAULT, WorkEstimate(1, 8, 62_500_000)),  # §5.5: 0.5 s / 8
        ("create", 9, 10, WorkEstimate(1, 0, 0)),
        ("create", 0, 10, WorkEstimate(1, 0, 0)),
        ("create", 10, 10, WorkEstimate(1, 1, 5 * MS)),
        # upstream width_test.go rows
        ("create", 29, 10, WorkEstimate(1, 3, 5 * MS)),
        ("create", 5, 10, WorkEstimate(1, 0, 0)),
        ("create", 199, 10, WorkEstimate(1, 10, 10 * MS)),
        ("update", 29, 10, WorkEstimate(1, 3, 5 * MS)),
        ("patch", 29, 10, WorkEstimate(1, 3, 5 * MS)),
        ("patch", 100, 5, WorkEstimate(1, 5, 10 * MS)),
        ("delete", 29, 10, WorkEstimate(1, 3, 5 * MS)),
        # caps: Exempt/Reject (0) and a level above 10 both get the global 10
        ("create", 1000, EXEMPT, WorkEstimate(1, 10, 50 * MS)),
        ("create", 1000, NODE_HIGH, WorkEstimate(1, 10, 50 * MS)),
        # reshaping truncates to whole ns: ceil(70/10) = 7 seats x 5 ms = 3.5e6 units over 3 seats
        # = 11_666_666.67 ns -> 11_666_666
        ("create", 70, 3, WorkEstimate(1, 3, 11_666_666)),
    ],
)
def test_mutating(verb, watches, pl, expected):
    we = WorkEstimator()
    ctx = EstimationContext(pl_max_seats=pl, watch_tracker=tracked(watches))
    assert we.estimate(foos(verb), ctx) == expected


def test_service_account_token_is_exempt_from_watch_cost():
    we = WorkEstimator()
    t = WatchTracker()
    t.add("", "serviceaccounts", n=5777)
    ctx = EstimationContext(pl_max_seats=10, watch_tracker=t)
    token = RequestAttributes(user="u", verb="create", resource="serviceaccounts", subresource="token",
                              namespace="foo", name="default")
    assert we.estimate(token, ctx) == WorkEstimate(1, 0, 0)
    sa = RequestAttributes(user="u", verb="create", resource="serviceaccounts", namespace="foo")
    # upstream: 1000 watchers -> final 100 -> cut to 10, 0.5 s / 10 = 50 ms
    t2 = WatchTracker()
    t2.add("", "serviceaccounts", n=1000)
    assert we.estimate(sa, EstimationContext(pl_max_seats=10, watch_tracker=t2)) == WorkEstimate(1, 10, 50 * MS)


def test_mutating_without_tracker_or_disabled():
    assert WorkEstimator().estimate(foos(), EstimationContext(pl_max_seats=10)) == WorkEstimate(1)
    we = WorkEstimator(mutating=MutatingEstimatorConfig(enabled=False))
    assert we.estimate(foos(), EstimationContext(pl_max_seats=10, watch_tracker=tracked(1000))) == WorkEstimate(1)


def test_mutating_parameters():
    we = WorkEstimator(mutating=MutatingEstimatorConfig(watches_per_seat=20, event_additional_duration_s=0.010,
                                                        max_mutating_seats=4))
    ctx = EstimationContext(pl_max_seats=0, watch_tracker=tracked(100))
    # ceil(100 / 20) = 5 seats x 10 ms = 0.05 seat-s, over min(5, 4) = 4 seats = 12.5 ms
    assert we.estimate(foos(), ctx) == WorkEstimate(1, 4, 12_500_000)
    # 19 watchers < 20: nothing
    assert we.estimate(foos(), EstimationContext(watch_tracker=tracked(19))) == WorkEstimate(1)
    with pytest.raises(EstimatorConfigError, match="watches_per_seat"):
        MutatingEstimatorConfig(watches_per_seat=0)
    with pytest.raises(EstimatorConfigError, match="max_mutating_seats"):
        MutatingEstimatorConfig(max_mutating_seats=0)


def test_seat_seconds_fixed_point():
    # 1 seat-second = 1e8 units (seat_seconds.go): 3 seats x 5 ms = 0.015 seat-s = 1_500_000 units
    assert seats_times_duration(3, 5 * MS) == 1_500_000
    # 100 seats x 5 ms = 0.5 seat-s; spread over 8 seats = 62.5 ms
    assert seats_times_duration(100, 5 * MS) == 50_000_000
    assert duration_per_seat_ns(50_000_000, 8) == 62_500_000
    # Go rounds half away from zero: 1 seat x 15 ns = 1.5 units -> 2
    assert seats_times_duration(1, 15) == 2
    assert seats_times_duration(1, 25) == 3


@pytest.mark.parametrize("verb", ["get", "deletecollection", "proxy", "post", "connect"])
def test_everything_else_is_one_seat(verb):
    we = WorkEstimator()
    ctx = EstimationContext(pl_max_seats=10, watch_tracker=tracked(1000), object_stats=pods_stats())
    assert we.estimate(RequestAttributes(user="u", verb=verb, api_group="foo.bar", resource="foos"), ctx) \
        == WorkEstimate(1, 0, 0)
    nonres = RequestAttributes(user="u", verb=verb, is_resource_request=False, path="/healthz")
    assert we.estimate(nonres, ctx) == WorkEstimate(1, 0, 0)


# --------------------------------------------------------------------------------------------
# §5.6 watch counting


def watch(resource: str = "pods", namespace: str = "", name: str = "", group: str = "", **opts) -> RequestAttributes:
    return RequestAttributes(user="u", verb="watch", api_group=group, resource=resource, namespace=namespace,
                             name=name, list_options=ListOptions(**opts))


def test_three_term_watch_count():
    t = WatchTracker()
    for _ in range(5):
        t.register(watch("configmaps"))  # cluster-wide
    for _ in range(3):
        t.register(watch("configmaps", namespace="ns1"))
    for _ in range(2):
        t.register(watch("configmaps", namespace="ns1", name="cm"))
    for _ in range(7):
        t.register(watch("configmaps", namespace="ns2"))
    t.register(watch("configmaps", namespace="ns1", name="other"))

    def req(verb, ns="", name=""):
        return RequestAttributes(user="u", verb=verb, resource="configmaps", namespace=ns, name=name)

    assert t.count_for(req("update", "ns1", "cm")) == 5 + 3 + 2
    assert t.count_for(req("create", "ns1")) == 5 + 3  # a create names nothing
    assert t.count_for(req("delete", "ns2", "cm")) == 5 + 7
    assert t.count_for(req("patch")) == 5
    for ro in ("get", "list", "watch", "proxy"):
        assert t.count_for(req(ro, "ns1", "cm")) == 0
    # another group is another resource
    assert t.count_for(RequestAttributes(user="u", verb="update", api_group="x.io", resource="configmaps",
                                         namespace="ns1")) == 0


def test_cluster_scoped_named_watch():
    t = WatchTracker()
    t.register(watch("nodes"))
    t.register(watch("nodes", name="n1"))
    t.register(watch("nodes", name="n1"))
    upd = RequestAttributes(user="u", verb="update", resource="nodes", name="n1")
    assert t.count_for(upd) == 3
    assert t.count_for(RequestAttributes(user="u", verb="update", resource="nodes", name="n2")) == 1


def test_pods_pinned_to_a_node_are_not_counted():
    t = WatchTracker()
    # kubelets: one per node
    for i in range(100):
        assert t.register(watch("pods", field_selector=f"spec.nodeName=node-{i}")) is None
    assert t.register(watch("pods", field_selector="metadata.namespace=a,spec.nodeName==node-1")) is None
    counted = [
        t.register(watch("pods")),
        t.register(watch("pods", field_selector="spec.nodeName=")),  # empty value: counted
        t.register(watch("pods", field_selector="spec.nodeName!=node-1")),  # not an exact match
        t.register(watch("pods", field_selector="status.phase=Running")),
    ]
    assert all(k is not None for k in counted)
    upd = RequestAttributes(user="u", verb="update", resource="pods", namespace="default", name="p")
    assert t.count_for(upd) == 4
    # other resources with a spec.nodeName-like selector are counted
    assert t.register(watch("events", field_selector="spec.nodeName=node-1")) is not None
    for k in counted:
        t.unregister(k)
    assert t.count_for(upd) == 0
    assert t.count("", "events") == 1


def test_watch_tracker_register_unregister():
    t = WatchTracker()
    assert t.register(RequestAttributes(user="u", verb="list", resource="pods")) is None
    k = t.register(watch("secrets", namespace="kube-system"))
    assert k == ("", "secrets", "kube-system", "")
    assert t.count("", "secrets", "kube-system") == 1
    t.unregister(None)  # uncounted watch: no-op
    t.unregister(k)
    assert t.total == 0
    with pytest.raises(KeyError):
        t.unregister(k)
    t.add("", "secrets", n=3)
    t.add("", "secrets", n=-3)
    assert t.snapshot() == {}
    with pytest.raises(ValueError):
        t.add("", "secrets", n=-1)


def test_field_selector_exact_value():
    assert field_selector_exact_value("spec.nodeName=n1", "spec.nodeName") == "n1"
    assert field_selector_exact_value("a=b,spec.nodeName==n1", "spec.nodeName") == "n1"
    assert field_selector_exact_value("spec.nodeName!=n1", "spec.nodeName") is None
    assert field_selector_exact_value("spec.nodeNameX=n1", "spec.nodeName") is None
    assert field_selector_exact_value("", "spec.nodeName") is None
    assert field_selector_exact_value("spec.nodeName=", "spec.nodeName") == ""


# --------------------------------------------------------------------------------------------
# constant policy


def test_constant_policy_bypasses_every_cap():
    we = WorkEstimator("constant", list_params={"seats": 150})
    # global-default's PLmaxSeats is 8 and the global cap 100: both bypassed
    assert we.estimate(pods(resource_version="0"), ctx_for(GLOBAL_DEFAULT)) == WorkEstimate(150)
    assert we.estimate(pods(), ctx_for(GLOBAL_DEFAULT, None)) == WorkEstimate(150)  # even unknown stats
    assert we.estimate(pods("watch", send_initial_events=True), ctx_for(GLOBAL_DEFAULT)) == WorkEstimate(150)
    # only LIST-costed requests: a cheap watch, a get and a write are not affected
    assert we.estimate(pods("watch", resource_version="5"), ctx_for(GLOBAL_DEFAULT)) == WorkEstimate(1)
    assert we.estimate(pods("get", name="p"), ctx_for(GLOBAL_DEFAULT)) == WorkEstimate(1)
    no_watch = WorkEstimator(ConstantListPolicy(seats=10, include_watch=False))
    assert no_watch.estimate(pods("watch", send_initial_events=True), ctx_for(GLOBAL_DEFAULT)) == WorkEstimate(1)
    with pytest.raises(EstimatorConfigError, match="seats"):
        make_list_policy("constant", seats=0)
    with pytest.raises(EstimatorConfigError, match="seats"):
        make_list_policy("constant")


# --------------------------------------------------------------------------------------------
# variants of kubernetes#132233 and follow-ups


def test_streamed_cache_cap_charges_non_streamed_cache_lists_fully():
    cache_list = pods(resource_version="0")  # 20 MB from the cache
    not_streamed = dict(response_streamed=False)
    size = WorkEstimator("size-based")
    streamed = WorkEstimator("streamed-cache-cap")
    assert size.estimate(cache_list, ctx_for(WORKLOAD_LOW, **not_streamed)).initial_seats == 10
    # 20 MB -> 200 seats -> min(cap, 200)
    assert streamed.estimate(cache_list, ctx_for(WORKLOAD_LOW, **not_streamed)).initial_seats == 37
    assert streamed.estimate(cache_list, ctx_for(EXEMPT, **not_streamed)).initial_seats == 100
    assert streamed.estimate(cache_list, ctx_for(EXEMPT, response_streamed=True)).initial_seats == 10
    # a callable decides per request
    by_resource = ctx_for(EXEMPT, response_streamed=lambda a: a.resource != "pods")
    assert streamed.estimate(cache_list, by_resource).initial_seats == 100
    # an initializing watch is a WatchList stream: always capped
    assert streamed.estimate(pods("watch", send_initial_events=True), ctx_for(EXEMPT, **not_streamed)) \
        == WorkEstimate(10)
    # storage lists are unaffected: 2 MB page -> 20
    assert streamed.estimate(pods(limit=500, continue_token="t"), ctx_for(EXEMPT, **not_streamed)) \
        == WorkEstimate(20)


def test_etcd_uncapped_lifts_level_cap_on_storage_lists_only():
    storage_20mb = pods(label_selector="a=b", resource_version_match="Exact", resource_version="1")
    assert WorkEstimator("size-based").estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT)).initial_seats == 8
    uncapped = WorkEstimator("etcd-uncapped")
    assert uncapped.estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT)).initial_seats == 100
    assert WorkEstimator("etcd-uncapped", list_params={"max_list_seats": 300}) \
        .estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT)).initial_seats == 200
    # cache-served LISTs keep the level's cap: 20 MB -> 1 MB -> 10 -> global-default 8
    assert uncapped.estimate(pods(resource_version="0"), ctx_for(GLOBAL_DEFAULT)).initial_seats == 8
    # 500 kB from the cache -> 5, under every cap
    assert uncapped.estimate(pods(resource_version="0", limit=125), ctx_for(GLOBAL_DEFAULT)).initial_seats == 5


def test_borrowing_aware_max_seats():
    storage_20mb = pods(label_selector="a=b", resource_version_match="Exact", resource_version="1")
    # global-default at S = 600: NominalCL 49, handSize 6 -> PLmaxSeats 8
    level = dict(nominal_cl=49, current_cl=200, max_cl=49 + 600, hand_size=6)
    # CurrentCL 200: max(1, min(ceil(30.0), 200 // 6 = 33)) = 30
    cur = WorkEstimator("borrowing-aware")
    assert cur.estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT, **level)).initial_seats == 30
    # MaxCL 649: min(ceil(97.35) = 98, 649 // 6 = 108) = 98, under the global 100
    mx = WorkEstimator("borrowing-aware", list_params={"basis": "max"})
    assert mx.estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT, **level)).initial_seats == 98
    # a level that lent seats away gets less than upstream: CurrentCL 20 -> min(3, 3) = 3
    lent = dict(level, current_cl=20)
    assert cur.estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT, **lent)).initial_seats == 3
    # Exempt/Reject levels have no max seats of their own: global cap
    assert cur.estimate(storage_20mb, ctx_for(EXEMPT, **level)).initial_seats == 100
    with pytest.raises(EstimatorConfigError, match="hand_size"):
        cur.estimate(storage_20mb, ctx_for(GLOBAL_DEFAULT, current_cl=200))
    with pytest.raises(EstimatorConfigError, match="basis"):
        make_list_policy("borrowing-aware", basis="nominal")


def test_options_compose():
    p = make_list_policy("size-based", storage_cap="global", cache_cap_when="streamed", max_list_seats=500)
    ctx = ctx_for(GLOBAL_DEFAULT, response_streamed=False)
    # storage 20 MB: uncapped by the level -> 200
    assert p.estimate(pods(label_selector="a", resource_version_match="Exact", resource_version="1"), ctx,
                      False).initial_seats == 200
    # cache 20 MB not streamed: fully charged but capped by the level -> 8
    assert p.estimate(pods(resource_version="0"), ctx, True).initial_seats == 8
    with pytest.raises(EstimatorConfigError, match="storage_cap"):
        make_list_policy("size-based", storage_cap="sometimes")
    with pytest.raises(EstimatorConfigError, match="fixes storage_cap"):
        make_list_policy("etcd-uncapped", storage_cap="level")


def test_size_based_parameters():
    p = make_list_policy("size-based", bytes_per_seat=1_000_000, cache_max_memory_bytes=5_000_000)
    ctx = ctx_for(EXEMPT)
    # cache: min(20 MB, 5 MB) / 1 MB = 5; storage page 2 MB / 1 MB = 2
    assert p.estimate(pods(resource_version="0"), ctx, True).initial_seats == 5
    assert p.estimate(pods(limit=500, continue_token="t"), ctx, False).initial_seats == 2


def test_gate_selects_upstream_formula_only_when_no_policy_named():
    storage_page = pods(limit=500, continue_token="t")  # 2 MB, 500 objects
    off = ctx_for(WORKLOAD_LOW, size_based_list_cost_estimate=False)
    on = ctx_for(WORKLOAD_LOW)
    assert WorkEstimator().estimate(storage_page, on).initial_seats == 20  # size-based
    assert WorkEstimator().estimate(storage_page, off).initial_seats == 10  # 2 x 500 / 100, cap 10
    # a named policy ignores the gate
    assert WorkEstimator("size-based").estimate(storage_page, off).initial_seats == 20


# --------------------------------------------------------------------------------------------
# registry and user classes


class HalfSeats(ListWorkPolicy):
    """A user's policy: half of upstream's size-based estimate, at least 1."""

    name = "half"

    def __init__(self, *, factor: float = 0.5) -> None:
        super().__init__()
        self.inner = SizeBasedListPolicy()
        self.factor = factor
        self._params = {"factor": factor}

    def estimate(self, attrs, ctx, from_cache):
        full = self.inner.estimate(attrs, ctx, from_cache).initial_seats
        return initial_only(max(1, int(full * self.factor)))


class DuckPolicy:
    """Not a subclass: anything with estimate(attrs, ctx, from_cache) will do."""

    def estimate(self, attrs, ctx, from_cache):
        return WorkEstimate(3 if from_cache else 4)


def test_registry_names():
    assert set(list_policy_names()) >= {"size-based", "count-based", "constant", "etcd-uncapped",
                                        "streamed-cache-cap", "borrowing-aware", "upstream"}
    assert type(make_list_policy("size-based")) is SizeBasedListPolicy
    assert type(make_list_policy("count-based")) is CountBasedListPolicy
    assert type(make_list_policy("upstream")) is UpstreamListPolicy
    assert type(make_list_policy("etcd-uncapped")) is EtcdUncappedListPolicy
    assert type(make_list_policy("streamed-cache-cap")) is StreamedCacheCapListPolicy
    assert type(make_list_policy("borrowing-aware")) is BorrowingAwareListPolicy
    assert type(make_list_policy("constant", seats=4)) is ConstantListPolicy


def test_user_class_by_import_path_and_by_class():
    ctx = ctx_for(WORKLOAD_LOW)
    storage_page = pods(limit=500, continue_token="t")  # 20 under size-based
    by_path = WorkEstimator(f"{__name__}:HalfSeats", list_params={"factor": 0.25})
    assert by_path.estimate(storage_page, ctx).initial_seats == 5
    by_class = WorkEstimator(HalfSeats)
    assert by_class.estimate(storage_page, ctx).initial_seats == 10
    assert by_class.estimate(pods("watch", send_initial_events=True), ctx).initial_seats == 5
    duck = WorkEstimator(DuckPolicy)
    assert duck.estimate(storage_page, ctx) == WorkEstimate(4)
    assert duck.estimate(pods(resource_version="0"), ctx) == WorkEstimate(3)
    assert duck.config()["list_policy"]["name"].endswith(":DuckPolicy")


def test_user_class_from_a_module_on_the_path(tmp_path, monkeypatch):
    (tmp_path / "my_apf_policies.py").write_text(textwrap.dedent("""
        from simapf.apf.types import WorkEstimate

        class Flat:
            def __init__(self, seats=7):
                self.seats = seats

            def estimate(self, attrs, ctx, from_cache):
                return WorkEstimate(self.seats)

        NOT_A_CLASS = 3

        class NoEstimate:
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_apf_policies", raising=False)
    we = WorkEstimator("my_apf_policies:Flat", list_params={"seats": 9})
    assert we.estimate(pods(), ctx_for(WORKLOAD_LOW)) == WorkEstimate(9)
    with pytest.raises(EstimatorConfigError, match="not a class"):
        make_list_policy("my_apf_policies:NOT_A_CLASS")
    with pytest.raises(EstimatorConfigError, match="has no estimate"):
        make_list_policy("my_apf_policies:NoEstimate")
    with pytest.raises(EstimatorConfigError, match="no attribute 'Missing'"):
        make_list_policy("my_apf_policies:Missing")
    with pytest.raises(EstimatorConfigError, match="bad parameters"):
        make_list_policy("my_apf_policies:Flat", width=3)


def test_bad_policy_names():
    with pytest.raises(EstimatorConfigError, match="unknown LIST policy 'size_based'.*known: .*size-based"):
        make_list_policy("size_based")
    with pytest.raises(EstimatorConfigError, match="cannot import module 'no_such_pkg.mod'"):
        make_list_policy("no_such_pkg.mod:Policy")
    with pytest.raises(EstimatorConfigError, match="package.module:ClassName"):
        make_list_policy("justamodule:")
    with pytest.raises(EstimatorConfigError, match="bad parameters"):
        make_list_policy("size-based", bogus=1)
    with pytest.raises(EstimatorConfigError, match="bytes_per_seat"):
        make_list_policy("size-based", bytes_per_seat=0)
    with pytest.raises(EstimatorConfigError, match="already built"):
        make_list_policy(SizeBasedListPolicy(), max_list_seats=3)
    with pytest.raises(EstimatorConfigError):
        WorkEstimator(42)


@pytest.mark.parametrize("name, params", [
    ("size-based", {"max_list_seats": 50, "storage_cap": "global"}),
    ("etcd-uncapped", {"max_list_seats": 250}),
    ("streamed-cache-cap", {"bytes_per_seat": 50_000}),
    ("borrowing-aware", {"basis": "max"}),
    ("count-based", {"objects_per_seat": 50.0}),
    ("constant", {"seats": 3}),
])
def test_config_round_trips(name, params):
    cfg = make_list_policy(name, **params).config()
    assert cfg["name"] == name
    rebuilt = make_list_policy(cfg.pop("name"), **cfg)
    assert rebuilt.config() == make_list_policy(name, **params).config()


# --------------------------------------------------------------------------------------------
# property: every estimate has 1 <= initial seats and max seats <= the applicable cap


def independent_cap(policy: str, pl: int, from_cache: bool, level: dict) -> int:
    """The cap each policy documents, computed here from the reference formulas."""
    if policy == "count-based":
        limit = 10
    else:
        limit = 100
    if policy == "etcd-uncapped" and not from_cache:
        return limit
    if policy == "borrowing-aware" and pl > 0:
        cl = level["current_cl"]
        pct = -(-cl * 15 // 100)  # exact ceil(0.15 cl)
        pl = max(1, min(pct, cl // level["hand_size"]))
    return pl if 0 < pl <= limit else limit


list_options = st.builds(
    ListOptions,
    resource_version=st.sampled_from([None, "", "0", "12345"]),
    resource_version_match=st.sampled_from(["", "", "NotOlderThan", "Exact"]),
    limit=st.sampled_from([0, 0, 1, 10, 500, 10_000]),
    continue_token=st.sampled_from(["", "", "tok"]),
    label_selector=st.sampled_from(["", "app=x"]),
    field_selector=st.sampled_from(["", "status.phase=Running"]),
    send_initial_events=st.sampled_from([None, True, False]),
)
stats_values = st.one_of(
    st.none(),
    st.builds(ObjectStats, object_count=st.integers(0, 2_000_000),
              average_object_size_bytes=st.integers(-5, 3_000_000),
              state=st.sampled_from(["ok", "ok", "stale", "not-found"])),
)


@settings(max_examples=400, deadline=None)
@given(
    policy=st.sampled_from(["size-based", "count-based", "etcd-uncapped", "streamed-cache-cap", "borrowing-aware",
                            "upstream"]),
    verb=st.sampled_from(["list", "watch"]),
    opts=list_options,
    stats=stats_values,
    pl=st.sampled_from([0, 1, 2, 8, 37, 99, 100, 184, 500]),
    current_cl=st.integers(0, 3000),
    hand_size=st.integers(1, 10),
    named=st.booleans(),
    progress_notify=st.booleans(),
    streamed=st.booleans(),
    gate=st.booleans(),
)
def test_property_estimates_within_cap(policy, verb, opts, stats, pl, current_cl, hand_size, named,
                                       progress_notify, streamed, gate):
    level = {"current_cl": current_cl, "hand_size": hand_size}
    ctx = EstimationContext(object_stats=pods_stats(stats), pl_max_seats=pl, nominal_cl=0, current_cl=current_cl,
                            max_cl=current_cl, hand_size=hand_size, etcd_supports_progress_notify=progress_notify,
                            response_streamed=streamed, size_based_list_cost_estimate=gate)
    attrs = RequestAttributes(user="u", verb=verb, resource="pods", name="p" if named else "", list_options=opts)
    est = WorkEstimator(policy).estimate(attrs, ctx)
    from_cache = verb == "watch" or served_from_cache_by_estimator(opts, progress_notify)
    effective = policy
    if policy == "upstream":
        effective = "size-based" if gate else "count-based"
    assert 1 <= est.initial_seats
    assert est.max_seats <= independent_cap(effective, pl, from_cache, level)
    assert est.final_seats == 0 and est.additional_latency_ns == 0


@settings(max_examples=300, deadline=None)
@given(watches=st.integers(0, 100_000), pl=st.sampled_from([0, 1, 3, 8, 10, 15, 184]),
       verb=st.sampled_from(["create", "update", "patch", "delete"]))
def test_property_mutating_within_cap_and_area_kept(watches, pl, verb):
    ctx = EstimationContext(pl_max_seats=pl, watch_tracker=tracked(watches))
    est = WorkEstimator().estimate(foos(verb, namespace="ns", name="x"), ctx)
    cap = pl if 0 < pl <= 10 else 10
    assert est.initial_seats == 1
    assert est.max_seats <= cap
    if watches < 10:
        assert est == WorkEstimate(1)
    else:
        # the reshaped rectangle keeps the fan-out area ceil(W/10) x 5 ms, to within the ns truncation
        area_ns = -(-watches // 10) * 5 * MS
        assert 0 <= area_ns - est.final_seats * est.additional_latency_ns < est.final_seats


def test_constant_property_ignores_cap():
    # the one policy exempt from the cap property: its width is exactly what was asked
    for pl in (0, 1, 8, 500):
        assert WorkEstimator("constant", list_params={"seats": 250}).estimate(pods(), ctx_for(pl)).initial_seats == 250


def test_one_default_list_policy_everywhere():
    # The registry once defaulted to size-based while WorkEstimator and scenarios used upstream.
    from simapf.apf.estimators import DEFAULT_LIST_POLICY, make_list_policy
    from simapf.scenario.schema import Estimator

    assert DEFAULT_LIST_POLICY == "upstream" == Estimator().list_policy
    assert type(make_list_policy()) is type(WorkEstimator().list_policy)
