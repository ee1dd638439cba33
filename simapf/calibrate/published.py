"""The validation table: the resource model against published measurements it was not fitted to.

`calibration/validation/table.yaml` has one row per compared quantity: a measurement from
`calibration/validation/sources.yaml`, the scenario file that sets up that experiment as its
source describes it (`calibration/validation/scenarios/`), overrides in `simapf run --set` form,
a quantity read from the run (`EXTRACTORS`, or `ratio` of two such readings), the measured value
and the tolerance the source's precision allows.

    from simapf.calibrate import published
    df = published.run_table()                  # every row; a DataFrame
    print(published.markdown(df))               # the table for docs/validation.md

Runs are deduplicated (rows reading the same scenario with the same overrides share one run)
and executed in local worker processes (joblib/loky, the sweeps' local backend), each worker
returning only the numbers its rows read. Each run is repeated with `SEEDS` seeds (the
scenario's own and the next ones) and a reading is the median over them: one run is one draw
of the model's randomness (each request's work, the Ps a pooled buffer lands on, arrival
phases), and some readings move by a factor of two from one seed to the next. Nothing here
changes a scenario after the fact: a row that the model cannot reach is marked `known_wrong` in
the table, with the missing mechanism.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import zlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from simapf.errors import ConfigError
from simapf.simulation.observe import scraped_peak
from simapf.schema.summary import validate
from simapf.files import read_yaml

VALIDATION_DIR = Path(__file__).resolve().parents[1] / "calibration" / "validation"
TABLE = VALIDATION_DIR / "table.yaml"
SOURCES = VALIDATION_DIR / "sources.yaml"

# Runs per scenario, seeds `run.seed` .. `run.seed + SEEDS - 1`; a reading is their median. One
# LIST of 16 GB (pr141378) lasts 124-284 s over seeds 1-9, its work drawn once per request.
SEEDS = 5

# Display units: a row's `measured` is in its unit; extractors return base units (bytes, s, cores).
UNITS: dict[str, float] = {
    "GB": 1e9,
    "GiB": float(2**30),
    "MB": 1e6,
    "MiB": float(2**20),
    "s": 1.0,
    "min": 60.0,
    "ms": 1e-3,
    "cores": 1.0,
    "core-s": 1.0,
    "fraction": 1.0,
    "ratio": 1.0,
    "1/s": 1.0,
}

ROW_FIELDS = {"id", "source", "scenario", "harness", "overrides", "quantity", "args", "numerator", "denominator",
              "measured", "unit", "tolerance", "why", "setup", "known_wrong"}  # fmt: skip
REQUIRED = ("id", "source", "quantity", "measured", "unit", "tolerance", "why")
# A row of the calibration's own harness (#132233's LIST experiment, other rows than those
# fitted) names its cell instead of a scenario file: it runs the scenario the calibration runs
# for such a cell (`simapf.calibrate.scenario.scenario_for`, with the shipped set-up), so the
# two can never drift apart.
HARNESS_FIELDS = {"source", "response_bytes", "objects", "qps", "seats"}
HARNESS = "harness:"


# ------------------------------------------------------------------------------ tolerance


@dataclass(frozen=True)
class Tolerance:
    """`30%`: |p/m - 1| <= 0.30; `2x`: max(p/m, m/p) <= 2."""

    kind: str  # "pct" | "fold"
    value: float
    text: str

    @classmethod
    def parse(cls, text: Any, where: str) -> "Tolerance":
        s = str(text).strip()
        try:
            if s.endswith("%"):
                v = float(s[:-1]) / 100.0
                if v > 0:
                    return cls("pct", v, s)
            elif s.lower().endswith("x"):
                v = float(s[:-1])
                if v > 1:
                    return cls("fold", v, s)
        except ValueError:
            pass
        raise ConfigError(f"{where}.tolerance: expected like '30%' or '2x', got {text!r}")

    def within(self, predicted: float, measured: float) -> bool:
        if not _finite(predicted) or not _finite(measured):
            return False
        if self.kind == "pct":
            return abs(predicted / measured - 1.0) <= self.value + 1e-12
        return fold(predicted, measured) <= self.value + 1e-12


def fold(predicted: float, measured: float) -> float:
    """max(p/m, m/p); infinite when either is 0, negative or not a number."""
    if not _finite(predicted) or not _finite(measured) or predicted <= 0 or measured <= 0:
        return math.inf
    return max(predicted / measured, measured / predicted)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and math.isfinite(float(x))


# ------------------------------------------------------------------------------ extractors
#
# Each takes (result, loaded scenario, params, args) and returns a number in base units, or NaN
# when the run does not have it (a client that never finished, say).


def _rss(result) -> pd.Series:
    return result.metric("process_resident_memory_bytes")


def _steady_from(loaded) -> float:
    return loaded.scenario.run.steady_from_s


def _peak(result, loaded, args, steady: bool) -> float:
    rss = _rss(result)
    if steady:
        rss = rss[rss.index >= _steady_from(loaded)]
    if rss.empty:
        return math.nan
    scrape_s = args.get("scrape_s")
    return scraped_peak(rss.to_numpy(), loaded.scenario.run.scrape_interval_s, float(scrape_s) if scrape_s else None)


def x_peak_rss_bytes(result, loaded, params, args) -> float:
    """The run's peak RSS (the summary's peak_rss_bytes, which also counts an OOM kill's limit)."""
    return float(validate(result.summary).memory.peak_rss_bytes)


def x_peak_rss_steady_bytes(result, loaded, params, args) -> float:
    """Peak RSS over the steady-state window (`run.steady_state_from_s` on)."""
    peak = validate(result.summary).memory.peak_rss_steady_bytes
    return float(peak) if peak is not None else math.nan


def x_peak_rss_scraped_bytes(result, loaded, params, args) -> float:
    """Peak RSS over the steady window as scrapes `scrape_s` apart see it (default 15 s)."""
    return _peak(result, loaded, {"scrape_s": args.get("scrape_s", 15)}, steady=True)


def _idle_rss(result, loaded, args) -> float:
    """RSS before any client starts: the last reading before `idle_before_s` (default the
    earliest client start; it must be after the first reading)."""
    rss = _rss(result)
    before = args.get("idle_before_s")
    if before is None:
        starts = [c.start.at_s for c in loaded.scenario.clients if c.count > 0]
        before = min(starts) if starts else 0.0
    idle = rss[rss.index < before]
    if idle.empty:
        raise ConfigError(f"peak_rss_minus_idle_bytes: no RSS reading before {before:g} s (start the clients later)")
    return float(idle.iloc[-1])


def x_peak_rss_minus_idle_bytes(result, loaded, params, args) -> float:
    """Peak RSS (over the steady window; as `scrape_s` scrapes see it when given) minus the same
    run's idle RSS before its clients start."""
    return _peak(result, loaded, args, steady=True) - _idle_rss(result, loaded, args)


def x_mean_cores(result, loaded, params, args) -> float:
    return float(validate(result.summary).cpu.mean_cores)


def x_mean_cores_steady(result, loaded, params, args) -> float:
    return float(validate(result.summary).cpu.mean_cores_steady)


def _client_row(result, args) -> pd.Series | None:
    df = result.client_latency
    if df is None or df.empty:
        return None
    sel = df[(df["client"] == args["client"]) & (df["verb"].str.lower() == str(args.get("verb", "list")).lower())]
    return None if sel.empty else sel.iloc[0]


def _client_latency(q: str) -> Callable:
    def extract(result, loaded, params, args) -> float:
        row = _client_row(result, args)
        return math.nan if row is None else float(row[q])

    extract.__doc__ = f"Client-side latency {q} of `client`'s `verb` requests (client_latency table)."
    return extract


def _server_latency(q: str) -> Callable:
    def extract(result, loaded, params, args) -> float:
        df = result.latency
        sel = df[df["verb"].str.lower() == str(args.get("verb", "list")).lower()]
        if args.get("priority_level"):
            sel = sel[sel["priority_level"] == args["priority_level"]]
        if sel.empty:
            return math.nan
        return float(sel.sort_values("count").iloc[-1][q])  # the busiest level serving that verb

    extract.__doc__ = f"Server-side latency {q} of `verb` (at `priority_level`, else the busiest level)."
    return extract


def _request_counts(result, loaded, args) -> tuple[pd.Series, pd.Series]:
    """apiserver_request_total over the steady window, for `verb`: (all codes, selected code)."""
    s = result.series
    s = s[(s["metric"] == "apiserver_request_total") & (s["verb"].str.lower() == str(args.get("verb", "list")).lower())]
    total = s.groupby("time_s")["value"].sum()
    code = str(args.get("code", "429"))
    sel = s[s["code"] == code].groupby("time_s")["value"].sum().reindex(total.index, fill_value=0.0)
    return total, sel


def _window_delta(x: pd.Series, start: float) -> tuple[float, float]:
    """(growth of a counter from the last reading at or before `start` to the end, elapsed s)."""
    if x.empty:
        return 0.0, 0.0
    before = x[x.index <= start]
    t0, v0 = (before.index[-1], before.iloc[-1]) if len(before) else (x.index[0], 0.0)
    return float(x.iloc[-1] - v0), float(x.index[-1] - t0)


def x_rejected_fraction(result, loaded, params, args) -> float:
    """Share of `verb` requests answered 429 over the steady window (apiserver_request_total)."""
    total, rejected = _request_counts(result, loaded, {**args, "code": "429"})
    n, _ = _window_delta(total, _steady_from(loaded))
    r, _ = _window_delta(rejected, _steady_from(loaded))
    return r / n if n > 0 else math.nan


def x_requests_per_s(result, loaded, params, args) -> float:
    """`verb` requests answered with `code` (default 200) per second over the steady window."""
    _, sel = _request_counts(result, loaded, {**args, "code": args.get("code", "200")})
    n, dt = _window_delta(sel, _steady_from(loaded))
    return n / dt if dt > 0 else math.nan


def x_cpu_core_s_per_request(result, loaded, params, args) -> float:
    """Process CPU while `client` works, less the idle CPU (`process.baseline_cores`), per
    successful `verb` request of it. The window runs from the client's start to the scrape at
    which its last request had ended (so idle time after it, and its GC cycles, are left out)."""
    row = _client_row(result, args)
    if row is None or row["ok"] == 0:
        return math.nan
    spec = next(c for c in loaded.scenario.clients if c.name == args["client"])
    done = result.metric("simapf_client_requests_total", client=args["client"])
    start = spec.start.at_s
    end = float(done[done >= done.iloc[-1]].index[0]) if len(done) else math.nan
    cpu = result.metric("process_cpu_seconds_total")
    t, c = cpu.index.to_numpy(dtype=float), cpu.to_numpy(dtype=float)
    busy = float(np.interp(end, t, c) - np.interp(start, t, c)) - params.process.baseline_cores * (end - start)
    return busy / float(row["ok"])


def x_discovery_run_s(result, loaded, params, args) -> float:
    """Median duration of `client`'s discovery runs (from its first request to its last response)."""
    for c in validate(result.summary).clients:
        if c.client == args["client"]:
            return float(c.run_p50_s) if c.run_p50_s is not None else math.nan
    return math.nan


def x_informers_synced_s(result, loaded, params, args) -> float:
    """Seconds from `client`'s start until all its informers are watching; NaN if never."""
    spec = next(c for c in loaded.scenario.clients if c.name == args["client"])
    watching = result.metric("simapf_informers_watching", client=args["client"])
    done = watching[(watching >= spec.count) & (watching.index > spec.start.at_s)]
    return float(done.index[0] - spec.start.at_s) if len(done) else math.nan


def _refill_window(result, loaded, args) -> tuple[float, float]:
    i = int(args.get("event", 0))
    ev = validate(result.summary).events[i]
    if ev.kind != "restart":
        raise ConfigError(f"refill: event {i} is a {ev.kind}, not a restart")
    if ev.recovery_s is None:
        return ev.at_s, math.nan
    restart_s = loaded.scenario.apiserver.restart_s
    down = restart_s if restart_s is not None else 0.0
    return ev.at_s + down, ev.at_s + ev.recovery_s


def x_refill_s(result, loaded, params, args) -> float:
    """Seconds from a restart's process start (its restart_s after the event) until it is healthy
    again with its watch caches filled (the summary's recovery, at scrape resolution)."""
    start, end = _refill_window(result, loaded, args)
    return end - start


def x_refill_cpu_core_s(result, loaded, params, args) -> float:
    """Process CPU between a restart's process start and its recovery, less the idle CPU."""
    start, end = _refill_window(result, loaded, args)
    if not math.isfinite(end):
        return math.nan
    cpu = result.metric("process_cpu_seconds_total")
    t, v = cpu.index.to_numpy(dtype=float), cpu.to_numpy(dtype=float)
    used = float(np.interp(end, t, v) - np.interp(start, t, v))
    return used - params.process.baseline_cores * (end - start)


EXTRACTORS: dict[str, Callable[..., float]] = {
    "peak_rss_bytes": x_peak_rss_bytes,
    "peak_rss_steady_bytes": x_peak_rss_steady_bytes,
    "peak_rss_scraped_bytes": x_peak_rss_scraped_bytes,
    "peak_rss_minus_idle_bytes": x_peak_rss_minus_idle_bytes,
    "mean_cores": x_mean_cores,
    "mean_cores_steady": x_mean_cores_steady,
    "cpu_core_s_per_request": x_cpu_core_s_per_request,
    "latency_p50_s": _server_latency("p50_s"),
    "latency_p99_s": _server_latency("p99_s"),
    "client_latency_p50_s": _client_latency("p50_s"),
    "client_latency_p99_s": _client_latency("p99_s"),
    "rejected_fraction": x_rejected_fraction,
    "requests_per_s": x_requests_per_s,
    "discovery_run_s": x_discovery_run_s,
    "informers_synced_s": x_informers_synced_s,
    "refill_s": x_refill_s,
    "refill_cpu_core_s": x_refill_cpu_core_s,
}
QUANTITIES = (*EXTRACTORS, "ratio")


# ------------------------------------------------------------------------------ the table


@dataclass(frozen=True)
class Reading:
    """One number read from one run: the run (scenario + overrides) and the extractor."""

    scenario: str  # path relative to VALIDATION_DIR
    overrides: str  # JSON of the sorted {key: value} mapping
    quantity: str
    args: str  # JSON of the sorted args

    @property
    def run_key(self) -> tuple[str, str]:
        return (self.scenario, self.overrides)


@dataclass
class Row:
    spec: dict[str, Any]
    tolerance: Tolerance
    numerator: Reading | None = None
    denominator: Reading | None = None
    reading: Reading | None = None
    parts: list[Reading] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec["id"]


def _json(x: dict) -> str:
    return json.dumps(x or {}, sort_keys=True, default=str)


def load_table(path: str | Path = TABLE) -> list[dict[str, Any]]:
    """The table's rows as mappings, checked: required fields, known quantities and units, ratio
    parts, unique ids, and scenario files that exist."""
    path = Path(path)
    rows = read_yaml(path)
    if not isinstance(rows, list):
        raise ConfigError(f"{path}: a list of rows expected")
    seen: set[str] = set()
    for i, r in enumerate(rows):
        where = f"{path.name}[{i}]"
        if not isinstance(r, dict):
            raise ConfigError(f"{where}: a mapping expected")
        where = f"{path.name}[{r.get('id', i)}]"
        unknown = set(r) - ROW_FIELDS
        if unknown:
            raise ConfigError(f"{where}: unknown fields {sorted(unknown)}")
        for k in REQUIRED:
            if k not in r:
                raise ConfigError(f"{where}: missing {k}")
        if r["id"] in seen:
            raise ConfigError(f"{where}: duplicate id")
        seen.add(r["id"])
        if r["quantity"] not in QUANTITIES:
            raise ConfigError(f"{where}.quantity: {r['quantity']!r} is not one of {', '.join(QUANTITIES)}")
        if r["unit"] not in UNITS:
            raise ConfigError(f"{where}.unit: {r['unit']!r} is not one of {', '.join(UNITS)}")
        if not _finite(r["measured"]) or r["measured"] <= 0:
            raise ConfigError(f"{where}.measured: a positive number expected")
        Tolerance.parse(r["tolerance"], where)
        if r["quantity"] == "ratio":
            for part in ("numerator", "denominator"):
                p = r.get(part)
                if not isinstance(p, dict) or not ("row" in p or "quantity" in p):
                    raise ConfigError(f"{where}.{part}: {{row: id}} or {{quantity, args, overrides}} expected")
                if "quantity" in p and p["quantity"] not in EXTRACTORS:
                    raise ConfigError(f"{where}.{part}.quantity: {p['quantity']!r} is not an extractor")
        if ("scenario" in r) == ("harness" in r):
            raise ConfigError(f"{where}: give a scenario file or a harness cell, one of them")
        if "harness" in r:
            h = r["harness"]
            if not isinstance(h, dict) or set(h) != HARNESS_FIELDS or h["source"] not in ("etcd", "cache"):
                raise ConfigError(f"{where}.harness: {{{', '.join(sorted(HARNESS_FIELDS))}}} expected, source etcd or cache")
        elif not (path.parent / r["scenario"]).is_file():
            raise ConfigError(f"{where}.scenario: no file {r['scenario']}")
    ids = {r["id"] for r in rows}
    for r in rows:
        for part in ("numerator", "denominator"):
            ref = (r.get(part) or {}).get("row")
            if ref is not None and ref not in ids:
                raise ConfigError(f"{path.name}[{r['id']}].{part}.row: no row {ref!r}")
    return rows


def load_sources(path: str | Path = SOURCES) -> dict[str, dict[str, Any]]:
    """sources.yaml as {id: entry}."""
    return {s["id"]: s for s in read_yaml(Path(path))}


def _reading(spec: dict, extra: dict | None = None) -> Reading:
    over = dict(spec.get("overrides") or {})
    extra = extra or {}
    over.update(extra.get("overrides") or {})
    quantity = extra.get("quantity", spec["quantity"])
    args = extra.get("args", spec.get("args") if "quantity" not in extra else None) or {}
    where = HARNESS + _json(spec["harness"]) if "harness" in spec else spec["scenario"]
    return Reading(where, _json(over), quantity, _json(args))


def harness_scenario(harness: dict[str, Any]) -> dict[str, Any]:
    """The scenario the calibration runs for a harness row's cell (`simapf.calibrate.scenario`)."""
    from simapf.calibrate.data import Cell, Row
    from simapf.calibrate.scenario import scenario_for

    # Its own random streams: an index no fitted row has, the same for the same cell on any machine.
    index = zlib.crc32(_json(harness).encode())
    row = Row(index=index, source=harness["source"], response_bytes=float(harness["response_bytes"]),
              object_count=int(harness["objects"]), qps=float(harness["qps"]), load="max", cpu_percent=math.nan,
              mem_mb=((int(harness["seats"]), None),))  # fmt: skip
    return scenario_for(Cell(row, int(harness["seats"])))


def _load(scenario: str, base: str, over: dict[str, Any]):
    """A table run's scenario: a file of the table's folder, or a harness cell's."""
    from simapf.scenario.load import load_scenario

    if scenario.startswith(HARNESS):
        return load_scenario(harness_scenario(json.loads(scenario[len(HARNESS):])), over, base_dir=base)
    return load_scenario(Path(base) / scenario, over)


def _build(rows: list[dict]) -> dict[str, Row]:
    by_id = {r["id"]: r for r in rows}
    out: dict[str, Row] = {}
    for r in rows:
        row = Row(r, Tolerance.parse(r["tolerance"], r["id"]))
        if r["quantity"] == "ratio":
            parts = []
            for name in ("numerator", "denominator"):
                p = r[name]
                if "row" in p:
                    ref = by_id[p["row"]]
                    if ref["quantity"] == "ratio":
                        raise ConfigError(f"{r['id']}.{name}: a ratio of ratios is not supported")
                    parts.append(_reading(ref))
                else:
                    parts.append(_reading(r, p))
            row.numerator, row.denominator = parts
            row.parts = parts
        else:
            row.reading = _reading(r)
            row.parts = [row.reading]
        out[r["id"]] = row
    return out


# ------------------------------------------------------------------------------ running


def _run_one(scenario: str, overrides: str, readings: list[tuple[str, str]], base: str,
             seed_offset: int = 0, draws: Any = None, draw: int = 0) -> dict[str, Any]:  # fmt: skip
    """Run one scenario (in a worker), its seed moved on by `seed_offset` (or, with `draws`, its
    own seed and parameter draw `draw`), and return the readings asked of it, {(quantity, args):
    value}, and the run's regime (`simapf.uncertainty.model_error.regime_of`)."""
    from simapf.simulation.runner import run
    from simapf.uncertainty.coverage import run_inputs
    from simapf.uncertainty.model_error import regime_of

    start = time.perf_counter()
    loaded = _run_scenario(scenario, overrides, base, seed_offset, draws, draw)
    result = run(loaded, cache=False)  # run_table caches what the run is read for, not all of it
    params = loaded.params
    values = {}
    for quantity, args in readings:
        values[(quantity, args)] = float(EXTRACTORS[quantity](result, loaded, params, json.loads(args)))
    return {"key": (scenario, overrides), "seed_offset": seed_offset, "draw": draw if draws is not None else None,
            "values": values, "regime": regime_of(result.summary),
            "inputs": run_inputs(result.summary, loaded.scenario.model_dump(mode="json")),
            "wall_s": time.perf_counter() - start, "sim_s": loaded.scenario.run.duration_s}  # fmt: skip


def _run_task(task: tuple, base: str, draws: Any) -> dict[str, Any]:
    """`_run_one` of a task of `run_table`: ((scenario, overrides), readings, seed offset, draw)."""
    (scenario, overrides), readings, seed_offset, draw = task
    return _run_one(scenario, overrides, sorted(readings), base, seed_offset, draws, draw)


def _costs(tasks: list, base: str) -> list[float]:
    """Each task's cost (simapf.jobs.estimate): its scenario's, whatever its seed or draw."""
    from simapf.jobs.estimate import cost

    by_run: dict[tuple[str, str], float] = {}
    for (s, o), _rs, _k, _d in tasks:
        if (s, o) not in by_run:
            by_run[(s, o)] = cost(_load(s, base, json.loads(o)))
    return [by_run[key] for key, _rs, _k, _d in tasks]


def _run_scenario(scenario: str, overrides: str, base: str, seed_offset: int = 0, draws: Any = None,
                  draw: int = 0):  # fmt: skip
    """The loaded scenario of one run of the table (see `_run_one`)."""
    from simapf.scenario.load import load_scenario
    from simapf.uncertainty.intervals import drawn_scenario

    over = json.loads(overrides)
    loaded = _load(scenario, base, over)
    if seed_offset:
        over["run.seed"] = loaded.scenario.run.seed + seed_offset
        loaded = _load(scenario, base, over)
    if draws is not None:
        data = drawn_scenario(loaded.scenario.model_dump(mode="json"), loaded.params, draws, draw)
        loaded = load_scenario(data, base_dir=loaded.base_dir)
    return loaded


# What identifies a run's output among the table's runs; the rest is what the run gave.
_TASK_FIELDS = ("key", "seed_offset", "draw")


def _from_cache(tasks: list, base: str, draws: Any) -> tuple[list[dict], list, dict]:
    """The outputs of `tasks` the result cache holds (simapf.simulation.cache), the tasks left to run, and
    the cache key of each of those by its output's identity (None: not to be cached)."""
    from simapf.simulation import cache
    from simapf.scenario.load import user_policies

    store = cache.active()
    if store is None:
        return [], tasks, {}
    found, todo, keys = [], [], {}
    for (s, o), rs, k, d in tasks:
        loaded = _run_scenario(s, o, base, k, draws, d)
        key = None if user_policies(loaded.scenario) else cache.key(
            "validation", {**cache.run_identity(loaded), "readings": sorted(rs)})  # fmt: skip
        identity = ((s, o), k, d if draws is not None else None)
        got = cache.MISS if key is None else store.get("validation", key, lambda out, rs=rs: _is_output_of(rs, out))
        if got is cache.MISS:
            todo.append(((s, o), rs, k, d))
            keys[identity] = key
        else:
            found.append(dict(zip(_TASK_FIELDS, identity), **got))
    return found, todo, keys


def _is_output_of(readings: list, out: Any) -> bool:
    """Whether `out` (read from the result cache) is what `_run_one` gives for `readings`, less
    the task's fields: a value for each reading, and the run's regime, inputs and times."""
    if not isinstance(out, dict) or set(out) != {"values", "regime", "inputs", "wall_s", "sim_s"}:
        return False
    values = out["values"]
    return (isinstance(values, dict) and set(values) == {tuple(r) for r in readings}
            and all(isinstance(v, float) for v in values.values())
            and isinstance(out["wall_s"], float) and isinstance(out["sim_s"], (int, float)))  # fmt: skip


def _kept(outputs: Iterable[dict], keys: dict) -> Iterator[dict]:
    """`outputs`, each put in the result cache as it comes, under the key `_from_cache` gave its run."""
    from simapf.simulation import cache

    store = cache.active() if keys else None
    for out in outputs:
        cache.tally.ran += 1
        key = keys.get(tuple(out[f] for f in _TASK_FIELDS))
        if store is not None and key is not None:
            store.put("validation", key, {k: v for k, v in out.items() if k not in _TASK_FIELDS})
        yield out


def _cost_hint(scenario: str, base: Path) -> float:
    """Rough cost of a run for scheduling (longest first): simulated seconds x client instances."""
    try:
        data = harness_scenario(json.loads(scenario[len(HARNESS):])) if scenario.startswith(HARNESS) \
            else read_yaml(base / scenario)
        n = sum(int(c.get("count", 1)) for c in data.get("clients") or []) or 1
        return float((data.get("run") or {}).get("duration_s", 300)) * n
    except Exception:  # noqa: BLE001 - only an ordering hint
        return 0.0


def table_runs(path: str | Path = TABLE, seeds: int = SEEDS) -> list[tuple[Any, int]]:
    """What `run_table` runs for the whole table: each scenario it loads, with its runs (one per
    seed); for an estimate of its time (simapf.jobs.estimate)."""
    path = Path(path)
    keys = {part.run_key for row in _build(load_table(path)).values() for part in row.parts}
    return [(_load(s, str(path.parent), json.loads(o)), seeds) for s, o in sorted(keys)]


def run_table(rows: Iterable[str] | None = None, progress: bool = False, workers: int | None = None,
              path: str | Path = TABLE, seeds: int = SEEDS, draws: Any = None) -> pd.DataFrame:  # fmt: skip
    """Run the table's scenarios (or only what `rows`, a list of ids, needs) and compare; each
    reading is the median of `seeds` runs (a ratio, the ratio of its two medians).

    Returns one line per row: id, source, quantity, measured, predicted (in the row's unit), unit,
    error (predicted/measured - 1), fold (max(p/m, m/p)), tolerance, within, known_wrong, setup,
    scenario, overrides, and the regime of its run (path, size, overloaded; a ratio's numerator's).
    `workers`: local processes (default: every core; 1 = in this process). With `draws`
    (`simapf.uncertainty.draws.ParameterDraws`): one run per row and draw, each on the scenario's
    own seed with the draw's parameters, and one line per row and draw (column `draw`).
    """
    path = Path(path)
    base = path.parent
    all_rows = load_table(path)
    built = _build(all_rows)
    wanted = list(built) if rows is None else list(rows)
    for r in wanted:
        if r not in built:
            raise ConfigError(f"no row {r!r} in {path.name}")
    runs: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for rid in wanted:
        for part in built[rid].parts:
            runs.setdefault(part.run_key, set()).add((part.quantity, part.args))
    if seeds < 1:
        raise ValueError("seeds must be at least 1")
    order = sorted(runs.items(), key=lambda kv: -_cost_hint(kv[0][0], base))
    if draws is None:
        tasks = [(key, rs, k, 0) for key, rs in order for k in range(seeds)]
    else:
        tasks = [(key, rs, 0, d) for key, rs in order for d in range(len(draws))]

    from simapf.sweeps.backends import cpu_count

    started = time.perf_counter()
    cached, todo, keys = _from_cache(tasks, str(base), draws)
    n = max(1, min(workers or cpu_count(), len(todo)))
    done: dict[tuple[tuple[str, str], int], list[dict]] = {}  # (run, draw) -> its runs
    from simapf.jobs.estimate import recording
    from simapf.jobs.pool import run_each

    run = functools.partial(_run_task, base=str(base), draws=draws)
    outputs = (out for _i, out in run_each(run, todo, n, _costs(todo, str(base)) if recording() else None))
    for out in itertools.chain(cached, _kept(outputs, keys)):
        done.setdefault((out["key"], out["draw"] or 0), []).append(out)
        if progress:
            s, o = out["key"]
            which = f"draw {out['draw']}" if out["draw"] is not None else f"seed +{out['seed_offset']}"
            print(f"[{time.perf_counter() - started:6.1f} s] {s} {o if o != '{}' else ''} {which} "
                  f"({out['sim_s']:g} simulated s in {out['wall_s']:.1f} s)", flush=True)  # fmt: skip

    def value(r: Reading, d: int) -> float:
        got = [x["values"][(r.quantity, r.args)] for x in done[(r.run_key, d)]]
        return float(np.median(got)) if all(_finite(x) for x in got) else math.nan

    def regime(r: Reading, d: int) -> Any:
        return min(done[(r.run_key, d)], key=lambda x: x["seed_offset"])["regime"]

    lines = []
    for d in range(1 if draws is None else len(draws)):
        for rid in wanted:
            row = built[rid]
            spec = row.spec
            scale = UNITS[spec["unit"]]
            if spec["quantity"] == "ratio":
                num, den = value(row.numerator, d), value(row.denominator, d)
                predicted = num / den if _finite(num) and _finite(den) and den != 0 else math.nan
            else:
                predicted = value(row.reading, d) / scale
            measured = float(spec["measured"])
            where = regime(row.parts[0], d)
            lines.append({
                "id": rid,
                "source": spec["source"],
                "quantity": spec["quantity"],
                "measured": measured,
                "predicted": predicted,
                "unit": spec["unit"],
                "error": predicted / measured - 1.0 if _finite(predicted) else math.nan,
                "fold": fold(predicted, measured),
                "tolerance": row.tolerance.text,
                "within": row.tolerance.within(predicted, measured),
                "known_wrong": spec.get("known_wrong"),
                "setup": spec.get("setup", ""),
                "scenario": spec.get("scenario", "the calibration's harness"),
                "overrides": spec.get("overrides") or {},
                "path": where.path, "size": where.size, "overloaded": where.overloaded,
                **({"draw": d} if draws is not None else {}),
            })  # fmt: skip
    df = pd.DataFrame(lines)
    df.attrs["wall_s"] = time.perf_counter() - started
    df.attrs["runs"] = len(tasks)
    df.attrs["seeds"] = seeds if draws is None else 1
    df.attrs["workers"] = n
    # Each run's inputs (simapf.uncertainty.coverage), its first seed's: where the model was checked.
    df.attrs["inputs"] = [min(outs, key=lambda x: x["seed_offset"])["inputs"] for outs in done.values()]
    return df


# ------------------------------------------------------------------------------ report


def summary(df: pd.DataFrame, include_known_wrong: bool = False) -> dict[str, Any]:
    """Median |error|, worst fold and rows within tolerance (known-wrong rows left out unless asked)."""
    d = df if include_known_wrong else df[[not _marked(x) for x in df["known_wrong"]]]
    err = d["error"].abs()
    return {
        "rows": int(len(d)),
        "within": int(d["within"].sum()),
        "median_abs_error": float(err.median()) if len(d) else math.nan,
        "worst_fold": float(d["fold"].max()) if len(d) else math.nan,
        "worst_fold_id": str(d.loc[d["fold"].idxmax(), "id"]) if len(d) and np.isfinite(d["fold"]).any() else None,
    }


def _marked(known_wrong: Any) -> bool:
    """Whether a row is marked known wrong (pandas keeps an absent mark as None or NaN)."""
    return isinstance(known_wrong, str) and bool(known_wrong.strip())


def _fmt(x: float) -> str:
    if not _finite(x):
        return "–"
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _pct(x: float) -> str:
    return "–" if not _finite(x) else f"{x * 100:+.0f}%"


def markdown(df: pd.DataFrame, sources: dict[str, dict] | None = None) -> str:
    """The table for docs/validation.md: one line per row, then the median |error| and worst fold."""
    sources = sources if sources is not None else load_sources()
    out = [
        "| measurement | source | setup | measured | predicted | error | tolerance | verdict |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    notes: list[str] = []
    for r in df.itertuples(index=False):
        src = sources.get(r.source, {})
        link = f"[{r.source}]({src['source_url']})" if src.get("source_url") else r.source
        if _marked(r.known_wrong):
            notes.append(f"{len(notes) + 1}. `{r.id}`: {r.known_wrong}")
            mark = f"known wrong [{len(notes)}]"
            verdict = f"within, though {mark}" if r.within else f"out (x{_fmt(r.fold)}), {mark}"
        elif r.within:
            verdict = "within"
        else:
            verdict = f"**out** (x{_fmt(r.fold)})"
        out.append(
            f"| {r.id} | {link} | {r.setup} | {_fmt(r.measured)} {r.unit} | {_fmt(r.predicted)} {r.unit} "
            f"| {_pct(r.error)} | {r.tolerance} | {verdict} |"
        )
    s = summary(df)
    a = summary(df, include_known_wrong=True)
    out.append("")
    out.append(
        f"Rows not marked known wrong: {s['within']} of {s['rows']} within tolerance, median |error| "
        f"{_pct(s['median_abs_error']).lstrip('+')}, worst fold x{_fmt(s['worst_fold'])} ({s['worst_fold_id']}). "
        f"All {a['rows']} rows: {a['within']} within, median |error| {_pct(a['median_abs_error']).lstrip('+')}, "
        f"worst fold x{_fmt(a['worst_fold'])} ({a['worst_fold_id']})."
    )
    if "wall_s" in df.attrs:
        seeds = df.attrs.get("seeds", 1)
        each = f" (each scenario with {seeds} seeds; a prediction is their median)" if seeds > 1 else ""
        out.append(f"{df.attrs['runs']} runs{each} on {df.attrs['workers']} worker(s) took {df.attrs['wall_s']:.0f} s.")
    if notes:
        out += ["", "Known wrong (the model lacks the mechanism that decides the row; the test expects these to fail):", ""]
        out += notes
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # python -m simapf.calibrate.published [row ...]
    import sys

    frame = run_table(sys.argv[1:] or None, progress=True)
    print(markdown(frame))
