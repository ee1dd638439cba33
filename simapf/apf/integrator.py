"""A time-weighted integrator of one value, as upstream's fairqueuing/integrator.go.

The queueset sets its seat demand here at every change; the borrowing adjuster reads and
resets it every 10 s. Time is in integer nanoseconds, results in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simapf.apf.types import NS_PER_S


@dataclass(frozen=True, slots=True)
class IntegratorResults:
    duration_s: float
    average: float
    deviation: float  # NaN when rounding makes the variance negative, as upstream
    min: float
    max: float


class Integrator:
    __slots__ = ("_last_ns", "_x", "_elapsed_s", "_integral", "_integral_sq", "_min", "_max")

    def __init__(self, now_ns: int) -> None:
        self._last_ns = now_ns
        self._elapsed_s = 0.0
        self._x = 0.0
        self._integral = 0.0
        self._integral_sq = 0.0
        self._min = 0.0
        self._max = 0.0

    def _advance(self, now_ns: int) -> None:
        dt = (now_ns - self._last_ns) / NS_PER_S
        if dt:
            x = self._x
            self._elapsed_s += dt
            self._integral += x * dt
            self._integral_sq += x * x * dt
        self._last_ns = now_ns

    def set(self, now_ns: int, x: float) -> None:
        dt_ns = now_ns - self._last_ns
        if dt_ns:  # _advance, inlined: the queueset calls this at every change
            dt = dt_ns / NS_PER_S
            old = self._x
            self._elapsed_s += dt
            self._integral += old * dt
            self._integral_sq += old * old * dt
            self._last_ns = now_ns
        self._x = x
        if x < self._min:
            self._min = x
        if x > self._max:
            self._max = x

    @property
    def value(self) -> float:
        return self._x

    def get_results(self, now_ns: int) -> IntegratorResults:
        self._advance(now_ns)
        duration = self._elapsed_s
        if duration > 0:
            avg = self._integral / duration
            variance = self._integral_sq / duration - avg * avg
            dev = math.sqrt(variance) if variance >= 0 else math.nan
        else:
            avg, dev = math.nan, math.nan
        return IntegratorResults(duration, avg, dev, self._min, self._max)

    def reset(self, now_ns: int) -> IntegratorResults:
        """Return the results so far and start afresh with min = max = the current value."""
        results = self.get_results(now_ns)
        self._elapsed_s = 0.0
        self._integral = 0.0
        self._integral_sq = 0.0
        self._min = self._max = self._x
        return results
