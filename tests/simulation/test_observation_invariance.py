"""Observing a run never changes what is simulated (issue 48).

How often the run is scraped (`run.scrape_interval_s`), whether it keeps one record per request
(`run.request_records`) and whether it shows a progress bar change only what is seen: the series,
the `scraped_*` peaks, the per-interval CPU peaks, the steady-state mean RSS (a mean of scrapes)
and the recovery times (read at scrapes). Everything else in summary.json, every counter and the
true peaks, must be the same. The watch caches follow the writes by themselves, one event at a
time, not when the recorder scrapes; the loop's stops keep every event's order.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from simpy.events import NORMAL, URGENT

import simapf
from simapf.engine.environment import Environment
from simapf.simulation.runner import stops
from simapf.server import CachedResource, ResourceModel, ServerParams
from simapf.server.costs import cache_bytes
from simapf.simulation.summary_text import format_summary

ROOT = Path(__file__).resolve().parents[2]
SCRAPES = (1, 2, 5, 15)

# Per summary key, the parts that depend on observation by design.
OBSERVED = {
    "top": ("wall_s", "simapf_version", "source", "provenance", "scenario"),
    "memory": ("scraped_peak_rss_bytes", "scraped_peak_heap_inuse_bytes", "scraped_peak_rss_steady_bytes",
               "scraped_peak_heap_steady_bytes", "mean_rss_steady_bytes"),
    "cpu": ("peak_cores", "gc_peak_cores", "gc_compulsory_peak_cores"),
    "replicas": ("scraped_peak_rss_bytes", "scraped_peak_rss_steady_bytes"),
    "events": ("scraped_peak_rss_bytes_until_next_event", "recovery_s"),
}  # fmt: skip

# Every shipped scenario, shortened to keep the whole within a couple of minutes: durations that
# 2, 5 and 15 divide and durations they do not (then the last scrape interval is short, and the
# steady state, half the run, starts between two scrapes; at 13 s a 15 s scrape is only the
# last), each long enough for its events.
SHIPPED = {
    "crossplane-providers.yaml": {"run.duration_s": 333},
    "gomemlimit-squeeze.yaml": {"run.duration_s": 13},
    "ha-relist-storm.yaml": {"run.duration_s": 450},
    "kubectl-discovery.yaml": {"run.duration_s": 31},
    "list-experiment.yaml": {"run.duration_s": 20},
    "mixed-cluster.yaml": {"run.duration_s": 197},
    "relist-storm.yaml": {"run.duration_s": 300},
    "webhook-policy-engine.yaml": {"run.duration_s": 61.5},
}
# The fast one: writers on every watch-cached resource, a restart (its caches refilled while
# the writes go on), informers, discovery; 43 s, which no scrape interval but 1 divides.
FAST = ("mixed-cluster.yaml", {"run.duration_s": 43, "events.0.at_s": 17.5})


def test_every_shipped_scenario_is_covered():
    assert sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml")) == sorted(SHIPPED)


def unobserved(summary: dict) -> dict:
    """The summary without what depends on observation by design."""
    s = copy.deepcopy(summary)
    for key in OBSERVED["top"]:
        s.pop(key, None)
    for key in OBSERVED["memory"]:
        s["memory"].pop(key)
    for key in OBSERVED["cpu"]:
        s["cpu"].pop(key)
    for part in ("replicas", "events"):
        for row in s[part]:
            for key in OBSERVED[part]:
                row.pop(key)
    return s


def observed_ways(overrides: dict) -> list[tuple[str, dict, bool]]:
    """(name, overrides, progress bar): each scrape interval, and records and a bar on and off."""
    ways = [(f"scrape {s} s", {**overrides, "run.scrape_interval_s": s}, False) for s in SCRAPES]
    ways.append(("records and a progress bar", {**overrides, "run.request_records": True}, True))
    return ways


def assert_observation_changes_nothing(scenario: str, overrides: dict) -> None:
    results = {name: simapf.run(simapf.load_scenario(ROOT / "scenarios" / scenario, o), progress=bar)
               for name, o, bar in observed_ways(overrides)}  # fmt: skip
    (first, base), *others = results.items()
    expected = unobserved(base.summary)
    for name, result in others:
        assert unobserved(result.summary) == expected, f"{scenario}: {name} differs from {first}"
    for name, result in results.items():
        m = result.summary["memory"]
        # A scrape never sees more than the true peak (but for float rounding, far below a byte);
        # the scraped series are its readings.
        assert at_most(m["scraped_peak_rss_bytes"], m["peak_rss_bytes"]), name
        assert m["scraped_peak_heap_inuse_bytes"] <= m["peak_heap_inuse_bytes"], name
        assert at_most(m["scraped_peak_rss_steady_bytes"], m["peak_rss_steady_bytes"]), name
        assert m["peak_rss_steady_bytes"] <= m["peak_rss_bytes"], name
        series = result.series
        assert series[series["metric"] == "process_resident_memory_bytes"]["value"].max() == m["scraped_peak_rss_bytes"]
    # The requests were recorded when asked for, and the run with records is the same run.
    with_records = results["records and a progress bar"]
    assert with_records.requests is not None and len(with_records.requests) == with_records.summary["requests"]["total"]


def at_most(scraped: float, true: float) -> bool:
    return scraped <= true + 1e-12 * abs(true)


def test_observing_a_run_changes_nothing_fast():
    assert_observation_changes_nothing(*FAST)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(SHIPPED))
def test_observing_a_shipped_scenario_changes_nothing(scenario):
    assert_observation_changes_nothing(scenario, SHIPPED[scenario])


def test_the_true_peak_sees_what_happens_between_scrapes():
    """A short LIST storm that rises and falls within a 10 s scrape interval (the restart event
    at 17.5 s takes the process down after its peak, before the scrape at 20 s): the scraped
    peak misses it, the true one does not, and the text says which is which."""
    overrides = {**FAST[1], "run.scrape_interval_s": 10}
    s = simapf.run(simapf.load_scenario(ROOT / "scenarios" / FAST[0], overrides)).summary
    m = s["memory"]
    assert m["scraped_peak_rss_bytes"] < m["peak_rss_bytes"]
    text = format_summary(s)
    assert f"peak RSS {m['peak_rss_bytes'] / 1e6:,.0f} MB" in text
    scraped = f"{m['scraped_peak_rss_bytes'] / 1e6:,.0f} MB"
    assert f"true peaks; scraped every 10 s, as Prometheus would see them: peak RSS {scraped}" in text


# ---------------------------------------------------------------------- the loop's stops


def test_stops_are_every_scrape_and_every_mark_in_order():
    s = 1_000_000_000
    got = list(stops(5 * s, 17 * s, [3 * s, 10 * s, 10 * s, 0, 17 * s, 40 * s]))
    assert got == [(3 * s, True, False), (5 * s, False, True), (10 * s, True, True), (15 * s, False, True),
                   (17 * s, False, True)]  # fmt: skip
    assert list(stops(20 * s, 7 * s, [])) == [(7 * s, False, True)]


def _trace_run(stop_times: list[int], seed: int) -> list[tuple]:
    """Events and alarms at colliding instants, some scheduling more at the same instant (urgent
    and normal, events and alarms): the order they ran in, stepping the loop at `stop_times`."""
    env = Environment()
    rng = random.Random(seed)
    trace: list[tuple] = []

    def fire(tag: tuple) -> None:
        trace.append((env.now, *tag))
        depth = tag[-1]
        if depth < 2 and rng.random() < 0.5:
            nxt = (*tag[:-1], depth + 1)
            if rng.random() < 0.5:
                env.clock.at(env.now, fire, nxt, URGENT if rng.random() < 0.5 else NORMAL)
            else:
                env.timeout(0).callbacks.append(lambda _e, t=nxt: fire(t))

    for i in range(300):
        at = rng.choice([0, 1, 5, 10, 10, 15, 20, 25, 30])
        if rng.random() < 0.5:
            env.clock.at(env.now + at, fire, (i, 0), URGENT if rng.random() < 0.3 else NORMAL)
        else:
            env.timeout(at).callbacks.append(lambda _e, t=(i, 0): fire(t))
    for t in stop_times:
        env.run_until(t)
    return trace


@pytest.mark.parametrize("seed", range(5))
def test_stepping_the_loop_keeps_every_events_order(seed):
    """Stopping at a scrape (at an instant events are due, or between) and going on runs every
    event in the order one uninterrupted run does, same-instant ones included."""
    whole = _trace_run([40], seed)
    assert len(whole) > 300
    for steps in ([10, 40], [1, 2, 5, 10, 15, 20, 25, 30, 40], [3, 7, 11, 29, 40], list(range(1, 41))):
        assert _trace_run(steps, seed) == whole, steps


# ---------------------------------------------------------------------- the watch caches


def _cached_model() -> tuple[Environment, ResourceModel]:
    env = Environment()
    model = ResourceModel(env.clock, ServerParams.model_validate({"process": {"restart_s": 5.0}}))
    model.set_watch_cache([CachedResource("pods", 1000, 1e7)])
    return env, model


def test_a_ready_watch_cache_applies_each_write_as_it_is_committed():
    env, model = _cached_model()
    mem = model.memory
    base, heap = mem.base_live, mem.heap_live
    model.watch_cache_event("pods", 1, 20_000.0)  # a create: allocated, live from now on
    grown = cache_bytes(model.params, 1001, 1e7 + 20_000.0) - cache_bytes(model.params, 1000, 1e7)
    assert mem.base_live == pytest.approx(base + grown) and mem.heap_live == pytest.approx(heap + grown)
    assert mem.peak_heap >= mem.heap_live
    model.watch_cache_event("pods", -1, -20_000.0)  # a delete: garbage until the next GC cycle
    assert mem.base_live == pytest.approx(base) and mem.heap_live == pytest.approx(heap + grown)
    assert model.resources[0] == CachedResource("pods", 1000, 1e7)


def test_a_down_or_refilling_cache_takes_the_writes_when_it_is_filled():
    env, model = _cached_model()
    model.kill("restart")
    model.watch_cache_event("pods", 1, 50_000.0)  # while down: the refill will read it from etcd

    def restarted(_now: int) -> None:  # refilling from here
        assert not model.watch_cache_ready("pods")
        model.watch_cache_event("pods", 1, 50_000.0)  # applied when the fill ends
        assert model.memory.base_live == model.params.process.live_heap_bytes

    model.process.on_restart.append(restarted)
    ready: list[float] = []
    model.process.on_ready.append(lambda _now: ready.append(model.memory.base_live))
    env.run_until(int(60e9))
    expected = cache_bytes(model.params, 1002, 1e7 + 100_000.0)
    assert ready == [pytest.approx(model.params.process.live_heap_bytes + expected)]  # both, when it is ready
