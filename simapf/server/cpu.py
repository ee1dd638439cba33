"""Processor sharing of CPU cores among executing requests and the Go GC.

Requests are jobs of known CPU work (core-seconds). At any instant each of the k requests runs
at the same rate r, and the GC's mark phase (when on) at rate g; both follow from k, the
number of Ps (GOMAXPROCS), the usable cores and how the GC shares CPU (`_rates`). Without the GC,
r = min(1, N/k) for k jobs on N cores.

Cost per event is O(log n) with a virtual-work clock: V(t) = service one request has received
since V was last reset, dV/dt = r. A job arriving at V0 with work w finishes when V reaches
V0 + w, whatever happens to r meanwhile, so the heap of (V_finish, seq) never needs rekeying.
One alarm (simapf.engine.clock.Clock) is pending at a time, for the earliest completion
(request or GC); when the rates change it is replaced by an earlier one if needed, and a
later-than-needed one is just a wake-up that reschedules (generation counter), so arrivals that
slow everyone down create no event.

Beside core-seconds, the Go runtime's own accounting is kept: P-seconds (a P held for a second,
whether or not the OS runs its thread then), as runtime/metrics' /cpu/classes and the GC CPU
limiter count them (mgclimit.go, mstats.go `cpuStats.accumulate`): the Ps the dedicated (and
fractional) mark workers hold while a mark phase runs, the Ps that run idle-priority mark workers,
and the Ps with nothing to run. Everything else is the process's goroutines (requests).

Foreign jobs are threads of another process on the same cores (a co-located client reading
responses, as in the calibration experiment's single-node cluster): they take their turn like
requests (same rate r, and, as a simplification, the same GOMAXPROCS bound) but their CPU is
integrated apart, so the process's CPU excludes them.

Time is integer nanoseconds (the SimPy clock). Completion times are rounded up to the next
nanosecond; a job whose remaining work would take less than 1 ns completes, so the CPU
integrals may count up to 1 ns of a core too much per completion.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable, Final

from simapf.engine.clock import FINISH
from simapf.engine.environment import RunClock

NS: Final = 1_000_000_000
_INV_NS: Final = 1e-9
# A job on the heap: (virtual finish time, sequence number, callback, its argument, foreign).
Job = tuple[float, int, Callable[[Any], None], Any, bool]


class ProcessorSharing:
    """k request jobs sharing `cores` over `procs` threads, plus an optional GC mark phase.

    `cores` (N) is the CPU the process can get; `procs` (P) how many goroutines run at once
    (GOMAXPROCS; for etcd, its concurrency). `gc_threads` (w) is the dedicated mark workers'
    share of P, used only while a mark phase is on.
    """

    __slots__ = (
        "clock", "cores", "procs", "gc_threads", "gc_sharing", "gc_idle_workers",
        "_heap", "_k", "_kf", "_v", "_r", "_t", "_seq", "_foreign_core_s",
        "_gc_on", "_gc_rem", "_g", "_gc_cb", "_gc_arg",
        "_req_core_s", "_gc_core_s", "_dedicated_ps", "_idle_mark_ps", "_idle_ps",
        "_dedicated_p_s", "_idle_mark_p_s", "_idle_p_s",
        "_gen", "_pending_at", "_dispatching", "_timer_cb", "_epoch", "_push", "_pop", "_r_by_k",
    )

    def __init__(
        self,
        clock: RunClock,
        cores: float,
        procs: int | float | None = None,
        *,
        gc_threads: float = 0.0,
        gc_sharing: str = "reserved",
        gc_idle_workers: bool = True,
    ) -> None:
        if cores <= 0:
            raise ValueError("cores must be positive")
        self.clock = clock  # the time and its alarms
        self.procs = float(procs) if procs is not None else float(cores)
        self.cores = min(float(cores), self.procs)
        self.gc_threads = float(gc_threads)
        if gc_sharing not in ("reserved", "shared"):
            raise ValueError(f"gc_sharing must be 'reserved' or 'shared', got {gc_sharing!r}")
        self.gc_sharing = gc_sharing
        self.gc_idle_workers = gc_idle_workers
        self._heap: list[Job] = []
        self._k = 0
        self._kf = 0  # of the k jobs, how many are foreign (another process's threads)
        self._foreign_core_s = 0.0
        self._v = 0.0
        self._r = 0.0
        self._t = clock.now
        self._seq = 0
        self._gc_on = False
        self._gc_rem = 0.0
        self._g = 0.0
        self._gc_cb: Callable[[Any], None] | None = None
        self._gc_arg: Any = None
        self._req_core_s = 0.0
        self._gc_core_s = 0.0
        # Ps held now (set while a mark phase runs) and P-seconds since the start, by use.
        self._dedicated_ps = 0.0
        self._idle_mark_ps = 0.0
        self._idle_ps = 0.0
        self._dedicated_p_s = 0.0
        self._idle_mark_p_s = 0.0
        self._idle_p_s = 0.0
        self._gen = 0
        self._pending_at: int | None = None
        self._dispatching = False
        self._timer_cb = self._on_timer
        self._epoch = 0  # bumped by clear(): callbacks of a dead process are not delivered
        # Held, not looked up in heapq at every job: the compiled core's lookups are generic ones.
        self._push: Callable[[list[Job], Job], None] = heapq.heappush
        self._pop: Callable[[list[Job]], Job] = heapq.heappop
        # r by k while no mark phase runs: what _rates would compute, looked up at each job.
        self._r_by_k: list[float] = []

    # ---------------------------------------------------------------- rates

    def _rate_without_gc(self, k: int) -> float:
        """r for k request jobs while no mark phase runs."""
        N = self.cores
        if k == 0:
            return 0.0
        if k <= N:
            return 1.0
        P = self.procs
        m = k if k < P else P  # goroutines on Ps; the rest wait their turn
        s = N / m if m > N else 1.0
        return m * s / k

    def _idle_ps_without_gc(self) -> float:
        """Ps with nothing of the process's to run while no mark phase runs."""
        own = self._k - self._kf
        P = self.procs
        return P - own if own < P else 0.0

    def _rates(self) -> None:
        """Set r (per request) and g (GC) from k and the GC state."""
        k = self._k
        if not self._gc_on:
            self._g = 0.0
            table = self._r_by_k
            while len(table) <= k:
                table.append(self._rate_without_gc(len(table)))
            self._r = table[k]
            return
        P = self.procs
        N = self.cores
        w = self.gc_threads
        pw = P - w if P > w else 0.0
        if self.gc_sharing == "reserved":
            # Dedicated workers own w Ps; requests run on the other P - w; idle Ps mark too.
            m = k if k < pw else pw
            gt = w + (pw - m if self.gc_idle_workers else 0.0)
            T = m + gt
            s = N / T if T > N else 1.0
            self._r = m * s / k if k else 0.0
            self._g = gt * s
        else:
            # Mark workers are w more threads competing with request goroutines.
            idle = P - k - w if self.gc_idle_workers and P > k + w else 0.0
            gt = w + idle
            T = k + gt
            run = T if T < P else P
            s = (N / run if run > N else 1.0) * run / T
            self._r = s
            self._g = gt * s
        # The runtime's view, in Ps: the dedicated workers hold w; the process's own goroutines
        # hold at most the other P - w (a foreign job is another process's thread: its P is
        # idle for this one); the rest run idle mark workers, or nothing.
        own = k - self._kf
        busy = own if own < pw else pw
        self._dedicated_ps = w if w < P else P
        free = pw - busy
        self._idle_mark_ps = free if self.gc_idle_workers else 0.0
        self._idle_ps = 0.0 if self.gc_idle_workers else free

    def _advance(self, now: int) -> None:
        dt = now - self._t
        if dt:
            dts = dt * _INV_NS
            r = self._r
            if r:
                self._v += r * dts
                if self._kf:
                    self._req_core_s += (self._k - self._kf) * r * dts
                    self._foreign_core_s += self._kf * r * dts
                else:
                    self._req_core_s += self._k * r * dts
            g = self._g
            if g:
                done = g * dts
                self._gc_core_s += done if done < self._gc_rem else self._gc_rem
                self._gc_rem -= done
                if self._gc_rem < 0.0:
                    self._gc_rem = 0.0
            if self._gc_on:
                self._dedicated_p_s += self._dedicated_ps * dts
                self._idle_mark_p_s += self._idle_mark_ps * dts
                self._idle_p_s += self._idle_ps * dts
            else:
                self._idle_p_s += self._idle_ps_without_gc() * dts
            self._t = now

    # ---------------------------------------------------------------- jobs

    def add(
        self, work_core_s: float, callback: Callable[[Any], None], arg: Any = None, foreign: bool = False
    ) -> None:
        """Start a request job of `work_core_s` core-seconds; `callback(arg)` when done.

        `foreign` marks work of another process sharing the cores (a co-located client reading
        a response): it competes like a request but its CPU is counted apart
        (`foreign_core_seconds`), not as this process's."""
        now = self.clock.now
        k = self._k
        if now != self._t:
            self._advance(now)
        if k == 0 and not self._heap:
            self._v = 0.0  # keep V small so float resolution stays far below 1 ns
        seq = self._seq = self._seq + 1
        self._push(self._heap, (self._v + work_core_s, seq, callback, arg, foreign))
        k = self._k = k + 1
        if foreign:
            self._kf += 1
        # _rates' table, read here too: through _rates the compiled core runs measurably slower
        # (docs/benchmarks.md, processor sharing's rate table).
        table = self._r_by_k
        if self._gc_on or k >= len(table):
            self._rates()
        else:
            self._r = table[k]
        if not self._dispatching:
            self._schedule(now)

    def start_gc(self, work_core_s: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Start a mark phase of `work_core_s` core-seconds; `callback(arg)` when done."""
        if self._gc_on:
            raise RuntimeError("a GC mark phase is already running")
        now = self.clock.now
        self._advance(now)
        self._gc_on = True
        self._gc_rem = work_core_s
        self._gc_cb = callback
        self._gc_arg = arg
        self._rates()
        if not self._dispatching:
            self._schedule(now)

    def gc_remaining(self) -> float:
        """Core-seconds of mark work left (0 when no mark phase runs)."""
        if not self._gc_on:
            return 0.0
        self._advance(self.clock.now)
        return self._gc_rem

    def gc_done_elsewhere(self, work_core_s: float) -> None:
        """Mark work done outside the dedicated workers (assists): the phase ends sooner."""
        if not self._gc_on or work_core_s <= 0:
            return
        now = self.clock.now
        self._advance(now)
        self._gc_rem -= work_core_s
        if self._gc_rem < 0.0:
            self._gc_rem = 0.0
        if not self._dispatching:
            self._schedule(now)

    @property
    def gc_active(self) -> bool:
        return self._gc_on

    @property
    def jobs(self) -> int:
        """Request jobs executing (foreign jobs not included)."""
        return self._k - self._kf

    @property
    def foreign_jobs(self) -> int:
        """Foreign jobs running."""
        return self._kf

    @property
    def rate_per_job(self) -> float:
        """Cores each request gets now."""
        return self._r

    @property
    def gc_rate(self) -> float:
        """Cores the mark phase gets now."""
        return self._g

    def request_core_seconds(self) -> float:
        """CPU used by request jobs since the start (includes assist work they were given)."""
        self._advance(self.clock.now)
        return self._req_core_s

    def gc_core_seconds(self) -> float:
        """CPU used by mark workers since the start."""
        self._advance(self.clock.now)
        return self._gc_core_s

    def foreign_core_seconds(self) -> float:
        """CPU used by foreign jobs (other processes on the same cores) since the start."""
        self._advance(self.clock.now)
        return self._foreign_core_s

    def usage_now(self) -> tuple[float, float, float]:
        """(request, mark worker, foreign) core-seconds since the start, as the three methods
        above give them, but without bringing the integration up to now: a reading (a scrape)
        leaves the model's arithmetic, and so its every later float, as it was."""
        req, gc, foreign = self._req_core_s, self._gc_core_s, self._foreign_core_s
        dt = self.clock.now - self._t
        if dt:
            dts = dt * _INV_NS
            r = self._r
            if r:
                kf = self._kf
                req += (self._k - kf) * r * dts
                foreign += kf * r * dts
            g = self._g
            if g:
                done = g * dts
                gc += done if done < self._gc_rem else self._gc_rem
        return req, gc, foreign

    def p_seconds(self) -> tuple[float, float, float]:
        """P-seconds since the start held by dedicated mark workers, by idle mark workers, and
        idle (nothing of the process's to run), brought up to now."""
        self._advance(self.clock.now)
        return self._dedicated_p_s, self._idle_mark_p_s, self._idle_p_s

    def p_seconds_now(self) -> tuple[float, float, float]:
        """`p_seconds` without bringing the integration up to now (a reading changes nothing)."""
        dedicated, idle_mark, idle = self._dedicated_p_s, self._idle_mark_p_s, self._idle_p_s
        dt = self.clock.now - self._t
        if dt:
            dts = dt * _INV_NS
            if self._gc_on:
                dedicated += self._dedicated_ps * dts
                idle_mark += self._idle_mark_ps * dts
                idle += self._idle_ps * dts
            else:
                idle += self._idle_ps_without_gc() * dts
        return dedicated, idle_mark, idle

    def clear(self) -> None:
        """Drop every job and the mark phase without calling back (the process died)."""
        self._advance(self.clock.now)
        self._heap.clear()
        self._k = 0
        self._kf = 0
        self._v = 0.0
        self._gc_on = False
        self._gc_rem = 0.0
        self._gc_cb = None
        self._gc_arg = None
        self._rates()
        self._gen += 1  # the pending alarm, if any, is now stale
        self._pending_at = None
        self._epoch += 1

    def drop(self, keep: Callable[[Callable[[Any], None]], bool]) -> None:
        """Drop, without calling back, the request jobs whose callback `keep` rejects (one
        process of several sharing these cores died); the others go on at the new share."""
        kept = [item for item in self._heap if keep(item[2])]
        if not kept:
            self.clear()  # nothing goes on: exactly a dead process's clear
            return
        now = self.clock.now
        self._advance(now)
        if len(kept) == len(self._heap):
            return
        heapq.heapify(kept)
        self._heap = kept
        self._k = len(kept)
        self._kf = sum(1 for item in kept if item[4])
        self._rates()
        self._pending_at = None
        self._gen += 1  # the pending alarm may be for a dropped job
        if not self._dispatching:
            self._schedule(now)

    # ---------------------------------------------------------------- timer

    def _schedule(self, now: int) -> None:
        at = -1
        heap = self._heap
        if heap and self._r > 0.0:
            # Less a thousandth of a ns, so float noise in an exact time does not add 1 ns.
            d = (heap[0][0] - self._v) / self._r * NS - 1e-3
            di = int(d)
            if di < d:
                di += 1
            at = now + (di if di > 0 else 0)
        if self._gc_on:
            g = self._g
            if g > 0.0:
                d = self._gc_rem / g * NS - 1e-3
                di = int(d)
                if di < d:
                    di += 1
                t = now + (di if di > 0 else 0)
                if at < 0 or t < at:
                    at = t
            elif self._gc_rem <= 0.0 and (at < 0 or now < at):
                at = now
        if at < 0:
            return
        pending = self._pending_at
        if pending is not None and pending <= at:
            return  # an earlier wake-up is already set; it will reschedule
        self._pending_at = at
        self._gen += 1
        self.clock.at(at, self._timer_cb, self._gen, FINISH)  # wake-ups keep the order Timeouts had

    def _on_timer(self, gen: int) -> None:
        if gen != self._gen:
            return
        self._pending_at = None
        now = self.clock.now
        gc_on = self._gc_on
        self._advance(now)
        heap = self._heap
        done = []
        if heap:
            # Due: would finish within 1 ns at the current rate.
            limit = self._v + self._r * _INV_NS
            pop = self._pop
            while heap and heap[0][0] <= limit:
                item = pop(heap)
                done.append(item)
                if item[4]:
                    self._kf -= 1
            self._k -= len(done)
        gc_done = gc_on and self._gc_rem <= self._g * _INV_NS
        gc_cb = gc_arg = None
        if gc_done:
            self._gc_core_s += self._gc_rem
            gc_cb, gc_arg = self._gc_cb, self._gc_arg
            self._gc_on = False
            self._gc_rem = 0.0
            self._gc_cb = self._gc_arg = None
        if gc_on:
            if done or gc_done:
                self._rates()
        elif done:
            self._r = self._r_by_k[self._k]  # k fell: in the table already
        epoch = self._epoch
        self._dispatching = True
        try:
            for _vf, _seq, cb, arg, _foreign in done:
                cb(arg)
                if self._epoch != epoch:
                    break  # a callback killed the process: the rest died with it
            else:
                if gc_cb is not None:
                    gc_cb(gc_arg)
        finally:
            self._dispatching = False
        self._schedule(self.clock.now)
