"""client-go's machinery: the token bucket, the reflector's backoff, 429 retries with
Retry-After, and kubectl discovery through its token bucket."""

import math

import numpy as np
import pytest
from wlhelp import CONFIGMAPS, Probe, closed_loop, discovery, scenario, simulation

from simapf.apf.types import NS_PER_S
from simapf.scenario.schema import Backoff as BackoffSpec
from simapf.scenario.schema import RateLimit
from simapf.workload.clientgo import Backoff, TokenBucket

# ------------------------------------------------------------------------- token bucket


def test_token_bucket_burst_then_exact_qps_spacing():
    qps, burst = 10.0, 5
    bucket = TokenBucket(RateLimit(qps=qps, burst=burst))
    t0 = 7 * NS_PER_S  # the first use, well after creation: the bucket is full
    waits = [bucket.reserve(t0) for _ in range(burst + 6)]
    assert waits[:burst] == [0] * burst
    # golang.org/x/time/rate: reservations queue, so the k-th request beyond the burst waits k/qps.
    for k in range(1, 7):
        assert waits[burst + k - 1] == pytest.approx(k / qps * NS_PER_S, abs=1)


def test_token_bucket_refills_at_qps_and_never_above_burst():
    bucket = TokenBucket(RateLimit(qps=4.0, burst=3))
    assert [bucket.reserve(0) for _ in range(3)] == [0, 0, 0]
    # Half a second later two tokens are back (4/s): two free requests, the third waits 1/4 s.
    t = NS_PER_S // 2
    assert [bucket.reserve(t) for _ in range(3)] == [0, 0, pytest.approx(NS_PER_S / 4, abs=1)]
    # After an hour idle the bucket holds `burst` tokens, not 14 400.
    t = 3600 * NS_PER_S
    waits = [bucket.reserve(t) for _ in range(4)]
    assert waits[:3] == [0, 0, 0] and waits[3] == pytest.approx(NS_PER_S / 4, abs=1)


# ------------------------------------------------------------------------- backoff


class _FixedRandom:
    """Stands in for the jitter stream: returns the given fractions in turn."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_reflector_backoff_doubles_from_0_8_to_a_30_s_cap():
    spec = BackoffSpec(jitter=0.0)
    b = Backoff(spec, np.random.default_rng(0))
    t = 0
    waits = []
    for _ in range(9):
        w = b.next_ns(t)
        waits.append(w / NS_PER_S)
        t += w
    assert waits == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0])


def test_reflector_backoff_jitter_stretches_each_wait_into_d_to_2d():
    # wait.Jitter(d, 1.0) = d + U[0,1) x d.
    b = Backoff(BackoffSpec(), _FixedRandom(0.0, 0.5, 0.999))
    assert b.next_ns(0) == pytest.approx(0.8 * NS_PER_S, abs=1)
    assert b.next_ns(1) == pytest.approx(1.6 * 1.5 * NS_PER_S, abs=1)
    assert b.next_ns(2) == pytest.approx(3.2 * 1.999 * NS_PER_S, abs=1)


def test_reflector_backoff_starts_over_after_two_quiet_minutes():
    b = Backoff(BackoffSpec(jitter=0.0), np.random.default_rng(0))
    for k in range(5):
        b.next_ns(k * NS_PER_S)  # 0.8 .. 12.8 used; the next would be 25.6
    last = 4 * NS_PER_S
    assert b.next_ns(last + 120 * NS_PER_S) == pytest.approx(25.6 * NS_PER_S, abs=1)  # exactly 2 min: not yet
    assert b.next_ns(last + 120 * NS_PER_S + 120 * NS_PER_S + 1) == pytest.approx(0.8 * NS_PER_S, abs=1)


# ------------------------------------------------------------------------- kubectl discovery

# Three group-versions served by the resources: v1 (core), apps/v1, example.com/v1.
DISCOVERY_RESOURCES = [
    CONFIGMAPS,
    {"name": "deployments", "group": "apps", "count": 10, "object_size": {"mean_bytes": 2048}},
    {"name": "replicasets", "group": "apps", "count": 10, "object_size": {"mean_bytes": 2048}},
    {"name": "widgets", "group": "example.com", "count": 10, "object_size": {"mean_bytes": 512}},
]


def _discovery_run(probe_run, extra: int, aggregated: bool, qps: float, burst: int):
    client = discovery(extra_group_versions=extra, aggregated=aggregated, interval_s=10_000,
                       discovery_rate_limit={"qps": qps, "burst": burst})  # fmt: skip
    sim, result, probe = probe_run(scenario(client, duration_s=30, resources=DISCOVERY_RESOURCES))
    stats = sim.groups["kubectl"].stats
    assert stats.runs == 1
    return probe.attempts, stats.run_durations_ns[0] / NS_PER_S


@pytest.mark.parametrize("extra", [0, 4])
def test_discovery_sends_two_plus_one_get_per_group_version(probe_run, extra):
    attempts, _ = _discovery_run(probe_run, extra, aggregated=False, qps=50, burst=300)
    paths = [a.path for a in attempts]
    n_gv = 3 + extra
    assert len(paths) == 2 + n_gv
    assert len(set(paths)) == len(paths)
    assert paths[:2] == ["/api", "/apis"]
    assert "/api/v1" in paths and "/apis/apps/v1" in paths and "/apis/example.com/v1" in paths
    assert all(a.verb == "get" and a.outcome == "ok" for a in attempts)


def test_aggregated_discovery_sends_two_gets(probe_run):
    attempts, _ = _discovery_run(probe_run, extra=20, aggregated=True, qps=50, burst=300)
    assert [a.path for a in attempts] == ["/api", "/apis"]


def test_discovery_through_a_small_burst_is_paced_by_qps(probe_run):
    qps, burst, extra = 10.0, 3, 4
    attempts, duration = _discovery_run(probe_run, extra, aggregated=False, qps=qps, burst=burst)
    n = 2 + 3 + extra
    sent = sorted(a.sent_s for a in attempts)
    # /api and /apis and the first group-version ride the burst; the k-th request beyond it
    # gets its token k/qps after the run started (the bucket is full at the start of a run).
    assert sent[0] == sent[1] == 0.0
    assert sent[2] < 1 / qps
    assert sent[burst:] == pytest.approx([k / qps for k in range(1, n - burst + 1)], abs=1e-6)
    assert duration >= (n - burst) / qps


def test_each_discovery_run_starts_with_a_full_bucket(probe_run):
    # A kubectl invocation is a new process: its bucket does not carry the last run's debt.
    qps, burst = 1.0, 2
    client = discovery(extra_group_versions=2, interval_s=0.5, discovery_rate_limit={"qps": qps, "burst": burst})
    sim, result, probe = probe_run(scenario(client, duration_s=30, resources=DISCOVERY_RESOURCES))
    starts = [a.sent_s for a in probe.attempts if a.path == "/api"]
    runs = sim.groups["kubectl"].stats.runs
    assert runs >= 3 and len(starts) in (runs, runs + 1)  # the last run may be unfinished
    for t0 in starts:
        # Both first requests of every run are sent the moment it starts, from the burst.
        first_two = [a for a in probe.attempts if a.path in ("/api", "/apis") and abs(a.sent_s - t0) < 1e-9]
        assert len(first_two) == 2


# ------------------------------------------------------------------------- 429 and Retry-After

SLOW_S = 40.0  # every admitted request holds its seat this long


def _slow_server(sim):
    """Every request the apiserver admits takes SLOW_S, whatever it is: the priority level stays
    full, so what the clients do with 429s is all that moves."""
    server = sim.server
    submit = server.submit

    def slow_submit(attrs, cost=None, on_done=None, service_ns=None, tag=None, link=None):
        return submit(attrs, None, on_done, service_ns=int(SLOW_S * NS_PER_S), tag=tag)

    server.submit = slow_submit


def _storm(**retry):
    # 150 users, one GET (one seat) each, all at t = 0, into global-default cut down to its
    # nominal 49 seats (no borrowing) and one queue of one: 49 run, one waits, 100 get a 429.
    users = closed_loop(count=150, think_s=10_000, retry=retry)
    sc = scenario(users, duration_s=120, apf={"priority_levels": {
        "global-default": {"queues": 1, "hand_size": 1, "queue_length_limit": 1, "borrowing_limit_percent": 0}}})  # fmt: skip

    sim = simulation(sc)
    _slow_server(sim)
    probe = Probe(sim)
    result = sim.run()
    return sim, result, probe


def test_429s_are_retried_after_their_retry_after_at_most_max_retries_times():
    max_retries = 5
    sim, result, probe = _storm(max_retries=max_retries)
    by_user = probe.by_user()
    assert len(by_user) == 150
    gave_up = 0
    for user, attempts in by_user.items():
        assert len(attempts) <= max_retries + 1
        for prev, nxt in zip(attempts, attempts[1:]):
            # Only a 429 is retried, and exactly Retry-After seconds after it came back.
            assert prev.outcome == "rejected"
            assert nxt.sent_s - prev.done_s == pytest.approx(prev.retry_after_s, abs=1e-9)
        if [a.outcome for a in attempts] == ["rejected"] * (max_retries + 1):
            gave_up += 1
    stats = sim.groups["users"].stats
    assert stats.outcomes.get("rejected", 0) == gave_up  # after the last retry the 429 is the answer
    assert stats.retries == sum(len(a) - 1 for a in by_user.values())
    # The 100 users rejected at t = 0 come back together, are rejected together, and each wave
    # lands in one second of the tracker: per upstream's rule the Retry-After doubles every
    # time (1, 2, 4, 8, 16, 32), so they are sent at 0, 1, 3, 7, 15 and 31 s, then give up
    # (the 49 seats stay taken for 40 s). Only the one that queued at t = 0 differs.
    doubling = [s for s in by_user.values() if [round(a.sent_s, 9) for a in s] == [0, 1, 3, 7, 15, 31]]
    assert len(doubling) >= 99
    assert all([a.retry_after_s for a in s] == [1, 2, 4, 8, 16, 32] for s in doubling)
    assert gave_up >= 99


def test_retry_after_can_be_ignored_for_a_fixed_wait():
    sim, result, probe = _storm(max_retries=3, honour_retry_after=False, fallback_wait_s=2.5)
    gaps = [nxt.sent_s - prev.done_s for atts in probe.by_user().values() for prev, nxt in zip(atts, atts[1:])]
    assert gaps and all(math.isclose(g, 2.5, abs_tol=1e-9) for g in gaps)


def test_no_retries_when_max_retries_is_zero():
    sim, result, probe = _storm(max_retries=0)
    assert all(len(atts) == 1 for atts in probe.by_user().values())
    assert sim.groups["users"].stats.retries == 0
