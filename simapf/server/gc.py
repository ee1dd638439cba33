"""The Go garbage collector: pacer, mark phase on shared CPU, assists, CPU limiter.

Follows Go 1.26 `runtime/mgcpacer.go`, `mgclimit.go`, `mgcscavenge.go` as summarised in
list-memory.md §4, reduced to what moves heap size and CPU:

- Goal (mgcpacer.go `commit`, `memoryLimitHeapGoal`), with L the heap marked by the last cycle
  and R the roots:  goal = min(max(L + (L+R)·GOGC/100, 4 MiB·GOGC/100), goal_memlimit).
- Trigger: goal − runway, runway = consMark·(1−u)/u·(last scan work), u = 0.25, clamped to
  [L + 45/64·(goal−L), max(L + 61/64·(goal−L), goal − 4 MiB)]; consMark is the largest of the
  last five cons/mark measurements (mgcpacer.go `endCycle`). A fixed fraction can replace it.
- A cycle starts when an allocation takes heap_live to the trigger (no time step). Marking is
  snapshot-at-the-beginning with allocate-black: it keeps everything live at its start plus
  everything allocated while it runs, so garbage made during a cycle is freed by the next one.
- Mark work = fixed + (live at start + roots)/mark_rate core-seconds, run as the GC job of the
  shared CPU (`ProcessorSharing`): its length is work / CPU actually granted.
- Assists: an allocation during marking pays the scan work the background workers are behind
  the pace "scan done in proportion to heap growth from trigger to goal" (Go's assist ratio
  net of background credit). Past the goal the assist goal is goal·1.1 (extrapolated up to
  (1+GOGC/100)·goal when the scan work grew); past that, the allocation finishes the cycle.
- GC CPU limiter (mgclimit.go `updateLocked`, `accumulate`; always on as in Go): a bucket of
  P·1 s, in P-seconds. While a mark phase runs it fills with GC time, counted as Go counts it:
  25 % of P (gcBackgroundUtilization: the dedicated and fractional workers) plus assist time. It
  drains with mutator time: P-time less GC time less idle time, where idle time is the Ps with
  nothing to run *and the Ps running idle mark workers* (they only take CPU nobody wanted). When
  full, no assists (and none that would overfill it), so the GC's compulsory share stays near
  50 % of the non-idle P-time and the heap may run past its goal; what the workers alone put
  over the capacity is overflow, dropped (`limiter_overflow_s`).
- CPU classes, as runtime/metrics reports them (P-seconds, mstats.go `cpuStats.accumulate`):
  /cpu/classes/gc/mark/dedicated (dedicated and fractional workers), .../assist, .../idle. Their
  sum is /cpu/classes/gc/total; the limiter and GODEBUG=gctrace=1's percentage leave idle out.
- Scavenger: after each cycle the retained heap goal is 1.1·(goal/last goal)·(heap in use at
  mark termination), or 0.95·GOMEMLIMIT less non-heap memory; see `MemoryModel.scavenge`.
- A cycle is forced after 2 minutes without one (forcegcperiod), unless GOGC is off.
"""

from __future__ import annotations

from typing import Final

from simapf.engine.clock import FINISH, RELEASE
from simapf.engine.environment import RunClock
from simapf.server.cpu import NS, ProcessorSharing
from simapf.server.memory import MemoryModel
from simapf.server.params import MiB, ServerParams

INF: Final = float("inf")


class GoGC:
    __slots__ = (
        "clock", "params", "memory", "cpu", "G", "memlimit", "roots", "mark_rate", "fixed",
        "heap_min", "procs", "u_goal",
        "marking", "enabled", "goal", "trigger", "heap_marked", "cycles", "forced_cycles",
        "alloc_during_mark", "assist_core_s_total", "last_mark_ns", "max_mark_ns",
        "last_goal", "last_heap_inuse",
        "_cons_hist", "_cons_mark", "_last_scan", "_last_end_ns",
        "_t_start", "_triggered", "_scan", "_work", "_idle_mark0", "_assist_cycle",
        "_bucket", "_bucket_cap", "_lim_t", "_lim_assist", "_lim_dedicated", "_lim_idle", "baseline_cores",
        "limiter_events", "limiter_gc_s", "limiter_mutator_s", "limiter_overflow_s",
    )

    def __init__(
        self, clock: RunClock, params: ServerParams, memory: MemoryModel, cpu: ProcessorSharing
    ) -> None:
        self.clock = clock  # the time and its alarms
        self.params = params
        self.memory = memory
        self.cpu = cpu
        gp = params.gc
        # GOGC is a percentage, or off (None once read; `off` is the spelling it was read from)
        self.G = gp.gogc / 100.0 if isinstance(gp.gogc, int) else None
        self.memlimit = gp.gomemlimit_bytes
        self.roots = gp.roots_bytes
        self.mark_rate = gp.mark_rate_bytes_per_core_s
        self.fixed = gp.fixed_cost_core_s
        self.heap_min = gp.heap_minimum_bytes
        self.procs = params.cpu.procs
        self.u_goal = gp.dedicated_fraction
        self._bucket_cap = self.procs * gp.limiter_bucket_s_per_proc
        # The idle process's own work keeps that much of a P busy: not idle time to the limiter.
        self.baseline_cores = params.process.baseline_cores
        self.cycles = 0
        self.forced_cycles = 0
        self.assist_core_s_total = 0.0
        self.max_mark_ns = 0
        # What the limiter has counted since the start (P-seconds), and how often it turned on.
        self.limiter_events = 0
        self.limiter_gc_s = 0.0
        self.limiter_mutator_s = 0.0
        self.limiter_overflow_s = 0.0
        self.reset()
        if gp.force_period_s is not None and self.G is not None:
            # The first check at once, before the instant's other work, as a starting SimPy process had it.
            self.clock.at(self.clock.now, self._force_check, int(gp.force_period_s * NS), RELEASE)

    # ------------------------------------------------------------------ lifecycle

    def reset(self) -> None:
        """A fresh process, as if a cycle had just marked its live heap."""
        self.enabled = True
        self.marking = False
        self.alloc_during_mark = 0.0
        self.heap_marked = self.memory.heap_live
        self._last_scan = self.heap_marked + self.roots
        self._cons_hist = [0.0, 0.0, 0.0, 0.0]
        self._cons_mark = 0.0
        self.last_goal = 0.0  # the goal of the last cycle (0: none yet), as mgcpacer's lastHeapGoal
        self.last_heap_inuse = 0.0  # heap in use at the last mark termination (memstats.lastHeapInUse)
        self._last_end_ns = self.clock.now
        self.last_mark_ns = 0
        self._bucket = 0.0
        self._limiter_sync()
        self._commit()
        self.memory.set_retained_goal(INF)

    def stop(self) -> None:
        """The process died; its CPU jobs are cleared by the caller."""
        self.enabled = False
        self.marking = False
        self.alloc_during_mark = 0.0

    def base_changed(self) -> None:
        """The baseline live heap changed outside a cycle (watch caches registered): re-pace as
        if a cycle had just marked the current live heap."""
        if not self.marking:
            self.heap_marked = self.memory.live_bytes
            self._last_scan = self.heap_marked + self.roots
            self._commit()

    # ------------------------------------------------------------------ pacing

    def _commit(self) -> None:
        L = self.heap_marked
        if self.G is not None:
            goal = L + (L + self.roots) * self.G
            floor = self.heap_min * self.G
            if goal < floor:
                goal = floor
        else:
            goal = INF
        if self.memlimit is not None:
            goal_mem = self.memory_limit_goal()
            if goal_mem < goal:
                goal = goal_mem
        self.goal = goal
        self.trigger = self._trigger(L, goal)

    def memory_limit_goal(self) -> float:
        """memoryLimitHeapGoal: the heap that keeps mapped memory under GOMEMLIMIT."""
        M = self.memlimit
        if M is None:
            return INF
        mem = self.memory
        heap = mem.heap_live + mem.heap_free
        nonheap = mem.mapped_bytes() - heap  # metadata + non-heap, as Go's mappedReady - heapFree - heapAlloc
        over = mem.mapped_bytes() - M
        g = M - nonheap - (over if over > 0.0 else 0.0)
        headroom = g * self.params.gc.memory_limit_headroom_fraction
        if headroom < MiB:
            headroom = float(MiB)
        g = g - headroom if g > headroom else 0.0
        return g if g > self.heap_marked else self.heap_marked

    def _trigger(self, L: float, goal: float) -> float:
        if goal == INF:
            return INF
        gp = self.params.gc
        span = goal - L
        if span <= 0.0:
            return L
        if gp.trigger_fraction is not None:
            return L + gp.trigger_fraction * span
        lo = L + gp.trigger_min_fraction * span
        hi = L + gp.trigger_max_fraction * span
        if goal > self.heap_min and goal - self.heap_min > hi:
            hi = goal - self.heap_min
        if hi < lo:
            hi = lo
        u = self.u_goal
        runway = self._cons_mark * (1.0 - u) / u * self._last_scan
        t = goal - runway if runway <= goal else lo
        if t < lo:
            t = lo
        if t > hi:
            t = hi
        return t

    # ------------------------------------------------------------------ cycle

    def start_cycle(self, forced: bool = False) -> None:
        if self.marking or not self.enabled:
            return
        now = self.clock.now
        mem = self.memory
        self.marking = True
        if forced:
            self.forced_cycles += 1
        self._t_start = now
        self._triggered = mem.heap_live
        self.alloc_during_mark = 0.0
        # The pools' victim copies are dropped as the cycle starts (sync.Pool's poolCleanup): not marked.
        for pool in mem.pools:
            pool.cleanup()
        self._scan = mem.base_live + mem.inflight_live + mem.pooled + self.roots
        self._work = self.fixed + self._scan / self.mark_rate
        self._assist_cycle = 0.0
        self._limiter_update()  # the time before the mark phase, without GC (startGCTransition)
        self._idle_mark0 = self.cpu.p_seconds()[1]
        self.cpu.start_gc(self._work, self._mark_done)

    def assist(self, nbytes: float) -> float:
        """CPU (core-s) an allocation of `nbytes` during marking owes; credited to the GC."""
        if not self.params.gc.assists or self._limiter_update():
            return 0.0
        mem = self.memory
        goal = self.goal
        heap = mem.heap_live
        triggered = self._triggered
        expected = self._last_scan
        if self._scan > expected > 0.0:
            # More scan work than last cycle: the heap is growing; extrapolate the goal
            # (mgcpacer.go revise), at most to the hard goal (1 + GOGC/100)·goal.
            ext = triggered + (goal - triggered) * self._scan / expected
            hard = goal * (1.0 + self.G) if self.G is not None else ext
            goal = ext if ext < hard else hard
        if heap > goal:
            goal *= self.params.gc.overshoot_factor
        total = self._work
        rem = self.cpu.gc_remaining()
        span = goal - triggered
        if span <= 0.0 or heap >= goal:
            debt = rem
        else:
            debt = total * (heap - triggered) / span - (total - rem)
            if debt <= 0.0:
                return 0.0
            if debt > rem:
                debt = rem
        if debt <= 0.0:
            return 0.0
        # Assist time fills the limiter's bucket twice over: GC time, and P-time the mutator did
        # not have. Allow no more than would fill it, as Go's assist stops once it is full
        # (gcDrainN checks the limiter as it works).
        room = 0.5 * (self._bucket_cap - self._bucket)
        if room <= 0.0:
            return 0.0
        if debt > room:
            debt = room
        self.cpu.gc_done_elsewhere(debt)
        self._assist_cycle += debt
        self.assist_core_s_total += debt
        self._limiter_update()  # counted at once, as Go counts an assist when it ends
        return debt

    def _mark_done(self, _arg: object = None) -> None:
        if not self.marking:
            return
        now = self.clock.now
        mem = self.memory
        peak_in_use = mem.heap_live
        marked = self._scan - self.roots + self.alloc_during_mark
        mem.collect(marked)
        # cons/mark of this cycle (mgcpacer.go endCycle): bytes allocated per unit of scan
        # work, each per unit of CPU the mutator or the GC had.
        dur = now - self._t_start
        self.last_mark_ns = dur
        if dur > self.max_mark_ns:
            self.max_mark_ns = dur
        if dur > 0:
            # mgcpacer.go endCycle: the background workers are taken at their goal (25 %), plus
            # the assists; idle mark time adds to the GC's CPU but not to what the mutator lost.
            p_dur = self.procs * dur / NS
            u = self.u_goal + self._assist_cycle / p_dur
            if u > 0.99:
                u = 0.99
            u_idle = (self.cpu.p_seconds()[1] - self._idle_mark0) / p_dur
            current = self.alloc_during_mark * (u + u_idle) / (self._scan * (1.0 - u))
            hist = self._cons_hist
            cons = current
            for c in hist:
                if c > cons:
                    cons = c
            self._cons_mark = cons
            hist.pop(0)
            hist.append(current)
        self.heap_marked = marked
        self._last_scan = self._scan
        self.cycles += 1
        self._last_end_ns = now
        self._limiter_update()  # the mark phase's time, with GC (finishGCTransition)
        self.marking = False
        self.alloc_during_mark = 0.0
        self.last_goal = self.goal
        self.last_heap_inuse = peak_in_use
        self._commit()
        mem.set_retained_goal(self.scavenge_goal())

    def scavenge_goal(self) -> float:
        """The background scavenger's gcPercent goal for the heap retained (in use + free), as
        mgcscavenge.go `gcPaceScavenger` sets it at mark termination: retainExtraPercent (10 %)
        over the heap in use then, scaled by how the goal moved; none before a cycle has ended
        or with GOGC off. (The GOMEMLIMIT goal is the memory model's: `set_retained_goal`.)"""
        if self.G is None or self.last_goal <= 0.0 or self.last_goal == INF:
            return INF
        return self.params.gc.scavenge_retain_factor * (self.goal / self.last_goal) * self.last_heap_inuse

    # ------------------------------------------------------------------ CPU limiter

    def _limiter_sync(self) -> None:
        """Start counting from now (a fresh process, an empty bucket)."""
        self._lim_t = self.clock.now
        self._lim_assist = self.assist_core_s_total
        dedicated, idle_mark, idle = self.cpu.p_seconds()
        self._lim_dedicated = dedicated
        self._lim_idle = idle_mark + idle

    def _limiter_update(self) -> bool:
        """Bring the bucket up to now (mgclimit.go `updateLocked`); True while the limiter is on
        (the bucket full)."""
        now = self.clock.now
        dedicated, idle_mark, idle_ps = self.cpu.p_seconds()
        assist = self.assist_core_s_total
        dt = (now - self._lim_t) / NS
        total = self.procs * dt
        # GC time: the background workers' share of the window while marking (their Ps) and
        # the assists; idle time: Ps with nothing to run and Ps running idle mark workers, less
        # what the process's own background work keeps busy.
        gc_time = (dedicated - self._lim_dedicated) + (assist - self._lim_assist)
        idle = idle_mark + idle_ps - self._lim_idle - self.baseline_cores * dt
        if idle < 0.0:
            idle = 0.0
        mutator = total - idle - gc_time
        self._lim_t = now
        self._lim_assist = assist
        self._lim_dedicated = dedicated
        self._lim_idle = idle_mark + idle_ps
        self.limiter_gc_s += gc_time
        self.limiter_mutator_s += mutator
        c = self.params.gc.limiter_cap_fraction
        # With c = 0.5 this is accumulate's fill += gcTime - mutatorTime.
        b = self._bucket + 2.0 * ((1.0 - c) * gc_time - c * mutator)
        cap = self._bucket_cap
        if b < 0.0:
            b = 0.0
        elif b > cap:
            self.limiter_overflow_s += b - cap
            b = cap
        full = b >= cap
        if full and self._bucket < cap:
            self.limiter_events += 1
        self._bucket = b
        return full

    @property
    def limiter_fill(self) -> float:
        """Bucket fill as a fraction of its capacity (1 = limiting)."""
        f = self._bucket / self._bucket_cap
        return f if f < 1.0 else 1.0

    # ------------------------------------------------------------------ forced GC

    def _force_check(self, period_ns: int) -> None:
        """A forced cycle if none has ended for `period_ns`; the next check when one would be due."""
        clock = self.clock
        now = clock.now
        due = self._last_end_ns + period_ns
        if now >= due:
            if self.enabled and not self.marking:
                self.start_cycle(forced=True)
            due = now + period_ns
        clock.at(due, self._force_check, period_ns, FINISH)
