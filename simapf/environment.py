"""The SimPy environment every simulated component shares, its clock in integer nanoseconds.

simapf schedules only whole nanoseconds (every delay is an int, and runs end at an int time),
so the clock SimPy keeps is always an int. Saying so here lets the typed modules read it as one,
and lets the compiled build (simapf.compile) keep it unboxed.
"""

from __future__ import annotations

import simpy


class Environment(simpy.Environment):
    """A `simpy.Environment` whose time (`now`, and `_now`, which the hot paths read directly
    to save a property call per event) is an int number of nanoseconds."""

    _now: int

    def __init__(self, initial_time: int = 0) -> None:
        super().__init__(initial_time)

    @property
    def now(self) -> int:
        """The current simulated time, in nanoseconds."""
        return self._now
