"""`simapf check`: one scenario measured and predicted, each headline figure side by side.

A row per headline figure both have (simapf.uncertainty.figures): the measured median and range
over the replications, the model's point and its 90 % interval, whether the interval holds the
measured median, and the model's error against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from simapf.bench.run import Measurement
from simapf.schema.summary import Summary
from simapf.uncertainty.figures import headline_figures, kind_of


@dataclass(frozen=True)
class Row:
    figure: str
    kind: str
    measured: float
    measured_min: float
    measured_max: float
    predicted: float
    low: float | None
    high: float | None

    @property
    def covered(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.measured <= self.high

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured."""
        return (self.predicted - self.measured) / self.measured if self.measured else None

    def as_dict(self) -> dict[str, Any]:
        return {"figure": self.figure, "kind": self.kind, "measured_median": self.measured, "measured_min": self.measured_min,
                "measured_max": self.measured_max, "predicted": self.predicted, "predicted_low": self.low,
                "predicted_high": self.high, "covered": self.covered, "error": self.error}  # fmt: skip


def rows(measurement: Measurement, predicted_summary: Summary | Mapping[str, Any]) -> list[Row]:
    spread = measurement.spread()
    out = []
    for fig in headline_figures(predicted_summary):
        got = spread.get(fig.key)
        if got is None:
            continue
        iv = fig.interval
        out.append(Row(fig.key, fig.kind, got["median"], got["min"], got["max"], fig.value,
                       iv.lo if iv else None, iv.hi if iv else None))  # fmt: skip
    return out


_SHOW = {
    "memory": lambda x: f"{x / 1e6:,.0f} MB",
    "cpu": lambda x: f"{x:.2f} cores",
    "oom_kills": lambda x: f"{x:.0f}",
    "rejected": lambda x: f"{100 * x:.2f} %",
    "latency": lambda x: f"{x * 1e3:,.1f} ms" if x < 1 else f"{x:.2f} s",
}


def table(check_rows: list[Row], replications: int) -> str:
    lines = [f"  {'figure':<44} {'measured (median, range over ' + str(replications) + ')':<40} "
             f"{'predicted [90 % interval]':<36} covered   error"]  # fmt: skip
    for r in check_rows:
        show = _SHOW[r.kind if r.kind in _SHOW else kind_of(r.figure) or "memory"]
        measured = f"{show(r.measured)} ({show(r.measured_min)} to {show(r.measured_max)})"
        predicted = show(r.predicted)
        if r.low is not None and r.high is not None:
            predicted += f" [{show(r.low)} to {show(r.high)}]"
        covered = {True: "yes", False: "no", None: "-"}[r.covered]
        error = f"{100 * r.error:+.0f} %" if r.error is not None else "-"
        lines.append(f"  {r.figure:<44} {measured:<40} {predicted:<36} {covered:<9} {error}")
    return "\n".join(lines) + "\n"
