"""Time, for every component: the one way to read it and to be called back later.

A component holds a `Clock`: it reads `now` (integer nanoseconds; simapf never reads a wall
clock) and asks `at(when_ns, fn, arg, phase)` for `fn(arg)` at `when_ns`, never earlier than
now. Callbacks due at the same instant run by `Phase`, then in the order of their causes: an
alarm's cause is its scheduling, and a request's own callbacks in APF (its handler's return
in a replay, the end of its additional latency, its wait limit) take the place of its arrival,
a `ticket()` APF takes when the request arrives and passes to `at_ticket`. That order is part
of the model: an arrival sees the state after every release, finish and time-out of its
instant, a request whose deadline coincides with a finish that frees room is dispatched
rather than timed out, requests whose seats free at one instant free them in the order they
arrived, and the periodic borrowing adjustment sees that instant's arrivals.

Upstream's queueset defines no order at a tie: its test clock starts every event due at an
instant in a goroutine of its own, and the Go scheduler decides. The arrival order here is
the one the project's conformance harness (`benchmarks/upstream_queueset`) drives upstream's
queueset with, one event at a time, so that a replay with ties is checked request by request.

Two clocks implement it: the full run's (`simapf.engine.environment.RunClock`, on the SimPy
environment) and `EventLoop` here, the clock of `simapf replay` and of the APF core's tests. As
upstream's flow control takes one `eventclock.Interface`, the APF core cannot tell them apart.
Both keep their callbacks in a heap of entries of one shape, (when, phase, order, fn, arg),
where `order` counts the scheduling calls and tickets.

This module imports nothing from simapf: every floor of the package may use it.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import Any, Callable, Final, Protocol


class Phase(IntEnum):
    """Which of the callbacks due at the same instant runs first: the lower phase, then the one
    scheduled first."""

    RELEASE = 0
    """A request's additional latency is over and APF releases its seats. A component that
    starts a periodic step (the forced GC's timer, a sampler) takes its first step in this
    phase too, before the instant's other work (the phase SimPy calls URGENT)."""

    FINISH = 1
    """A handler returned; and every step of the resource model's own work (an etcd round or
    a read served, a CPU job done, a response sent, a restart, a webhook answered), which
    ends in this phase in the order it was scheduled (the phase SimPy calls NORMAL)."""

    TIMEOUT = 2
    """A queued request reaches its wait limit (APF)."""

    ARRIVAL = 3
    """Clients act: a request arrives, a retry or a watch starts, a load balancer's health check
    answers, a scenario event fires. Everything the instant's releases, finishes and time-outs
    changed is seen."""

    OTHER = 4
    """APF's periodic borrowing adjustment: it sees the instant's arrivals."""


# Each phase as a module constant too, which is what simapf's own modules pass: in pure Python an
# attribute of an enum class is read through EnumType's __getattr__ hook, several times slower
# than a module's name, and a run sets millions of alarms.
RELEASE: Final = Phase.RELEASE
FINISH: Final = Phase.FINISH
TIMEOUT: Final = Phase.TIMEOUT
ARRIVAL: Final = Phase.ARRIVAL
OTHER: Final = Phase.OTHER


class Clock(Protocol):
    """The time and the callbacks due: what every component holds."""

    now: int
    """The current simulated time, in nanoseconds."""

    def at(self, when_ns: int, fn: Callable[[Any], None], arg: Any, phase: int) -> None:
        """Call `fn(arg)` at `when_ns` (never earlier than `now`), in `phase` among the
        callbacks due then."""
        ...

    def ticket(self) -> int:
        """A place in the order of callbacks due at one instant, taken now: the place an alarm
        set now would have."""
        ...

    def at_ticket(self, when_ns: int, fn: Callable[[Any], None], arg: Any, phase: int, ticket: int) -> None:
        """As `at`, but in the place `ticket` (from `ticket()`) among the callbacks of `phase`
        due then."""
        ...


class EventLoop:
    """A `Clock` of its own: a heap of callbacks, run in (time, phase, scheduling) order."""

    __slots__ = ("now", "heap", "_counter")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.heap: list[tuple[int, int, int, Callable[[Any], None], Any]] = []
        self._counter = 0

    def at(self, when_ns: int, fn: Callable[[Any], None], arg: Any, phase: int) -> None:
        if when_ns < self.now:
            raise ValueError(f"cannot schedule in the past: {when_ns} < {self.now}")
        self._counter += 1
        heapq.heappush(self.heap, (when_ns, phase, self._counter, fn, arg))

    def ticket(self) -> int:
        self._counter += 1
        return self._counter

    def at_ticket(self, when_ns: int, fn: Callable[[Any], None], arg: Any, phase: int, ticket: int) -> None:
        if when_ns < self.now:
            raise ValueError(f"cannot schedule in the past: {when_ns} < {self.now}")
        heapq.heappush(self.heap, (when_ns, phase, ticket, fn, arg))

    def run(self, until_ns: int | None = None) -> None:
        """Run callbacks in order until none is left (or the next is after until_ns)."""
        heap = self.heap
        pop = heapq.heappop
        while heap:
            if until_ns is not None and heap[0][0] > until_ns:
                self.now = until_ns
                return
            when, _phase, _order, fn, arg = pop(heap)
            self.now = when
            fn(arg)
        if until_ns is not None and until_ns > self.now:
            self.now = until_ns

    def advance_to(self, when_ns: int) -> None:
        """Run everything due up to when_ns and stop the clock there."""
        self.run(until_ns=when_ns)

    def __len__(self) -> int:
        return len(self.heap)
