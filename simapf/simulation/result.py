"""A run's results: series and tables as pandas DataFrames, a JSON summary, files on disk.

Every Result embeds the resolved scenario, its seed and the simapf version, so any number in
it can be traced back to the run that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simapf.files import json_text, output_directory


@dataclass
class Result:
    summary: dict[str, Any]
    series: pd.DataFrame  # long form: time_s, metric, <labels>, value
    latency: pd.DataFrame  # per priority level and verb
    levels: pd.DataFrame  # per priority level: requests, rejections by reason
    requests: pd.DataFrame | None = None  # one row per request, when asked for
    scenario: dict[str, Any] = field(default_factory=dict)
    # per client and verb, as the client saw its logical requests (see `_client_latency_table`)
    client_latency: pd.DataFrame | None = None
    # upstream's latency histograms at every scrape (simapf.simulation.histograms), built when first asked for
    _histograms: Any = field(default=None, repr=False, compare=False)
    # Read back from the result cache (simapf.jobs.cache) rather than computed by this call; every
    # number, `summary["wall_s"]` included, is the run's as it was computed.
    cached: bool = field(default=False, compare=False)

    @property
    def histograms(self) -> pd.DataFrame | None:
        """The latency histograms, long form: time_s, metric (`<name>_bucket`, `_sum`, `_count`),
        labels, le, value (cumulative counts); see `simapf.simulation.histograms`."""
        if self._histograms is not None and not isinstance(self._histograms, pd.DataFrame):
            self._histograms = self._histograms.frame()
        return self._histograms

    # ------------------------------------------------------------------ views

    def metric(self, name: str, **labels: str) -> pd.Series:
        """One metric as a time-indexed Series (summed over labels not given)."""
        df = self.series[self.series["metric"] == name]
        for k, v in labels.items():
            df = df[df[k] == v]
        return df.groupby("time_s")["value"].sum()

    def wide(self, name: str, by: str = "priority_level") -> pd.DataFrame:
        """One metric as a time x label table, e.g. executing seats per priority level."""
        df = self.series[self.series["metric"] == name]
        return df.pivot_table(index="time_s", columns=by, values="value", aggfunc="sum")

    def rate(self, name: str, by: str = "priority_level") -> pd.DataFrame:
        """A counter's per-second increase between scrapes, as a time x label table (a row per
        scrape after the first). A counter appears in the series at its first increment; before
        that it was 0, so every increment is counted, the first included."""
        df = self.series[self.series["metric"] == name]
        times = np.unique(self.series["time_s"].to_numpy())
        wide = df.pivot_table(index="time_s", columns=by, values="value", aggfunc="sum")
        wide = wide.reindex(times).ffill().fillna(0.0)
        if len(times) < 2:
            return wide.iloc[0:0]
        return wide.diff().iloc[1:].div(np.diff(times), axis=0)

    # ------------------------------------------------------------------ writing

    def write(self, out_dir: str | Path, figure: bool = True, force: bool = False) -> Path:
        """Write series (Parquet and CSV), summary.json, tables and the overview figure to
        `out_dir`. Files are written to a temporary directory first and moved into place, so an
        interrupted write leaves no half-written directory. A directory that is not empty is
        refused unless it holds an earlier run's output (whose files are replaced) or `force`
        (simapf's files are added beside the others); see `simapf.files.output_directory`."""
        out = Path(out_dir)
        with output_directory(out, "run", force) as tmp:
            self.write_files(tmp, figure)
        return out

    def write_files(self, folder: Path, figure: bool = True) -> list[str]:
        """Write the run's files into `folder` (an output's staging directory); their names."""
        tmp = Path(folder)
        self.series.to_parquet(tmp / "series.parquet", index=False)
        self.series.to_csv(tmp / "series.csv", index=False)
        self.latency.to_csv(tmp / "latency.csv", index=False)
        self.levels.to_csv(tmp / "priority_levels.csv", index=False)
        if self.client_latency is not None:
            self.client_latency.to_csv(tmp / "client_latency.csv", index=False)
        if self.requests is not None:
            self.requests.to_parquet(tmp / "requests.parquet", index=False)
        if self.histograms is not None:
            self.histograms.to_parquet(tmp / "histograms.parquet", index=False)
        (tmp / "summary.json").write_text(json_text(self.summary, indent=2, default=_json_default) + "\n")
        if figure:
            from simapf.outputs.figures import overview_figure, save_figure
            save_figure(overview_figure(self), tmp / "overview", self.summary.get("provenance"))
        return sorted(p.name for p in tmp.iterdir())


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return None if np.isnan(x) else float(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
