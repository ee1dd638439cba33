"""Two settings compared: an interval for the difference and the ratio of a figure between them.

`compare --uncertainty N` (one policy against another) and `sweep --uncertainty N` (each level
of a factor against its first, the other factors equal) run both settings under the same N
parameter draws on the same seed, so draw d of one and draw d of the other differ only in the
setting: where the figure has no band, its interval is the parameters' alone, taken draw by
draw, and what they move alike cancels.

The model's error is shared as far as the validation shows it is. Each residual comes from one
experiment (one harness, one set-up: `experiment_of`), and two cells of one experiment that
differ in a setting are what a comparison is: the pairs of residuals from the same experiment
(two different rows) say how the model's error moves between two such cells. So a measurement pair
is the two runs moved by such a pair of residuals: a model biased alike in both cancels from
the ratio, and a model whose error changes with the setting does not. Where the two figures'
bands share no experiment, their residuals pair every way (independent errors); where either
has no band, the contrast is the parameters' alone, as a figure's own interval is. With bands,
the two points alone are moved: each residual was taken out of sample and already holds the
parameters' error (`simapf.uncertainty.intervals.interval`).

The bounds are the conformal order statistics of the moved measurement pairs (or of the draws),
each measurement first held to its physical range (0 to the cores, 0 to the memory limit); the
point (the fitted parameters' difference and ratio) is always inside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from simapf.uncertainty.intervals import within
from simapf.uncertainty.model_error import KINDS, LEVEL, Band, NoBand, conformal, experiment_of

# Residual pairs kept (evenly spaced, in a fixed order) when a band pair has more: enough for the
# order statistics of a 90 % interval many times over, few enough to stay quick.
MAX_PAIRS = 20_000


@dataclass(frozen=True)
class Contrast:
    """A's figure against B's: their difference and ratio, each (point, lo, hi)."""

    difference: tuple[float, float, float]
    ratio: tuple[float, float, float]
    runs: int  # paired runs: the point runs and the draws both have
    error: str  # how the model's error entered: "shared within experiments", "independent", or "none: ..."
    pairs: int  # residual pairs used (0 without a band)

    def as_dict(self) -> dict[str, Any]:
        d, r = self.difference, self.ratio
        return {"difference": d[0], "difference_lo": d[1], "difference_hi": d[2],
                "ratio": r[0], "ratio_lo": r[1], "ratio_hi": r[2],
                "runs": self.runs, "model_error": self.error, "residual_pairs": self.pairs}  # fmt: skip


def residual_pairs(a: Band, b: Band) -> tuple[np.ndarray, np.ndarray, bool]:
    """Indices (i into a's residuals, j into b's) of the residual pairs, and whether they are
    pairs from one experiment (True; `experiment_of`, two different rows) or every pair (False,
    when the bands share no experiment or do not say where their residuals come from)."""
    same = np.zeros((len(a.residuals), len(b.residuals)), dtype=bool)
    if a.members and b.members:
        exp_a = np.array([experiment_of(source) for source, _row in a.members])
        exp_b = np.array([experiment_of(source) for source, _row in b.members])
        row_a, row_b = np.array([row for _s, row in a.members]), np.array([row for _s, row in b.members])
        same = (exp_a[:, None] == exp_b[None, :]) & (row_a[:, None] != row_b[None, :])  # two cells, not one row twice
    shared = bool(same.any())
    i, j = np.nonzero(same) if shared else np.nonzero(np.ones_like(same))
    if len(i) > MAX_PAIRS:
        keep = np.linspace(0, len(i) - 1, MAX_PAIRS).round().astype(int)
        i, j = i[keep], j[keep]
    return i, j, shared


def contrast(a_point: float, a_drawn: Iterable[float], a_error: Band | NoBand,
             b_point: float, b_drawn: Iterable[float], b_error: Band | NoBand,
             level: float = LEVEL, limit: float | None = None) -> Contrast:  # fmt: skip
    """A's figure against B's (see the module): `*_drawn`, the draws' values in draw order (draw
    d of A beside draw d of B); `limit`, the figure's physical upper bound (the same for both)."""
    a = np.array([a_point, *a_drawn], dtype=float)
    b = np.array([b_point, *b_drawn], dtype=float)
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    both = np.isfinite(a) & np.isfinite(b)
    a, b = a[both], b[both]
    runs = len(a)
    if isinstance(a_error, Band) and isinstance(b_error, Band) and a_error.kind == b_error.kind:
        # The points alone, moved by the residual pairs: each residual, taken out of sample,
        # already holds the parameters' error (as a figure's own interval, intervals.interval).
        i, j, shared = residual_pairs(a_error, b_error)
        ra, rb = np.asarray(a_error.residuals)[i], np.asarray(b_error.residuals)[j]
        ma, mb = _measured(a_error.kind, a[:1], ra), _measured(b_error.kind, b[:1], rb)
        how, pairs = ("shared within experiments" if shared else "independent"), len(i)
    else:
        ma, mb = a[:, None], b[:, None]
        missing = a_error if isinstance(a_error, NoBand) else b_error
        how, pairs = f"none: {getattr(missing, 'reason', 'the bands are of different kinds')}", 0
    if limit is not None and math.isfinite(limit) and limit > 0:
        ma, mb = np.clip(ma, 0.0, limit), np.clip(mb, 0.0, limit)
    diff = (ma - mb).ravel()
    ratio = (ma / np.where(mb > 0, mb, np.nan)).ravel()
    ratio = ratio[np.isfinite(ratio)]
    d_point = float(a_point - b_point)
    r_point = float(a_point / b_point) if b_point > 0 else math.nan
    return Contrast(_bounds(d_point, diff, level, signed=True), _bounds(r_point, ratio, level), int(runs), how,
                    pairs)  # fmt: skip


def _measured(kind: str, values: np.ndarray, residuals: np.ndarray) -> np.ndarray:
    """(runs x pairs) the measurement each run implies under each pair's residual."""
    p = values[:, None]
    r = residuals[None, :]
    if KINDS[kind] == "abs":
        return np.clip(p - r, 0.0, 1.0)
    return p * np.exp(-r)


def _bounds(point: float, values: np.ndarray, level: float, signed: bool = False) -> tuple[float, float, float]:
    if not math.isfinite(point):
        return (point, math.nan, math.nan)
    if len(values) == 0:
        return (point, point, point)
    lo, hi = conformal(values, level) or (float(values.min()), float(values.max()))
    if signed:  # a difference may be negative (the measurements it came from were held to their range)
        return (point, float(min(lo, point)), float(max(hi, point)))
    lo, hi = within(lo, hi, point, None)
    return (point, lo, hi)


__all__ = ["Contrast", "MAX_PAIRS", "contrast", "residual_pairs"]
