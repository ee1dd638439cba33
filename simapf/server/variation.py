"""How much one request's work differs from another's of the same kind.

Identical LISTs do not cost identical CPU: scheduling, cache misses and assists make their
times vary. The variation matters beyond the mean: under processor sharing, a batch of equal
jobs started together (a borrowing adjustment that raises a level's limit, a queue dispatched
at once) finishes together, and so allocates, frees and writes together, for ever. With a few
tens of per cent of variation such a cohort disperses within a few service times, as it does in
a real server.

The factors belong to the request, not to the moment they are asked for: request number `key`
gets the same factors for its etcd range, its CPU and its client's reading whatever order
requests start, finish or are rejected in. So a parameter that moves the timing a little changes
the outcome a little instead of dealing every later request another draw (which lets a fit take
finite differences of a saturated run), and two runs with the same seed under different
policies give request number k the same work even where they start it at different times.
"""

from __future__ import annotations

from typing import Final

import numpy as np

STAGES: Final = 3  # factors per request: its etcd range, its CPU, its client's reading
BLOCK: Final = 4096  # requests whose factors are drawn at once: one numpy call per request would dominate
KEPT_BLOCKS: Final = 8  # blocks kept; an evicted one is drawn again, to the same numbers, if asked for
DEFAULT_SEED: Final = 20250624  # without a generator of its own, every model draws the same factors
# A request's STAGES factors. Typed as any length so that the compiled core passes the tuple on as
# it is, instead of unpacking three floats and boxing them into a new tuple per request.
Factors = tuple[float, ...]


class WorkVariation:
    """Mean-1 gamma factors with coefficient of variation `cv` (all 1.0 when `cv` is 0).

    `rng` only seeds the factors: block `b` of requests is drawn from `(seed, b)`, so any
    request's factors can be drawn again without drawing those before it.
    """

    __slots__ = ("seed", "_shape", "_blocks", "_ones")

    def __init__(self, cv: float, rng: np.random.Generator | None = None) -> None:
        # Drawn once from `rng`; other parts of the model derive streams of their own from it.
        self.seed = int((rng if rng is not None else np.random.default_rng(DEFAULT_SEED)).integers(2**63))
        self._shape = 1.0 / (cv * cv) if cv > 0 else 0.0
        self._blocks: dict[int, list[Factors]] = {}
        self._ones: Factors = (1.0, 1.0, 1.0)  # STAGES of them

    def factors(self, key: int) -> Factors:
        """The factors of request number `key` (>= 0): its etcd range, its CPU, its client's reading."""
        if not self._shape:
            return self._ones
        b, i = divmod(key, BLOCK)
        block = self._blocks.get(b)
        if block is None:
            k = self._shape
            draws = iter(np.random.default_rng([self.seed, b]).gamma(k, 1.0 / k, BLOCK * STAGES).tolist())
            block = self._blocks[b] = list(zip(*[draws] * STAGES))  # a request's STAGES, one after another
            if len(self._blocks) > KEPT_BLOCKS:  # requests start roughly in arrival order
                del self._blocks[min(self._blocks)]
        return block[i]
