"""A replication's readings as a `Result`: the summary a simulated run writes, with the figures
that were measured, and the series under their upstream names.

Where a figure is read: RSS from /proc (the true peak is the kernel's VmHWM over the load;
scraped peaks from /metrics' process_resident_memory_bytes), the Go heap from /metrics only (so
its peak is the highest scrape), CPU from /proc's user and system time, the priority levels'
requests from APF's own counters, latencies and outcomes from the load generator's attempts
(each logical request from its first attempt to the last byte of its final response; the
server-side table uses the final attempt alone and the priority level the response named in
its X-Kubernetes-PF-PriorityLevel-UID header). What no reading gives is left out, or null.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable

import numpy as np
import pandas as pd

from simapf.bench.measure import Readings
from simapf.bench.sampler import Samples
from simapf.provenance import provenance
from simapf.scenario.load import LoadedScenario
from simapf.simulation.collect import CLIENT_LATENCY_COLUMNS, p99_ok
from simapf.simulation.observe import LABELS
from simapf.simulation.result import Result
from simapf.version import __version__
from simapf.workload.clientgo import CLIENT_OUTCOMES

LATENCY_COLUMNS = ["priority_level", "verb", "count", "p50_s", "p90_s", "p99_s", "max_s", "mean_s"]
LEVEL_COLUMNS = ["priority_level", "requests", "dispatched", "rejected", "rejection_rate"]
# Upstream's labels as the series' columns; the others are summed over.
LABEL_COLUMNS = {"priority_level": "priority_level", "flow_schema": "flow_schema", "reason": "reason",
                 "verb": "verb", "code": "code", "resource": "resource", "resource_prefix": "resource"}  # fmt: skip
# A request still under way when its client stopped at the end of the run.
_CUT_SHORT = ("context canceled", "context deadline exceeded")


# ---------------------------------------------------------------------- series


def series_frame(readings: Readings) -> pd.DataFrame:
    """Every kept sample, long form as a run's: time_s, metric, the label columns, value."""
    rows: dict[tuple, float] = defaultdict(float)
    for t, name, labels, value in readings.samples.metrics:
        mapped = {col: "" for col in LABELS}
        for upstream, col in LABEL_COLUMNS.items():
            if upstream in labels:
                mapped[col] = labels[upstream]
        key = tuple(mapped[c] for c in LABELS)
        rows[(round(t, 6), name, *key)] += value
    deaths = sorted(d.at_s for d in readings.deaths if d.reason == "oom-killed")
    for t in sorted({k[0] for k in rows}):
        kills = sum(1 for at in deaths if at <= t)
        rows[(t, "simapf_oom_kills_total", *([""] * len(LABELS)))] = float(kills)
    frame = pd.DataFrame([(*k, v) for k, v in rows.items()], columns=["time_s", "metric", *LABELS, "value"])
    for col in ("metric", *LABELS):
        frame[col] = frame[col].astype("string")
    return frame.sort_values(["time_s", "metric"], kind="stable").reset_index(drop=True)


def _scraped(frame: pd.DataFrame, metric: str, since_s: float = -math.inf) -> int | None:
    """The highest scrape of a memory gauge (whole bytes, as a run's summary has them)."""
    values = frame.loc[(frame["metric"] == metric) & (frame["time_s"] >= since_s)].groupby("time_s")["value"].sum()
    return int(values.max()) if len(values) else None


GC_CPU = "go_cpu_classes_gc_total_cpu_seconds_total"


def _counter_increase(frame: pd.DataFrame, metric: str, by: str) -> dict[str, float]:
    """A counter's increase over the run per label value, its resets (a restarted process) included."""
    got: dict[str, float] = {}
    rows = frame.loc[frame["metric"] == metric]
    for label, group in rows.groupby(by):
        values = group.groupby("time_s")["value"].sum().to_numpy()
        if len(values) == 0:
            continue
        got[str(label)] = _increase(values)
    return got


def _increase(values: np.ndarray) -> float:
    """A counter's increase over its scrapes: a drop is a restarted process counting from zero."""
    steps = np.diff(values)
    return float(np.where(steps >= 0, steps, values[1:]).sum())


# ---------------------------------------------------------------------- CPU and RSS


def _cpu_between(readings: Readings, start_s: float, end_s: float) -> float:
    """CPU seconds the apiserver used in [start_s, end_s], over every incarnation."""
    used = 0.0
    by_pid: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for t, pid, cpu in readings.samples.cpu:
        if start_s <= t <= end_s:
            by_pid[pid].append((t, cpu))
    for values in by_pid.values():
        used += values[-1][1] - values[0][1]
    return used


def _peak_cores(readings: Readings, step_s: float) -> float:
    by_pid: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for t, pid, cpu in readings.samples.cpu:
        by_pid[pid].append((t, cpu))
    peak = 0.0
    for values in by_pid.values():
        times = np.array([t for t, _ in values])
        cpu = np.array([c for _, c in values])
        for start in np.arange(times[0], times[-1] - step_s + 1e-9, step_s):
            inside = (times >= start) & (times <= start + step_s)
            if inside.sum() >= 2:
                t, c = times[inside], cpu[inside]
                peak = max(peak, (c[-1] - c[0]) / (t[-1] - t[0]))
    return peak


def _whole(x: float | None) -> int | None:
    return None if x is None else int(round(x))


def _rss_in(readings: Readings, start_s: float) -> np.ndarray:
    return np.array([r for t, r in readings.samples.rss if t >= start_s], dtype=float)


def _time_mean(points: Iterable[tuple[float, int]], start_s: float, end_s: float) -> float | None:
    pts = [(t, r) for t, r in points if start_s <= t <= end_s]
    if len(pts) < 2:
        return float(pts[0][1]) if pts else None
    t = np.array([p[0] for p in pts])
    r = np.array([p[1] for p in pts], dtype=float)
    return float(np.sum(r[:-1] * np.diff(t)) / (t[-1] - t[0]))


# ---------------------------------------------------------------------- requests


def _outcome(final: dict[str, str]) -> str | None:
    """A logical request's outcome from its last attempt; None if it was cut short by the end."""
    code = int(final["code"] or 0)
    error = final.get("error", "")
    if code and 200 <= code < 300:
        if error and any(e in error for e in _CUT_SHORT):
            return None
        return "ok" if not error else "failed"
    if code == 429:
        return "rejected"
    if code == 504:
        return "timed_out"
    if code == 410:
        return "gone"
    if not code:
        if any(e in error for e in _CUT_SHORT):
            return None
        return "unavailable"
    return "failed"


def _logical(attempts: list[dict[str, str]]) -> list[tuple[str, float, float, str | None, dict[str, str], int]]:
    """(verb, start_s, end_s, outcome, final attempt, attempts) of each logical request."""
    grouped: dict[str, list[dict[str, str]]] = defaultdict(list)
    for a in attempts:
        grouped[a["logical"]].append(a)
    out = []
    for rows in grouped.values():
        rows.sort(key=lambda a: float(a["start_s"]))
        final = rows[-1]
        out.append((final["verb"], float(rows[0]["start_s"]), float(final["end_s"]), _outcome(final), final, len(rows)))
    return out


def _stats(latency: np.ndarray) -> dict[str, float]:
    p50, p90, p95, p99 = (float(x) for x in np.percentile(latency, [50, 90, 95, 99]))
    return {"p50_s": p50, "p90_s": p90, "p99_s": p99, "max_s": float(latency.max()), "mean_s": float(latency.mean()),
            "min_s": float(latency.min()), "p95_s": p95}  # fmt: skip


def _clients(readings: Readings, loaded: LoadedScenario) -> tuple[list[dict[str, Any]], pd.DataFrame, dict[str, list[float]]]:
    """The summary's clients, the client latency table, and server-side latencies by (level, verb)."""
    rows, table = [], []
    server: dict[tuple[str, str], list[float]] = defaultdict(list)
    for spec in loaded.scenario.clients:
        attempts = readings.attempts.get(spec.name, [])
        logical = _logical(attempts)
        outcomes: dict[str, int] = defaultdict(int)
        by_verb: dict[str, dict[str, Any]] = {}
        per_verb: dict[str, list[tuple[float, str]]] = defaultdict(list)
        in_flight = 0
        for verb, start, end, outcome, final, _n in logical:
            if outcome is None:
                in_flight += 1
                continue
            outcomes[outcome] += 1
            per_verb[verb].append((end - start, outcome))
            if outcome == "ok":
                level = readings.uid_names.get(final["priority_level_uid"], final["priority_level_uid"] or "unknown")
                server[(level, verb)].append(float(final["end_s"]) - float(final["start_s"]))
        for verb, items in sorted(per_verb.items()):
            latency = np.array([x for x, _ in items])
            ok = np.array([o == "ok" for _, o in items])
            counts = {o: sum(1 for _, x in items if x == o) for o in CLIENT_OUTCOMES}
            entry = {"requests": len(items), **counts, "error_rate": float(1 - counts["ok"] / len(items)),
                     **_stats(latency), "p99_ok_s": p99_ok(latency, ok)}  # fmt: skip
            by_verb[verb] = entry
            table.append({"client": spec.name, "verb": verb, **entry})
        retries = sum(1 for a in attempts if a["code"] == "429") - outcomes.get("rejected", 0)
        rows.append({"client": spec.name, "kind": spec.kind, "instances": spec.count, "attempts": len(attempts),
                     "outcomes": dict(outcomes), "retries_after_429": max(0, retries), "in_flight_at_end": in_flight,
                     "by_verb": by_verb})  # fmt: skip
    client_table = pd.DataFrame(table, columns=CLIENT_LATENCY_COLUMNS)
    return rows, client_table, {f"{k[0]}\0{k[1]}": v for k, v in server.items()}


def _latency(server: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for key, values in sorted(server.items()):
        level, verb = key.split("\0")
        a = np.array(values)
        s = _stats(a)
        rows.append({"priority_level": level, "verb": verb, "count": int(a.size),
                     **{k: s[k] for k in ("p50_s", "p90_s", "p99_s", "max_s", "mean_s")}})  # fmt: skip
    return pd.DataFrame(rows, columns=LATENCY_COLUMNS)


def _levels(frame: pd.DataFrame) -> pd.DataFrame:
    dispatched = _counter_increase(frame, "apiserver_flowcontrol_dispatched_requests_total", "priority_level")
    rejected_rows = frame.loc[frame["metric"] == "apiserver_flowcontrol_rejected_requests_total"]
    by_reason: dict[str, dict[str, float]] = defaultdict(dict)
    for (level, reason), group in rejected_rows.groupby(["priority_level", "reason"]):
        by_reason[str(level)][str(reason)] = _increase(group.groupby("time_s")["value"].sum().to_numpy())
    rows = []
    for level in sorted(set(dispatched) | set(by_reason)):
        if not level:
            continue
        rejected = sum(by_reason[level].values())
        total = dispatched.get(level, 0.0) + rejected
        row = {"priority_level": level, "requests": int(total), "dispatched": int(dispatched.get(level, 0.0)),
               "rejected": int(rejected), "rejection_rate": float(rejected / total) if total else 0.0}  # fmt: skip
        for reason, n in sorted(by_reason[level].items()):
            if n:
                row[f"rejected_{reason.replace('-', '_')}"] = int(n)
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=LEVEL_COLUMNS + sorted({k for r in rows for k in r} - set(LEVEL_COLUMNS)))


# ---------------------------------------------------------------------- the summary


def result(readings: Readings, loaded: LoadedScenario, replication: int = 1) -> Result:
    """The Result of one replication, as `simapf run` would write it."""
    sc = loaded.scenario
    duration = readings.duration_s
    steady = sc.run.steady_from_s
    frame = series_frame(readings)
    clients, client_table, server = _clients(readings, loaded)
    latency = _latency(server)
    levels = _levels(frame)
    deaths = readings.deaths
    oom = [d for d in deaths if d.reason == "oom-killed"]
    # Down from each death until the apiserver served again, or died again first, or the run ended.
    ends = [d.at_s for d in deaths[1:]] + [duration]
    down = sum(min(d.restarted_at_s if d.restarted_at_s is not None else math.inf, end, duration) - d.at_s
               for d, end in zip(deaths, ends))  # fmt: skip
    rss_steady = _rss_in(readings, steady)
    limit = readings.plan.memory_limit_bytes
    mean_cores = _cpu_between(readings, 0.0, duration) / duration
    memory = {
        "peak_rss_bytes": int(readings.peak_rss_bytes),
        "peak_heap_inuse_bytes": _scraped(frame, "go_memstats_heap_inuse_bytes"),
        "scraped_peak_rss_bytes": _scraped(frame, "process_resident_memory_bytes"),
        "scraped_peak_heap_inuse_bytes": _scraped(frame, "go_memstats_heap_inuse_bytes"),
        "memory_limit_bytes": limit, "steady_state_from_s": steady,
        "peak_rss_steady_bytes": int(rss_steady.max()) if rss_steady.size else None,
        "scraped_peak_rss_steady_bytes": _scraped(frame, "process_resident_memory_bytes", steady),
        "oom_killed": bool(oom), "rss_at_oom_kill_bytes": oom[0].rss_bytes if oom else None, "oom_demand_bytes": None,
        "mean_rss_steady_bytes": _whole(_time_mean(readings.samples.rss, steady, duration)),
        "peak_heap_steady_bytes": _scraped(frame, "go_memstats_heap_inuse_bytes", steady),
        "scraped_peak_heap_steady_bytes": _scraped(frame, "go_memstats_heap_inuse_bytes", steady),
    }  # fmt: skip
    gc_cycles = _counter_increase(frame, "go_gc_duration_seconds_count", "metric").get("go_gc_duration_seconds_count")
    gc_cpu = _counter_increase(frame, GC_CPU, "metric").get(GC_CPU)  # runtime/metrics' /cpu/classes/gc/total
    cpu = {"mean_cores": mean_cores, "peak_cores": _peak_cores(readings, sc.run.scrape_interval_s),
           "cores": readings.plan.apiserver_cores,
           "mean_cores_steady": _cpu_between(readings, steady, duration) / (duration - steady),
           "gc_cycles": None if gc_cycles is None else int(gc_cycles),
           "gc_mean_cores": None if gc_cpu is None else gc_cpu / duration,
           "client_mean_cores": readings.client_cpu_core_s / duration}  # fmt: skip
    etcd_busy = readings.etcd_cpu_core_s / (readings.plan.etcd_cores * duration)
    etcd = {"cores": readings.plan.etcd_cores, "members": 1, "member_round_trip_s": None, "embedded": False,
            "fitted_deployment": False, "ranges": None, "busy_core_s": readings.etcd_cpu_core_s,
            "busy_fraction": etcd_busy, "busy_fraction_steady": None, "apiserver_cores_fraction_steady": None,
            "bottleneck": False}  # fmt: skip
    totals = defaultdict(int)
    for c in clients:
        for k, v in c["outcomes"].items():
            totals[k] += v
    total = sum(totals.values())
    by_outcome = {k: totals.get(k, 0) for k in ("ok", "rejected", "unavailable", "failed")}
    process = {"oom_kills": len(oom), "kills": len(deaths), "restarts": sum(1 for d in deaths if d.restarted_at_s is not None),
               "down_s": down}  # fmt: skip
    scenario = sc.model_dump(mode="json")
    open_watches = sum(c["in_flight_at_end"] for c in clients)
    summary: dict[str, Any] = {
        "simapf_version": __version__, "scenario_name": sc.name, "seed": sc.run.seed, "source": loaded.source,
        "duration_s": duration, "wall_s": readings.wall_s, "measured": True,
        "memory": memory, "cpu": cpu, "etcd": etcd, "admission_webhooks": [], "process": process,
        "replicas": [{"replica": 0, "peak_rss_bytes": memory["peak_rss_bytes"],
                      "peak_rss_steady_bytes": memory["peak_rss_steady_bytes"],
                      "scraped_peak_rss_bytes": memory["scraped_peak_rss_bytes"],
                      "scraped_peak_rss_steady_bytes": memory["scraped_peak_rss_steady_bytes"],
                      "mean_cores": mean_cores, **process, "requests": by_outcome}],
        "deaths": [{"replica": 0, "at_s": d.at_s, "reason": d.reason, "rss_bytes": d.rss_bytes, "connections": None,
                    "open_watches": None} for d in deaths],
        "requests": {"total": total, "by_outcome": by_outcome, "rejected_share": totals["rejected"] / total if total else 0.0},
        # a level's figure the bench could not read (NaN) is left out of its row
        "priority_levels": [{k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}
                            for row in levels.to_dict("records")],
        "latency": latency.to_dict("records"), "clients": clients,
        "events": [], "watches": {"open_at_end": open_watches, "events_delivered": None},
        "load_balancer": {"policy": sc.apiserver.load_balancer.policy, "goaways": 0},
        "provenance": {**provenance(scenario, loaded.params, [sc.run.seed], replication), "replications": replication},
        "scenario": scenario, "extrapolation": [],
        "bench": bench_record(readings),
    }  # fmt: skip
    return Result(summary, frame, latency, levels.fillna(0), None, scenario, client_table)


# runtime/metrics' /gc/heap/live: the heap the last GC cycle marked live.
HEAP_LIVE = "go_gc_heap_live_bytes"


def base_heap_live(samples: Samples) -> float | None:
    """The apiserver's live heap as the load starts (the first scrape's), None if not exposed:
    what an idle process of this deployment holds (the model's `process.live_heap_bytes`)."""
    first = min((t for t, metric, _labels, _v in samples.metrics if metric == HEAP_LIVE), default=None)
    if first is None:
        return None
    return sum(v for t, metric, _labels, v in samples.metrics if metric == HEAP_LIVE and t == first)


def bench_record(readings: Readings) -> dict[str, Any]:
    """What made the measurement: binaries, flags, machine, and what was read how."""
    s = readings.samples
    return {
        "release": readings.binaries.release, "versions": readings.binaries.versions,
        "server_version": readings.server_version,
        "kube_apiserver_flags": readings.flags, "kube_apiserver_env": readings.env,
        "gates": readings.plan.gates, "cpu_quota_cores": readings.plan.apiserver_cores,
        "etcd_cpu_quota_cores": readings.plan.etcd_cores, "machine": readings.machine,
        "base_rss_bytes": readings.base_rss_bytes, "base_heap_live_bytes": base_heap_live(s),
        "scrapes": len(s.scrape_times), "scrape_errors": s.scrape_errors,
        "rss_samples": len(s.rss),
        "heap_profile": None if s.profile is None else {"file": "heap-peak.pb.gz", "at_s": s.profile_at_s,
                                                         "rss_bytes": s.profile_rss_bytes},
        "notes": readings.plan.notes + [
            "peak_rss_bytes is the kernel's VmHWM over the load; the Go heap's peak is the highest scrape of /metrics",
            "latencies are the load generator's, on loopback; the server-side table takes each request's final attempt",
        ],
    }  # fmt: skip
