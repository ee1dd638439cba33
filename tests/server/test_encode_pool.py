"""encoding/json's pool of encode buffers (simapf.server.pool) and what it keeps in the heap."""

from __future__ import annotations

from pathlib import Path

import pytest

from simapf.engine.environment import Environment
from simapf.server import Encoding, ResourceModel, ServerParams, ServingPath
from simapf.server.pool import (ALLOCATOR, DOUBLING, GET, PUT, EncodeBufferPool, grow, grown_capacity, growth_alloc_bytes,
                                resident_after_growth)

from srvhelp import S, cost

MiB = 2**20


def test_a_buffer_doubles_from_64_bytes_and_never_shrinks():
    assert grown_capacity(0.0, 10) == 64
    assert grown_capacity(0.0, 65) == 128
    assert grown_capacity(0.0, 50 * MiB) == 64 * MiB  # kubernetes#114276's 50 MiB LIST
    assert grown_capacity(64 * MiB, 1000) == 64 * MiB
    assert grown_capacity(3 * MiB, 5 * MiB) == 6 * MiB
    # Each doubling allocates the new array: 64 + 128 + ... + c = 2c - 64 from nothing.
    assert growth_alloc_bytes(0.0, 1024) == 64 + 128 + 256 + 512 + 1024
    assert growth_alloc_bytes(256.0, 1024) == 512 + 1024
    assert growth_alloc_bytes(1024.0, 1024) == 0.0


def test_get_reaches_its_own_slot_the_shared_chains_and_the_victims_but_no_other_slot():
    pool = EncodeBufferPool(procs=4, seed=1)
    pool.put(0, 100.0)
    assert pool.get(1) == 0.0  # P0's private slot is out of P1's reach
    assert pool.get(0) == 100.0 and pool.live == 0.0
    pool.put(0, 100.0)
    pool.put(0, 200.0)  # the slot is taken: onto P0's shared chain
    assert pool.live == 300.0
    assert pool.get(2) == 200.0  # stolen from P0's chain
    pool.put(1, 300.0)
    pool.put(1, 400.0)
    pool.put(1, 500.0)
    assert pool.get(1) == 300.0  # its own slot first
    assert pool.get(1) == 500.0  # then the head of its chain: the last put
    assert pool.get(3) == 400.0  # another P steals from the tail
    assert pool.live == 100.0


def test_a_gc_cycle_makes_the_pool_its_victim_and_the_next_one_frees_it():
    pool = EncodeBufferPool(procs=2, seed=1)
    pool.put(0, 100.0)
    pool.put(0, 50.0)
    assert pool.cleanup() == 0.0  # nothing was a victim yet
    assert pool.live == 150.0
    assert pool.get(0) == 100.0  # the victim's slot of this P
    pool.put(1, 100.0)  # given back: in the pool again
    assert pool.cleanup() == 50.0  # the untouched one is dropped
    assert pool.live == 100.0
    assert pool.get(1) == 100.0
    assert pool.live == 0.0


def test_use_grows_the_buffer_of_the_p_it_runs_on_and_keeps_it_there():
    pool = EncodeBufferPool(procs=1, seed=1)
    assert pool.use(0, 1000) == growth_alloc_bytes(0.0, 1024)
    assert pool.use(0, 500) == 0.0  # the same buffer, big enough
    assert pool.use(0, 3000) == growth_alloc_bytes(1024.0, 4096)
    assert pool.live == 4096.0


def _splitmix_p(seed: int, key: int, step: int, procs: int) -> int:
    """The P of request `key` at `step`, one request at a time in Python ints."""
    mask = (1 << 64) - 1
    z = (seed + (key * 2 + step + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return (z ^ (z >> 31)) % procs


def test_the_ps_mixed_in_blocks_are_splitmix64s_one_by_one():
    for seed in (0, 1, 2**63 - 5):
        pool = EncodeBufferPool(16, seed)
        keys = [*range(0, 9000), 123_456_789, 4095, 4096]  # across blocks, and one far away
        assert [pool.proc(k, s) for k in keys for s in (GET, PUT)] == \
            [_splitmix_p(seed, k, s, 16) for k in keys for s in (GET, PUT)]  # fmt: skip


def test_a_requests_ps_are_uniform_and_its_own():
    a, b = EncodeBufferPool(8, seed=3), EncodeBufferPool(8, seed=3)
    draws = [a.proc(key, step) for key in range(2000) for step in (GET, PUT)]
    # The same request, asked in another order, runs on the same Ps.
    assert [b.proc(key, PUT) for key in reversed(range(2000))] == draws[1::2][::-1]
    counts = [draws.count(p) for p in range(8)]
    assert min(counts) > 400 and max(counts) < 600  # 500 each expected
    # Its Get and its Put are independent draws, and another seed deals other Ps.
    assert sum(g == p for g, p in zip(draws[::2], draws[1::2])) < 2000 / 8 * 1.3
    assert [EncodeBufferPool(8, seed=4).proc(key, GET) for key in range(2000)] != draws[::2]


def test_a_buffer_grown_with_make_keeps_its_unwritten_tail_on_fresh_pages_untouched():
    # Go 1.18 and older: make zeroes reused pages, not pages fresh from the OS.
    assert resident_after_growth(512 * MiB, 300 * MiB, free_bytes=0.0) == 300 * MiB
    assert resident_after_growth(512 * MiB, 300 * MiB, free_bytes=1024 * MiB) == 512 * MiB
    assert resident_after_growth(512 * MiB, 300 * MiB, free_bytes=412 * MiB) == 412 * MiB  # 100 MiB fresh
    pool = EncodeBufferPool(procs=2, seed=1, by_written=True)
    taken, grown, written, alloc = pool.take(0, 300 * MiB, free_bytes=0.0)
    assert (taken, grown, written) == (0.0, 512 * MiB, 300 * MiB)
    assert alloc == growth_alloc_bytes(0.0, 512 * MiB)  # the heap counts every array whole
    pool.put(0, written)
    assert pool.live == 512 * MiB and pool.untouched == 212 * MiB
    # Written again up to 400 MiB: the same array, 100 MiB more of it touched.
    assert pool.take(0, 400 * MiB, free_bytes=0.0) == (512 * MiB, 512 * MiB, 400 * MiB, 0.0)
    assert pool.live == 0.0 and pool.untouched == 0.0
    pool.put(0, 400 * MiB)
    # Outgrown, its array is garbage with its untouched tail.
    assert pool.take(0, 600 * MiB, free_bytes=0.0)[1:3] == (1024 * MiB, 600 * MiB)
    assert pool.freed_untouched == 112 * MiB
    pool.put(1, 600 * MiB)
    assert pool.cleanup() == 0.0 and pool.cleanup() == 1024 * MiB  # dropped by the second cycle
    assert pool.untouched == 0.0 and pool.freed_untouched == (112 + 424) * MiB


def _whole_json_lists(lists: int, zeroes: bool) -> ResourceModel:
    """`lists` whole JSON LISTs of 300 MB from the cache at once in a fresh process."""
    env = Environment()
    params = ServerParams.model_validate({"request_memory": {"buffer_growth_zeroes": zeroes}})
    model = ResourceModel(env.clock, params)
    c = cost(ServingPath.CACHE, 300e6, 300, encoding=Encoding.JSON)
    for _ in range(lists):
        model.start(c, lambda _t: None)
    env.run(until=60 * S)
    return model


def test_before_go_1_19_a_fresh_encode_buffer_is_resident_as_far_as_it_is_written():
    zeroed, made = _whole_json_lists(4, True), _whole_json_lists(4, False)
    tail = grown_capacity(0.0, 300e6) - 300e6  # 512 MiB arrays, 300 MB written into each
    saved = zeroed.memory.peak_rss - made.memory.peak_rss
    assert saved > 0.5 * 4 * tail  # most of the four tails were on fresh pages
    assert saved < 4 * tail * zeroed.memory.meta + 1.0  # never more than the tails
    # The heap and the GC see whole arrays either way; once freed, nothing is left untouched.
    assert made.memory.alloc_total == zeroed.memory.alloc_total
    assert made.memory.untouched == pytest.approx(made.memory.pool.untouched)


def _sequential(encoding: Encoding, lists: int, procs: int = 16,
                allocator_pool: bool = True) -> tuple[ResourceModel, list[float], Environment]:  # fmt: skip
    """`lists` whole LISTs of 50 MB from the cache, one after the other; the RSS after each. The
    model is left as the last one ends (afterwards the process's own allocation would go on
    cycling the heap, and two cycles empty the pools), and its environment."""
    env = Environment()
    params = ServerParams.model_validate({"cpu": {"cores": procs},
                                          "request_memory": {"protobuf_allocator_pool": allocator_pool}})  # fmt: skip
    model = ResourceModel(env.clock, params)
    c = cost(ServingPath.CACHE, 50e6, 50, encoding=encoding)
    rss: list[float] = []
    done = env.event()

    def again(_t: int) -> None:
        rss.append(model.memory.rss_bytes())
        if len(rss) < lists:
            model.start(c, again)
        else:
            done.succeed()

    model.start(c, again)
    env.run(until=env.any_of([done, env.timeout(120 * S)]))
    assert len(rss) == lists
    return model, rss, env


def test_sequential_json_lists_leave_their_buffers_in_the_pool():
    # kubernetes#114276: one LIST at a time, yet each runs on a P with no buffer of its own and
    # grows another, and the buffers raise the heap goal, so GC cycles come rarely enough to keep them.
    model, rss, _env = _sequential(Encoding.JSON, 20)
    pool = model.memory.pool
    assert pool.live >= 4 * grown_capacity(0.0, 50e6)
    assert model.memory.live_bytes >= model.memory.base_live + pool.live
    assert rss[-1] > 2 * rss[0]  # it builds up
    # Protobuf before 1.37 had no such pool: its live heap falls back after each LIST.
    proto, proto_rss, _env = _sequential(Encoding.PROTOBUF, 20, allocator_pool=False)
    assert proto.memory.pool.live == 0.0 and proto.memory.allocators.live == 0.0
    assert proto.memory.live_bytes == pytest.approx(proto.memory.base_live)
    assert proto_rss[-1] < rss[-1]
    # Since 1.37 the allocator pool keeps Protobuf's: each exactly one response's size.
    pooled, pooled_rss, _env = _sequential(Encoding.PROTOBUF, 20)
    kept = pooled.memory.allocators.live
    assert pooled.memory.pool.live == 0.0 and kept >= 4 * 50e6
    assert kept / 50e6 == pytest.approx(round(kept / 50e6))
    assert pooled.memory.live_bytes == pytest.approx(pooled.memory.base_live + kept)
    assert proto_rss[-1] < pooled_rss[-1] < rss[-1]


def test_an_allocator_grows_once_to_twice_its_capacity_plus_the_request():
    assert grow(ALLOCATOR, 0.0, 50e6) == (50e6, 50e6)  # exactly the size, from nothing
    assert grow(ALLOCATOR, 60e6, 50e6) == (60e6, 0.0)  # big enough: reused
    assert grow(ALLOCATOR, 30e6, 50e6) == (110e6, 110e6)  # one new array of 2·30 + 50
    assert grow(DOUBLING, 0.0, 1024) == (1024, growth_alloc_bytes(0.0, 1024))
    pool = EncodeBufferPool(1, seed=1, growth=ALLOCATOR)
    assert pool.use(0, 1000) == 1000 and pool.live == 1000
    assert pool.use(0, 3000) == 5000 and pool.live == 5000


def test_one_p_keeps_one_buffer():
    model, rss, _env = _sequential(Encoding.JSON, 10, procs=1)
    assert model.memory.pool.live == grown_capacity(0.0, 50e6)


def test_a_dead_process_keeps_no_buffers():
    model, _rss, _env = _sequential(Encoding.JSON, 5)
    assert model.memory.pool.live > 0.0
    model.kill()
    assert model.memory.pool.live == 0.0 and model.memory.live_bytes == 0.0


def test_unused_buffers_go_with_the_second_gc_cycle_after_them():
    model, _rss, env = _sequential(Encoding.JSON, 5)
    mem, gc = model.memory, model.gc
    assert mem.pool.live > 0.0
    for _ in range(2):
        gc.start_cycle()
        env.run(until=env.now + 10 * S)
    assert mem.pool.live == pytest.approx(0.0)
    assert mem.live_bytes == pytest.approx(mem.base_live)


@pytest.mark.parametrize("version, zeroes", [("1.23", False), ("1.24", False), ("1.25", True), ("1.37", True)])
def test_the_kubernetes_version_says_how_its_go_grew_encode_buffers(version, zeroes):
    import simapf

    path = Path(__file__).resolve().parents[2] / "scenarios" / "list-experiment.yaml"
    loaded = simapf.load_scenario(path, [f"kubernetes.version={version}"])
    assert loaded.params.request_memory.buffer_growth_zeroes is zeroes
    # A parameter set that says otherwise wins over the version.
    said = simapf.load_scenario(path, [
        f"kubernetes.version={version}", f"apiserver.params.request_memory.buffer_growth_zeroes={not zeroes}"])
    assert said.params.request_memory.buffer_growth_zeroes is (not zeroes)
