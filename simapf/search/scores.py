"""How a trial's runs score: the objective aggregated over them, each constraint's worst case."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from simapf.search.spec import LoadedOptimization


@dataclass
class Evaluation:
    """What a trial's (or a compared setting's) runs gave: per metric, one value per run."""

    settings: dict[str, Any]
    values: dict[str, list[float]] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)

    def add(self, run_id: str, row: dict[str, Any], metrics: Sequence[str]) -> None:
        self.runs.append(run_id)
        for m in metrics:
            v = row.get(m)
            self.values.setdefault(m, []).append(float(v) if v is not None else math.nan)


def objective_value(loaded: LoadedOptimization, values: list[float]) -> float:
    """The runs' values of the objective metric, aggregated; a run without the metric (no such
    requests) counts as the worst possible."""
    o = loaded.spec.objective
    if not values or any(v != v for v in values):
        return math.inf if o.direction == "minimize" else -math.inf
    a = np.asarray(values, dtype=float)
    agg = o.aggregate
    if agg == "worst":
        return float(a.max() if o.direction == "minimize" else a.min())
    if agg == "mean":
        return float(a.mean())
    if agg == "median":
        return float(np.median(a))
    return float(np.quantile(a, agg if o.direction == "minimize" else 1.0 - agg))


def violations(loaded: LoadedOptimization, ev: Evaluation) -> list[float]:
    """Per constraint, how far the worst run is beyond it (<= 0: kept)."""
    return [c.violation(ev.values.get(c.metric, [math.nan])) for c in loaded.spec.constraints]


def better(loaded: LoadedOptimization, a: float, b: float) -> bool:
    return a < b if loaded.spec.objective.direction == "minimize" else a > b


def rank(loaded: LoadedOptimization, objective: float, peak_rss_bytes: float, decisive: Sequence[float]) -> tuple[float, ...]:
    """How a feasible trial ranks, the smaller the better: its objective, then (on a tie) its
    worst peak RSS, then how close each constraint's decisive run comes to its bound. So a tie
    of the objective goes to the setting that needs less memory, and the best is never one that
    another feasible trial matches on the objective with less memory (it is on the Pareto front).

    With the worst case as aggregate, more runs can only raise every part of the key: a trial
    whose key so far is no smaller than the best's cannot become the best (`study`'s early stop)."""
    sign = 1.0 if loaded.spec.objective.direction == "minimize" else -1.0
    margins = [c.violation([v]) if v == v else math.inf for c, v in zip(loaded.spec.constraints, decisive)]
    return (_missing_last(sign * objective), _missing_last(peak_rss_bytes), *margins)


def _missing_last(x: float | None) -> float:
    """A value a run did not report ranks after every reported one."""
    return math.inf if x is None or x != x else x


def largest(values: list[float]) -> float:
    """The largest of a metric's run values (NaN if a run lacks it)."""
    return math.nan if any(v != v for v in values) or not values else max(values)
