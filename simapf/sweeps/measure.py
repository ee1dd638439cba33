"""One run of a sweep or a comparison, as a self-contained task, and its result as one flat row.

A `RunTask` carries everything a worker needs: the scenario as plain data and the contents of the
files it refers to (an APF configuration, a parameters file). A Dask worker on another machine
has none of the user's files, so the driver bundles them and the worker writes them to a
temporary directory. Every backend goes through the same path, so results cannot depend on it.

The row flattens a run's summary into scalar columns a DataFrame can hold:

    peak_rss_bytes, peak_heap_inuse_bytes, mean_cores, peak_cores, gc_mean_cores, gc_cycles,
    oom_kills, kills, down_s, requests_total, requests_<outcome>, rejected_share, throughput_ok_per_s,
    apf_requests, apf_rejected, rejection_rate, lists_dispatched, seats_per_list_mean, seats_per_list_max,
    requests/<level>, rejection_rate/<level>, rejection_rate/<level>/<reason>,
    served/<level>/<verb>, {mean_s,p50_s,p90_s,p99_s}/<level>/<verb>,
    client_error_rate/<client>/<verb>, client_{mean_s,p50_s,p90_s,p99_s}/<client>/<verb>,
    client_p99_ok_s/<client>/<verb>, list_requests/<path>, list_bytes/<path>, cores, memory_limit_bytes

(the headline figures among them are those of `simapf.uncertainty.figures`; `cores` and
`memory_limit_bytes`, the apiserver's, bound their intervals)

plus `wall_s` (the only column that differs between two runs of the same task) and
`simapf_version`.

A row the result cache holds (simapf.simulation.cache, `cached_rows`) is not run again: it is the row
that run gave, `wall_s` included.
"""

from __future__ import annotations

import fnmatch
import math
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from simapf.version import __version__
from simapf.schema.summary import validate
from simapf.uncertainty.figures import figure_values

# Outcomes as the apiserver model names them (simapf.server.runtime); always present, 0 if none.
OUTCOMES = ("ok", "rejected", "unavailable", "failed")
# APF's rejection reasons (simapf.apf.queueset).
REASONS = ("queue-full", "time-out", "concurrency-limit")

SCALAR_METRICS = (
    "peak_rss_bytes", "peak_heap_inuse_bytes", "mean_cores", "peak_cores", "gc_mean_cores", "gc_cycles",
    "oom_kills", "kills", "down_s",
    "requests_total", *(f"requests_{o}" for o in OUTCOMES), "rejected_share", "throughput_ok_per_s",
    "apf_requests", "apf_rejected", "rejection_rate", "lists_dispatched", "seats_per_list_mean", "seats_per_list_max",
    "cores", "memory_limit_bytes",
)  # fmt: skip
# Columns per priority level (and verb): metric/<level>[/<verb or reason>]; per client group and
# verb as the client saw its requests: client_*/<client>/<verb> (client_p99_ok_s: the time within
# which 99 % of them succeeded, infinite when more than 1 % failed; see simapf.simulation.collect.p99_ok).
PATTERN_METRICS = ("requests", "rejection_rate", "served", "mean_s", "p50_s", "p90_s", "p99_s", "client_error_rate",
                   "client_mean_s", "client_p50_s", "client_p90_s", "client_p99_s", "client_p99_ok_s",
                   "list_requests", "list_bytes")  # fmt: skip
RUN_INFO = ("wall_s", "simapf_version")


@dataclass(frozen=True)
class RunTask:
    """What a worker runs: identity columns for the row, the scenario and its files."""

    key: dict[str, Any]  # columns that say which run this is (run_id, replication, seed, factors...)
    scenario: dict[str, Any]  # a scenario as plain data, seed and overrides applied
    files: tuple[tuple[str, bytes], ...] = ()  # (name used in `scenario`, contents)
    metrics: tuple[str, ...] | None = None  # patterns of metric columns to keep; None = all
    label: str = field(default="", compare=False)
    cost: float | None = field(default=None, compare=False)  # simapf.jobs.estimate.cost of its scenario


# ------------------------------------------------------------------------------ driver side


def bundle(loaded) -> tuple[dict[str, Any], tuple[tuple[str, bytes], ...]]:
    """The scenario of a `LoadedScenario` as data, its file references renamed into a bundle."""
    data = loaded.scenario.model_dump(mode="json")
    files: list[tuple[str, bytes]] = []

    def take(ref: str) -> str:
        path = Path(ref)
        if not path.is_absolute():
            path = loaded.base_dir / path
        name = f"bundle/{len(files)}-{path.name}"
        files.append((name, path.read_bytes()))
        return name

    if data["apf"]["config"] != "bootstrap":
        data["apf"]["config"] = take(data["apf"]["config"])
    if data["apiserver"].get("params_file"):
        data["apiserver"]["params_file"] = take(data["apiserver"]["params_file"])
    for event in data["events"]:
        if event.get("kind") == "apf_config" and event.get("config", "bootstrap") != "bootstrap":
            event["config"] = take(event["config"])
    return data, tuple(files)


def select_metrics(row: dict[str, Any], patterns: Iterable[str] | None) -> dict[str, Any]:
    if patterns is None:
        return row
    pats = list(patterns)
    return {k: v for k, v in row.items() if any(fnmatch.fnmatchcase(k, p) for p in pats)}


def known_metric(pattern: str) -> bool:
    """Whether a metrics pattern can match a column (for checking sweep files)."""
    if any(ch in pattern for ch in "*?["):
        return True
    if "/" in pattern:
        return pattern.split("/", 1)[0] in PATTERN_METRICS
    return pattern in SCALAR_METRICS or pattern in RUN_INFO


def cached_rows(tasks: Sequence[RunTask], run: Callable[[list[RunTask]], Iterator[tuple[int, dict]]]) -> Iterator[dict]:
    """The rows of `tasks`: those the result cache holds (simapf.simulation.cache) first, then the others
    as `run` yields them ((index in the list it was given, row)), each kept in the cache as it
    arrives. Only this process, the one that asked for the runs, reads and writes the cache."""
    from simapf.simulation import cache

    store = cache.active()
    keys = [row_key(t) if store is not None else None for t in tasks]
    todo = []
    for i, (task, k) in enumerate(zip(tasks, keys)):
        got = cache.MISS if store is None or k is None else store.get("row", k, lambda row: is_row_of(task, row))
        if got is cache.MISS:
            todo.append(i)
        else:
            yield {**task.key, **got}  # as `execute` builds it: the key, then what the run gave
    if not todo:
        return  # every row came from the cache: no backend to start
    for j, row in run([tasks[i] for i in todo]):
        i = todo[j]
        cache.tally.ran += 1
        if store is not None and keys[i] is not None:
            store.put("row", keys[i], {k: v for k, v in row.items() if k not in tasks[i].key})
        yield row


def is_row_of(task: RunTask, row: Any) -> bool:
    """Whether `row` (read from the result cache) is a row `execute` could have made for `task`
    (less its key): scalars by name, the run info and every scalar metric it asks for."""
    if not isinstance(row, dict) or not all(isinstance(k, str) for k in row):
        return False
    if not all(v is None or isinstance(v, (bool, int, float, str)) for v in row.values()):
        return False
    wall = row.get("wall_s")
    if not isinstance(wall, (int, float)) or not math.isfinite(wall) or wall < 0:
        return False
    if row.get("simapf_version") != __version__:
        return False
    asked = SCALAR_METRICS if task.metrics is None else [m for m in task.metrics if m in SCALAR_METRICS]
    return all(m in row for m in asked) and not set(row) & set(task.key)


def row_key(task: RunTask) -> str | None:
    """A task's key in the result cache: its scenario, the contents of its files and the metrics
    asked; None for a run of the user's own policy code."""
    import hashlib

    from simapf.simulation import cache

    if cache.names_user_code(task.scenario):
        return None
    files = [[name, hashlib.sha256(content).hexdigest()] for name, content in task.files]
    return cache.key("row", {"scenario": task.scenario, "files": files,
                             "metrics": list(task.metrics) if task.metrics is not None else None})  # fmt: skip


# ------------------------------------------------------------------------------ worker side


def execute(task: RunTask) -> dict[str, Any]:
    """Run one task and return its row: the task's key, then the metrics, then run info."""
    from simapf.scenario.load import load_scenario

    start = time.perf_counter()
    if task.files:
        with tempfile.TemporaryDirectory(prefix="simapf-run-") as tmp:
            for name, content in task.files:
                path = Path(tmp) / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            metrics = measure(load_scenario(task.scenario, base_dir=tmp))
    else:
        metrics = measure(load_scenario(task.scenario, base_dir=os.getcwd()))
    row = dict(task.key)
    row.update(select_metrics(metrics, task.metrics))
    row["wall_s"] = time.perf_counter() - start
    row["simapf_version"] = __version__
    return row


class ListSeats:
    """Seats of the LISTs APF dispatched, tallied as they complete (no per-request records)."""

    __slots__ = ("count", "total", "max")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.max = 0

    def observe(self, rec) -> None:
        if rec.dispatch_ns >= 0 and rec.attrs.verb == "list":
            seats = rec.seats
            self.count += 1
            self.total += seats
            if seats > self.max:
                self.max = seats


def measure(loaded) -> dict[str, Any]:
    """Run a loaded scenario and flatten what happened into one row of scalars."""
    from simapf.simulation.runner import Simulation

    sim = Simulation(loaded)
    seats = ListSeats()
    sim.cluster.observers.append(seats.observe)
    result = sim.run(progress=False)
    return flatten(result.summary, seats)


def _float_or_none(x: Any) -> float | None:
    return None if x is None else float(x)


def flatten(summary: dict[str, Any], seats: ListSeats) -> dict[str, Any]:
    """A run's summary (summary.json's dict, read through its schema) as one row of scalars."""
    s = validate(summary)
    m, c, p = s.memory, s.cpu, s.process
    row: dict[str, Any] = {
        "peak_rss_bytes": float(m.peak_rss_bytes),
        "peak_heap_inuse_bytes": _float_or_none(m.peak_heap_inuse_bytes),
        "mean_cores": float(c.mean_cores),
        "peak_cores": float(c.peak_cores),
        "gc_mean_cores": _float_or_none(c.gc_mean_cores),
        "gc_cycles": c.gc_cycles,
        "oom_kills": p.oom_kills,
        "kills": p.kills,
        "down_s": float(p.down_s),
        "requests_total": s.requests.total,
        "cores": float(c.cores),
        "memory_limit_bytes": _float_or_none(m.memory_limit_bytes),
    }
    by_outcome = s.requests.by_outcome
    for outcome in OUTCOMES:
        row[f"requests_{outcome}"] = by_outcome.get(outcome, 0)
    row["throughput_ok_per_s"] = row["requests_ok"] / s.duration_s
    levels = [lv for lv in s.priority_levels if lv.requests]
    row["apf_requests"] = sum(lv.requests for lv in levels)
    row["apf_rejected"] = sum(lv.rejected for lv in levels)
    row["rejection_rate"] = row["apf_rejected"] / row["apf_requests"] if row["apf_requests"] else 0.0
    row["lists_dispatched"] = seats.count
    row["seats_per_list_mean"] = seats.total / seats.count if seats.count else float("nan")
    row["seats_per_list_max"] = float(seats.max) if seats.count else float("nan")
    for lv in levels:
        name, n = lv.priority_level, lv.requests
        row[f"requests/{name}"] = n
        row[f"rejection_rate/{name}"] = float(lv.rejection_rate or 0.0)
        counts = lv.counts()
        for reason in REASONS:
            row[f"rejection_rate/{name}/{reason}"] = counts.get(f"rejected_{reason.replace('-', '_')}", 0) / n
    for lat in s.latency:
        row[f"served/{lat.priority_level}/{lat.verb}"] = lat.count
    for client in s.clients:
        for verb, x in client.by_verb.items():
            where = f"{client.client}/{verb}"
            row[f"client_error_rate/{where}"] = float(x.error_rate)
            row[f"client_p99_ok_s/{where}"] = float(x.p99_ok_s) if x.p99_ok_s is not None else math.inf
    row.update(figure_values(summary))  # latencies and the rest of the headline figures
    for path, served in (s.lists.by_path if s.lists is not None else {}).items():  # what makes the run's regime
        row[f"list_requests/{path}"] = served.requests
        row[f"list_bytes/{path}"] = float(served.bytes)
    return row
