"""Intervals for a run's headline figures: the parameter draws' spread and the model-error band.

`simapf.sweeps.drawn_runs` runs the draws (`simapf run --uncertainty N`); `attach` then gives each
headline figure (`simapf.uncertainty.figures`), beside it in the summary, `<field>_interval`:

    {"lo": ..., "hi": ..., "level": 0.9,
     "parts": {"parameters": {"lo", "hi", "draws"},
               "model_error": {"kind", "lo", "hi", "rows", "sources", "regime", ...} | {"kind", "none"}}}

- *parameters*: the 5th and 95th percentiles of the figure over the draws and the point run:
  how much the figure moves with parameter sets as likely as the fitted one, given the
  calibration data;
- *model error*: the conformal band of the validation's residuals for the figure's kind in the
  run's regime (`simapf.uncertainty.model_error`): how far measurements fell from the model's
  predictions where it was checked, with parameters fitted elsewhere.

`lo`/`hi`: where a band speaks for the figure, the point moved by the band. Each of its
residuals was taken out of sample, with parameters fitted without its row, so it already holds
the parameters' error as that row felt it; moving the draws by it too would count that error
twice. Where no validation rows speak for a figure, the interval is the parameters' alone, and
`model_error` says why; the text output marks such an interval. Either way the interval holds
its point and stays within the figure's physical range (`within`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from simapf.schema.summary import Interval as SummaryInterval, Summary, typed
from simapf.uncertainty.draws import PRIOR_SD, ParameterDraws
from simapf.uncertainty.figures import Figure, headline_figures
from simapf.uncertainty.model_error import LEVEL, KINDS, Band, NoBand, Regime, band, load_pool, regime_of


def drawn_scenario(data: dict[str, Any], params: Any, draws: ParameterDraws, d: int) -> dict[str, Any]:
    """The scenario (as data) with draw d's parameters: each fitted parameter of the run's
    resolved `params` moved by the draw's factor, set explicitly in `apiserver.params`."""
    dumped = params.model_dump()
    over = {**data["apiserver"].get("params", {})}
    for key, factor in zip(draws.keys, draws.factors[d]):
        section, field = key.split(".")
        over[section] = {**over.get(section, {}), field: dumped[section][field] * float(factor)}
    return {**data, "apiserver": {**data["apiserver"], "params": over}}


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    parameters: tuple[float, float]
    runs: int  # the draws and the point run
    model_error: Band | NoBand

    def as_dict(self) -> dict[str, Any]:
        return {
            "lo": _plain(self.lo), "hi": _plain(self.hi), "level": LEVEL,
            "parts": {"parameters": {"lo": _plain(self.parameters[0]), "hi": _plain(self.parameters[1]),
                                     "runs": self.runs},
                      "model_error": self.model_error.as_dict()},
        }  # fmt: skip


def _plain(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def interval(point: float, drawn: Iterable[float], error: Band | NoBand, level: float = LEVEL,
             limit: float | None = None) -> Interval:  # fmt: skip
    """A figure's interval from its draws' values and its kind's band (see the module), held
    to the figure's physical range (0 to `limit`: the apiserver's cores, its memory limit) and
    always holding the point."""
    # The fitted parameters are as likely as any draw (the posterior's mode): their run counts too.
    values = np.array([point] + [v for v in drawn if v is not None and math.isfinite(v)], dtype=float)
    alpha = round(1.0 - level, 12)
    params = (float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2)))
    if isinstance(error, NoBand):
        lo, hi = params
    else:
        # Every residual of a band was taken out of sample (a published row the fit never saw, a
        # calibration cell predicted without its group, a bench cell on a machine fitted without
        # it), so each already holds the fitted parameters' error as its row felt it: the band
        # moves the point alone, and the parameters' error is counted once.
        lo, hi = error.bounds(point)
    lo, hi = within(lo, hi, point, limit)
    return Interval(lo, hi, params, len(values), error)


def within(lo: float, hi: float, point: float, limit: float | None) -> tuple[float, float]:
    """[lo, hi] widened to hold the point and held to [0, limit]. A band whose residuals all lie
    on one side (a model biased there) would leave the model's own prediction outside: the
    interval then reaches it, rather than print a point its interval denies. No measurement
    passes the physical limit (a process has its cores; the kernel kills it at its limit), so
    neither does a bound."""
    lo, hi = min(lo, point), max(hi, point)
    if limit is not None and math.isfinite(limit) and limit > 0:
        hi = min(hi, max(limit, point))
        lo = min(lo, hi)
    return max(0.0, lo) if point >= 0 else lo, hi


def limit_of(kind: str, cores: Any, memory_limit_bytes: Any) -> float | None:
    """A figure's physical upper bound, by kind: the cores for CPU, the memory limit for memory
    (None: no limit, or none known)."""
    bound = {"cpu": cores, "memory": memory_limit_bytes}.get(kind)
    try:
        return float(bound) if bound is not None and math.isfinite(float(bound)) and float(bound) > 0 else None
    except (TypeError, ValueError):
        return None


def limit_of_row(kind: str, row: dict[str, Any]) -> float | None:
    """`limit_of` for a sweep or comparison row (its `cores` and `memory_limit_bytes` columns)."""
    return limit_of(kind, row.get("cores"), row.get("memory_limit_bytes"))


def finite(x: Any) -> bool:
    """Whether a row's value is a finite number (a missing figure is None or NaN)."""
    try:
        return x is not None and not isinstance(x, (str, bool)) and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def attach(summary: dict[str, Any], rows: list[dict[str, Any]], pool: list | None = None,
           draws: ParameterDraws | None = None, level: float = LEVEL) -> dict[str, Any]:  # fmt: skip
    """Put every headline figure's interval beside it in `summary` (from the draws' `rows`), and
    what they rest on in its `uncertainty` section; returns the summary."""
    pool = load_pool() if pool is None else pool
    s = typed(summary)
    regime = regime_of(s)
    bands: dict[str, Band | NoBand] = {}
    for fig in list(headline_figures(s)):
        if fig.kind not in bands:
            bands[fig.kind] = band(pool, fig.kind, regime, level)
        got = interval(fig.value, (r.get(fig.key) for r in rows), bands[fig.kind], level,
                       limit_of(fig.kind, s.cpu.cores, s.memory.memory_limit_bytes))  # fmt: skip
        _written_at(summary, fig.path)[f"{fig.field}_interval"] = got.as_dict()
    summary["uncertainty"] = {
        "draws": len(rows),
        "level": level,
        "regime": {"path": regime.path, "size": regime.size, "overloaded": regime.overloaded},
        "parameters": {"prior_sd": PRIOR_SD, "drawn": list(draws.keys) if draws is not None else []},
        "model_error": {kind: b.as_dict() for kind, b in sorted(bands.items())},
    }
    return summary


def _written_at(summary: dict[str, Any], path: tuple[str | int, ...]) -> dict[str, Any]:
    """The mapping of summary.json at `path` (a Figure's), to write an interval into."""
    holder: Any = summary
    for step in path:
        holder = holder[step]
    return holder


def figures_with_intervals(summary: Summary | Mapping[str, Any]) -> Iterator[tuple[Figure, SummaryInterval]]:
    """Each headline figure of a summary that has an interval, with it."""
    for fig in headline_figures(summary):
        got = fig.interval
        if got is not None:
            yield fig, got


__all__ = ["Interval", "KINDS", "Regime", "attach", "drawn_scenario", "finite", "interval", "limit_of",
           "limit_of_row", "within"]
