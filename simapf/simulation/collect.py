"""A finished simulation read into a `Result`: the recorder's series, the tables and the summary.

The last step of a run (scenario → build → run → observe → result): it reads the simulation's
components through `Finished`, what a finished run offers, and builds the Result, which knows
nothing of how it was made.
"""

from __future__ import annotations

import math
from array import array
from typing import Any, Iterable, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from simapf.version import __version__
from simapf.apf.types import NS_PER_S
from simapf.simulation.observe import LABELS, RECORD_FIELDS, ProcessReading, Recorder, scraped_peak
from simapf.provenance import provenance
from simapf.simulation.result import Result
from simapf.scenario.load import LoadedScenario
from simapf.scenario.schema import Scenario
from simapf.server.params import ServerParams
from simapf.server.runtime import APIServerSnapshot, SimulatedAPIServer, by_level, by_level_and_reason
from simapf.workload.balancer import LoadBalancer
from simapf.uncertainty.coverage import beyond, run_inputs
from simapf.uncertainty.model_error import load_checked_inputs
from simapf.workload.clientgo import CLIENT_OUTCOMES
from simapf.workload.clients import ClientGroup
from simapf.workload.cluster import Cluster


class Finished(Protocol):
    """What a finished run offers to be read (a `simapf.simulation.runner.Simulation`)."""

    loaded: LoadedScenario
    scenario: Scenario
    servers: Sequence[SimulatedAPIServer]
    server: SimulatedAPIServer
    cluster: Cluster
    balancer: LoadBalancer
    groups: Mapping[str, ClientGroup]
    recorder: Recorder


def collect(sim: Finished, wall_s: float) -> Result:
    """The Result of a finished run that took `wall_s` seconds of wall time."""
    rec = sim.recorder
    series = pd.DataFrame({"time_s": rec.time_s, "metric": rec.metric})
    labels = list(zip(*rec.labels)) if rec.labels else [[] for _ in LABELS]
    for name, column in zip(LABELS, labels):
        series[name] = pd.Series(column, dtype="string")
    series["value"] = np.asarray(rec.value, dtype=float)
    series["metric"] = series["metric"].astype("string")

    latency = _latency_table(rec.latencies)
    snaps = [server.snapshot() for server in sim.servers]  # every replica as the run ended
    levels = _levels_table(snaps)
    requests = pd.DataFrame.from_records(rec.records, columns=list(RECORD_FIELDS)) if rec.keep_records else None
    scenario = sim.scenario.model_dump(mode="json")
    client_latency = _client_latency_table(sim)
    summary = _summary(sim, snaps, latency, levels, wall_s, scenario, client_latency)
    # Every input of this run beyond what the model was ever compared with a measurement at.
    summary["extrapolation"] = beyond(run_inputs(summary, scenario), load_checked_inputs())
    return Result(summary, series, latency, levels, requests, scenario, client_latency, rec.histograms)


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else x


# ---------------------------------------------------------------------- tables


def _latency_table(latencies: dict[tuple[str, str], array]) -> pd.DataFrame:
    rows = []
    for (level, verb), values in sorted(latencies.items()):
        a = np.frombuffer(values, dtype=np.float64)  # a view of the recorder's array, not a copy
        p50, p90, p99 = (float(x) for x in np.percentile(a, [50, 90, 99]))
        rows.append({
            "priority_level": level, "verb": verb, "count": int(a.size),
            "p50_s": p50, "p90_s": p90, "p99_s": p99, "max_s": float(a.max()), "mean_s": float(a.mean()),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["priority_level", "verb", "count", "p50_s", "p90_s", "p99_s", "max_s", "mean_s"])


CLIENT_LATENCY_COLUMNS = ["client", "verb", "requests", *CLIENT_OUTCOMES, "error_rate",
                          "p50_s", "p90_s", "p99_s", "max_s", "mean_s", "min_s", "p95_s", "p99_ok_s"]  # fmt: skip


def p99_ok(latency_s: np.ndarray, ok: np.ndarray) -> float:
    """The time within which 99 % of the requests succeeded: the nearest-rank 99th percentile
    with a failed request counted as never done, so infinite when more than 1 % failed. The p99
    of every outcome (p99_s) can look fast just because errors come back fast: a LIST cut short
    by an OOM kill has a short latency and no result."""
    k = math.ceil(0.99 * latency_s.size)
    good = np.sort(latency_s[ok])
    return float(good[k - 1]) if 0 < k <= good.size else math.inf


def _client_latency_table(sim: Finished) -> pd.DataFrame:
    """Per client and verb (a request class): its logical requests as the client saw them, each
    from the first attempt's call (token-bucket waits included) to the final response (429
    retries and their waits included); every outcome counts, errors too. A paged LIST is one
    request per page. Requests still under way at the end, or dropped by a stopped instance, are
    not counted."""
    rows = []
    for g in sim.groups.values():
        for verb, log in sorted(g.stats.requests.items()):
            lat = np.frombuffer(log.latency_s, dtype=np.float64)
            outcome = np.frombuffer(log.outcome, dtype=np.uint8)
            counts = np.bincount(outcome, minlength=len(CLIENT_OUTCOMES))
            n = int(lat.size)
            p50, p90, p95, p99 = (float(x) for x in np.percentile(lat, [50, 90, 95, 99]))
            rows.append({
                "client": g.spec.name, "verb": verb, "requests": n,
                **{o: int(k) for o, k in zip(CLIENT_OUTCOMES, counts)},
                "error_rate": float(1.0 - counts[0] / n), "p50_s": p50, "p90_s": p90, "p99_s": p99,
                "max_s": float(lat.max()),
                # What k6 prints for http_req_duration: avg, min, med, max, p(90), p(95).
                "mean_s": float(lat.mean()), "min_s": float(lat.min()), "p95_s": p95,
                "p99_ok_s": p99_ok(lat, outcome == 0),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=CLIENT_LATENCY_COLUMNS)


def _levels_table(snaps: Sequence[APIServerSnapshot]) -> pd.DataFrame:
    """Per priority level, over every replica: its requests that ended (as the summary's
    `requests` counts them; those still executing at the end are dispatched, not yet ended), how
    many APF dispatched and how many it rejected."""
    names = [g.name for g in snaps[0].levels]
    dispatched_by_level = _summed(by_level(s.dispatched_by_flow) for s in snaps)
    rejected_by_level = _summed(by_level_and_reason(s.rejected_by_flow) for s in snaps)
    ended_by_level = _summed(s.ended_by_level for s in snaps)
    for name in list(dispatched_by_level) + [n for n, _r in rejected_by_level]:
        if name not in names:
            names.append(name)
    reasons = sorted({r for _n, r in rejected_by_level})
    rows = []
    for name in names:
        dispatched = dispatched_by_level.get(name, 0)
        by_reason = {r: rejected_by_level.get((name, r), 0) for r in reasons}
        rejected = sum(by_reason.values())
        total = ended_by_level.get(name, 0)
        rows.append({
            "priority_level": name, "requests": total, "dispatched": dispatched, "rejected": rejected,
            "rejection_rate": rejected / total if total else 0.0,
            **{f"rejected_{r.replace('-', '_')}": n for r, n in by_reason.items()},
        })  # fmt: skip
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- summary


def _summary(sim: Finished, snaps: Sequence[APIServerSnapshot], latency: pd.DataFrame, levels: pd.DataFrame,
             wall_s: float, scenario: dict, client_latency: pd.DataFrame) -> dict[str, Any]:  # fmt: skip
    from simapf.workload.events import event_end_s

    sc = sim.scenario
    server = sim.server
    params = server.params  # every replica's
    rec = sim.recorder
    duration = sc.run.duration_s
    steady = sc.run.steady_from_s
    # With several replicas, per-process figures are per replica: means over the replicas, peaks
    # the highest replica's (what its limits are compared with); `replicas` gives each.
    procs = params.cpu.procs
    per_replica = [_replica_figures(readings, duration, steady, cpu_at_steady, procs)
                   for readings, cpu_at_steady in zip(rec.readings, rec.cpu_seconds_at_steady)]  # fmt: skip
    # Every replica's scraped RSS, scrape by scrape: (time, bytes).
    rss = [(r.t_s, r.rss_bytes) for scrape in zip(*rec.readings) for r in scrape]
    rss_steady = np.array([v for t, v in rss if t >= steady])
    by_class = {}
    for row in client_latency.to_dict("records"):
        # JSON has no infinity: a class that never had 99 % of its requests succeed has p99_ok_s null.
        row["p99_ok_s"] = row["p99_ok_s"] if math.isfinite(row["p99_ok_s"]) else None
        by_class.setdefault(row.pop("client"), {})[row.pop("verb")] = row

    events = []
    for i, e in enumerate(sc.events):
        end = event_end_s(e)
        nxt = min([x.at_s for x in sc.events if x.at_s > e.at_s] + [duration])
        window = [v for t, v in rss if e.at_s <= t <= nxt]
        # OOM kills in [at_s, the next event), the last window to the end of the run inclusive.
        kills = [d for d in sim.cluster.deaths
                 if d.reason == "oom" and e.at_s <= d.at_s and (d.at_s < nxt or nxt == duration)]  # fmt: skip
        events.append({
            "index": i, "kind": e.kind, "at_s": e.at_s, "end_s": end,
            "recovery_s": rec.recovery_s(end),
            "peak_rss_bytes_until_next_event": (
                rec.true_peaks(from_ns=int(e.at_s * NS_PER_S), until_ns=int(nxt * NS_PER_S))[0]
                if e.at_s < duration else None),
            "scraped_peak_rss_bytes_until_next_event": (
                scraped_peak(window, sc.run.scrape_interval_s, None) if window else None),
            "oom_kills_until_next_event": len(kills),
        })  # fmt: skip

    clients = []
    for g in sim.groups.values():
        s = g.stats
        # Every attempt is accounted for: attempts = sum(outcomes) + retries_after_429 +
        # in_flight_at_end, for the client and for each of its verbs (`attempts_by_verb`;
        # `abandoned`: answers that came to an instance which had stopped, never read).
        abandoned = sum(c.abandoned for c in s.by_verb.values())
        outcomes = dict(s.outcomes, **({"abandoned": abandoned} if abandoned else {}))
        row = {
            "client": g.spec.name, "kind": g.spec.kind, "instances": g.active_count,
            "attempts": s.attempts, "outcomes": dict(sorted(outcomes.items())), "retries_after_429": s.retries,
            "in_flight_at_end": sum(c.in_flight for c in s.by_verb.values()),
        }  # fmt: skip
        if g.spec.kind == "informer":
            row.update(lists=s.lists, relists=s.relists, watch_breaks=s.watch_breaks, gone_410=s.gone)
        if g.spec.kind == "discovery" and s.run_durations_ns:
            d = np.asarray(s.run_durations_ns) / NS_PER_S
            row.update(runs=s.runs, run_p50_s=float(np.percentile(d, 50)), run_max_s=float(d.max()))
        if s.throttle_wait_ns and s.attempts:
            row["mean_throttle_wait_s"] = s.throttle_wait_ns / NS_PER_S / s.attempts
        if s.processing_ns:
            # Worker time the instances spent on their responses (clients.processing); discovery
            # run durations already include it.
            row["processing_busy_s"] = s.processing_ns / NS_PER_S
        # Per verb, the logical requests as the client saw them (client_latency.csv), and what
        # became of their attempts.
        row["by_verb"] = by_class.get(g.spec.name, {})
        row["attempts_by_verb"] = {
            verb: {"attempts": c.sent, "outcomes": c.outcomes + c.abandoned, "abandoned": c.abandoned,
                   "retries_after_429": c.retries, "in_flight_at_end": c.in_flight}
            for verb, c in sorted(s.by_verb.items())
        }  # fmt: skip
        clients.append(row)

    completed = _summed(s.completed for s in snaps)
    n_replicas = len(snaps)
    figures = _whole_bytes({
        "simapf_version": __version__,
        "scenario_name": sc.name,
        "seed": sc.run.seed,
        "source": sim.loaded.source,
        "duration_s": duration,
        "wall_s": round(wall_s, 3),
        # Peaks: the true ones (the model's, exact), and `scraped_*` the highest scrape, what
        # Prometheus scraping every run.scrape_interval_s would show.
        "memory": {
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
        },
        "cpu": {
            "mean_cores": sum(r["mean_cores"] for r in per_replica) / n_replicas,
            "peak_cores": max(r["peak_cores"] for r in per_replica),
            "cores": params.cpu.cores,
            "mean_cores_steady": sum(r["mean_cores_steady"] for r in per_replica) / n_replicas,
            # The Go GC's CPU as the runtime's metrics count it (/cpu/classes/gc, in P-seconds a
            # second: the Ps its workers hold, whether or not the OS runs them), all classes, and
            # by class: dedicated and fractional workers, assists, idle mark workers (which only
            # take Ps nothing else wanted). The compulsory part (dedicated + assists) is what the
            # CPU limiter counts: it holds it near half of the Ps not idle over a window of its
            # bucket (a scrape interval's peak may pass that a little), and what gctrace's
            # percentage and GCCPUFraction give over the run (`gc_cpu_fraction`).
            "gc_mean_cores": sum(r["gc_mean_cores"] for r in per_replica) / n_replicas,
            "gc_peak_cores": max(r["gc_peak_cores"] for r in per_replica),
            "gc_dedicated_mean_cores": sum(r["gc_dedicated_mean_cores"] for r in per_replica) / n_replicas,
            "gc_assist_mean_cores": sum(r["gc_assist_mean_cores"] for r in per_replica) / n_replicas,
            "gc_idle_mark_mean_cores": sum(r["gc_idle_mark_mean_cores"] for r in per_replica) / n_replicas,
            "gc_compulsory_peak_cores": max(r["gc_compulsory_peak_cores"] for r in per_replica),
            "gc_cpu_fraction": sum(r["gc_cpu_fraction"] for r in per_replica) / n_replicas,
            "gc_cycles": sum(r["gc_cycles"] for r in per_replica),
            # Clients that read their responses on the apiserver's cores (params.client): their
            # CPU, which the process's figures above leave out.
            "client_mean_cores": sum(s.resources.client_cpu_seconds_total for s in snaps) / n_replicas / duration,
        },
        "etcd": _etcd_summary(params, snaps[0], rec.etcd_busy_s_at_steady, per_replica, duration, steady),
        "admission_webhooks": [
            {"name": w.spec.name, "calls": w.calls, "timeouts": w.timeouts}
            for w in (server.admission.webhooks if server.admission is not None else [])
        ],
        "process": {
            "oom_kills": sum(s.oom_kills for s in snaps),
            "kills": sum(s.kills for s in snaps),
            "restarts": sum(s.restarts for s in snaps),
            "down_s": sum(s.down_ns for s in snaps) / NS_PER_S,
        },  # fmt: skip
        "replicas": [_replica_summary(sim, snap, figures) for snap, figures in zip(snaps, per_replica)],
        # Every process death in time order: which replica, why, and what moved to the others.
        "deaths": [d.as_dict() for d in sim.cluster.deaths],
        "requests": {"total": sum(completed.values()), "by_outcome": completed,
                     "rejected_share": completed.get("rejected", 0) / max(1, sum(completed.values()))},
        # What the LISTs served (WatchList's initial events too), by serving path.
        "lists": {"by_path": {path: {"requests": int(n), "bytes": b}
                              for path, (n, b) in sorted(rec.lists_by_path.items())}},
        "priority_levels": [{k: _nan_to_none(v) for k, v in row.items()} for row in levels.to_dict("records")],
        "latency": latency.to_dict("records"),
        "clients": clients,
        "events": events,
        "watches": {"open_at_end": sim.cluster.open_watches(), "events_delivered": sim.cluster.watch_events_total},
        "load_balancer": {"policy": sc.apiserver.load_balancer.policy, "goaways": sim.balancer.goaways},
    })
    # What made these numbers: the build, the resolved scenario, the calibration, the seed.
    return {**figures, "provenance": provenance(scenario, params, [sc.run.seed]), "scenario": scenario}


def is_bytes_key(key: str) -> bool:
    """Whether a summary's `key` holds an amount of bytes."""
    return key == "bytes" or key.endswith("_bytes") or key.endswith("_bytes_until_next_event")


def _whole_bytes(value: Any) -> Any:
    """`value` with every amount of bytes in it (a key `bytes`, `*_bytes` or
    `*_bytes_until_next_event`) a whole number, as a process's memory is: the model's sums are
    floats."""
    if isinstance(value, dict):
        return {k: round(v) if is_bytes_key(k) and isinstance(v, float) and math.isfinite(v) else _whole_bytes(v)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_whole_bytes(v) for v in value]
    return value


# etcd is the bottleneck of a run when, over its steady state, etcd's cores were busy at least
# ETCD_BUSY of the time (a queue of ranges builds as its use nears 1) while the apiserver used at
# most APISERVER_IDLE of its cores (it had room to serve more).
ETCD_BUSY = 0.9
APISERVER_IDLE = 0.5
# The deployment simapf's etcd rates were fitted on (the calibration's kind node).
FITTED_ETCD = ServerParams().etcd


def _etcd_summary(params: ServerParams, snap: APIServerSnapshot, busy_at_steady: float,
                  per_replica: list[dict[str, float]], duration: float, steady: float) -> dict[str, Any]:  # fmt: skip
    """The etcd every replica read (`snap`: a replica's snapshot; one etcd serves them all, an
    embedded one the one replica), as deployed, and how busy it was: its ranges and the
    server-seconds they took (`busy_core_s`; `busy_at_steady` when the steady state started),
    and the share of its cores' time (every member's) they took over the run and over the
    steady state. An embedded etcd's ranges ran on the apiserver's cores, so it has no time of
    its own to be busy."""
    p = params.etcd
    busy = snap.etcd_busy_core_s
    own = not p.embedded
    cores = p.members * p.concurrency  # every member's
    busy_steady = (busy - busy_at_steady) / (cores * (duration - steady)) if own else None
    cpu_steady = sum(r["mean_cores_steady"] for r in per_replica) / len(per_replica) / params.cpu.cores
    return {
        "cores": p.concurrency, "members": p.members, "member_round_trip_s": p.member_round_trip_s,
        "embedded": p.embedded,
        "fitted_deployment": (p.concurrency, p.members, p.embedded) == (FITTED_ETCD.concurrency, FITTED_ETCD.members,
                                                                       FITTED_ETCD.embedded),
        "ranges": snap.etcd_ranges,
        "read_index_rounds": snap.etcd_read_index_rounds,
        "busy_core_s": busy,
        "busy_fraction": busy / (cores * duration) if own else None,
        "busy_fraction_steady": busy_steady,
        "apiserver_cores_fraction_steady": cpu_steady,
        "bottleneck": busy_steady is not None and busy_steady >= ETCD_BUSY and cpu_steady <= APISERVER_IDLE,
    }  # fmt: skip


def _replica_figures(readings: Sequence[ProcessReading], duration: float, steady: float,
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

    cpu = [r.cpu_s for r in readings]
    gc_cpu = [r.gc_s for r in readings]
    idle_mark = [r.idle_mark_s for r in readings]
    # What the GC CPU limiter counts: every class but the idle mark workers'.
    compulsory = [gc - idle for gc, idle in zip(gc_cpu, idle_mark)]
    cpu_steady = cpu[-1] - cpu_at_steady if cpu else 0.0
    return {
        "mean_cores": mean(cpu),
        "peak_cores": peak(cpu),
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


def _summed(counts: Iterable[dict]) -> dict:
    """Per-replica counts added up, key by key, in the order keys first appear (zeros kept)."""
    total: dict = {}
    for c in counts:
        for k, n in c.items():
            total[k] = total.get(k, 0) + n
    return total


def _replica_summary(sim: Finished, snap: APIServerSnapshot, figures: dict[str, float]) -> dict[str, Any]:
    i = snap.replica
    rec = sim.recorder
    return {
        "replica": i,
        "peak_rss_bytes": rec.true_peaks(i)[0],
        "peak_rss_steady_bytes": rec.true_peaks_steady(i)[0],
        "scraped_peak_rss_bytes": rec.scraped_peak_rss_by_replica[i],
        "scraped_peak_rss_steady_bytes": rec.scraped_peak_rss_steady_by_replica[i],
        "mean_cores": figures["mean_cores"],
        "oom_kills": snap.oom_kills, "kills": snap.kills, "restarts": snap.restarts,
        "down_s": snap.down_ns / NS_PER_S,
        "requests": snap.completed,
        "openapi_v2_rebuilds": snap.openapi_v2_rebuilds,
        "openapi_v2_rebuild_core_s": snap.openapi_v2_rebuild_core_s,
        "connections_at_end": sim.balancer.connections[i],
        "open_watches_at_end": sim.cluster.open_watches(i),
    }  # fmt: skip
