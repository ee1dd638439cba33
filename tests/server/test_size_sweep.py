"""Costs stay physical from 1 KB to 1 GB on every serving path.

Every figure of a request's plan (CPU, etcd work, live and allocated bytes) is a sum of terms per
request, per object and per byte, so it must grow with the response's size and object count and
never faster than linearly in bytes; its per-byte rates must lie between what a core can do at
all (copying memory: ~10 GB/s) and the slowest published encoder (JSON into typed structs:
~20 MB/s, kubernetes#138841). A single LIST of 1 GB must complete in the time those rates say,
and a range beyond gRPC's 2 GiB message limit must fail, not hang.
"""

from __future__ import annotations

import numpy as np
import pytest

from simapf.engine.environment import Environment
from simapf.server import ResourceModel, ServerParams
from simapf.server.costs import ETCD_MAX_RESPONSE_BYTES, ETCD_RESPONSE_TOO_LARGE, compute_plan, fresh_buffer_bytes
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath

OBJECT_BYTES = (1e3, 1e5, 1.5e6)  # small objects, large ones, etcd's largest
PATHS = [  # (path, streaming-encoded (KEP-5116), etcd range read as a stream (EtcdRangeStream))
    (ServingPath.ETCD, False, False),
    (ServingPath.ETCD, True, True),
    (ServingPath.CACHE, False, False),
    (ServingPath.CACHE, True, False),
    (ServingPath.CACHE_SNAPSHOT, True, False),
    (ServingPath.WATCHLIST_STREAM, True, False),
]
FIELDS = ("cpu_core_s", "decode_core_s", "etcd_work", "wait_live_bytes", "live_bytes", "alloc_bytes")
FASTEST_BYTES_PER_CORE_S = 10e9  # a memcpy
SLOWEST_BYTES_PER_CORE_S = 5e6  # well below JSON decoding's ~20 MB/s


def _sizes(object_bytes: float) -> np.ndarray:
    """Responses of whole objects, from one object up to about 1 GB."""
    counts = np.unique(np.round(np.logspace(0, np.log10(1e9 / object_bytes), 25)))
    return counts * object_bytes


def _plans(path: ServingPath, streaming: bool, ranged: bool, object_bytes: float, encoding=Encoding.JSON, gzip=False):
    p = ServerParams(client={"accept_gzip": gzip})
    return [
        compute_plan(p, RequestCost(path, ResponseShape(float(size), int(size / object_bytes), encoding), streaming,
                                    ranged))  # fmt: skip
        for size in _sizes(object_bytes)
    ]


@pytest.mark.parametrize("gzip", [False, True])
@pytest.mark.parametrize("encoding", [Encoding.JSON, Encoding.PROTOBUF])
@pytest.mark.parametrize("object_bytes", OBJECT_BYTES)
@pytest.mark.parametrize("path,streaming,ranged", PATHS)
def test_every_cost_grows_with_size_and_never_faster_than_linearly(path, streaming, ranged, object_bytes, encoding, gzip):
    plans = _plans(path, streaming, ranged, object_bytes, encoding, gzip)
    sizes = _sizes(object_bytes)
    for field in FIELDS:
        y = np.array([getattr(plan, field) for plan in plans])
        assert np.all(np.diff(y) >= -1e-12 * np.abs(y[1:])), (field, y)
        # Never faster than linear: the cost per byte never rises with the size, except in the
        # one step where gzip starts (the apiserver compresses responses of 128 KiB and more).
        per_byte = y / sizes
        threshold = ServerParams().request_memory.compress_threshold_bytes
        for part in (sizes < threshold, sizes >= threshold):
            q = per_byte[part]
            assert np.all(q[1:] <= q[:-1] * (1 + 1e-9) + 1e-18), (field, per_byte)


@pytest.mark.parametrize("object_bytes", OBJECT_BYTES)
@pytest.mark.parametrize("path,streaming,ranged", PATHS)
def test_per_byte_rates_are_physical(path, streaming, ranged, object_bytes):
    big = _plans(path, streaming, ranged, object_bytes)[-1]  # about 1 GB
    gb = _sizes(object_bytes)[-1]
    n = gb / object_bytes
    cpu = big.cpu_core_s + big.decode_core_s
    assert 1 / FASTEST_BYTES_PER_CORE_S <= cpu / gb <= 1 / SLOWEST_BYTES_PER_CORE_S
    if ranged:
        # Decoded as it arrives, the range's bytes freed: the decoded list and its encoding,
        # and while it arrives a few chunks besides the share decoded so far.
        decoded = ServerParams().request_memory.etcd_decoded_multiplier * gb
        assert decoded <= big.live_bytes <= 10 * gb
        assert big.wait_live_bytes <= big.live_bytes + 3 * max(1.5 * 2**20, object_bytes)
        assert 1 / FASTEST_BYTES_PER_CORE_S <= big.etcd_work / gb <= 1 / SLOWEST_BYTES_PER_CORE_S
    elif path is ServingPath.ETCD:
        assert 1 / FASTEST_BYTES_PER_CORE_S <= big.etcd_work / gb <= 1 / SLOWEST_BYTES_PER_CORE_S
        # Holds the decoded list and its encoding: a few times the bytes, not orders more.
        assert gb <= big.live_bytes <= 10 * gb
    elif streaming:
        # One item at a time, plus the cache's shallow struct copy per object (a struct's
        # headers, not its strings and maps): bounded by the count, not the bytes.
        assert big.live_bytes <= n * 2048 + 4 * 1.5e6
        if object_bytes >= 1e5:
            assert big.live_bytes <= 0.1 * gb
    else:
        # The whole response's buffer: the plan's own (Protobuf, CBOR) or encoding/json's, from its pool.
        assert 0.5 * gb <= big.live_bytes + fresh_buffer_bytes(big) <= 10 * gb
    assert big.alloc_bytes >= big.live_bytes


def test_object_count_raises_cost_at_fixed_bytes():
    p = ServerParams()
    for path, streaming, ranged in PATHS:
        few = compute_plan(p, RequestCost(path, ResponseShape(1e8, 100), streaming, ranged))
        many = compute_plan(p, RequestCost(path, ResponseShape(1e8, 100_000), streaming, ranged))
        assert many.cpu_core_s + many.decode_core_s > few.cpu_core_s + few.decode_core_s, path
        assert many.etcd_work >= few.etcd_work, path


def _one_list(response_bytes: float, objects: int, path=ServingPath.ETCD, streaming=False, **memory):
    env = Environment()
    p = ServerParams(request_cpu={"work_cv": 0.0}, request_memory=memory)
    model = ResourceModel(env.clock, p)
    cost = RequestCost(path, ResponseShape(response_bytes, objects), streaming)
    plan = model.plan(cost)
    done: list[int] = []
    assert model.start(cost, done.append)
    env.run(until=int(600e9))
    return plan, done, model


def test_a_1gb_list_from_etcd_completes_in_the_time_its_rates_give():
    plan, done, model = _one_list(1e9, 100_000)
    assert done, "a 1 GB LIST never completed"
    # etcd's range, then the CPU work on one core, plus GC assists: not a collapse.
    floor = plan.etcd_work + plan.cpu_core_s
    assert floor * 1e9 <= done[0] <= 2.0 * floor * 1e9
    assert done[0] < 60e9
    assert model.memory.peak_rss > plan.live_bytes


def test_an_etcd_range_past_grpcs_limit_fails_once_served():
    p = ServerParams()
    too_big = compute_plan(p, RequestCost(ServingPath.ETCD, ResponseShape(3e9, 1000)))
    just_under = compute_plan(p, RequestCost(ServingPath.ETCD, ResponseShape(0.99 * ETCD_MAX_RESPONSE_BYTES, 1000)))
    assert too_big.error == ETCD_RESPONSE_TOO_LARGE and just_under.error == ""
    assert too_big.etcd_work > just_under.etcd_work  # etcd still did the work
    assert too_big.live_bytes == 0.0  # nothing decoded or encoded
    # The watch cache serves the same LIST whole: no gRPC message in the way.
    assert compute_plan(p, RequestCost(ServingPath.CACHE, ResponseShape(3e9, 1000), True)).error == ""


def test_a_big_request_allocates_its_garbage_as_it_works_and_the_gc_keeps_up():
    # A streamed 1 GB LIST encoded by a JSON encoder that copies every item (before 1.37)
    # allocates ~1 GB over its seconds of encoding. Allocated at once, all of it would be on the
    # heap together; allocated as it works, GC cycles collect it meanwhile.
    plan, done, model = _one_list(1e9, 10_000, ServingPath.CACHE, streaming=True, streaming_encoder_reuses_buffer=False)
    assert done and plan.alloc_steps > 1
    garbage = plan.alloc_bytes - plan.live_bytes
    base = model.params.process.live_heap_bytes
    assert garbage > 0.9e9
    assert model.memory.peak_heap < base + plan.live_bytes + 0.5 * garbage
    assert model.gc.cycles >= 3
