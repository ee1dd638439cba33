"""A run's results: series and tables as pandas DataFrames and a JSON summary (written to a
directory by `simapf.outputs.rundir.write_run`).

Every Result embeds the resolved scenario, its seed and the simapf version, so any number in
it can be traced back to the run that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simapf.schema.summary import Summary, validate


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
    # Read back from the result cache (simapf.simulation.cache) rather than computed by this call; every
    # number, `summary["wall_s"]` included, is the run's as it was computed.
    cached: bool = field(default=False, compare=False)

    @property
    def typed(self) -> Summary:
        """The summary as its model (simapf.schema.summary), validated from `summary` when asked
        for, so that it is never older than the mapping that is written out."""
        return validate(self.summary)

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
