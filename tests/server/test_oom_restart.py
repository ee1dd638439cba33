"""Memory limit, OOM kill, restart after restart_s, watch-cache refill from etcd."""

from __future__ import annotations

import pytest
import simpy

from simapf.engine.environment import Environment
from simapf.server import CachedResource, ProcessState, ResourceModel, ServerParams, ServingPath

from srvhelp import S, cost


def build(limit: str | None = "1Gi", restart_s: float = 10.0) -> tuple[simpy.Environment, ResourceModel, list]:
    env = Environment()
    p = ServerParams.model_validate({"process": {"memory_limit_bytes": limit, "restart_s": restart_s}})
    m = ResourceModel(env.clock, p)
    events: list = []
    m.process.on_death.append(lambda t: events.append(("oom", t, m.state, m.snapshot().rss_bytes)))
    m.process.on_restart.append(lambda t: events.append(("restart", t, m.state, m.watch_cache_ready("pods"))))
    m.process.on_ready.append(lambda t: events.append(("ready", t, m.state, m.watch_cache_ready("pods"))))
    return env, m, events


def flood(env: simpy.Environment, m: ResourceModel, until_s: float, done: list) -> None:
    """100 MB LISTs from the cache at 20/s, ~1 core-s and 150 MB live each: GBs in flight."""
    c = cost(ServingPath.CACHE, 100_000_000, 10_000)

    def driver():
        while env.now < until_s * S:
            m.start(c, done.append)
            yield env.timeout(S // 20)

    env.process(driver())


def test_crossing_the_memory_limit_kills_and_restarts_after_restart_time():
    env, m, events = build()
    done: list[int] = []
    flood(env, m, 4.0, done)
    env.run(until=30 * S)
    kinds = [e[0] for e in events]
    assert kinds[:2] == ["oom", "restart"]
    t_oom = events[0][1]
    assert 0 < t_oom < 4 * S
    assert events[0][2] is ProcessState.DOWN and events[0][3] == 0.0  # memory gone at the hook
    assert m.oom_demand_bytes > 2**30  # it was the crossing that killed it
    assert m.rss_at_oom_bytes <= m.memory.peak_rss <= 2**30  # the peak is what the process had
    assert events[1][1] == t_oom + 10 * S
    assert m.process.oom_kills >= 1 and m.snapshot().oom_kills == m.process.oom_kills
    # Requests in flight at the kill never complete.
    assert all(t < t_oom for t in done)
    assert m.completed == len(done) < (t_oom // (S // 20)) - 1


def test_down_server_refuses_requests():
    env, m, events = build()
    flood(env, m, 4.0, [])
    env.run(until=4 * S)
    assert events and events[0][0] == "oom"
    assert not m.up and m.state is ProcessState.DOWN
    assert m.start(cost(ServingPath.CACHE, 1000, 1), lambda t: None) is False
    snap = m.snapshot()
    assert snap.up is False and snap.rss_bytes == 0.0 and snap.requests_executing == 0
    assert snap.etcd_reads_in_flight == 0


def test_no_limit_no_oom():
    env, m, events = build(limit=None)
    flood(env, m, 4.0, [])
    env.run(until=4 * S)
    assert events == [] and m.up and m.memory.peak_rss > 2**30


def test_restart_refills_watch_caches_from_etcd_before_ready():
    env, m, events = build(restart_s=5.0)
    m.set_watch_cache([CachedResource("pods", 10_000, 100e6), CachedResource("configmaps", 1000, 10e6)])
    full_live = m.snapshot().live_bytes
    m.kill("test")
    assert m.process.last_down_reason == "test" and m.process.oom_kills == 0
    env.run(until=5 * S + 1)
    # Restarted: serving, caches empty, refilling through etcd.
    assert [e[0] for e in events] == ["oom", "restart"]
    assert events[1][1] == 5 * S and events[1][2] is ProcessState.REFILLING and events[1][3] is False
    assert m.up and not m.watch_cache_ready("pods")
    snap = m.snapshot()
    assert snap.etcd_reads_in_flight == 2
    assert snap.live_bytes < full_live
    env.run(until=30 * S)
    assert [e[0] for e in events] == ["oom", "restart", "ready"]
    t_ready = events[2][1]
    # Listing 100 MB from etcd takes time (one range on one etcd server) and CPU.
    p = m.params
    assert t_ready - 5 * S > 100e6 / p.etcd.bytes_per_s * p.etcd.concurrency * S * 0.99
    assert events[2][2] is ProcessState.UP and events[2][3] is True
    assert m.snapshot().live_bytes == pytest.approx(full_live)
    assert m.snapshot().request_cpu_seconds_total > 0.5  # decoding 110 MB


def test_restart_without_caches_is_ready_at_once():
    env, m, events = build(restart_s=1.0)
    m.kill()
    env.run(until=2 * S)
    assert [e[0] for e in events] == ["oom", "restart", "ready"]
    assert m.process.last_down_reason == "killed"
    assert events[1][1] == events[2][1] == S
    assert m.state is ProcessState.UP


def test_oom_while_refilling_goes_down_again():
    # A limit the refilled caches alone exceed: crash loop.
    env = Environment()
    p = ServerParams.model_validate({"process": {"memory_limit_bytes": "700M", "restart_s": 1}})
    m = ResourceModel(env.clock, p)
    m.set_watch_cache([CachedResource("pods", 10_000, 100e6)])
    m.kill()
    env.run(until=20 * S)
    assert m.process.oom_kills >= 2
    assert m.process.restarts >= 2
    assert not m.watch_cache_ready("pods")
