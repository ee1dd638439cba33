"""The process's own allocation: what kube-apiserver allocates whether or not requests arrive.

The watch caches' dispatch and bookmarks, the informers of the apiserver's own controllers,
timers, compaction and metrics allocate all the time, and nearly all of it is garbage soon after.
So a real apiserver's heap keeps cycling up to the GC's trigger with no request at all, which
matters twice: near a tight GOMEMLIMIT the GC runs back to back on an idle apiserver, and after a
burst the scavenger's goal follows the cycling heap rather than staying where the burst left it.

`process.own_alloc_bytes_per_s` of garbage is allocated in steps, each through
`MemoryModel.allocate` like a request's bytes (so it starts cycles, owes assists, may end in an
OOM kill). A step is the allocation of a stretch of time: at most `MAX_STEP_S`, at most a
sixteenth of the heap the GC lets grow between cycles, and ending exactly where the heap reaches
the trigger, so a cycle starts when the steady rate would start it. Its CPU is the idle process's
(`process.baseline_cores`); the assists it owes go on the cores as a job of their own.
"""

from __future__ import annotations

from typing import Callable, Final

from simapf.engine.clock import FINISH
from simapf.engine.environment import RunClock
from simapf.server.cpu import NS
from simapf.server.gc import GoGC
from simapf.server.memory import MemoryModel
from simapf.server.process import ServerProcessState

MAX_STEP_S: Final = 1.0  # the longest stretch allocated at once
MIN_STEP_NS: Final = 1_000_000  # the shortest: 1 ms, however little the heap may grow
STEPS_PER_RUNWAY: Final = 16  # steps at least, from the marked heap to the goal


class OwnAllocation:
    """Allocates `rate` bytes per second of garbage in a process while it is up: `allocate(n)`
    allocates n bytes and says whether the process lived through it."""

    __slots__ = ("clock", "gc", "memory", "process", "rate", "allocate", "_last_ns", "_epoch", "_tick_cb")

    def __init__(self, clock: RunClock, gc: GoGC, memory: MemoryModel, process: ServerProcessState,
                 rate: float, allocate: Callable[[float], bool]) -> None:  # fmt: skip
        self.clock = clock
        self.gc = gc
        self.memory = memory
        self.process = process
        self.rate = rate
        self.allocate = allocate
        self._last_ns = 0
        self._epoch = -1
        self._tick_cb = self._tick

    def start(self) -> None:
        """The process (re)started: allocate from now on, while this incarnation lives."""
        if self.rate <= 0.0:
            return
        self._epoch = self.process.epoch
        self._last_ns = self.clock.now
        self._schedule()

    def _schedule(self) -> None:
        self.clock.at(self.clock.now + self._step_ns(), self._tick_cb, self._epoch, FINISH)

    def _step_ns(self) -> int:
        """How long the next step lasts: see the module's docstring."""
        rate = self.rate
        gc = self.gc
        chunk = rate * MAX_STEP_S
        runway = (gc.goal - gc.heap_marked) / STEPS_PER_RUNWAY
        if runway < chunk:
            chunk = runway
        if not gc.marking:
            to_trigger = gc.trigger - self.memory.heap_live
            if 0.0 < to_trigger < chunk:
                chunk = to_trigger
        step = chunk / rate * NS
        whole = int(step)
        if whole < step:
            whole += 1  # rounded up, so the step's bytes reach the trigger
        return whole if whole > MIN_STEP_NS else MIN_STEP_NS

    def _tick(self, epoch: int) -> None:
        if epoch != self._epoch or epoch != self.process.epoch or not self.process.up:
            return  # the process died since: a restart starts a new one
        now = self.clock.now
        nbytes = self.rate * (now - self._last_ns) / NS
        self._last_ns = now
        if self.allocate(nbytes):
            self._schedule()
