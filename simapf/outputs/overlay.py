"""A real cluster's measurements beside a simulated run, on the run's time axis.

Two formats a user can get from Prometheus without extra tools:

- a `query_range` JSON export (`curl '.../api/v1/query_range?query=...&start=...&end=...&step=...'`
  or Grafana's "Inspect > Data > Download JSON" of a Prometheus panel): `data.result[]` of
  `{metric: {__name__, labels...}, values: [[unix_s, "value"], ...]}`;
- an OpenMetrics text file with timestamps (what `simapf export` writes, or `promtool tsdb dump`
  turned back into exposition), read with prometheus-client's parser.

`align` puts the measurements on the simulation's clock: the real instant `measured_at_unix_s`
(when the outage began, say) becomes the simulated instant `at_s` (the scenario's event).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from simapf.errors import ConfigError
from simapf.files import MAX_METRICS_BYTES, read_text

COLUMNS = ["time_unix_s", "metric", "series", "value"]


def load_measured(path: str | Path) -> pd.DataFrame:
    """Long form: time_unix_s, metric, series (its labels as `a="x",b="y"`), value."""
    path = Path(path)
    text = read_text(path, MAX_METRICS_BYTES, "a metrics file")
    if text.lstrip().startswith("{"):
        return _query_range(text, path)
    return _openmetrics(text, path)


def _labels(metric: dict) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(metric.items()) if k != "__name__")


def _query_range(text: str, path: Path) -> pd.DataFrame:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not readable JSON: {err}") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise ConfigError(f"{path}: not a Prometheus query_range result (data.resultType 'matrix' with data.result)")
    rows = []
    for i, item in enumerate(data["result"]):
        metric = item.get("metric") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            raise ConfigError(f"{path}: data.result[{i}]: expected metric and values")
        name, series = str(metric.get("__name__", "")), _labels(metric)
        for j, pair in enumerate(values):
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                raise ConfigError(f"{path}: data.result[{i}].values[{j}]: expected [unix_s, \"value\"]") from None
            rows.append((t, name, series, v))
    return pd.DataFrame(rows, columns=COLUMNS)


def _openmetrics(text: str, path: Path) -> pd.DataFrame:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    rows = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.timestamp is None:
                    raise ConfigError(f"{path}: {s.name}: a sample without a timestamp; cannot place it in time")
                t = float(s.timestamp.sec + s.timestamp.nsec / 1e9) if hasattr(s.timestamp, "sec") else float(s.timestamp)
                rows.append((t, s.name, _labels(s.labels), float(s.value)))
    except ValueError as err:
        raise ConfigError(f"{path}: not readable OpenMetrics: {err}") from None
    return pd.DataFrame(rows, columns=COLUMNS)


def align(measured: pd.DataFrame, measured_at_unix_s: float, at_s: float) -> pd.DataFrame:
    """The measurements with `time_s` on the simulation's clock: `measured_at_unix_s` -> `at_s`."""
    return measured.assign(time_s=measured["time_unix_s"] - measured_at_unix_s + at_s)


def plot(ax, aligned: pd.DataFrame, metric: str | None = None, scale: float = 1.0, rate: bool = False,
         label: str = "measured", time_div: float = 1.0) -> int:  # fmt: skip
    """Draw each measured series on `ax` (dashed, black shades); returns how many were drawn.
    `rate`: a counter, drawn as its per-second increase."""
    df = aligned if metric is None else aligned[aligned["metric"] == metric]
    drawn = 0
    for series, part in df.groupby("series", sort=True):
        part = part.sort_values("time_s")
        t, v = part["time_s"].to_numpy(), part["value"].to_numpy()
        if rate:
            if len(t) < 2:
                continue
            v = (v[1:] - v[:-1]) / (t[1:] - t[:-1])
            t = t[1:]
        name = f"{label} {series}" if series else label
        ax.plot(t / time_div, v * scale, ls="--", lw=1.2, color=f"{0.15 + 0.15 * (drawn % 4):.2f}", label=name)
        drawn += 1
    return drawn
