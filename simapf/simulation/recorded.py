"""The summary's sections the recorder writes (simapf.simulation.observe.Recorder): memory peaks,
CPU from each replica's counters, the LISTs by serving path, and the figures of each scenario
event's window. `simapf.simulation.collect` assembles them with the other owners' sections.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from simapf.apf.types import NS_PER_S
from simapf.scenario.schema import Scenario
from simapf.server.params import ServerParams
from simapf.server.runtime import APIServerSnapshot
from simapf.simulation.observe import ProcessReading, Recorder, scraped_peak
from simapf.workload.cluster import Death
from simapf.workload.events import event_end_s


def scraped_rss(rec: Recorder) -> list[tuple[float, float]]:
    """Every replica's scraped RSS, scrape by scrape: (time, bytes)."""
    return [(r.t_s, r.rss_bytes) for scrape in zip(*rec.readings) for r in scrape]


def memory(rec: Recorder, params: ServerParams, steady: float) -> dict[str, Any]:
    """Peaks: the true ones (the model's, exact), and `scraped_*` the highest scrape, what
    Prometheus scraping every run.scrape_interval_s would show."""
    rss_steady = np.array([v for t, v in scraped_rss(rec) if t >= steady])
    return {
        "peak_rss_bytes": rec.peak_rss,
        "peak_heap_inuse_bytes": rec.peak_heap,
        "scraped_peak_rss_bytes": rec.scraped_peak_rss,
        "scraped_peak_heap_inuse_bytes": rec.scraped_peak_heap,
        "memory_limit_bytes": params.process.memory_limit_bytes,
        "steady_state_from_s": steady,
        "peak_rss_steady_bytes": rec.peak_rss_steady,
        "scraped_peak_rss_steady_bytes": rec.scraped_peak_rss_steady,
        "oom_killed": rec.rss_at_oom_kill is not None,
        "rss_at_oom_kill_bytes": rec.rss_at_oom_kill,
        "oom_demand_bytes": rec.oom_demand,
        "mean_rss_steady_bytes": float(rss_steady.mean()) if len(rss_steady) else None,
        "peak_heap_steady_bytes": rec.peak_heap_steady,
        "scraped_peak_heap_steady_bytes": rec.scraped_peak_heap_steady,
    }


def cpu_by_replica(rec: Recorder, duration: float, steady: float, procs: int) -> list[dict[str, float]]:
    """Each replica's CPU figures (`replica_cpu`)."""
    return [replica_cpu(readings, duration, steady, cpu_at_steady, procs)
            for readings, cpu_at_steady in zip(rec.readings, rec.cpu_seconds_at_steady)]  # fmt: skip


def cpu(per_replica: list[dict[str, float]], params: ServerParams, snaps: Sequence[APIServerSnapshot],
        duration: float) -> dict[str, Any]:  # fmt: skip
    """With several replicas, per-process figures are per replica: means over the replicas, peaks
    the highest replica's (what its limits are compared with); `replicas` gives each."""
    n = len(per_replica)

    def mean(key: str) -> float:
        return sum(r[key] for r in per_replica) / n

    def most(key: str) -> float:
        return max(r[key] for r in per_replica)

    return {
        "mean_cores": mean("mean_cores"),
        "peak_cores": most("peak_cores"),
        "cores": params.cpu.cores,
        "mean_cores_steady": mean("mean_cores_steady"),
        # The Go GC's CPU as the runtime's metrics count it (/cpu/classes/gc, in P-seconds a
        # second: the Ps its workers hold, whether or not the OS runs them), all classes, and
        # by class: dedicated and fractional workers, assists, idle mark workers (which only
        # take Ps nothing else wanted). The compulsory part (dedicated + assists) is what the
        # CPU limiter counts: it holds it near half of the Ps not idle over a window of its
        # bucket (a scrape interval's peak may pass that a little), and what gctrace's
        # percentage and GCCPUFraction give over the run (`gc_cpu_fraction`).
        "gc_mean_cores": mean("gc_mean_cores"),
        "gc_peak_cores": most("gc_peak_cores"),
        "gc_dedicated_mean_cores": mean("gc_dedicated_mean_cores"),
        "gc_assist_mean_cores": mean("gc_assist_mean_cores"),
        "gc_idle_mark_mean_cores": mean("gc_idle_mark_mean_cores"),
        "gc_compulsory_peak_cores": most("gc_compulsory_peak_cores"),
        "gc_cpu_fraction": mean("gc_cpu_fraction"),
        "gc_cycles": sum(r["gc_cycles"] for r in per_replica),
        # Clients that read their responses on the apiserver's cores (params.client): their
        # CPU, which the process's figures above leave out.
        "client_mean_cores": sum(s.resources.client_cpu_seconds_total for s in snaps) / n / duration,
    }


def replica_cpu(readings: Sequence[ProcessReading], duration: float, steady: float,
                cpu_at_steady: float, procs: int) -> dict[str, float]:  # fmt: skip
    """One replica's CPU from its counters at every scrape (`readings`), its CPU counter when
    the steady state started (`cpu_at_steady`) and its GOMAXPROCS (`procs`): means over the
    run from the last reading, peaks the fastest rise between two scrapes."""
    t = [r.t_s for r in readings]

    def mean(counter: list[float]) -> float:
        return counter[-1] / duration if counter else 0.0

    def peak(counter: list[float]) -> float:
        rates = [(b - a) / (t1 - t0) for a, b, t0, t1 in zip(counter, counter[1:], t, t[1:])]
        return max(rates) if rates else 0.0

    cpu_s = [r.cpu_s for r in readings]
    gc_cpu = [r.gc_s for r in readings]
    idle_mark = [r.idle_mark_s for r in readings]
    # What the GC CPU limiter counts: every class but the idle mark workers'.
    compulsory = [gc - idle for gc, idle in zip(gc_cpu, idle_mark)]
    cpu_steady = cpu_s[-1] - cpu_at_steady if cpu_s else 0.0
    return {
        "mean_cores": mean(cpu_s),
        "peak_cores": peak(cpu_s),
        "mean_cores_steady": cpu_steady / (duration - steady),
        "gc_mean_cores": mean(gc_cpu),
        "gc_peak_cores": peak(gc_cpu),
        "gc_dedicated_mean_cores": mean([r.dedicated_s for r in readings]),
        "gc_assist_mean_cores": mean([r.assist_s for r in readings]),
        "gc_idle_mark_mean_cores": mean(idle_mark),
        "gc_compulsory_peak_cores": peak(compulsory),
        "gc_cpu_fraction": mean(compulsory) / procs,
        "gc_cycles": max(r.gc_cycles for r in readings) if readings else 0,
    }


def replica_peaks(rec: Recorder, i: int) -> dict[str, Any]:
    """Replica `i`'s memory peaks, true and scraped, over the run and the steady state."""
    return {
        "peak_rss_bytes": rec.true_peaks(i)[0],
        "peak_rss_steady_bytes": rec.true_peaks_steady(i)[0],
        "scraped_peak_rss_bytes": rec.scraped_peak_rss_by_replica[i],
        "scraped_peak_rss_steady_bytes": rec.scraped_peak_rss_steady_by_replica[i],
    }


def lists(rec: Recorder) -> dict[str, Any]:
    """What the LISTs served (WatchList's initial events too), by serving path."""
    return {"by_path": {path: {"requests": int(n), "bytes": b} for path, (n, b) in sorted(rec.lists_by_path.items())}}


def events(rec: Recorder, sc: Scenario, deaths: Sequence[Death]) -> list[dict[str, Any]]:
    """Each scenario event, its recovery, and the peaks and OOM kills of its window: from it to
    the next event (the last one's to the end of the run)."""
    duration = sc.run.duration_s
    rss = scraped_rss(rec)
    rows = []
    for i, e in enumerate(sc.events):
        end = event_end_s(e)
        nxt = min([x.at_s for x in sc.events if x.at_s > e.at_s] + [duration])
        window = [v for t, v in rss if e.at_s <= t <= nxt]
        # OOM kills in [at_s, the next event), the last window to the end of the run inclusive.
        kills = [d for d in deaths if d.reason == "oom" and e.at_s <= d.at_s and (d.at_s < nxt or nxt == duration)]
        rows.append({
            "index": i, "kind": e.kind, "at_s": e.at_s, "end_s": end,
            "recovery_s": rec.recovery_s(end),
            "peak_rss_bytes_until_next_event": (
                rec.true_peaks(from_ns=int(e.at_s * NS_PER_S), until_ns=int(nxt * NS_PER_S))[0]
                if e.at_s < duration else None),
            "scraped_peak_rss_bytes_until_next_event": (
                scraped_peak(window, sc.run.scrape_interval_s, None) if window else None),
            "oom_kills_until_next_event": len(kills),
        })  # fmt: skip
    return rows
