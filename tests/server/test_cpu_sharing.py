"""Processor sharing of cores among requests and the GC mark phase."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simapf.engine.environment import Environment
from simapf.server.cpu import ProcessorSharing

S = 1_000_000_000


def run_jobs(cores: float, jobs: list[tuple[int, float]], procs: float | None = None) -> tuple[dict[int, int], ProcessorSharing]:
    """jobs: (arrival_ns, work_core_s); returns completion time per job index."""
    env = Environment()
    ps = ProcessorSharing(env.clock, cores=cores, procs=procs)
    done: dict[int, int] = {}

    def arrive(i: int, work: float) -> None:
        ps.add(work, lambda j: done.__setitem__(j, env.now), i)

    for i, (at, work) in enumerate(jobs):
        env.timeout(at).callbacks.append(lambda _e, i=i, w=work: arrive(i, w))
    env.run()
    return done, ps


def test_k_at_most_n_jobs_each_get_a_full_core():
    done, ps = run_jobs(4, [(0, 1.0), (0, 1.0), (0, 1.0), (0, 0.5)])
    assert done == {0: S, 1: S, 2: S, 3: S // 2}
    assert ps.request_core_seconds() == pytest.approx(3.5)


def test_k_above_n_jobs_share_n_cores_equally():
    # 5 jobs of 1 core-s on 2 cores: each runs at 2/5 core and all end at 2.5 s.
    done, ps = run_jobs(2, [(0, 1.0)] * 5)
    assert set(done.values()) == {int(2.5 * S)}
    assert ps.request_core_seconds() == pytest.approx(5.0)


def test_completion_times_follow_processor_sharing_with_staggered_arrivals():
    # 1 core. A (2 core-s) at 0 runs alone until 0.5 s (1.5 left); B (1 core-s) arrives;
    # both at 1/2 core: B ends at 2.5 s, A then has 0.5 left alone: ends at 3.0 s.
    done, _ = run_jobs(1, [(0, 2.0), (S // 2, 1.0)])
    assert done == {1: int(2.5 * S), 0: 3 * S}


def test_unequal_jobs_leave_in_order_of_work():
    # 1 core, 1/2/3 core-s at 0: at 1/3 each the first ends at 3 s; then 1 and 2 left at
    # 1/2 each: 5 s; then 1 left alone: 6 s.
    done, _ = run_jobs(1, [(0, 1.0), (0, 2.0), (0, 3.0)])
    assert done == {0: 3 * S, 1: 5 * S, 2: 6 * S}


def test_gomaxprocs_below_cores_caps_the_process():
    # 4 cores but GOMAXPROCS=2: 4 jobs of 1 core-s share 2 cores -> 2 s.
    done, _ = run_jobs(4, [(0, 1.0)] * 4, procs=2)
    assert set(done.values()) == {2 * S}


def _reference_ps(cores: float, jobs: list[tuple[int, float]]) -> list[float]:
    """Textbook processor sharing, event by event, in float seconds."""
    pending = sorted((a / S, w, i) for i, (a, w) in enumerate(jobs))
    active: dict[int, float] = {}
    t = 0.0
    out = [0.0] * len(jobs)
    while pending or active:
        k = len(active)
        r = min(1.0, cores / k) if k else 0.0
        t_next_arr = pending[0][0] if pending else float("inf")
        t_next_done = t + min(active.values()) / r if active else float("inf")
        t_new = min(t_next_arr, t_next_done)
        for i in active:
            active[i] -= r * (t_new - t)
        t = t_new
        for i in [i for i, rem in active.items() if rem <= 1e-12]:
            out[i] = t
            del active[i]
        while pending and pending[0][0] <= t:
            _a, w, i = pending.pop(0)
            active[i] = w
    return out


@settings(max_examples=60, deadline=None)
@given(
    cores=st.sampled_from([1.0, 2.0, 3.5, 8.0]),
    jobs=st.lists(
        st.tuples(st.integers(0, 3 * S), st.floats(0.001, 2.0, allow_nan=False)), min_size=1, max_size=25
    ),
)
def test_matches_textbook_processor_sharing(cores, jobs):
    done, ps = run_jobs(cores, jobs)
    expected = _reference_ps(cores, jobs)
    for i, t in enumerate(expected):
        # Completions are rounded up to whole nanoseconds; each rounding can delay others by <1 ns.
        assert abs(done[i] - t * S) <= 2 * len(jobs) + 2
    assert ps.request_core_seconds() == pytest.approx(sum(w for _a, w in jobs), abs=2e-9 * len(jobs))


def _gc_scenario(sharing: str, k: int, idle: bool) -> tuple[int, list[int]]:
    """4 cores, GOMAXPROCS 4, w = 1 dedicated mark worker; k requests of 3 core-s and a GC of
    1 core-s, all at 0. Returns (GC end, request ends)."""
    env = Environment()
    ps = ProcessorSharing(env.clock, cores=4, procs=4, gc_threads=1.0, gc_sharing=sharing, gc_idle_workers=idle)
    ends: list[int] = []
    gc_end: list[int] = []
    for _ in range(k):
        ps.add(3.0, lambda _a: ends.append(env.now))
    ps.start_gc(1.0, lambda _a: gc_end.append(env.now))
    env.run()
    return gc_end[0], ends


def test_reserved_mark_worker_takes_a_core_from_requests():
    # 4 requests, but only P - w = 3 Ps for them while marking: each runs at 3/4 core; the GC
    # gets its core and ends at 1 s; the requests have 2.25 core-s left: end at 3.25 s.
    gc_end, ends = _gc_scenario("reserved", 4, idle=False)
    assert gc_end == S
    assert set(ends) == {int(3.25 * S)}


def test_idle_ps_run_mark_workers():
    # One request on 4 Ps: the other 3 mark (1 dedicated + 2 idle) -> 1 core-s takes 1/3 s.
    gc_end, ends = _gc_scenario("reserved", 1, idle=True)
    assert abs(gc_end - S / 3) <= 1
    assert ends == [3 * S]


def test_shared_gc_starves_when_requests_saturate_the_cores():
    # Shared: 7 requests + 1 mark thread on 4 cores: 1/2 core each -> the GC takes 2 s,
    # against 1 s on an idle server.
    busy_end, _ = _gc_scenario("shared", 7, idle=False)
    idle_end, _ = _gc_scenario("shared", 0, idle=False)
    assert idle_end == S
    assert busy_end == 2 * S


def test_gc_work_done_by_assists_ends_the_phase_early():
    env = Environment()
    ps = ProcessorSharing(env.clock, cores=2, procs=2, gc_threads=0.5, gc_idle_workers=False)
    ended: list[int] = []
    ps.start_gc(1.0, lambda _a: ended.append(env.now))
    env.run(until=S)  # 0.5 core-s done by the worker, 0.5 left
    assert ps.gc_remaining() == pytest.approx(0.5)
    ps.gc_done_elsewhere(0.5)
    env.run(until=2 * S)
    assert ended == [S]
    assert ps.gc_core_seconds() == pytest.approx(0.5)


def test_clear_drops_jobs_without_callbacks():
    env = Environment()
    ps = ProcessorSharing(env.clock, cores=1)
    called: list[tuple[int, int]] = []
    ps.add(1.0, lambda _a: called.append((1, env.now)))
    env.run(until=S // 2)
    ps.clear()
    assert ps.jobs == 0
    ps.add(0.25, lambda _a: called.append((2, env.now)))
    env.run()
    assert called == [(2, S // 2 + S // 4)]
