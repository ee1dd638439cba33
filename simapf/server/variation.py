"""How much one request's work differs from another's of the same kind.

Identical LISTs do not cost identical CPU: scheduling, cache misses and assists make their
times vary. The variation matters beyond the mean: under processor sharing, a batch of equal
jobs started together (a borrowing adjustment that raises a level's limit, a queue dispatched
at once) finishes together, and so allocates, frees and writes together, for ever. With a few
tens of per cent of variation such a cohort disperses within a few service times, as it does in
a real server.
"""

from __future__ import annotations

import numpy as np

BLOCK = 4096  # factors drawn at a time: one numpy call per draw would dominate the cost
DEFAULT_SEED = 20250624  # without a generator of its own, every model draws the same factors


class WorkVariation:
    """Mean-1 gamma factors with coefficient of variation `cv` (always 1.0 when `cv` is 0)."""

    __slots__ = ("cv", "_rng", "_shape", "_factors")

    def __init__(self, cv: float, rng: np.random.Generator | None = None) -> None:
        self.cv = cv
        self._rng = rng if rng is not None else np.random.default_rng(DEFAULT_SEED)
        self._shape = 1.0 / (cv * cv) if cv > 0 else 0.0
        self._factors: list[float] = []

    def __call__(self) -> float:
        if not self._shape:
            return 1.0
        if not self._factors:
            k = self._shape
            self._factors = self._rng.gamma(k, 1.0 / k, BLOCK).tolist()
        return self._factors.pop()
