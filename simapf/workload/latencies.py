"""The latencies of one request class: every one kept up to a limit, a sketch of fixed size beyond.

A run's percentiles are computed from its latencies when the result is built. Kept whole, they
cost 8 bytes a request (a double in a typed array) and grow with the run: 10 M requests hold
80 MB per stream of them, and more again while the percentiles are computed. So a request
class keeps its latencies exactly up to `EXACT_UP_TO` of them (8 MiB), which covers every run
of the shipped scenarios, and past that folds them into a `Sketch`: counts in logarithmic
buckets, whose size depends on the latencies' range, not their number. A run that needs exact
percentiles however long it is asks for them (`run.exact_percentiles`).

A sketched percentile is within `RELATIVE_ERROR` of the exact one (DDSketch's bound, Masson,
Rim and Lee, VLDB 2019): each bucket holds the values in (g^(i-1), g^i] with
g = (1 + a) / (1 - a), and stands for 2 g^i / (g + 1), within a of every value it holds; a
percentile interpolated between two order statistics, as numpy's default is, is then within a
of the exact interpolation. The buckets span `SMALLEST_S` to `LARGEST_S` in one array of counts
made when the sketch is. The count, the mean, the smallest and the largest stay exact.
"""

from __future__ import annotations

import math
from array import array
from typing import Iterable, Sequence

import numpy as np

from simapf.scenario.schema.scenario import EXACT_LATENCIES

EXACT_UP_TO = EXACT_LATENCIES  # latencies of one request class kept exactly before they are sketched
RELATIVE_ERROR = 0.001  # of a sketched percentile
# The range a sketch's buckets cover, in seconds: a latency outside it counts in the end bucket
# (the error bound holds within it; the smallest and largest latency stay exact).
SMALLEST_S = 1e-9
LARGEST_S = 1e6


class Sketch:
    """Latencies (seconds, >= 0) as counts in logarithmic buckets: the count, sum, min and max exact."""

    __slots__ = ("counts", "zeros", "n", "total", "lo", "hi", "_gamma", "_per_log", "_first", "_last")

    def __init__(self, relative_error: float = RELATIVE_ERROR) -> None:
        self._gamma = (1.0 + relative_error) / (1.0 - relative_error)
        self._per_log = 1.0 / math.log(self._gamma)
        self._first = math.ceil(math.log(SMALLEST_S) * self._per_log)  # the first bucket's index
        self._last = math.ceil(math.log(LARGEST_S) * self._per_log) - self._first  # the last's place
        self.counts = array("q", bytes(8 * (self._last + 1)))  # values in each bucket, from the first
        self.zeros = 0  # values of 0 (no logarithm)
        self.n = 0
        self.total = 0.0
        self.lo = math.inf
        self.hi = -math.inf

    def add(self, x: float) -> None:
        self.n += 1
        self.total += x
        if x < self.lo:
            self.lo = x
        if x > self.hi:
            self.hi = x
        if x <= 0.0:
            self.zeros += 1
            return
        i = math.ceil(math.log(x) * self._per_log) - self._first
        self.counts[0 if i < 0 else self._last if i > self._last else i] += 1

    def add_all(self, xs: Iterable[float]) -> None:
        for x in xs:
            self.add(x)

    def order_statistics(self, ranks: Sequence[int]) -> list[float]:
        """The estimated values of the given 0-based ranks (ascending order), held within [min, max]:
        the first and the last exact."""
        gamma = self._gamma
        out: list[float] = []
        wanted = sorted(set(ranks))
        found: dict[int, float] = {}
        seen = self.zeros
        j = 0
        while j < len(wanted) and wanted[j] < seen:
            found[wanted[j]] = 0.0
            j += 1
        for i, count in enumerate(self.counts):
            if not count:
                continue
            seen += count
            value = min(max(2.0 * gamma ** (i + self._first) / (gamma + 1.0), self.lo), self.hi)
            while j < len(wanted) and wanted[j] < seen:
                found[wanted[j]] = value
                j += 1
        for r in ranks:
            # The smallest and the largest are known exactly.
            out.append(self.lo if r == 0 else self.hi if r == self.n - 1 else found[r])
        return out

    def percentiles(self, qs: Sequence[float]) -> list[float]:
        """numpy's default (linear) percentiles, of the estimated order statistics."""
        n = self.n
        spots = []
        for q in qs:
            h = (n - 1) * q / 100.0
            lo = math.floor(h)
            spots.append((lo, min(lo + 1, n - 1), h - lo))
        values = self.order_statistics([r for lo, hi, _t in spots for r in (lo, hi)])
        return [values[2 * k] + (values[2 * k + 1] - values[2 * k]) * t for k, (_lo, _hi, t) in enumerate(spots)]

    def mean(self) -> float:
        return self.total / self.n


class Latencies:
    """One request class's latencies: exact (`values`) until `exact_up_to` of them (None: no
    limit), then a `Sketch` (`sketch`; `values` emptied)."""

    __slots__ = ("values", "sketch", "exact_up_to")

    def __init__(self, exact_up_to: int | None = EXACT_UP_TO) -> None:
        self.values = array("d")
        self.sketch: Sketch | None = None
        self.exact_up_to = exact_up_to

    def append(self, x: float) -> None:
        sketch = self.sketch
        if sketch is not None:
            sketch.add(x)
            return
        self.values.append(x)
        if self.exact_up_to is not None and len(self.values) >= self.exact_up_to:
            self.sketch = sketch = Sketch()
            sketch.add_all(self.values)
            self.values = array("d")

    def __len__(self) -> int:
        return self.sketch.n if self.sketch is not None else len(self.values)

    def stats(self, qs: Sequence[float]) -> tuple[list[float], float, float, float]:
        """(percentiles at `qs`, max, mean, min); exact while no sketch is kept. Non-empty only."""
        if self.sketch is not None:
            s = self.sketch
            return s.percentiles(qs), s.hi, s.mean(), s.lo
        a = np.frombuffer(self.values, dtype=np.float64)  # a view of the typed array, not a copy
        return [float(x) for x in np.percentile(a, qs)], float(a.max()), float(a.mean()), float(a.min())
