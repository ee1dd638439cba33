"""The Go runtime's goals in the GC model: the process's own allocation keeps the heap cycling,
the scavenger follows its goal at its pace, the CPU limiter counts what mgclimit.go counts, and
idle mark work is reported apart (runtime/metrics /cpu/classes/gc)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import simapf
from simapf.engine.environment import Environment
from simapf.outputs.export import openmetrics_text
from simapf.server import ResourceModel, ServerParams, ServingPath

from srvhelp import S, cost
from simapf.outputs.rundir import write_run

MB = 1e6


def params(own_alloc: float, **sections: dict[str, Any]) -> ServerParams:
    """16 cores, a 100 MB live heap, no roots, no metadata, 50 MB non-heap, marking 1 GB per
    core-second, no idle CPU, no memory per request; `own_alloc` bytes a second of the process's
    own; `sections` merged over those."""
    data: dict[str, dict[str, Any]] = {
        "cpu": {"cores": 16, "usable_cores": 16},
        "process": {"live_heap_bytes": 100 * MB, "nonheap_bytes": 50 * MB, "heap_metadata_fraction": 0,
                    "baseline_cores": 0, "own_alloc_bytes_per_s": own_alloc},
        "request_memory": {"request_held_bytes": 0},
        "gc": {"roots_bytes": 0, "mark_rate_bytes_per_core_s": 1e9},
    }  # fmt: skip
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return ServerParams.model_validate(data)


# ---------------------------------------------------------------- the process's own allocation


def _idle_cycles_per_s(own_alloc: float, gomemlimit: float | None, secs: float = 60) -> tuple[float, ResourceModel]:
    env = Environment()
    m = ResourceModel(env.clock, params(own_alloc, gc={"gomemlimit_bytes": gomemlimit}))
    env.run(until=int(secs * S))
    return m.gc.cycles / secs, m


def test_gc_cycles_near_a_tight_gomemlimit_rise_with_the_process_own_allocation():
    # No request at all. GOMEMLIMIT 170 MB over 50 MB of non-heap memory leaves the heap ~16 MB
    # above its 100 MB live heap; the GC runs whenever the process's own garbage fills that.
    limit = 170 * MB
    rates = (0.0, 1 * MB, 4 * MB, 16 * MB)
    runs = [_idle_cycles_per_s(rate, limit) for rate in rates]
    per_s = [r for r, _m in runs]
    assert per_s[0] == 0.0  # nothing allocates: nothing collects (the forced cycle is 2 min away)
    assert per_s == sorted(per_s) and per_s[-1] > 0.5
    for rate, (cycles, m) in zip(rates[1:], runs[1:]):
        # Each cycle lets the heap grow from what it marked to the trigger (the own garbage
        # made during a mark of a few ms is a rounding error here).
        runway = m.gc.trigger - m.gc.heap_marked
        assert abs(cycles - rate / runway) * 60 <= 1.0, rate  # within one cycle in the minute
        assert m.gc.goal < 1.2 * m.gc.heap_marked  # the limit, not GOGC (2x), sets it
    # Without the limit the same allocation runs through GOGC's 100 MB of runway: far fewer.
    roomy, _m = _idle_cycles_per_s(16 * MB, None)
    assert roomy < per_s[-1] / 4


# ---------------------------------------------------------------- the scavenger's goal


def _gc_percent_goal(m: ResourceModel) -> float:
    """mgcscavenge.go gcPaceScavenger's goal for the retained heap, from the model's reported
    heap figures: (retainExtraPercent+100)/100 · (heapGoal/lastHeapGoal) · lastHeapInUse."""
    gc = m.gc
    if gc.last_goal <= 0.0:
        return float("inf")
    return (10 + 100) / 100 * (gc.goal / gc.last_goal) * gc.last_heap_inuse


def test_after_a_burst_rss_follows_the_scavengers_goal_at_its_pace():
    # 300 MB held for 2 s (the heap, its goal and its retained pages grow with it), then let go.
    # The process's own allocation (20 MB/s) goes on cycling the heap; a slow scavenger (20 MB/s)
    # so that its pace shows between samples.
    rate, own = 20 * MB, 20 * MB
    env = Environment()
    m = ResourceModel(env.clock, params(own, gc={"scavenge_rate_bytes_per_s": rate}))
    mem = m.memory
    m.hold(300 * MB)
    env.run(until=2 * S)
    m.release(300 * MB)
    step_s = 0.5
    samples = []
    t = 2 * S
    while t < 120 * S:
        t += int(step_s * S)
        env.run(until=t)
        # What the runtime counts as retained (heapInUse + heapFree), and its goal now.
        samples.append((mem.heap_live + mem.heap_free_now(), mem.heap_live, _gc_percent_goal(m), m.gc.cycles))
    assert samples[-1][3] >= samples[0][3] + 10  # the heap kept cycling with no request
    falling = 0
    for (r0, _h0, goal0, c0), (r1, h1, goal1, c1) in zip(samples, samples[1:]):
        tol = 1.0  # bytes
        # Never below the goal in force by scavenging (the one before a cycle that ends within
        # the step, the new one after it; pages in use stay, whatever the goal).
        assert r1 >= min(r0, max(min(goal0, goal1), h1)) - tol
        if c1 == c0 and r0 > goal0 + rate * step_s and r1 > h1:
            # Above its goal, with free pages left: released at exactly its pace.
            assert r0 - r1 == pytest.approx(rate * step_s, rel=1e-6)
            falling += 1
    assert falling >= 10
    # It converges: retained sits at the runtime's goal (or the heap itself, when above it), and
    # RSS is that plus non-heap memory.
    retained, heap, goal, _c = samples[-1]
    assert retained == pytest.approx(max(goal, heap), abs=rate * step_s)
    assert m.snapshot().rss_bytes == pytest.approx(retained + 50 * MB)
    # That goal follows the cycling heap: 10 % over the heap in use when the last cycle ended,
    # which the own allocation took close to the trigger, far above the 100 MB live heap.
    assert goal == pytest.approx(1.1 * m.gc.last_heap_inuse * m.gc.goal / m.gc.last_goal)
    assert m.gc.last_heap_inuse > 0.9 * m.gc.trigger and retained > 1.5 * 100 * MB


# ---------------------------------------------------------------- the CPU limiter


def _limited_run(cap: float) -> tuple[ResourceModel, list[tuple[float, float, float]]]:
    """4 cores, GOMEMLIMIT 170 MB over a 100 MB live heap, 8 clients of back-to-back 1 MB LISTs
    for 15 s: the GC runs back to back and wants more than half the CPU. Returns the model and
    the limiter's counters (GC, mutator, overflow P-seconds) every 50 ms."""
    env = Environment()
    p = params(4 * MB, cpu={"cores": 4, "usable_cores": 4},
               gc={"gomemlimit_bytes": 170 * MB, "limiter_cap_fraction": cap, "mark_rate_bytes_per_core_s": 2e8})  # fmt: skip
    m = ResourceModel(env.clock, p)
    c = cost(ServingPath.CACHE, 1_000_000, 1000)

    def again(_t: int) -> None:
        m.start(c, again)

    for _ in range(8):
        m.start(c, again)
    counted = []
    for k in range(1, 301):
        env.run(until=k * S // 20)
        counted.append((m.gc.limiter_gc_s, m.gc.limiter_mutator_s, m.gc.limiter_overflow_s))
    return m, counted


def test_the_gc_cpu_the_limiter_counts_stays_under_its_cap_and_the_heap_overshoots_instead():
    m, counted = _limited_run(0.5)
    free, free_counted = _limited_run(0.99)  # the limiter as good as off
    capacity = 4 * 1.0  # P x 1 s
    # Over any window the GC time it counts exceeds the mutator time by at most its bucket,
    # that is, at most half of the non-idle P-time, give or take one bucket: the workers alone
    # never overfill it here, only assists would, and those it refuses.
    assert counted[-1][2] < 1e-6
    for i, (gc0, mut0, _o0) in enumerate(counted):
        for gc1, mut1, _o1 in counted[i + 1:]:
            assert (gc1 - gc0) - (mut1 - mut0) <= capacity + 1e-6
    assert m.gc.limiter_events > 0 and free.gc.limiter_events == 0
    gc, mut, _ = counted[-1]
    assert gc / (gc + mut) == pytest.approx(0.5, abs=0.05)
    gc_free, mut_free, _ = free_counted[-1]
    assert gc_free - mut_free > 3 * capacity  # what the GC wanted: well over its share
    # The price: the heap runs further past GOMEMLIMIT, and the requests get the CPU.
    limit = 170 * MB
    assert m.memory.peak_heap + 50 * MB > limit
    assert m.memory.peak_heap > free.memory.peak_heap
    assert m.completed > free.completed


# ---------------------------------------------------------------- idle mark work, apart


def test_idle_mark_work_is_a_class_of_its_own_that_the_limiter_does_not_count():
    # One cycle on 16 idle Ps: 4 dedicated workers and 12 idle ones mark 100 MB.
    env = Environment()
    m = ResourceModel(env.clock, params(0.0, gc={"trigger_fraction": 0.5, "fixed_cost_core_s": 0}))
    m.memory.allocate(50 * MB)
    assert m.gc.marking
    env.run(until=S)
    dur = m.gc.last_mark_ns / S
    snap = m.snapshot()
    assert snap.gc_mark_dedicated_seconds_total == pytest.approx(4 * dur, rel=1e-6)
    assert snap.gc_mark_idle_seconds_total == pytest.approx(12 * dur, rel=1e-6)
    assert snap.gc_mark_assist_seconds_total == 0.0
    assert snap.gc_cpu_seconds_total == pytest.approx(16 * dur, rel=1e-6)  # /cpu/classes/gc/total
    # The limiter counts the dedicated workers' 25 % as GC time and the idle workers as idle:
    # no mutator time at all.
    assert m.gc.limiter_gc_s == pytest.approx(4 * dur, rel=1e-6)
    assert m.gc.limiter_mutator_s == pytest.approx(0.0, abs=1e-9)
    # The CPU the process used is the mark work, 100 MB at 1 GB per core-second.
    assert snap.cpu_seconds_total == pytest.approx(0.1, rel=1e-6)


def _light_load_scenario() -> dict:
    return {
        "name": "light", "run": {"duration_s": 30, "seed": 1, "scrape_interval_s": 1},
        "apiserver": {"cores": 12, "gomemlimit_bytes": "360Mi"},
        "resources": [{"name": "configmaps", "count": 2000, "object_size": {"mean_bytes": "20Ki"}}],
        "clients": [{"name": "getters", "kind": "open_loop", "identity": {"user": "alice"}, "rate_per_s": 100,
                     "request": {"verb": "get", "resource": "configmaps"}}],
    }  # fmt: skip


def test_the_summary_and_openmetrics_carry_the_gc_cpu_classes_apart(tmp_path):
    result = simapf.run(simapf.load_scenario(_light_load_scenario()))
    c = result.summary["cpu"]
    classes = c["gc_dedicated_mean_cores"] + c["gc_assist_mean_cores"] + c["gc_idle_mark_mean_cores"]
    assert c["gc_mean_cores"] == pytest.approx(classes, rel=1e-9)
    # On 12 mostly idle Ps the idle workers do most of the marking; gctrace's percentage and
    # GCCPUFraction leave them out.
    assert c["gc_idle_mark_mean_cores"] > c["gc_dedicated_mean_cores"] > 0.0
    assert c["gc_cpu_fraction"] == pytest.approx((c["gc_dedicated_mean_cores"] + c["gc_assist_mean_cores"]) / 12)
    assert c["gc_compulsory_peak_cores"] <= c["gc_peak_cores"] and c["gc_cycles"] >= 3
    out = tmp_path / "run"
    write_run(result, out)
    gc_lines = [line for line in openmetrics_text(out).splitlines() if "go_cpu_classes_gc_" in line]
    families = {f.name: f for f in text_string_to_metric_families("\n".join(gc_lines + ["# EOF", ""]))}
    last = {name: max(s.value for s in families[name].samples)
            for name in ("go_cpu_classes_gc_total_cpu_seconds", "go_cpu_classes_gc_mark_dedicated_cpu_seconds",
                         "go_cpu_classes_gc_mark_assist_cpu_seconds", "go_cpu_classes_gc_mark_idle_cpu_seconds")}  # fmt: skip
    assert families["go_cpu_classes_gc_mark_idle_cpu_seconds"].type == "counter"
    assert last["go_cpu_classes_gc_total_cpu_seconds"] == pytest.approx(
        last["go_cpu_classes_gc_mark_dedicated_cpu_seconds"] + last["go_cpu_classes_gc_mark_assist_cpu_seconds"]
        + last["go_cpu_classes_gc_mark_idle_cpu_seconds"], rel=1e-9)  # fmt: skip
