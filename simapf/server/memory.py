"""Heap and RSS accounting of the apiserver process (list-memory.md §4.7, §6.3).

Quantities, all bytes (floats):

- `base_live`: live heap that does not depend on requests: the process's own live heap plus the
  watch caches (decoded objects).
- `inflight_live`: the sum of the live bytes of executing requests. They appear when a request
  starts executing (an etcd-served LIST: when its range response arrives) and leave when it ends.
- `pooled`: encode buffers kept between responses in encoding/json's pool (`pool`: JSON) and
  apimachinery's allocator pool (`allocators`: whole Protobuf responses since 1.37), both Go
  `sync.Pool`s (simapf.server.pool); one nobody takes is freed by the second GC cycle after it
  was put back.
- `heap_live`: Go's heapLive: every byte allocated since the last mark termination plus the bytes
  that mark kept. It only grows between GC cycles; a cycle's end sets it to what was marked.
  `heap_live - live` is garbage not yet collected.
- `heap_free`: free heap pages still mapped (unscavenged). Freed bytes land here at the end of a
  cycle; allocation reuses them before the heap grows; the scavenger returns them to the OS
  (MADV_DONTNEED, Go's default on Linux since 1.16, so RSS falls at once).
- `lazy_free`: pages returned with MADV_FREE instead (`gc.page_release: free`, Go 1.12-1.15's
  default): Go counts them released, but they stay resident until the kernel needs memory. The
  heap reuses them first when it grows, so they keep RSS at its high-water mark without ever
  pushing it past it: the limit is crossed when the heap itself crosses it, as with MADV_DONTNEED.

- `untouched`: heap bytes never written, so not resident: the unwritten tails of encode buffers
  grown with make on pages fresh from the OS (`request_memory.buffer_growth_zeroes: false`, Go
  1.18 and older) while a request or the pool holds them, and once they are garbage until the
  cycle that frees them ends (freed, they are free pages that cost nothing until reused). Always
  0 when buffers grow with append, which writes the whole new array.

    RSS = (heap_live + heap_free + lazy_free − untouched)·(1 + heap_metadata_fraction) + nonheap_bytes

RSS only rises when an allocation grows the heap, so checking the container limit at each
allocation finds every crossing without a time step.

`peak_rss` and `peak_heap` are the highest RSS and heap in use since `restart_peaks` (or since the
model was made), followed at every change that can raise them: an allocation (one the container
refuses kills the process and is not counted), a heap set without one (a process starting, watch
caches registered) and, with untouched pages, an encode buffer's pages written or given back. So
they are exact, whenever and however often anyone reads the model (to the rounding of moves that
leave RSS as it is, such as an allocation on free pages: far below a byte). Reading it (`rss_now`,
`heap_free_now`) changes nothing: the background scavenger is brought up to now only by the
model's own events.
"""

from __future__ import annotations

from typing import Callable, Final, Protocol

from simapf.engine.environment import RunClock
from simapf.server.params import ServerParams
from simapf.server.pool import ALLOCATOR, DOUBLING, EncodeBufferPool

_INV_NS: Final = 1e-9


class Pacer(Protocol):
    """What allocation asks of the garbage collector (simapf.server.gc.GoGC): whether a mark
    phase is on, where the next cycle starts, and the assist an allocation owes."""

    marking: bool
    trigger: float
    alloc_during_mark: float

    def assist(self, nbytes: float) -> float: ...

    def start_cycle(self) -> None: ...


class MemoryModel:
    __slots__ = (
        "clock", "nonheap_bytes", "meta", "limit_bytes", "gomemlimit_bytes", "memlimit_scavenge",
        "base_live", "inflight_live", "heap_live", "heap_free", "lazy_free", "lazy_release",
        "retained_goal", "scavenge_rate", "_scav_t", "released_bytes",
        "alloc_total", "peak_rss", "peak_heap", "gc", "on_over_limit", "alive", "rss_before_kill", "pools",
        "untouched_held", "untouched_pages",
    )

    def __init__(self, clock: RunClock, params: ServerParams, seed: int = 0) -> None:
        """`seed` draws the Ps that encode buffers are taken and given back on."""
        self.clock = clock  # the time and its alarms
        p = params.process
        self.nonheap_bytes = p.nonheap_bytes
        self.meta = 1.0 + p.heap_metadata_fraction
        self.limit_bytes = p.memory_limit_bytes
        self.gomemlimit_bytes = params.gc.gomemlimit_bytes
        self.memlimit_scavenge = (
            params.gc.gomemlimit_bytes * params.gc.memory_limit_scavenge_fraction
            if params.gc.gomemlimit_bytes is not None
            else None
        )
        self.scavenge_rate = params.gc.scavenge_rate_bytes_per_s
        self.lazy_release = params.gc.page_release == "free"
        self.gc: Pacer | None = None  # set by the GC that paces this heap
        self.on_over_limit: Callable[[], None] | None = None
        self.alloc_total = 0.0
        self.released_bytes = 0.0
        self.peak_rss = 0.0
        self.rss_before_kill: float | None = None  # set by an allocation that did not fit
        self.peak_heap = 0.0
        # Indexed by how their buffers grow (a plan's `buffer_growth`): DOUBLING, ALLOCATOR.
        procs = params.cpu.procs
        self.untouched_pages = not params.request_memory.buffer_growth_zeroes
        self.untouched_held = 0.0  # of the buffers requests hold
        self.pools = (EncodeBufferPool(procs, seed, DOUBLING, by_written=self.untouched_pages),
                      EncodeBufferPool(procs, seed, ALLOCATOR))  # fmt: skip
        self.start_process(params.process.live_heap_bytes)
        self.note_peaks()

    def start_process(self, base_live: float) -> None:
        """A fresh process: the heap holds exactly its live baseline."""
        self.alive = True
        self.base_live = base_live
        self.inflight_live = 0.0
        self.untouched_held = 0.0
        for pool in self.pools:
            pool.clear()
        self.heap_live = base_live
        self.heap_free = 0.0
        self.lazy_free = 0.0
        self.retained_goal = float("inf")
        self._scav_t = self.clock.now

    def kill(self) -> None:
        """The process is gone: it holds no memory."""
        self.alive = False
        self.base_live = self.inflight_live = self.heap_live = self.heap_free = self.lazy_free = 0.0
        self.untouched_held = 0.0
        for pool in self.pools:
            pool.clear()

    # ------------------------------------------------------------------ gauges

    @property
    def live_bytes(self) -> float:
        return self.base_live + self.inflight_live + self.pooled

    @property
    def pool(self) -> EncodeBufferPool:
        """encoding/json's pool of encode buffers."""
        return self.pools[DOUBLING]

    @property
    def allocators(self) -> EncodeBufferPool:
        """The allocator pool whole Protobuf responses take their buffer from (1.37)."""
        return self.pools[ALLOCATOR]

    @property
    def pooled(self) -> float:
        """Bytes of encode buffers the pools keep between responses."""
        json, allocators = self.pools
        return json.live + allocators.live

    @property
    def garbage_bytes(self) -> float:
        g = self.heap_live - self.base_live - self.inflight_live - self.pooled
        return g if g > 0.0 else 0.0

    @property
    def untouched(self) -> float:
        """Heap bytes never written (see the module's docstring)."""
        if not self.untouched_pages:
            return 0.0
        json = self.pools[DOUBLING]
        return self.untouched_held + json.untouched + json.freed_untouched

    def rss_bytes(self) -> float:
        if not self.alive:
            return 0.0
        return (self.heap_live + self.heap_free + self.lazy_free - self.untouched) * self.meta + self.nonheap_bytes

    def mapped_bytes(self) -> float:
        """What Go's runtime has mapped and ready (its view for GOMEMLIMIT): RSS less the pages it
        released with MADV_FREE, which it counts as returned."""
        if not self.alive:
            return 0.0
        return (self.heap_live + self.heap_free) * self.meta + self.nonheap_bytes

    # ------------------------------------------------------------------ allocation

    def allocate(self, nbytes: float) -> float:
        """Allocate `nbytes`; returns the assist CPU (core-s) the allocator owes the GC, or -1.0
        if the allocation pushed RSS over the container limit and the process was killed."""
        free = self.heap_free
        if free > 0.0 and self.heap_live + free > self.retained_goal:
            # What the background scavenger released until now, before this allocation takes
            # any of the free pages.
            self.scavenge()
            free = self.heap_free
        heap = self.heap_live = self.heap_live + nbytes
        self.alloc_total += nbytes
        if free >= nbytes:
            self.heap_free = free - nbytes
            # RSS stays (but for the rounding of moving bytes from free to in use, far below a
            # byte, not followed: it would cost every allocation), or rises by the pages of a
            # buffer just taken that were untouched.
            if self.untouched_pages:
                self.note_rss()
        else:
            self.heap_free = 0.0
            lazy = self.lazy_free
            if lazy > 0.0:
                # Growth reuses pages released with MADV_FREE that are still resident: RSS stays.
                reuse = nbytes - free
                self.lazy_free = lazy = lazy - reuse if lazy > reuse else 0.0
            # The hot path: `untouched` is only asked for where it can be other than 0.
            untouched = self.untouched if self.untouched_pages else 0.0
            rss = (heap + lazy - untouched) * self.meta + self.nonheap_bytes
            limit = self.limit_bytes
            if limit is not None and rss > limit:
                # The RSS the process had: the kernel kills it when this allocation does not fit.
                self.rss_before_kill = (heap - nbytes + free + lazy - untouched) * self.meta + self.nonheap_bytes
                if self.on_over_limit is not None:
                    self.on_over_limit()
                return -1.0
            if rss > self.peak_rss:
                self.peak_rss = rss
        if heap > self.peak_heap:
            self.peak_heap = heap
        gc = self.gc
        if gc is None:
            return 0.0
        if gc.marking:
            gc.alloc_during_mark += nbytes
            return gc.assist(nbytes)
        if heap >= gc.trigger:
            gc.start_cycle()
        return 0.0

    # ------------------------------------------------------------------ peaks

    def note_rss(self) -> None:
        """RSS may have risen without an allocation: follow its peak."""
        rss = self.rss_bytes()
        if rss > self.peak_rss:
            self.peak_rss = rss

    def note_peaks(self) -> None:
        """The heap was set without an allocation (a process starting, watch caches
        registered): follow both peaks."""
        self.note_rss()
        if self.heap_live > self.peak_heap:
            self.peak_heap = self.heap_live

    def note_rss_reached(self, rss: float) -> None:
        """The process had `rss` (an OOM kill's, at most the limit) at some instant."""
        if rss > self.peak_rss:
            self.peak_rss = rss

    def restart_peaks(self) -> tuple[float, float]:
        """The highest (RSS, heap in use) since the last call; the peaks start again from what
        the process has now."""
        ended = (self.peak_rss, self.peak_heap)
        self.peak_rss = self.rss_now()
        self.peak_heap = self.heap_live
        return ended

    # ------------------------------------------------------------------ GC and scavenger

    def collect(self, marked: float) -> float:
        """Mark termination: the heap is what was marked; the rest becomes free pages."""
        freed = self.heap_live - marked
        if freed < 0.0:
            freed = 0.0
        self.heap_live = marked
        resident = freed
        if self.untouched_pages:
            # Pages never written are free now but were never resident: they cost RSS only once
            # reused, which zeroes them, as the heap's growth does here.
            json = self.pools[DOUBLING]
            gone = json.freed_untouched if json.freed_untouched < freed else freed
            json.freed_untouched -= gone
            resident -= gone
        self.heap_free += resident
        return freed

    def set_retained_goal(self, retained_goal: float) -> None:
        """Where the scavenger stops: the GC's retained-heap goal, or below the memory-limit
        goal (0.95 x GOMEMLIMIT less non-heap memory) when that is lower."""
        self.scavenge()
        if self.memlimit_scavenge is not None:
            mem_target = (self.memlimit_scavenge - self.nonheap_bytes) / self.meta
            if mem_target < retained_goal:
                retained_goal = mem_target
            self._scavenge_to_memory_limit()
        self.retained_goal = retained_goal

    def scavenge(self) -> None:
        """Bring the background scavenger up to now: release free pages above the retained
        goal at `scavenge_rate` bytes per second of elapsed time."""
        release = self._release_due()
        self._scav_t = self.clock.now
        if release <= 0.0:
            return
        self.heap_free -= release
        self.released_bytes += release
        if self.lazy_release:
            self.lazy_free += release

    def _release_due(self) -> float:
        """What the background scavenger has released since it was last brought up to now."""
        dt = (self.clock.now - self._scav_t) * _INV_NS
        free = self.heap_free
        if free <= 0.0 or dt <= 0.0:
            return 0.0
        excess = self.heap_live + free - self.retained_goal
        if excess <= 0.0:
            return 0.0
        release = self.scavenge_rate * dt
        if release > excess:
            release = excess
        if release > free:
            release = free
        return release

    def heap_free_now(self) -> float:
        """`heap_free` as it is now, the scavenger's release since its last step taken off,
        without stepping it (a reading must not change the model's arithmetic)."""
        return self.heap_free - self._release_due()

    def rss_now(self) -> float:
        """RSS now, read as `heap_free_now` is: the model is left as it was."""
        if not self.alive:
            return 0.0
        release = self._release_due()
        lazy = self.lazy_free + release if self.lazy_release else self.lazy_free
        return (self.heap_live + (self.heap_free - release) + lazy - self.untouched) * self.meta + self.nonheap_bytes

    def _scavenge_to_memory_limit(self) -> None:
        # Over GOMEMLIMIT the runtime scavenges synchronously, not at the background pace.
        limit = self.gomemlimit_bytes
        assert limit is not None
        over = self.mapped_bytes() - limit
        if over > 0.0 and self.heap_free > 0.0:
            release = min(self.heap_free, over / self.meta)
            self.heap_free -= release
            self.released_bytes += release
            if self.lazy_release:
                self.lazy_free += release
