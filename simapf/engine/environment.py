"""The engine: the SimPy environment every simulated component shares, and the run's clock.

simapf schedules only whole nanoseconds (every time is an int, and runs end at an int time),
so the clock SimPy keeps is always an int. Saying so here lets the typed modules read it as one,
and lets the compiled core (simapf.compiled_core) keep it unboxed.

`RunClock` is the full run's `simapf.engine.clock.Clock`: what the components hold, the time (`now`)
and `at`, which queues a bare callback with no event object. It shares SimPy's queue and event
counter, so the heap holds one entry shape, (time, phase, id, fn, arg): an alarm's callback and
argument, or, for the SimPy events tests still make, `_fire` and the event. `run_until` is
SimPy's `run(until=...)` loop written for that clock, and `schedule` and `step` SimPy's own for
that entry: the compiled core compiles them with the rest, so the loop that dispatches every
event and the calls that queue them run compiled too. This is the only module that reads
SimPy's private fields.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Callable, Iterator

import simpy
from simpy.core import EmptySchedule, SimTime
from simpy.events import NORMAL, URGENT, Event, EventPriority

from simapf.engine.clock import FINISH, RELEASE

# SimPy's priorities are phases: URGENT (a process starts or resumes) is RELEASE, NORMAL (a
# timeout, a triggered event) FINISH.
assert URGENT == RELEASE and NORMAL == FINISH

# A processed event's callbacks, as SimPy marks them (SimPy's annotation of the field omits None).
_PROCESSED: Any = None


class RunClock:
    """The simulated time and the callbacks due: what every component reads (`now`) or sets
    (`at`) several times per request. A plain object of its own rather than the SimPy
    environment's attributes, so that the compiled core reads and writes it natively.
    `Environment` keeps it: it shares SimPy's queue and event counter, and its time is the
    environment's."""

    __slots__ = ("now", "queue", "eid", "_push")

    def __init__(self, now: int, queue: list[Any], eid: Iterator[int]) -> None:
        self.now = now
        self.queue = queue
        self.eid = eid
        # Held, not looked up among the module's globals at each of the run's million alarms.
        self._push: Callable[[list[Any], tuple[Any, ...]], None] = heappush

    def at(self, when_ns: int, fn: Callable[[Any], None], arg: Any, phase: int) -> None:
        """`fn(arg)` at `when_ns`, in `phase` among the callbacks and SimPy events due then
        (a SimPy event scheduled with priority p is in phase p), then in scheduling order."""
        self._push(self.queue, (when_ns, phase, next(self.eid), fn, arg))

    def ticket(self) -> int:
        """A place among the callbacks due at one instant, taken now (SimPy's event counter)."""
        return next(self.eid)

    def at_ticket(self, when_ns: int, fn: Callable[[Any], None], arg: Any, phase: int, ticket: int) -> None:
        """As `at`, in the place `ticket` took among the callbacks of `phase` due then."""
        self._push(self.queue, (when_ns, phase, ticket, fn, arg))


def _fire(event: Event) -> None:
    """Run a SimPy event's callbacks, as SimPy's `step` does."""
    callbacks = event.callbacks
    event.callbacks = _PROCESSED
    for callback in callbacks:
        callback(event)
    if not event._ok and not hasattr(event, "_defused"):
        # A failed event nobody handled: raise it here, as SimPy's step does.
        failure = event._value
        raised = type(failure)(*failure.args)
        raised.__cause__ = failure
        raise raised


class Environment(simpy.Environment):
    """A `simpy.Environment` whose time is an int number of nanoseconds, kept in its `clock` too
    (the components read `clock.now`; SimPy's own objects read `now`)."""

    _now: int
    # (time, phase, id, fn, arg): alarms, and SimPy's events as (time, priority, id, _fire, event).
    _queue: list[Any]  # type: ignore[assignment]

    def __init__(self, initial_time: int = 0) -> None:
        super().__init__(initial_time)
        self.clock = RunClock(initial_time, self._queue, self._eid)

    @property
    def now(self) -> int:
        """The current simulated time, in nanoseconds."""
        return self._now

    def schedule(self, event: Event, priority: EventPriority = NORMAL, delay: SimTime = 0) -> None:
        """Schedule `event` `delay` ns from now, as SimPy does, in the heap's one entry shape."""
        heappush(self._queue, (self._now + delay, priority, next(self._eid), _fire, event))

    def step(self) -> None:
        """SimPy's `step` (`run` without `run_until` goes through it)."""
        queue = self._queue
        if not queue:
            raise EmptySchedule()
        when, _phase, _eid, fn, arg = heappop(queue)
        self._now = self.clock.now = int(when)  # before the callbacks read it
        fn(arg)

    def run_until(self, until_ns: int) -> None:
        """What `run(until=until_ns)` does, event for event: process every event due before
        the stop SimPy would schedule now (at `until_ns`, urgent, after the events already
        scheduled at that instant with that priority), then set the clock to `until_ns`."""
        if until_ns <= self._now:
            raise ValueError(f"until ({until_ns}) must be greater than the current simulation time")
        stop_eid = next(self._eid)  # the stop's place among events tied with it, as SimPy's
        queue = self._queue
        clock = self.clock
        pop: Callable[[list[Any]], Any] = heappop
        item: tuple[Any, ...]
        while queue:
            item = queue[0]
            when = int(item[0])  # an int already: this makes it one the compiled core compares natively
            if when > until_ns or (when == until_ns and (item[1] > URGENT or (item[1] == URGENT and item[2] > stop_eid))):
                break
            pop(queue)
            self._now = clock.now = when
            item[3](item[4])
        self._now = clock.now = until_ns
