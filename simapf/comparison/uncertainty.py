"""A comparison across the plausible models: each policy's intervals, and how often one wins.

`simapf compare --uncertainty N` runs every policy under the same N parameter sets drawn from
the calibration's uncertainty (`simapf.uncertainty.draws`), each on the scenario's own seed (the
seed of replication 0), so that draw d of one policy and draw d of another differ only in the
policy. From them:

- `intervals`: per policy and headline figure, the replication-0 run's value and its interval,
  as `simapf run --uncertainty` gives it (parameters and the model's validated error);
- `wins`: per pair of policies and figure, in how many draws the first's figure is lower than
  the second's, equal, or higher. A ranking that holds in every draw holds across the models the
  calibration cannot tell apart, which is what a KEP can cite.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from simapf.uncertainty.intervals import interval
from simapf.uncertainty.model_error import Band, band, load_pool, regime_of_row


def intervals_table(points: dict[str, dict[str, Any]], drawn: dict[str, list[dict[str, Any]]],
                    metrics: list[str], kinds: dict[str, str]) -> pd.DataFrame:  # fmt: skip
    """metric, policy, value, lo, hi, parameters_lo, parameters_hi, model_error (its regime or why none)."""
    pool = load_pool()
    rows = []
    for policy, point in points.items():
        regime = regime_of_row(point)
        for metric in metrics:
            if metric not in kinds or not _finite(point.get(metric)):
                continue
            error = band(pool, kinds[metric], regime)
            iv = interval(float(point[metric]), (r.get(metric) for r in drawn[policy]), error)
            rows.append({
                "metric": metric, "policy": policy, "value": float(point[metric]), "lo": iv.lo, "hi": iv.hi,
                "parameters_lo": iv.parameters[0], "parameters_hi": iv.parameters[1], "runs": iv.runs,
                "model_error": error.regime if isinstance(error, Band) else f"none: {error.reason}",
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "policy", "value", "lo", "hi", "parameters_lo", "parameters_hi",
                                       "runs", "model_error"])  # fmt: skip


def wins_table(drawn: dict[str, list[dict[str, Any]]], policies: list[str], metrics: list[str]) -> pd.DataFrame:
    """metric, policy, other, draws, lower, equal, higher: draw by draw, `policy` against `other`."""
    rows = []
    for i, a in enumerate(policies):
        for b in policies[i + 1 :]:
            for metric in metrics:
                pairs = [(x.get(metric), y.get(metric)) for x, y in zip(drawn[a], drawn[b])]
                pairs = [(float(x), float(y)) for x, y in pairs if _finite(x) and _finite(y)]
                rows.append({
                    "metric": metric, "policy": a, "other": b, "draws": len(pairs),
                    "lower": sum(1 for x, y in pairs if x < y), "equal": sum(1 for x, y in pairs if x == y),
                    "higher": sum(1 for x, y in pairs if x > y),
                })  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "policy", "other", "draws", "lower", "equal", "higher"])


def _finite(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))
