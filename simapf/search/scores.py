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


def largest(values: list[float]) -> float:
    """The largest of a metric's run values (NaN if a run lacks it)."""
    return math.nan if any(v != v for v in values) or not values else max(values)
