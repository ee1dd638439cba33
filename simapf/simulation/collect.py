"""A finished simulation read into a `Result`: the recorder's series, the tables and the summary.

The last step of a run (scenario → build → run → observe → result): it reads the simulation's
components through `Finished`, what a finished run offers, and builds the Result, which knows
nothing of how it was made.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from simapf.version import __version__
from simapf.simulation import recorded
from simapf.simulation.observe import LABELS, RECORD_FIELDS, Recorder
from simapf.provenance import provenance
from simapf.simulation.result import Result
from simapf.schema.summary import validate
from simapf.scenario.load import LoadedScenario
from simapf.scenario.schema import Scenario
from simapf.server import sections
from simapf.server.runtime import APIServerSnapshot, SimulatedAPIServer, by_level, by_level_and_reason
from simapf.workload.balancer import LoadBalancer
from simapf.uncertainty.coverage import beyond, run_inputs
from simapf.uncertainty.model_error import load_checked_inputs
from simapf.workload.clientgo import CLIENT_OUTCOMES
from simapf.workload.clients import ClientGroup
from simapf.workload.latencies import Latencies, Sketch
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
    inputs = run_inputs(validate({**summary, "extrapolation": []}), scenario)
    summary["extrapolation"] = beyond(inputs, load_checked_inputs())
    return Result(summary, series, latency, levels, requests, scenario, client_latency, rec.histograms)


def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and np.isnan(x)) else x


# ---------------------------------------------------------------------- tables


def _latency_table(latencies: dict[tuple[str, str], Latencies]) -> pd.DataFrame:
    rows = []
    for (level, verb), values in sorted(latencies.items()):
        (p50, p90, p99), max_s, mean_s, _min_s = values.stats([50, 90, 99])
        rows.append({
            "priority_level": level, "verb": verb, "count": len(values),
            "p50_s": p50, "p90_s": p90, "p99_s": p99, "max_s": max_s, "mean_s": mean_s,
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


def _p99_ok_sketched(n: int, ok: Sketch | None) -> float:
    """`p99_ok` of `n` requests whose successful ones' latencies are sketched in `ok`."""
    k = math.ceil(0.99 * n)
    return ok.order_statistics([k - 1])[0] if ok is not None and 0 < k <= ok.n else math.inf


def _client_latency_table(sim: Finished) -> pd.DataFrame:
    """Per client and verb (a request class): its logical requests as the client saw them, each
    from the first attempt's call (token-bucket waits included) to the final response (429
    retries and their waits included); every outcome counts, errors too. A paged LIST is one
    request per page. Requests still under way at the end, or dropped by a stopped instance, are
    not counted."""
    rows = []
    for g in sim.groups.values():
        for verb, log in sorted(g.stats.requests.items()):
            n = len(log)
            if log.every is None:
                lat = np.frombuffer(log.latency_s, dtype=np.float64)
                outcome = np.frombuffer(log.outcome, dtype=np.uint8)
                counts = [int(k) for k in np.bincount(outcome, minlength=len(CLIENT_OUTCOMES))]
                p50, p90, p95, p99 = (float(x) for x in np.percentile(lat, [50, 90, 95, 99]))
                max_s, mean_s, min_s = float(lat.max()), float(lat.mean()), float(lat.min())
                ok_p99 = p99_ok(lat, outcome == 0)
            else:  # sketched (simapf.workload.latencies): a long run's
                every = log.every
                counts = list(log.outcomes)
                p50, p90, p95, p99 = every.percentiles([50, 90, 95, 99])
                max_s, mean_s, min_s = every.hi, every.mean(), every.lo
                ok_p99 = _p99_ok_sketched(n, log.ok)
            rows.append({
                "client": g.spec.name, "verb": verb, "requests": n,
                **{o: k for o, k in zip(CLIENT_OUTCOMES, counts)},
                "error_rate": float(1.0 - counts[0] / n), "p50_s": p50, "p90_s": p90, "p99_s": p99,
                "max_s": max_s,
                # What k6 prints for http_req_duration: avg, min, med, max, p(90), p(95).
                "mean_s": mean_s, "min_s": min_s, "p95_s": p95,
                "p99_ok_s": ok_p99,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=CLIENT_LATENCY_COLUMNS)


def _levels_table(snaps: Sequence[APIServerSnapshot]) -> pd.DataFrame:
    """Per priority level, over every replica: its requests that ended (as the summary's
    `requests` counts them; those still executing at the end are dispatched, not yet ended), how
    many APF dispatched and how many it rejected."""
    names = [g.name for g in snaps[0].levels]
    dispatched_by_level = sections.summed(by_level(s.dispatched_by_flow) for s in snaps)
    rejected_by_level = sections.summed(by_level_and_reason(s.rejected_by_flow) for s in snaps)
    ended_by_level = sections.summed(s.ended_by_level for s in snaps)
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
    """The summary (simapf.schema.summary), each section written by its owner."""
    sc, rec, params = sim.scenario, sim.recorder, sim.server.params  # every replica's params
    duration, steady = sc.run.duration_s, sc.run.steady_from_s
    per_replica = recorded.cpu_by_replica(rec, duration, steady, params.cpu.procs)
    cpu = recorded.cpu(per_replica, params, snaps, duration)
    by_verb = _by_client_and_verb(client_latency)
    figures = _whole_bytes({
        "simapf_version": __version__, "scenario_name": sc.name, "seed": sc.run.seed, "source": sim.loaded.source,
        "duration_s": duration, "wall_s": round(wall_s, 3),
        "memory": recorded.memory(rec, params, steady),
        "cpu": cpu,
        "etcd": sections.etcd(params, snaps[0], rec.etcd_busy_s_at_steady, cpu["mean_cores_steady"] / params.cpu.cores,
                              duration, steady),
        "admission_webhooks": sections.admission(sim.server),
        "process": sections.process(snaps),
        "replicas": [{"replica": snap.replica, **recorded.replica_peaks(rec, snap.replica),
                      "mean_cores": own_cpu["mean_cores"], **sections.replica(snap),
                      "connections_at_end": sim.balancer.connections[snap.replica],
                      "open_watches_at_end": sim.cluster.open_watches(snap.replica)}
                     for snap, own_cpu in zip(snaps, per_replica)],
        "deaths": [d.as_dict() for d in sim.cluster.deaths],  # every process death in time order
        "requests": sections.requests(snaps),
        "lists": recorded.lists(rec),
        "priority_levels": [{k: _nan_to_none(v) for k, v in row.items()} for row in levels.to_dict("records")],
        "latency": latency.to_dict("records"),
        "clients": [g.summary_row(by_verb.get(g.spec.name, {})) for g in sim.groups.values()],
        "events": recorded.events(rec, sc, sim.cluster.deaths),
        "watches": {"open_at_end": sim.cluster.open_watches(), "events_delivered": sim.cluster.watch_events_total},
        "load_balancer": {"policy": sc.apiserver.load_balancer.policy, "goaways": sim.balancer.goaways},
    })  # fmt: skip
    # What made these numbers: the build, the resolved scenario, the calibration, the seed.
    return {**figures, "provenance": provenance(scenario, params, [sc.run.seed]), "scenario": scenario}


def _by_client_and_verb(client_latency: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """client_latency.csv's rows, by client and verb."""
    by_class: dict[str, dict[str, dict[str, Any]]] = {}
    for row in client_latency.to_dict("records"):
        # JSON has no infinity: a class that never had 99 % of its requests succeed has p99_ok_s null.
        row["p99_ok_s"] = row["p99_ok_s"] if math.isfinite(row["p99_ok_s"]) else None
        by_class.setdefault(row.pop("client"), {})[row.pop("verb")] = row
    return by_class


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
