"""`simapf export RUN_DIR`: a run's results in the formats the monitoring stack reads.

- `openmetrics`: every series of `series.parquet` as an OpenMetrics text file, one timestamped
  sample per scrape (`*_total` metrics as counters, the rest as gauges), and the latency
  histograms of `histograms.parquet` (upstream's names, labels and buckets), written with
  prometheus-client's OpenMetrics exposition, so `promtool tsdb create-blocks-from openmetrics`
  can load a run into Prometheus and Grafana show it beside a real cluster. Timestamps are the
  simulated seconds plus `start_unix_s` (0 by default: the run starts at the Unix epoch; give a
  wall-clock start to lay it over real data).
- `perfdata`: clusterloader2's PerfData JSON (`version`, `dataItems` of `data` {Perc50, Perc90,
  Perc99}, `unit`, `labels`): API call latencies per priority level and verb (as CL2's
  APIResponsiveness, in ms) and the apiserver's resource usage (memory in MB and CPU in cores
  over the scrapes, as CL2's ResourceUsageSummary), so perf-dash and the scripts that read CL2
  results read simapf's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from simapf.errors import ConfigError
from simapf.files import json_text, write_text_atomic
from simapf.histograms import LABELS as HISTOGRAM_LABELS
from simapf.histograms import UPSTREAM_VERBS
from simapf.observe import LABELS

FORMATS = ("openmetrics", "perfdata")


def _read(run_dir: Path, name: str) -> pd.DataFrame:
    path = run_dir / name
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no {name} here; is it the --out directory of `simapf run`?")
    return pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)


def _families(series: pd.DataFrame, start_unix_s: float) -> Iterator:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = [c for c in LABELS if c in series.columns]
    for metric, rows in series.groupby("metric", sort=True):
        used = [c for c in labels if rows[c].fillna("").astype(str).ne("").any()]
        counter = str(metric).endswith("_total")
        name = str(metric)[: -len("_total")] if counter else str(metric)
        family = (CounterMetricFamily if counter else GaugeMetricFamily)(name, f"simapf: {metric}", labels=used)
        keyed = rows.assign(**{c: rows[c].fillna("").astype(str) for c in used})
        for key, part in keyed.groupby(used, sort=True) if used else [((), keyed)]:
            values = [str(k) for k in (key if isinstance(key, tuple) else (key,))] if used else []
            for t, v in zip(part["time_s"].to_numpy(), part["value"].to_numpy()):
                family.add_metric(values, float(v), timestamp=round(start_unix_s + float(t), 3))
        yield family


def _histogram_families(hist: pd.DataFrame, start_unix_s: float) -> Iterator:
    """Each histogram of `histograms.parquet` (simapf.histograms) as one family, a sample per
    scrape. The file holds each snapshot as consecutive rows: its buckets, then _sum and _count."""
    from prometheus_client.core import HistogramMetricFamily

    metric = hist["metric"].to_numpy(dtype=object)
    family_of = hist["metric"].str.replace(r"_(bucket|sum|count)$", "", regex=True).to_numpy(dtype=object)
    times = hist["time_s"].to_numpy(dtype=float)
    values = hist["value"].to_numpy(dtype=float)
    les = hist["le"].fillna("").astype(str).to_numpy(dtype=object)
    cells = {c: hist[c].fillna("").astype(str).to_numpy(dtype=object) for c in HISTOGRAM_LABELS}
    families: dict[str, tuple[list[str], list]] = {}
    i, n = 0, len(hist)
    while i < n:
        j = i
        while metric[j].endswith("_bucket"):
            j += 1
        name = family_of[i]
        if name not in families:
            used = [c for c in HISTOGRAM_LABELS if cells[c][i]]
            families[name] = (used, [])
        used, samples = families[name]
        buckets = [(les[k], values[k]) for k in range(i, j)]
        samples.append(([cells[c][i] for c in used], buckets, values[j], round(start_unix_s + times[i], 3)))
        i = j + 2  # past _sum and _count
    for name in sorted(families):
        used, samples = families[name]
        family = HistogramMetricFamily(name, f"simapf: {name}", labels=used)
        for label_values, buckets, total, t in sorted(samples, key=lambda x: (x[0], x[3])):
            family.add_metric(label_values, buckets, sum_value=total, timestamp=t)
        yield family


def openmetrics_text(run_dir: str | Path, start_unix_s: float = 0.0) -> str:
    """The run's series and histograms as OpenMetrics text (see the module's docstring)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest

    run_dir = Path(run_dir)
    series = _read(run_dir, "series.parquet")
    # Upstream's verb label is the HTTP verb, upper case (LIST, POST, ...).
    if "verb" in series.columns:
        series = series.assign(verb=series["verb"].map(lambda v: UPSTREAM_VERBS.get(v, v) if isinstance(v, str) else v))
    hist = pd.read_parquet(run_dir / "histograms.parquet") if (run_dir / "histograms.parquet").is_file() else None

    class _Run:
        def collect(self):
            yield from _families(series, start_unix_s)
            if hist is not None and len(hist):
                yield from _histogram_families(hist, start_unix_s)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Run())
    return generate_latest(registry).decode()


def perfdata(run_dir: str | Path) -> dict[str, dict]:
    """CL2 PerfData documents, by file name: API call latencies and resource usage."""
    run_dir = Path(run_dir)
    latency = _read(run_dir, "latency.csv")
    series = _read(run_dir, "series.parquet")
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


def export(run_dir: str | Path, fmt: str, out: str | Path, start_unix_s: float = 0.0) -> list[Path]:
    """Write the run in `run_dir` as `fmt` to `out` (a file for openmetrics, a directory for
    perfdata); returns the files written."""
    run_dir, out = Path(run_dir), Path(out)
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such directory")
    if fmt == "openmetrics":
        write_text_atomic(out, openmetrics_text(run_dir, start_unix_s))
        return [out]
    if fmt == "perfdata":
        from simapf.files import output_directory

        docs = perfdata(run_dir)
        with output_directory(out, "perfdata") as tmp:
            for name, doc in docs.items():
                (tmp / name).write_text(json_text(doc, indent=2) + "\n")
        return [out / name for name in docs]
    raise ConfigError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
