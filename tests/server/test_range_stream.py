"""LISTs from etcd that read their range as a stream (EtcdRangeStream, on in 1.37).

The store decodes each chunk as etcd sends it and frees it once decoded, so the decoding runs
alongside etcd's work, the request never holds the whole range, and the CPU and garbage are a
unary range's: the same work, split and overlapped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import simapf
from simapf.apf.types import ListOptions
from simapf.engine.environment import Environment
from simapf.server import CachedResource, ResourceModel, ServerParams
from simapf.server.costs import STREAM_CHUNKS_HELD, compute_plan, refill_plan
from simapf.server.paths import RequestCost, ResponseShape, ServingPath, is_range_streamed, plan_request

from srvhelp import S

ROOT = Path(__file__).resolve().parents[2]
ON = ServerParams().features
OFF = ServerParams(features={"etcd_range_stream": False}).features


def test_which_lists_stream_their_range():
    etcd = ServingPath.ETCD
    assert is_range_streamed("list", etcd, ListOptions(), ON)
    assert not is_range_streamed("list", etcd, ListOptions(), OFF)
    assert is_range_streamed("list", etcd, ListOptions(limit=500), ON)  # an unfiltered page
    assert is_range_streamed("list", etcd, ListOptions(label_selector="app=x"), ON)  # whole, filtered
    # A filtered page: etcd cannot apply a limit to matches it does not see.
    assert not is_range_streamed("list", etcd, ListOptions(limit=500, label_selector="app=x"), ON)
    assert not is_range_streamed("list", ServingPath.CACHE, ListOptions(), ON)
    assert not is_range_streamed("get", etcd, ListOptions(), ON)
    shape = ResponseShape(1e6, 100)
    cost = plan_request("list", ListOptions(resource_version_match="", resource_version=""), shape,
                        gates=ServerParams(features={"consistent_list_from_cache": False}).features)  # fmt: skip
    assert cost is not None and cost.path is etcd and cost.range_streamed


@pytest.mark.parametrize("object_bytes", [1e3, 1e5, 1.5e6])
def test_a_streamed_range_is_a_unary_ones_work_split_and_holds_no_whole_range(object_bytes):
    p = ServerParams()
    B, n = 1e8, int(1e8 / object_bytes)
    unary = compute_plan(p, RequestCost(ServingPath.ETCD, ResponseShape(B, n), True, False))
    streamed = compute_plan(p, RequestCost(ServingPath.ETCD, ResponseShape(B, n), True, True))
    # A unary range is only received alongside etcd's work; a streamed one is decoded too.
    assert unary.decode_core_s == pytest.approx(p.request_cpu.etcd_receive_core_s_per_byte * B)
    assert streamed.decode_core_s > 2 * unary.decode_core_s
    assert streamed.cpu_core_s + streamed.decode_core_s == pytest.approx(unary.cpu_core_s + unary.decode_core_s)
    assert streamed.etcd_work == unary.etcd_work
    assert streamed.alloc_bytes == pytest.approx(unary.alloc_bytes)  # every chunk still allocated
    assert streamed.live_bytes == pytest.approx(unary.live_bytes - B)  # the range's bytes freed
    m = p.request_memory
    decoded = m.etcd_decoded_multiplier * B + m.decoded_bytes_per_object * n
    window = STREAM_CHUNKS_HELD * max(p.etcd.stream_chunk_bytes, object_bytes)
    assert streamed.wait_live_bytes == pytest.approx(p.etcd.wait_live_fraction * decoded + window)


def test_a_small_range_holds_at_most_itself_undecoded():
    p = ServerParams(etcd={"wait_live_fraction": 0.0})
    plan = compute_plan(p, RequestCost(ServingPath.ETCD, ResponseShape(1e5, 10), False, True))
    assert plan.wait_live_bytes == pytest.approx(1e5)


def _one_list(ranged: bool):
    env = Environment()
    model = ResourceModel(env.clock, ServerParams(request_cpu={"work_cv": 0.0}))
    cost = RequestCost(ServingPath.ETCD, ResponseShape(1e8, 100_000), True, ranged)
    plan = model.plan(cost)
    done: list[int] = []
    assert model.start(cost, done.append)
    env.run(until=int(60e9))
    assert done
    return done[0], plan


def test_a_streamed_range_is_decoded_while_etcd_sends_it():
    unary_ns, unary = _one_list(False)
    streamed_ns, streamed = _one_list(True)
    etcd_s, decode_s = streamed.etcd_work, streamed.decode_core_s
    assert 0.3 < etcd_s / decode_s < 3  # comparable, so the overlap shows
    assert streamed_ns >= max(etcd_s, decode_s) * S
    # The unary LIST is received as etcd sends it, and decoded only when the whole range is in.
    receive_s = unary.decode_core_s
    assert 0 < receive_s < etcd_s
    assert unary_ns >= (etcd_s + unary.cpu_core_s) * S
    assert unary_ns - streamed_ns == pytest.approx((min(etcd_s, decode_s) - receive_s) * S, rel=0.15)


def test_a_unary_range_is_received_while_etcd_sends_it():
    """Without the overlap the LIST would take etcd's time, then the receiving, then the rest."""
    unary_ns, unary = _one_list(False)
    overlapped = max(unary.etcd_work, unary.decode_core_s) + unary.cpu_core_s
    assert unary_ns == pytest.approx(overlapped * S, rel=0.02)
    assert unary_ns < (unary.etcd_work + unary.decode_core_s + unary.cpu_core_s) * S - 0.5 * unary.decode_core_s * S


@pytest.mark.parametrize("ranged", [False, True])
def test_a_streamed_watch_cache_fill_is_faster_and_holds_no_whole_range(ranged):
    env = Environment()
    p = ServerParams(features={"etcd_range_stream": ranged}, process={"restart_s": 0})
    model = ResourceModel(env.clock, p)
    ready: list[int] = []
    model.process.on_ready.append(ready.append)
    model.set_watch_cache([CachedResource("pods", 100_000, 1e9)])
    model.kill("test")
    env.run(until=int(120e9))
    plan, _cache = refill_plan(p, 100_000, 1e9)
    assert ready
    insert = p.request_cpu.refill_core_s_per_object * 100_000
    # Alongside etcd: the whole decoding of a streamed range, the receiving of a unary one.
    floor = max(plan.etcd_work, plan.decode_core_s) + (0.0 if ranged else plan.cpu_core_s - insert)
    assert floor * S <= ready[0] <= 1.5 * floor * S
    unary, _ = refill_plan(ServerParams(features={"etcd_range_stream": False}), 100_000, 1e9)
    if ranged:
        assert plan.live_bytes < unary.live_bytes - 0.9e9


@pytest.mark.parametrize("version, gate, streams", [
    ("1.37", None, True), ("1.38.2", None, True), ("1.36", None, False), ("v1.33.4", None, False),
    ("1.36", True, True), ("1.37", False, False),
])  # fmt: skip
def test_the_gate_follows_the_kubernetes_version_unless_set(version, gate, streams):
    overrides = {"kubernetes.version": version}
    if gate is not None:
        overrides["kubernetes.feature_gates.EtcdRangeStream"] = gate
    loaded = simapf.load_scenario(ROOT / "scenarios" / "relist-storm.yaml", overrides)
    assert loaded.params.features.EtcdRangeStream is streams
