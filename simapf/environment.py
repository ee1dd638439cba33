"""The SimPy environment every simulated component shares, its clock in integer nanoseconds.

simapf schedules only whole nanoseconds (every delay is an int, and runs end at an int time),
so the clock SimPy keeps is always an int. Saying so here lets the typed modules read it as one,
and lets the compiled core (simapf.compiled_core) keep it unboxed.

`Clock` is what the components hold: the time (`now`) and `alarm`, which queues a bare callback
with no event object (most of what a run schedules is one). `run_until` is SimPy's
`run(until=...)` loop written for that clock, and `schedule` SimPy's own: the compiled core
compiles them with the rest, so the loop that dispatches every event and the calls that queue
them run compiled too.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Callable, Final, Iterator

import simpy
from simpy.core import SimTime
from simpy.events import NORMAL, URGENT, Event, EventPriority


# A processed event's callbacks, as SimPy marks them (SimPy's annotation of the field omits None).
_PROCESSED: Any = None
NORMAL_PRIORITY: Final = 1  # simpy.events.NORMAL, a constant the compiled core can inline


class Clock:
    """The simulated time and the alarms due: what every component reads (`now`) or sets
    (`alarm`) several times per request. A plain object of its own rather than the SimPy
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

    def alarm(self, delay_ns: int, callback: Callable[[Any], None], arg: Any, priority: int = NORMAL_PRIORITY) -> None:
        """`callback(arg)` in `delay_ns`: in the order `timeout(delay_ns).callbacks.append(...)`
        would run it (events due at the same instant run by priority, then in scheduling order),
        without making an event. The queue holds it as a 5-tuple (time, priority, id, callback,
        arg) beside SimPy's 4-tuples (time, priority, id, event)."""
        self._push(self.queue, (self.now + delay_ns, priority, next(self.eid), callback, arg))


class Environment(simpy.Environment):
    """A `simpy.Environment` whose time is an int number of nanoseconds, kept in its `clock` too
    (the components read `clock.now`; SimPy's own objects read `now`)."""

    _now: int
    # SimPy's events, (time, priority, id, event), and alarms, (time, priority, id, callback, arg).
    _queue: list[Any]  # type: ignore[assignment]

    def __init__(self, initial_time: int = 0) -> None:
        super().__init__(initial_time)
        self.clock = Clock(initial_time, self._queue, self._eid)

    @property
    def now(self) -> int:
        """The current simulated time, in nanoseconds."""
        return self._now

    def schedule(self, event: Event, priority: EventPriority = NORMAL, delay: SimTime = 0) -> None:
        """Schedule `event` `delay` ns from now, as SimPy does (here so that it compiles too)."""
        heappush(self._queue, (self._now + delay, priority, next(self._eid), event))

    def step(self) -> None:
        """SimPy's `step`, for the alarms too (`run` without `run_until` goes through it)."""
        queue = self._queue
        if queue:
            self.clock.now = int(queue[0][0])  # before the next event's callbacks read it
            if len(queue[0]) == 5:
                when, _priority, _eid, callback, arg = heappop(queue)
                self._now = int(when)
                callback(arg)
                return
        super().step()

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
            if len(item) == 5:
                item[3](item[4])  # an alarm
                continue
            event = item[3]
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
        self._now = clock.now = until_ns
