"""What a request costs before it runs, what the idle process costs, and per-resource sizes.

- Every request holds `request_memory.request_held_bytes` from its arrival to its end, queued
  in APF or executing; a process that dies takes that memory with it.
- The idle process burns `process.baseline_cores` while it is up, in process CPU.
- A resource's own decoded/stored ratio sizes its watch cache.
- A selector makes an etcd LIST read everything, even when nothing matches.
"""

from __future__ import annotations

import pytest

import simapf
from simapf.apf.types import RequestAttributes
from simapf.engine.environment import Environment
from simapf.server import ResourceModel, ServerParams
from simapf.server.costs import cache_bytes
from simapf.server.model import CachedResource
from simapf.server.runtime import OK, SimulatedAPIServer

S = 1_000_000_000
USER = RequestAttributes(user="bob", groups=("system:authenticated",), verb="list", resource="configmaps",
                         namespace="default")  # fmt: skip


def test_queued_and_executing_requests_hold_their_memory_until_they_end():
    env = Environment()
    server = SimulatedAPIServer(env.clock, server_concurrency=600)
    held = server.model.params.request_memory.request_held_bytes
    assert held > 0
    done = []
    for _ in range(120):  # more than global-default runs at once: the rest queue
        server.submit(USER, service_ns=S // 2, on_done=done.append)
    queued = server.apf.levels["global-default"].queueset.reqs_waiting
    assert queued > 0
    assert server.model.memory.inflight_live == pytest.approx(120 * held)
    env.run(until=20 * S)
    assert len(done) == 120 and all(r.outcome == OK for r in done)
    assert server.model.memory.inflight_live == pytest.approx(0.0, abs=1e-3)


def test_a_dead_process_takes_the_held_memory_with_it():
    env = Environment()
    server = SimulatedAPIServer(env.clock, server_concurrency=600)
    for _ in range(50):
        server.submit(USER, service_ns=10 * S)
    server.model.kill("test")
    env.run(until=60 * S)  # restarted, nothing in flight: nothing may be released twice
    assert server.model.up
    assert server.model.memory.inflight_live == pytest.approx(0.0, abs=1e-3)


def test_the_idle_process_burns_its_baseline_cpu_while_up():
    env = Environment()
    p = ServerParams(process={"baseline_cores": 0.25, "restart_s": 5})
    m = ResourceModel(env.clock, p)
    env.run(until=10 * S)
    assert m.snapshot().cpu_seconds_total == pytest.approx(2.5)
    m.kill("test")
    env.run(until=20 * S)  # down for 5 s, then up for 5 s
    assert m.snapshot().cpu_seconds_total == pytest.approx(2.5 + 0.25 * 5)
    # The requests share what the idle work leaves.
    assert m.cpu.cores == pytest.approx(p.cpu.effective_cores - 0.25)


def test_a_resource_with_its_own_decoded_ratio_fills_the_watch_cache_by_it():
    p = ServerParams()
    typed = cache_bytes(p, 1000, 1e8)
    custom = cache_bytes(p, 1000, 1e8, 5.2)
    overhead = p.watch_cache.per_object_overhead_bytes * 1000
    assert typed == pytest.approx(p.watch_cache.decoded_size_multiplier * 1e8 + overhead)
    assert custom == pytest.approx(5.2 * 1e8 + overhead)
    env = Environment()
    m = ResourceModel(env.clock, p)
    before = m.memory.base_live
    m.set_watch_cache([CachedResource("widgets.example.com", 1000, 1e8, 5.2)])
    assert m.memory.base_live - before == pytest.approx(custom)


def _etcd_list_scenario(selector: dict) -> dict:
    return {
        "name": "etcd-list", "run": {"duration_s": 20, "seed": 1},
        "apiserver": {"params": {"etcd": {"concurrency": 4}}},
        "resources": [{"name": "configmaps", "count": 300, "object_size": {"mean_bytes": "1M"}, "watch_cache": False}],
        "clients": [{"name": "lister", "kind": "open_loop", "identity": {"user": "alice"}, "rate_per_s": 1,
                     "arrivals": "constant", "request": {"verb": "list", "resource": "configmaps", **selector}}],
    }  # fmt: skip


def test_a_selector_that_matches_nothing_still_reads_and_decodes_everything():
    selector = {"options": {"label_selector": "app=none", "selectivity": 0.0001}}
    full = simapf.run(simapf.load_scenario(_etcd_list_scenario({})))
    none = simapf.run(simapf.load_scenario(_etcd_list_scenario(selector)))
    unary = simapf.run(simapf.load_scenario(_etcd_list_scenario(selector),
                                            {"kubernetes.feature_gates.EtcdRangeStream": False}))  # fmt: skip
    p50 = lambda r: r.latency.set_index("verb").loc["list", "p50_s"]  # noqa: E731
    # 300 MB read from etcd and decoded either way: the empty answer saves only the encoding.
    p = ServerParams()
    read_s = 300e6 / p.etcd.bytes_per_s
    decode_s = 300e6 * p.request_cpu.decode_core_s_per_byte
    # Requests' work varies (request_cpu.work_cv), so the median request may do a little less
    # (of these 16, about a fifth less: the bounds leave a quarter).
    # 1.37 decodes a streamed range as etcd sends it; a unary range is read first, then decoded.
    assert 0.75 * max(read_s, decode_s) <= p50(none) < p50(full)
    assert 0.75 * (read_s + decode_s) <= p50(unary)
    assert none.summary["cpu"]["mean_cores"] >= 0.3 * full.summary["cpu"]["mean_cores"]
