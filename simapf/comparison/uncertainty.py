"""A comparison across the plausible models: each policy's intervals, and how often one wins.

`simapf compare --uncertainty N` runs every policy under the same N parameter sets drawn from
the calibration's uncertainty (`simapf.uncertainty.draws`), each on the scenario's own seed (the
seed of replication 0), so that draw d of one policy and draw d of another differ only in the
policy. From them:

- `intervals`: per policy and headline figure, the replication-0 run's value and its interval,
  as `simapf run --uncertainty` gives it (parameters and the model's validated error);
- `contrasts`: per policy against the first (the baseline) and figure, the difference and the
  ratio with their intervals (`simapf.uncertainty.contrast`: draw by draw, the model's error
  shared as the validation's experiments show it is);
- `wins`: per pair of policies and figure, in how many draws the first's figure is lower than
  the second's, equal, or higher. A ranking that holds in every draw holds across the models the
  calibration cannot tell apart, which is what a KEP can cite.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from simapf.uncertainty.contrast import contrast
from simapf.uncertainty.intervals import finite, interval, limit_of_row
from simapf.uncertainty.model_error import Band, NoBand, band, load_pool, regime_of_row

CONTRAST_COLUMNS = ["metric", "policy", "baseline", "difference", "difference_lo", "difference_hi", "ratio", "ratio_lo",
                    "ratio_hi", "runs", "model_error", "residual_pairs"]  # fmt: skip


def intervals_table(points: dict[str, dict[str, Any]], drawn: dict[str, list[dict[str, Any]]],
                    metrics: list[str], kinds: dict[str, str]) -> pd.DataFrame:  # fmt: skip
    """metric, policy, value, lo, hi, parameters_lo, parameters_hi, model_error (its regime or why none)."""
    pool = load_pool()
    rows = []
    for policy, point in points.items():
        regime = regime_of_row(point)
        for metric in metrics:
            if metric not in kinds or not finite(point.get(metric)):
                continue
            error = band(pool, kinds[metric], regime)
            iv = interval(float(point[metric]), (r.get(metric) for r in drawn[policy]), error,
                          limit=limit_of_row(kinds[metric], point))  # fmt: skip
            rows.append({
                "metric": metric, "policy": policy, "value": float(point[metric]), "lo": iv.lo, "hi": iv.hi,
                "parameters_lo": iv.parameters[0], "parameters_hi": iv.parameters[1], "runs": iv.runs,
                "model_error": error.regime if isinstance(error, Band) else f"none: {error.reason}",
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "policy", "value", "lo", "hi", "parameters_lo", "parameters_hi",
                                       "runs", "model_error"])  # fmt: skip


def contrasts_table(points: dict[str, dict[str, Any]], drawn: dict[str, list[dict[str, Any]]],
                    metrics: list[str], kinds: dict[str, str]) -> pd.DataFrame:  # fmt: skip
    """Each policy against the first, figure by figure: `CONTRAST_COLUMNS` (see the module)."""
    pool = load_pool()
    policies = list(points)
    base = policies[0]
    regimes = {p: regime_of_row(points[p]) for p in policies}
    rows = []
    for policy in policies[1:]:
        for metric in metrics:
            a, b = points[policy].get(metric), points[base].get(metric)
            if metric not in kinds or not finite(a) or not finite(b):
                continue
            kind = kinds[metric]
            errors: list[Band | NoBand] = [band(pool, kind, regimes[p]) for p in (policy, base)]
            got = contrast(float(a), _values(drawn[policy], metric), errors[0], float(b), _values(drawn[base], metric),
                           errors[1], limit=limit_of_row(kind, points[base]))  # fmt: skip
            rows.append({"metric": metric, "policy": policy, "baseline": base, **got.as_dict()})
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


def _values(rows: list[dict[str, Any]], metric: str) -> list[float]:
    """A policy's draws' values of `metric`, in draw order (NaN where a draw has none)."""
    return [float(r[metric]) if finite(r.get(metric)) else math.nan for r in rows]



def wins_table(drawn: dict[str, list[dict[str, Any]]], policies: list[str], metrics: list[str]) -> pd.DataFrame:
    """metric, policy, other, draws, lower, equal, higher: draw by draw, `policy` against `other`."""
    rows = []
    for i, a in enumerate(policies):
        for b in policies[i + 1 :]:
            for metric in metrics:
                pairs = [(x.get(metric), y.get(metric)) for x, y in zip(drawn[a], drawn[b])]
                pairs = [(float(x), float(y)) for x, y in pairs if finite(x) and finite(y)]
                rows.append({
                    "metric": metric, "policy": a, "other": b, "draws": len(pairs),
                    "lower": sum(1 for x, y in pairs if x < y), "equal": sum(1 for x, y in pairs if x == y),
                    "higher": sum(1 for x, y in pairs if x > y),
                })  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "policy", "other", "draws", "lower", "equal", "higher"])


