"""Admission webhooks in the request path: called while the request holds its APF seats, a
saturated webhook makes a k6-style closed loop obey Little's law, a timeout fails the request
under failure_policy Fail and is skipped under Ignore."""

from __future__ import annotations

import pytest

import simapf
from simapf.errors import ConfigError

DURATION_S = 120
USERS, THINK_S = 50, 0.5


def _scenario(service_mean_s: float, **webhook) -> dict:
    return {
        "name": "webhook", "run": {"duration_s": DURATION_S, "seed": 1},
        "resources": [{"name": "configmaps", "count": 100, "object_size": {"mean_bytes": 2048}}],
        "clients": [{"name": "k6", "kind": "closed_loop", "count": USERS, "identity": {"service_account": "load/k6"},
                     "think_time": {"mean_s": THINK_S}, "request": {"verb": "create", "resource": "configmaps"}}],
        "admission_webhooks": [{"name": "policy", "replicas": 2, "concurrency": 4,
                                "service_time": {"mean_s": service_mean_s}, **webhook}],
    }  # fmt: skip


def _k6(result):
    cl = result.client_latency
    return cl[cl["client"] == "k6"].iloc[0]


def test_a_saturated_webhook_bounds_throughput_and_the_closed_loop_follows_littles_law():
    fast, slow = simapf.run(_scenario(0.01)), simapf.run(_scenario(0.2))
    # 8 servers at 0.2 s a call serve 40 calls a second: the loop's throughput is the webhook's.
    x_slow = _k6(slow)["requests"] / DURATION_S
    assert x_slow == pytest.approx(8 / 0.2, rel=0.05)
    for result in (fast, slow):
        row = _k6(result)
        x = row["requests"] / DURATION_S
        # Little's law for the users: N = X (R + Z).
        assert x * (row["mean_s"] + THINK_S) == pytest.approx(USERS, rel=0.03)
    assert _k6(slow)["mean_s"] > 10 * _k6(fast)["mean_s"]
    assert {"mean_s", "min_s", "p50_s", "max_s", "p90_s", "p95_s"} <= set(slow.client_latency.columns)  # k6's


def test_a_webhook_that_times_out_fails_the_request_or_is_ignored():
    # 0.5 s calls on 8 servers against 50 users: calls wait seconds, beyond a 1 s timeout.
    fail = simapf.run(_scenario(0.5, timeout_s=1, failure_policy="Fail"))
    ignore = simapf.run(_scenario(0.5, timeout_s=1, failure_policy="Ignore"))
    assert fail.summary["requests"]["by_outcome"]["failed"] > 0
    assert ignore.summary["requests"]["by_outcome"]["failed"] == 0
    # A call the apiserver gave up on costs the request at most its timeout.
    assert _k6(fail)["max_s"] <= 1.0 + 0.05 and _k6(ignore)["max_s"] <= 1.0 + 0.05


def test_a_slow_webhook_holds_seats_so_reads_in_the_same_level_queue():
    def with_readers(service_mean_s: float) -> dict:
        sc = _scenario(service_mean_s)
        sc["apiserver"] = {"max_requests_inflight": 20, "max_mutating_requests_inflight": 10}
        sc["clients"].append({"name": "readers", "kind": "open_loop", "identity": {"service_account": "load/reader"},
                              "rate_per_s": 50, "request": {"verb": "get", "resource": "configmaps"}})  # fmt: skip
        return sc

    def reader_p99(result) -> float:
        cl = result.client_latency
        return float(cl[cl["client"] == "readers"]["p99_s"].iloc[0])

    fast, slow = simapf.run(with_readers(0.001)), simapf.run(with_readers(0.2))
    # The writes hold workload-low's few seats while the webhook works; the GETs wait for them.
    assert reader_p99(slow) > 20 * reader_p99(fast)


def test_a_webhook_field_out_of_bounds_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"admission_webhooks\[0\].timeout_s"):
        simapf.load_scenario(_scenario(0.1, timeout_s=60))
