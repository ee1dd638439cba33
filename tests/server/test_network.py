"""Responses take time to reach their client (simapf.server.network): a stream's pace, a shared
link, gzip's smaller wire bytes, and what the request keeps meanwhile."""

from __future__ import annotations

import pytest

import simapf
from simapf.engine.environment import Environment
from simapf.errors import ConfigError
from simapf.server import ResourceModel, ServerParams, ServingPath, compute_plan
from simapf.server.costs import DEFAULT_GZIP_RATIO, fresh_buffer_bytes
from simapf.server.network import Link
from simapf.server.paths import RequestCost, ResponseShape

from srvhelp import S

MB = 1e6
# Nothing but the request's own work: no idle CPU, no per-request GC surprises at these sizes.
QUIET = {"process": {"baseline_cores": 0.0}, "request_cpu": {"work_cv": 0.0}}


def _sends(link_bytes_per_s: float | None, n: int, nbytes: float = 100 * MB) -> list[int]:
    env = Environment()
    link = Link(env.clock, stream_bytes_per_s=100 * MB, link_bytes_per_s=link_bytes_per_s)
    done: list[int] = []
    for _ in range(n):
        link.send(nbytes, lambda _a: done.append(env.now))
    assert link.in_flight == n
    env.run()
    return done


def test_a_response_goes_at_its_streams_pace_and_shares_the_link():
    assert _sends(None, 1) == pytest.approx([1.0 * S], abs=2)
    # No shared limit: two streams go side by side, each at its own pace.
    assert _sends(None, 2) == pytest.approx([1.0 * S] * 2, abs=2)
    # A link as wide as one stream: two responses share it and take twice as long.
    assert _sends(100 * MB, 2) == pytest.approx([2.0 * S] * 2, abs=2)
    # Narrower than a stream: one response alone goes at the link's pace.
    assert _sends(50 * MB, 1) == pytest.approx([2.0 * S], abs=2)
    with pytest.raises(ValueError):
        Link(Environment().clock, 0.0)


def _run_one(cost: RequestCost, link: bool, params: dict | None = None):
    env = Environment()
    model = ResourceModel(env.clock, ServerParams(**{**QUIET, **(params or {})}))
    plan = model.plan(cost)
    done: list[int] = []
    lk = Link(env.clock, stream_bytes_per_s=100 * MB) if link else None
    assert model.start(cost, done.append, link=lk)
    return env, model, plan, done


def test_a_whole_response_is_written_after_its_encoding_holding_what_it_keeps():
    cost = RequestCost(ServingPath.CACHE, ResponseShape(100 * MB, 100))
    # Without a link it ends with its CPU work (and the GC's assists).
    env0, _m, _p, encoded = _run_one(cost, link=False)
    env0.run(until=10 * S)
    env, model, plan, done = _run_one(cost, link=True)
    assert plan.wire_bytes == 100 * MB and not plan.streamed
    env.run(until=encoded[0] + S // 2)  # encoded, half written
    assert not done
    # What it keeps while written: its write bytes and its JSON encode buffer (from an empty pool).
    buffer = fresh_buffer_bytes(plan)
    assert buffer >= 100 * MB
    assert model.snapshot().inflight_live_bytes == pytest.approx(plan.write_live_bytes + buffer, rel=1e-9)
    env.run(until=10 * S)
    assert done == pytest.approx([encoded[0] + 1.0 * S], abs=S * 1e-3)  # then 1 s on the wire
    assert model.snapshot().inflight_live_bytes == pytest.approx(0.0, abs=1e-3)
    assert model.memory.pool.live == buffer  # the buffer stays in encoding/json's pool


def test_a_streamed_response_is_written_while_it_is_encoded():
    cost = RequestCost(ServingPath.CACHE, ResponseShape(100 * MB, 100), streaming=True)
    env, _model, plan, done = _run_one(cost, link=True)
    assert plan.streamed
    env.run(until=10 * S)
    # The write (1 s) and the encoding overlap: it ends with the longer of the two, not their sum.
    expected = max(plan.cpu_core_s, 1.0) * S
    assert done == pytest.approx([expected], rel=1e-3)
    assert done[0] < (plan.cpu_core_s + 1.0) * S * 0.99


def test_a_compressed_response_puts_fewer_bytes_on_the_wire():
    params = ServerParams(client={"accept_gzip": True})
    shape = ResponseShape(100 * MB, 100)
    default = compute_plan(params, RequestCost(ServingPath.CACHE, shape))
    assert default.wire_bytes == pytest.approx(100 * MB * DEFAULT_GZIP_RATIO)
    random = compute_plan(params, RequestCost(ServingPath.CACHE, ResponseShape(100 * MB, 100, gzip_ratio=1.0)))
    assert random.wire_bytes == pytest.approx(100 * MB)
    # Below the threshold nothing is compressed, whatever the resource.
    small = compute_plan(params, RequestCost(ServingPath.CACHE, ResponseShape(10_000, 10, gzip_ratio=0.2)))
    assert small.wire_bytes == 10_000


def test_a_response_being_written_dies_with_the_process():
    cost = RequestCost(ServingPath.CACHE, ResponseShape(100 * MB, 100))
    env, model, plan, done = _run_one(cost, link=True)
    env.run(until=int(plan.cpu_core_s * S + 0.5 * S))
    model.kill("test")
    env.run(until=5 * S)
    assert not done


def _lister(network: dict) -> dict:
    return {
        "name": "big-lists", "kind": "closed_loop", "count": 1, "identity": {"user": "alice"},
        "think_time": {"mean_s": 1.0, "distribution": "constant"},
        "processing": {"per_response_s": 0, "per_object_s": 0, "per_byte_s": 0}, "network": network,
        "request": {"verb": "list", "resource": "configmaps", "namespace": "ns-0",
                    "options": {"resource_version": "0", "limit": 0}, "encoding": "json"},
    }  # fmt: skip


def _latency(network: dict) -> tuple[float, float]:
    sc = {
        "name": "net", "run": {"duration_s": 20, "seed": 1},
        "kubernetes": {"feature_gates": {"StreamingCollectionEncodingToJSON": False}},
        "apiserver": {"params": QUIET},
        "resources": [{"name": "configmaps", "count": 100, "object_size": {"mean_bytes": 1e6}}],
        "clients": [_lister(network)],
    }  # fmt: skip
    r = simapf.run(simapf.load_scenario(sc))
    client = r.client_latency.set_index(["client", "verb"]).loc[("big-lists", "list")]
    server = r.latency.set_index(["priority_level", "verb"]).loc[("global-default", "list")]
    return float(client["p50_s"]), float(server["p50_s"])


def test_clients_see_the_write_and_the_round_trip():
    fast_client, fast_server = _latency({"stream_bytes_per_s": None})
    slow_client, slow_server = _latency({"stream_bytes_per_s": "50M"})
    # 100 MB at 50 MB/s: the handler (and its seats) take 2 s more, and so does the client.
    assert slow_server - fast_server == pytest.approx(2.0, rel=0.05)
    far_client, far_server = _latency({"stream_bytes_per_s": None, "rtt_s": 0.2})
    assert far_server == pytest.approx(fast_server, rel=1e-3)
    assert far_client - fast_client == pytest.approx(0.2, rel=0.05)  # there and back
    with pytest.raises(ConfigError, match="stream_bytes_per_s"):
        _latency({"stream_bytes_per_s": 0})
