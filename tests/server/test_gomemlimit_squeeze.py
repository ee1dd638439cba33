"""GOMEMLIMIT close to the live heap (scenarios/gomemlimit-squeeze.yaml): GC CPU rises towards
its limiter's cap, latency with it, throughput collapses, and the OOM kill comes only after the
collapse (Go's GC guide, "Memory limit"; runtime/mgclimit.go)."""

from __future__ import annotations

import numpy as np
import pytest

import simapf

pytestmark = pytest.mark.slow

SCENARIO = "scenarios/gomemlimit-squeeze.yaml"
CORES = 4  # the scenario's, and GOMAXPROCS
OFFERED_PER_S = 2000


def _run(count: int):
    return simapf.run(SCENARIO, {"resources.configmaps.count": count, "run.duration_s": 60})


@pytest.fixture(scope="module")
def runs():
    return {n: _run(n) for n in (8000, 21000, 25000, 27000, 29000)}


def test_gc_cpu_rises_as_the_live_heap_nears_gomemlimit(runs):
    gc = [runs[n].summary["cpu"]["gc_mean_cores"] for n in (8000, 21000, 25000, 27000)]
    assert gc == sorted(gc) and gc[-1] > 5 * gc[0]
    p99 = [runs[n].summary["latency"][0]["p99_s"] for n in (8000, 21000, 25000, 27000)]
    assert p99 == sorted(p99)


def test_gc_cpu_stays_under_the_limiters_cap(runs):
    # The limiter keeps the GC's compulsory CPU (dedicated workers and assists, the runtime's
    # /cpu/classes less its idle mark class) at most half of GOMAXPROCS over time; its bucket
    # (1 s of every P) lets it run over by at most that much within a window.
    cap, bucket_core_s, window_s = 0.5 * CORES, 1.0 * CORES, 10.0
    for n, result in runs.items():
        total = result.metric("go_cpu_classes_gc_total_cpu_seconds_total")
        gc = total - result.metric("go_cpu_classes_gc_mark_idle_cpu_seconds_total").reindex(total.index)
        t, v = gc.index.to_numpy(), gc.to_numpy()
        starts = np.arange(t[0], t[-1] - window_s + 1e-9, window_s)
        used = np.interp(starts + window_s, t, v) - np.interp(starts, t, v)
        assert (used <= cap * window_s + bucket_core_s + 1e-6).all(), (n, used.max() / window_s)
        c = result.summary["cpu"]
        assert c["gc_dedicated_mean_cores"] + c["gc_assist_mean_cores"] <= cap


def test_throughput_collapses_before_the_oom_kill(runs):
    served = {n: runs[n].summary["requests"]["by_outcome"]["ok"] / 60 for n in runs}
    kills = {n: runs[n].summary["process"]["oom_kills"] for n in runs}
    assert served[8000] == pytest.approx(OFFERED_PER_S, rel=0.02) and kills[8000] == 0
    # The collapse: the GC takes the CPU the requests needed, with no OOM yet ...
    assert served[27000] < 0.95 * OFFERED_PER_S and kills[27000] == 0
    # ... and only a larger live heap ends in the OOM killer.
    assert kills[29000] >= 1
