"""How time reaches the APF core.

The core never reads a wall clock. It asks a `Scheduler` for the current time and to call it
back later, in integer nanoseconds. Callbacks due at the same instant run in a fixed order:
by phase (seat releases, then execution ends, then wait-limit expiries, then arrivals), then
by a sequence number the caller gives (a request's arrival index), then in scheduling order.
That order is part of the model: it decides ties the way the `replay` contract states.

`EventLoop` is the scheduler for tests and replays; the SimPy runtime provides another.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Final, Protocol

# Phases of callbacks due at the same instant, in the order they run.
RELEASE: Final = 0  # additional latency over: seats released
FINISH: Final = 1  # handler returned
TIMEOUT: Final = 2  # queue wait limit reached
ARRIVAL: Final = 3
OTHER: Final = 4  # borrowing adjustments, scenario events


class Scheduler(Protocol):
    def now(self) -> int:
        """Current time in nanoseconds."""
        ...

    def call_at(
        self, when_ns: int, phase: int, seq: int, fn: Callable[[Any], None], arg: Any
    ) -> None:
        """Call fn(arg) at when_ns (never earlier than now)."""
        ...


class EventLoop:
    """A discrete-event clock: a heap of callbacks, run in time/phase/sequence order."""

    __slots__ = ("_now", "_heap", "_counter")

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        self._heap: list[tuple[int, int, int, int, Callable[[Any], None], Any]] = []
        self._counter = 0

    def now(self) -> int:
        return self._now

    def call_at(
        self, when_ns: int, phase: int, seq: int, fn: Callable[[Any], None], arg: Any
    ) -> None:
        if when_ns < self._now:
            raise ValueError(f"cannot schedule in the past: {when_ns} < {self._now}")
        self._counter += 1
        heapq.heappush(self._heap, (when_ns, phase, seq, self._counter, fn, arg))

    def run(self, until_ns: int | None = None) -> None:
        """Run callbacks in order until none is left (or the next is after until_ns)."""
        heap = self._heap
        pop = heapq.heappop
        while heap:
            if until_ns is not None and heap[0][0] > until_ns:
                self._now = until_ns
                return
            when, _phase, _seq, _count, fn, arg = pop(heap)
            self._now = when
            fn(arg)
        if until_ns is not None and until_ns > self._now:
            self._now = until_ns

    def advance_to(self, when_ns: int) -> None:
        """Run everything due up to when_ns and stop the clock there."""
        self.run(until_ns=when_ns)

    def __len__(self) -> int:
        return len(self._heap)
