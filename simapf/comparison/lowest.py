"""Which setting kept peak memory lowest, said only where the runs can tell.

    answer = lowest_peak(runs, by="policy")       # a comparison's runs, or a sweep's rows
    answer.setting     # the setting, or None when the runs cannot name one
    str(answer)        # the answer in a sentence, or why there is none

A run the memory limit OOM-killed peaked where the limit stopped it, not where the setting would
have gone, so its peak ranks nothing; settings whose runs all stayed alive peaked below every one
that was killed. Among those, the lowest is named only when its peak is below each other's with
a confidence interval that excludes zero: paired where both settings ran on the same seeds (a
comparison's replications, a sweep's runs that differ only in the setting), Welch's otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from simapf.comparison.stats import fmt, label, unit


@dataclass(frozen=True)
class Lowest:
    setting: Any | None  # None: the runs cannot tell which is lowest (`reason` says why)
    mean: float | None  # its mean over its runs
    reason: str

    def __str__(self) -> str:
        return self.reason


def lowest_peak(runs: pd.DataFrame, by: str, metric: str = "peak_rss_bytes", confidence: float = 0.95,
                named: str | None = None) -> Lowest:  # fmt: skip
    """The value of column `by` whose runs had the lowest mean `metric`, if the runs show it;
    `named`: what the answer calls the column (its name by default)."""
    what = label(metric)
    column, by = by, named or by

    def shown(value: float, signed: bool = False) -> str:
        return fmt(value, unit(metric), signed)

    killed_column = runs["oom_kills"] if "oom_kills" in runs.columns else pd.Series(0, index=runs.index)
    groups = {value: group for value, group in runs.groupby(column, sort=True)}
    killed = sorted(v for v, g in groups.items() if (killed_column.loc[g.index].fillna(0) > 0).any())
    alive = {v: g for v, g in groups.items() if v not in killed and g[metric].notna().any()}
    if not alive:
        return Lowest(None, None, f"No lowest {what}: every {by} had a run OOM-killed, so each peak is where the "
                                  f"memory limit stopped it, not what the {by} needed.")  # fmt: skip
    means = {v: float(g[metric].mean()) for v, g in alive.items()}
    best = min(means, key=means.__getitem__)
    for other in sorted(means, key=means.__getitem__)[1:]:
        interval = _difference_interval(alive[other], alive[best], metric, confidence)
        if interval is None:
            return Lowest(None, None, f"No lowest {what}: {by} {best} ({shown(means[best])}) and {by} {other} "
                                      f"({shown(means[other])}) ran once each, so nothing tells them apart; "
                                      f"run more replications.")  # fmt: skip
        lo, hi = interval
        if lo <= 0:
            return Lowest(None, None, f"No lowest {what}: {by} {best} and {by} {other} cannot be told apart (the "
                                      f"difference, {shown((lo + hi) / 2, True)}, has a {confidence * 100:g} % interval "
                                      f"from {shown(lo, True)} to {shown(hi, True)}); run more replications.")  # fmt: skip
    rest = f", below every other {by}'s with {confidence * 100:g} % confidence" if len(means) > 1 else ""
    beyond = f"; {', '.join(map(str, killed))} had runs OOM-killed" if killed else ""
    return Lowest(best, means[best], f"Lowest {what}: {by} {best}, {shown(means[best])} on average{rest}{beyond}.")


def _difference_interval(higher: pd.DataFrame, lower: pd.DataFrame, metric: str,
                         confidence: float) -> tuple[float, float] | None:  # fmt: skip
    """The `confidence` interval of mean(higher) - mean(lower), or None with too few runs."""
    a, b = higher.dropna(subset=[metric]), lower.dropna(subset=[metric])
    if "seed" in a.columns and sorted(a["seed"]) == sorted(b["seed"]) and a["seed"].is_unique:
        d = (a.set_index("seed")[metric] - b.set_index("seed")[metric]).to_numpy(dtype=float)
        if d.size < 2:
            return None
        half = float(stats.t.ppf(0.5 + confidence / 2, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
        return float(d.mean()) - half, float(d.mean()) + half
    x, y = a[metric].to_numpy(dtype=float), b[metric].to_numpy(dtype=float)
    if x.size < 2 or y.size < 2:
        return None
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    mean = float(x.mean() - y.mean())
    if vx + vy == 0:
        return mean, mean
    dof = (vx + vy) ** 2 / (vx**2 / (x.size - 1) + vy**2 / (y.size - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * float(np.sqrt(vx + vy))
    return mean - half, mean + half
