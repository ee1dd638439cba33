"""`simapf export RUN_DIR`: a run's results in the formats the monitoring stack reads.

- `openmetrics`: every series of `series.parquet` as an OpenMetrics text file, one timestamped
  sample per scrape, and the latency histograms of `histograms.parquet` (upstream's names,
  labels and buckets), each family with the type, unit and help text kube-apiserver gives it
  (`simapf.outputs.metric_help`), written with prometheus-client's OpenMetrics exposition, so `promtool
  tsdb create-blocks-from openmetrics` can load a run into Prometheus and a Grafana dashboard
  built for a real cluster show it (`examples/grafana`). Timestamps are the
  simulated seconds plus `start_unix_s` (0 by default: the run starts at the Unix epoch; give a
  wall-clock start to lay it over real data).
- `perfdata`: clusterloader2's PerfData JSON (`version`, `dataItems` of `data` {Perc50, Perc90,
  Perc99}, `unit`, `labels`): API call latencies per priority level and verb (as CL2's
  APIResponsiveness, in ms) and the apiserver's resource usage (memory in MB and CPU in cores
  over the scrapes, as CL2's ResourceUsageSummary), so perf-dash and the scripts that read CL2
  results read simapf's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from simapf.errors import ConfigError
from simapf.outputs import FORMATS
from simapf.files import OUTPUT_MARKER, changed_since_written, check_output_file, json_text, read_output_marker
from simapf.simulation.histograms import LABELS as HISTOGRAM_LABELS
from simapf.simulation.histograms import UPSTREAM_VERBS
from simapf.outputs.metric_help import Family, family_name, family_of
from simapf.simulation.observe import LABELS


# What each format reads of a run directory. summary.json is read by neither, but it is the run's
# record: a run directory without it, or with it damaged, is not a whole run.
READS = {
    "openmetrics": ("series.parquet", "histograms.parquet", "summary.json"),
    "perfdata": ("latency.csv", "series.parquet", "summary.json"),
}
OPTIONAL = {"histograms.parquet"}  # runs written before simapf kept histograms have none

# The columns export reads from each table: "number" (finite, for times and counts), "value" (a
# number, NaN allowed), "text" (strings, or empty). The other columns are not read.
COLUMNS = {
    "series.parquet": {"time_s": "number", "metric": "text", "value": "value", **dict.fromkeys(LABELS, "label")},
    "histograms.parquet": {"time_s": "number", "metric": "text", "le": "label", "value": "value",
                           **dict.fromkeys(HISTOGRAM_LABELS, "label")},
    "latency.csv": {"priority_level": "any", "verb": "any", "count": "number", "p50_s": "number",
                    "p90_s": "number", "p99_s": "number"},
}  # fmt: skip
# Columns a table may lack (the label columns: simapf writes those it has values for).
OPTIONAL_COLUMNS = set(LABELS) | set(HISTOGRAM_LABELS)

# Where other commands keep their results, to say what a directory holds instead of a run.
OTHER_RESULTS = {"_sweep.json": "a sweep's results (`simapf sweep`)", "_optimize.json": "a search's results (`simapf optimize`)"}


def _run_directory(run_dir: Path) -> dict | None:
    """Refuse what is not a run directory; returns its marker (None for a run written without one)."""
    if not run_dir.exists():
        raise ConfigError(f"{run_dir}: no such directory")
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: is a file; export reads a run's directory (the --out of `simapf run`)")
    marker = read_output_marker(run_dir)
    if marker is not None and marker["kind"] != "run":
        raise ConfigError(f"{run_dir}: holds simapf {marker['kind']} output, not a run; export reads the --out "
                          "directory of `simapf run`")  # fmt: skip
    for name, what in OTHER_RESULTS.items():
        if marker is None and (run_dir / name).is_file():
            raise ConfigError(f"{run_dir}: holds {what}, not a run; export reads the --out directory of `simapf run`")
    return marker


def _check_file(run_dir: Path, name: str, marker: dict | None) -> bool:
    """Whether the run has `name` to read; refuses one that is missing or changed since written."""
    path = run_dir / name
    listed = marker is not None and name in marker["files"]
    if not path.exists():
        if listed:
            raise ConfigError(f"{path}: missing, though {run_dir / OUTPUT_MARKER} lists it; the run directory is "
                              "incomplete (run the scenario again)")  # fmt: skip
        if name in OPTIONAL or (name == "summary.json" and marker is None):
            return False
        raise ConfigError(f"{run_dir}: no {name} here; is it the --out directory of `simapf run`?")
    if not path.is_file():
        raise ConfigError(f"{path}: is not a file")
    if listed:
        why = changed_since_written(run_dir, name, marker)
        if why is not None:
            raise ConfigError(f"{path}: {why}; the run directory is damaged (run the scenario again)")
    return True


def _read(run_dir: Path, name: str) -> pd.DataFrame:
    """The table, checked for the columns export reads: one line naming the file otherwise."""
    path = run_dir / name
    try:
        frame = pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001  (pyarrow and pandas raise many kinds for a damaged file)
        kind = "Parquet" if name.endswith(".parquet") else "CSV"
        reason = " ".join(str(exc).replace(f"Could not open Parquet input source '{path}': ", "").split())
        reason = reason or type(exc).__name__
        raise ConfigError(f"{path}: not a {kind} table simapf can read ({reason[:200]})") from None
    try:
        whole_lines = not name.endswith(".csv") or _ends_a_line(path)
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None
    if not whole_lines:
        raise ConfigError(f"{path}: ends in the middle of a line (truncated?); not the {name} of a simapf run")
    for column, kind in COLUMNS[name].items():
        if column not in frame.columns:
            if column in OPTIONAL_COLUMNS:
                continue
            raise ConfigError(f"{path}: no column {column!r} (it has {', '.join(map(str, frame.columns[:12]))}); "
                              f"not the {name} of a simapf run")  # fmt: skip
        problem = _column_problem(frame[column], kind)
        if problem:
            raise ConfigError(f"{path}: column {column!r}: {problem}; not the {name} of a simapf run")
    return frame


def _ends_a_line(path: Path) -> bool:
    # simapf ends every line it writes; a CSV cut short mid-row still parses, into wrong numbers
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            return True
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


def _column_problem(column: pd.Series, kind: str) -> str | None:
    if kind == "any" or len(column) == 0:
        return None
    if kind in ("number", "value"):
        if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            return f"holds {column.dtype} values, not numbers"
        if kind == "number" and not np.isfinite(column.to_numpy(dtype=float)).all():
            return "holds a value that is not a finite number"
        return None
    inferred = pd.api.types.infer_dtype(column, skipna=True)
    if kind == "text" and (inferred != "string" or column.isna().any()):
        return "holds values that are not names"
    if kind == "label" and inferred not in ("string", "empty"):
        return f"holds {inferred} values, not label values"
    return None


def _check_summary(run_dir: Path) -> None:
    path = run_dir / "summary.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not the JSON simapf wrote ({' '.join(str(exc).split())[:200]})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: not a run's summary (a JSON object)")


def _tables(run_dir: Path, fmt: str) -> dict[str, pd.DataFrame]:
    """The tables `fmt` reads from the run directory, each checked against the marker (when the
    run has one) and for the columns it needs; summary.json checked too."""
    marker = _run_directory(run_dir)
    present = [name for name in READS[fmt] if _check_file(run_dir, name, marker)]
    if "summary.json" in present:
        _check_summary(run_dir)
    return {name: _read(run_dir, name) for name in present if name in COLUMNS}


def _inputs(run_dir: Path, marker: dict | None) -> list[Path]:
    """The run's files (those export reads, and every file simapf wrote there): never written over."""
    names = {*READS["openmetrics"], *READS["perfdata"], OUTPUT_MARKER, *(marker["files"] if marker else [])}
    return [run_dir / n for n in sorted(names) if isinstance(n, str) and n]


def _check_start(start_unix_s: float) -> None:
    if not math.isfinite(start_unix_s):
        raise ConfigError(f"--start {start_unix_s}: must be a finite number of Unix seconds")


def _family(metric: str, fallback_type: str):
    """An empty family for the run's series or histogram `metric`, with its type, unit and help
    text from simapf.outputs.metric_help (upstream's, for upstream's metrics). A name simapf does not
    describe (a run of another simapf version) keeps `fallback_type` and says so in its help."""
    from prometheus_client.core import Metric

    family = family_of(metric) or Family(fallback_type, f"simapf: {metric} (no description in this simapf version)")
    return Metric(family_name(metric, family), family.help, family.type, family.unit)


def _families(series: pd.DataFrame, start_unix_s: float) -> Iterator:
    labels = [c for c in LABELS if c in series.columns]
    for metric, rows in series.groupby("metric", sort=True):
        metric = str(metric)
        used = [c for c in labels if rows[c].fillna("").astype(str).ne("").any()]
        family = _family(metric, "counter" if metric.endswith("_total") else "gauge")
        keyed = rows.assign(**{c: rows[c].fillna("").astype(str) for c in used})
        for key, part in keyed.groupby(used, sort=True) if used else [((), keyed)]:
            values = dict(zip(used, (str(k) for k in (key if isinstance(key, tuple) else (key,))))) if used else {}
            for t, v in zip(part["time_s"].to_numpy(), part["value"].to_numpy()):
                family.add_sample(metric, values, float(v), timestamp=round(start_unix_s + float(t), 3))
        yield family


def _snapshots(hist: pd.DataFrame, path: Path) -> list[tuple[int, int]]:
    """Each snapshot's rows of `histograms.parquet` as (first, its _sum row): buckets, then _sum
    and _count of the same histogram. Refuses a table not in that shape."""
    metric = hist["metric"].to_numpy(dtype=object)
    spans, i, n = [], 0, len(hist)
    while i < n:
        j = i
        while j < n and metric[j].endswith("_bucket"):
            j += 1
        name = metric[i].removesuffix("_bucket")
        if j == i or j + 1 >= n or metric[j] != name + "_sum" or metric[j + 1] != name + "_count":
            raise ConfigError(f"{path}: row {i}: {metric[i]} does not start a histogram (buckets, then _sum and "
                              "_count); not the histograms.parquet of a simapf run")  # fmt: skip
        spans.append((i, j))
        i = j + 2
    return spans


def _histogram_families(hist: pd.DataFrame, start_unix_s: float, path: Path) -> Iterator:
    """Each histogram of `histograms.parquet` (simapf.simulation.histograms) as one family, a sample per
    scrape. The file holds each snapshot as consecutive rows: its buckets, then _sum and _count."""
    from prometheus_client.core import HistogramMetricFamily

    spans = _snapshots(hist, path)
    family_of = hist["metric"].str.replace(r"_(bucket|sum|count)$", "", regex=True).to_numpy(dtype=object)
    times = hist["time_s"].to_numpy(dtype=float)
    values = hist["value"].to_numpy(dtype=float)
    les = hist["le"].fillna("").astype(str).to_numpy(dtype=object)
    cells = {c: (hist[c].fillna("").astype(str).to_numpy(dtype=object) if c in hist.columns else np.full(len(hist), ""))
             for c in HISTOGRAM_LABELS}  # fmt: skip
    families: dict[str, tuple[list[str], list]] = {}
    for i, j in spans:
        name = family_of[i]
        if name not in families:
            used = [c for c in HISTOGRAM_LABELS if cells[c][i]]
            families[name] = (used, [])
        used, samples = families[name]
        buckets = [(les[k], values[k]) for k in range(i, j)]
        samples.append(([cells[c][i] for c in used], buckets, values[j], round(start_unix_s + times[i], 3)))
    for name in sorted(families):
        used, samples = families[name]
        described = _family(name, "histogram")
        family = HistogramMetricFamily(described.name, described.documentation, labels=used, unit=described.unit)
        for label_values, buckets, total, t in sorted(samples, key=lambda x: (x[0], x[3])):
            try:
                family.add_metric(label_values, buckets, sum_value=total, timestamp=t)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{path}: {name}: {' '.join(str(exc).split())[:200]}; not the histograms.parquet "
                                  "of a simapf run") from None  # fmt: skip
        yield family


def openmetrics_text(run_dir: str | Path, start_unix_s: float = 0.0) -> str:
    """The run's series and histograms as OpenMetrics text (see the module's docstring)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest

    _check_start(start_unix_s)
    run_dir = Path(run_dir)
    tables = _tables(run_dir, "openmetrics")
    series = tables["series.parquet"]
    # Upstream's verb label is the HTTP verb, upper case (LIST, POST, ...).
    if "verb" in series.columns:
        series = series.assign(verb=series["verb"].map(lambda v: UPSTREAM_VERBS.get(v, v) if isinstance(v, str) else v))
    hist = tables.get("histograms.parquet")
    families = list(_families(series, start_unix_s))
    if hist is not None and len(hist):
        families += list(_histogram_families(hist, start_unix_s, run_dir / "histograms.parquet"))

    class _Run:
        def collect(self):
            yield from families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Run())
    return generate_latest(registry).decode()


def perfdata(run_dir: str | Path) -> dict[str, dict]:
    """CL2 PerfData documents, by file name: API call latencies and resource usage."""
    run_dir = Path(run_dir)
    tables = _tables(run_dir, "perfdata")
    latency, series = tables["latency.csv"], tables["series.parquet"]
    calls = []
    for row in latency.to_dict("records"):
        calls.append({
            "data": {"Perc50": row["p50_s"] * 1e3, "Perc90": row["p90_s"] * 1e3, "Perc99": row["p99_s"] * 1e3},
            "unit": "ms",
            "labels": {"Metric": "request_duration", "PriorityLevel": str(row["priority_level"]),
                       "Verb": str(row["verb"]).upper(), "Count": str(int(row["count"]))},
        })  # fmt: skip

    def usage(metric: str, scale: float, rate: bool) -> dict[str, float]:
        s = series[series["metric"] == metric].groupby("time_s")["value"].sum()
        if s.empty:
            raise ConfigError(f"{run_dir / 'series.parquet'}: no {metric} series; not the series of a simapf run")
        values = s.to_numpy()
        if rate:
            t = s.index.to_numpy()
            values = np.diff(values) / np.diff(t) if len(t) > 1 else np.array([0.0])
        p50, p90, p99 = (float(x) / scale for x in np.percentile(values, [50, 90, 99]))
        return {"Perc50": p50, "Perc90": p90, "Perc99": p99}

    resources = [
        {"data": usage("process_resident_memory_bytes", 1e6, False), "unit": "MB",
         "labels": {"Name": "kube-apiserver", "Resource": "memory"}},
        {"data": usage("process_cpu_seconds_total", 1.0, True), "unit": "cores",
         "labels": {"Name": "kube-apiserver", "Resource": "cpu"}},
    ]  # fmt: skip
    return {
        "APIResponsiveness_simapf.json": {"version": "v1", "dataItems": calls},
        "ResourceUsageSummary_simapf.json": {"version": "v1", "dataItems": resources},
    }


def export(run_dir: str | Path, fmt: str, out: str | Path, start_unix_s: float = 0.0, force: bool = False) -> list[Path]:
    """Write the run in `run_dir` as `fmt` to `out` (a file for openmetrics, a directory for
    perfdata); returns the files written.

    Everything is checked before anything is written: the run directory (its files against the
    sizes and hashes its marker recorded, and the columns export reads), and `out`, which must
    not exist (unless `force`) and is never one of the run's own files."""
    from simapf.files import check_output_directory, output_directory, write_output_file

    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    _check_start(start_unix_s)
    run_dir = Path(run_dir)
    inputs = _inputs(run_dir, _run_directory(run_dir))
    if fmt == "openmetrics":
        check_output_file(out, "-o", force, inputs)
        text = openmetrics_text(run_dir, start_unix_s)
        return [write_output_file(out, text, "openmetrics", "-o", force, inputs)]
    out = Path(out)
    if out.is_dir() and out.resolve() == run_dir.resolve():
        raise ConfigError(f"-o {out}: is the run directory export reads; choose another folder")
    check_output_directory(out, "perfdata", force, option="-o")
    docs = perfdata(run_dir)
    with output_directory(out, "perfdata", force, option="-o") as tmp:
        for name, doc in docs.items():
            (tmp / name).write_text(json_text(doc, indent=2) + "\n")
    return [out / name for name in docs]
