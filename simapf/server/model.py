"""The facade the runtime drives: one call per request, gauges for series, deaths and restarts.

    model = ResourceModel(clock, ServerParams())
    model.set_watch_cache([CachedResource("pods", 5000, 50e6)])
    model.start(RequestCost(ServingPath.ETCD, ResponseShape(100_000, 10)), on_done)
    ...
    model.snapshot()            # gauges and counters now

`start` runs the request through etcd (if its path reads etcd), then allocates its bytes (which
may start a GC cycle, or charge it a GC assist, or kill the process) and runs its CPU work under
processor sharing; `on_done(now_ns)` is called when the handler would return. Nothing per
request is a SimPy process: a request is a tuple passed between callbacks.
"""

from __future__ import annotations

from typing import Any, Callable, Final, Iterable, NamedTuple

import numpy as np

from simapf.engine.clock import FINISH, RELEASE
from simapf.engine.environment import RunClock
from simapf.server.costs import RequestPlan, compute_plan, refill_plan
from simapf.server.cpu import NS, ProcessorSharing
from simapf.server.etcd import EmbeddedEtcd, EtcdMember, EtcdModel, etcd_for
from simapf.server.gc import GoGC
from simapf.server.memory import MemoryModel
from simapf.server.network import Link
from simapf.server.openapi import OpenAPIv2Rebuilds
from simapf.server.own_alloc import OwnAllocation
from simapf.server.params import ServerParams
from simapf.server.paths import RequestCost
from simapf.server.pool import GET, PUT
from simapf.server.process import ProcessState, ServerProcessState
from simapf.server.variation import Factors, WorkVariation
from simapf.server.watch_caches import CachedResource, WatchCaches

DoneCallback = Callable[[int], None]

PLAN_CACHE_LIMIT: Final = 20_000  # distinct request costs a process keeps planned


class Running:
    """A request in flight: its plan, its callback, its work factors (etcd, CPU, client reading),
    the link its response goes out on (None: the client takes it at once), and how many of its
    CPU work and its streamed write are still going (both must end before it goes on), and the
    capacity of the pooled encode buffer it holds until its response is written (0: none).
    `key` is its number, which picks its work factors and the Ps it encodes on."""

    __slots__ = ("plan", "on_done", "factors", "link", "pending", "epoch", "key", "buffer", "buffer_written",
                 "buffer_garbage")  # fmt: skip

    def __init__(self, plan: RequestPlan, on_done: DoneCallback, factors: Factors,
                 link: Link | None, epoch: int, key: int) -> None:  # fmt: skip
        self.plan = plan
        self.on_done = on_done
        self.factors = factors
        self.link = link
        self.pending = 1
        self.epoch = epoch
        self.key = key
        self.buffer = 0.0
        self.buffer_written = 0.0  # of its buffer's capacity, the bytes ever written (the rest is not resident)
        self.buffer_garbage = 0.0  # the smaller arrays its buffer outgrew, allocated along its work


class _Refill:
    """A watch cache's fill in flight: its plan, the resource, the bytes the cache will keep,
    the process incarnation it belongs to, and how many of etcd's work and its decoding are going."""

    __slots__ = ("plan", "name", "cache_bytes", "epoch", "pending")

    def __init__(self, plan: RequestPlan, name: str, cache_bytes: float, epoch: int) -> None:
        self.plan = plan
        self.name = name
        self.cache_bytes = cache_bytes
        self.epoch = epoch
        self.pending = 1


class ServerSnapshot(NamedTuple):
    """Gauges and counters at one instant; a list of these is a pandas DataFrame.

    Counters (`*_total`, `gc_cycles`, `oom_kills`) run across restarts. `cpu_seconds_total` is
    process_cpu_seconds_total (requests + GC + the idle process's own work), in core-seconds.
    The GC's CPU is given as the Go runtime's metrics give it (runtime/metrics /cpu/classes/gc):
    P-seconds (a P held for a second, whether or not the OS ran its thread then), by class:
    `gc_mark_dedicated_seconds_total` (dedicated and fractional mark workers),
    `gc_mark_assist_seconds_total` (assists), `gc_mark_idle_seconds_total` (idle mark workers, on
    Ps with nothing else to run); `gc_cpu_seconds_total` is their sum, /cpu/classes/gc/total. The
    GC CPU limiter and gctrace's percentage leave the idle class out. Byte figures are 0 while
    the process is down.
    """

    t_ns: int
    up: bool
    state: str
    rss_bytes: float
    heap_inuse_bytes: float  # Go heap_live: live + not yet collected
    heap_free_bytes: float  # free, not yet scavenged (in RSS)
    heap_goal_bytes: float
    heap_trigger_bytes: float
    live_bytes: float  # reachable: baseline + watch caches + in-flight requests
    inflight_live_bytes: float
    garbage_bytes: float
    gc_cycles: int
    gc_marking: bool
    cpu_seconds_total: float
    request_cpu_seconds_total: float
    gc_cpu_seconds_total: float
    requests_executing: int
    etcd_reads_in_flight: int
    requests_completed_total: int
    oom_kills: int
    alloc_bytes_total: float  # go_memstats_alloc_bytes_total
    responses_writing: int = 0  # handlers waiting for a co-located client to read their response
    client_cpu_seconds_total: float = 0.0  # CPU of co-located clients (not the process's)
    gc_mark_dedicated_seconds_total: float = 0.0
    gc_mark_assist_seconds_total: float = 0.0
    gc_mark_idle_seconds_total: float = 0.0
    gc_limiter_fill: float = 0.0  # the GC CPU limiter's bucket, as a fraction of its capacity (1: on)


class ResourceModel:
    """CPU, etcd, memory and the Go GC of one kube-apiserver, driven per request."""

    def __init__(
        self, clock: RunClock, params: ServerParams | None = None, rng: np.random.Generator | None = None,
        etcd: EtcdModel | EmbeddedEtcd | None = None,
    ) -> None:
        """`etcd`: the etcd this apiserver reads from, when several replicas share one (by
        default its own, from `params.etcd`)."""
        self.clock = clock  # the time and its alarms
        self.params = params = params if params is not None else ServerParams()
        cp = params.cpu
        # The idle process's own work (baseline_cores) runs all the time: requests share the rest.
        self.baseline_cores = params.process.baseline_cores
        self.cpu = ProcessorSharing(
            clock,
            cores=max(cp.effective_cores - self.baseline_cores, 0.01 * cp.effective_cores),
            procs=cp.procs,
            gc_threads=params.gc.dedicated_fraction * cp.procs,
            gc_sharing=params.gc.cpu_sharing,
            gc_idle_workers=params.gc.idle_mark_workers,
        )
        self.etcd = etcd if etcd is not None else etcd_for(clock, params.etcd, self.cpu)
        self.vary = WorkVariation(params.request_cpu.work_cv, rng)
        self.memory = MemoryModel(clock, params, seed=self.vary.seed)
        self.gc = GoGC(clock, params, self.memory, self.cpu)
        self.memory.gc = self.gc
        self.memory.on_over_limit = self._oom
        self.rss_at_oom_bytes = 0.0  # the RSS the last OOM kill ended
        self.oom_demand_bytes = 0.0  # what the allocation that did not fit would have made it
        self.process = ServerProcessState()
        self._plans: dict[RequestCost, RequestPlan] = {}
        self.caches = WatchCaches(params)
        self._refilling = 0
        self.up = True  # the process runs (False from its death to its restart)
        self.completed = 0
        self._started = 0
        self.writing = 0  # responses a co-located client is still reading
        self._restart_cb = self._restart
        self._delivered_cb = self._delivered
        self._links: list[Link] = []  # client links that carried a response of this process
        self.held_bytes = params.request_memory.request_held_bytes
        self._up_since_ns = self.clock.now  # for the baseline CPU: time up, across restarts
        self.crd_bytes = 0.0  # live heap of the installed CRDs: every process, restarted or not, holds it
        self.openapi = OpenAPIv2Rebuilds(params, self.cpu, self.memory)
        self._up_s_before = 0.0
        self.own_alloc = OwnAllocation(self.clock, self.gc, self.memory, self.process,
                                       params.process.own_alloc_bytes_per_s, self.allocate_own)  # fmt: skip
        self.own_alloc.start()

    # ------------------------------------------------------------------ per request

    def plan(self, cost: RequestCost) -> RequestPlan:
        """CPU, etcd work and bytes of a request (cached per distinct cost, at most
        PLAN_CACHE_LIMIT of them: a workload of ever-new sizes starts the cache afresh)."""
        plan = self._plans.get(cost)
        if plan is None:
            if len(self._plans) >= PLAN_CACHE_LIMIT:
                self._plans.clear()
            plan = self._plans[cost] = compute_plan(self.params, cost)
        return plan

    def hold_request(self) -> bool:
        """A request has arrived: it holds `request_memory.request_held_bytes` (goroutines, the
        request, its stream's buffers) until `release_request`, queued or executing. Returns
        False if the allocation killed the process (then nothing is held)."""
        return self.hold(self.held_bytes)

    def release_request(self) -> None:
        """A request that `hold_request` counted has ended (not called for a process that died
        since: its memory went with it)."""
        self.release(self.held_bytes)

    def hold(self, nbytes: float) -> bool:
        """`nbytes` stay live in flight (a request, an open watch) until `release(nbytes)`.
        Returns False if the allocation killed the process (then nothing is held)."""
        if nbytes and self.up:
            mem = self.memory
            mem.inflight_live += nbytes
            if mem.allocate(nbytes) < 0.0:
                return False
        return True

    def release(self, nbytes: float) -> None:
        """What `hold(nbytes)` held is freed (not called for a process that died since)."""
        if self.up:
            self.memory.inflight_live -= nbytes

    def allocate_own(self, nbytes: float) -> bool:
        """The process allocates `nbytes` of garbage on its own (simapf.server.own_alloc); the
        assist it owes runs on the cores as a job nobody waits for. Returns False if the
        allocation killed the process."""
        assist = self.memory.allocate(nbytes)
        if assist < 0.0:
            return False
        if assist > 0.0:
            self.cpu.add(assist, _nothing)
        return True

    def start(self, cost: RequestCost, on_done: DoneCallback, key: int | None = None,
              link: Link | None = None) -> bool:  # fmt: skip
        """Execute a request; `on_done(now_ns)` when its handler returns.

        `key`: the request's number, which picks its work factors (`request_cpu.work_cv`); the
        apiserver gives its arrival number, so that a request keeps its work whenever it starts.
        Without one, requests are numbered in the order they start. `link`: the way to its
        client (simapf.server.network); the handler returns once the response has gone out on it.

        Returns False (and never calls back) when the process is down. If the process dies
        while the request runs, `on_done` is not called; `process.on_death` hooks fire instead.
        """
        if not self.up:
            return False
        plan = self._plans.get(cost)
        if plan is None:
            plan = self.plan(cost)
        if key is None:
            key = self._started
        self._started += 1
        if link is not None and not plan.wire_bytes:
            link = None
        req = Running(plan, on_done, self.vary.factors(key), link, self.process.epoch, key)
        if link is not None and link not in self._links:
            self._links.append(link)
        if plan.etcd_work:
            if plan.wait_live_bytes:
                mem = self.memory
                mem.inflight_live += plan.wait_live_bytes
                if mem.allocate(plan.wait_live_bytes) < 0.0:
                    return True  # killed; the on_death hooks told the runtime
            self._read_range(plan.etcd_work * req.factors[0], plan.decode_core_s * req.factors[1],
                             self._after_etcd, req)  # fmt: skip
        else:
            self._begin_cpu(req)
        return True

    def _read_range(self, etcd_work: float, decode_core_s: float, then: Callable[[Any], None],
                    job: Running | _Refill) -> None:  # fmt: skip
        """etcd serves a range; a streamed one (`decode_core_s` > 0) is decoded on our cores as
        etcd sends it. `then(job)` is called when each ends: `job.pending` counts them. The range
        goes to the next etcd member, and with several members it is linearizable: it starts
        once that member's ReadIndex round has returned (simapf.server.etcd.ReadIndexLoop)."""
        member = self.etcd.pick()
        read_index = member.read_index
        if read_index is not None:
            read_index.wait(self._range_confirmed, (member, etcd_work, decode_core_s, then, job))
            return
        self._start_range(member, etcd_work, decode_core_s, then, job)

    def _range_confirmed(self, args: tuple[EtcdMember | EmbeddedEtcd, float, float, Callable[[Any], None],
                                           Running | _Refill]) -> None:  # fmt: skip
        member, etcd_work, decode_core_s, then, job = args
        if job.epoch != self.process.epoch:
            return  # the process died while its read waited
        self._start_range(member, etcd_work, decode_core_s, then, job)

    def _start_range(self, member: EtcdMember | EmbeddedEtcd, etcd_work: float, decode_core_s: float,
                     then: Callable[[Any], None], job: Running | _Refill) -> None:  # fmt: skip
        if decode_core_s:
            job.pending = 2
            self.cpu.add(decode_core_s, then, job)
        member.read(etcd_work, then, job)

    def _after_etcd(self, req: Running) -> None:
        if req.epoch != self.process.epoch:
            return  # a range the process asked for before it died (shared etcd, FIFO)
        req.pending -= 1
        if req.pending:
            return  # its streamed range is still arriving, or still being decoded
        plan = req.plan
        if plan.wait_live_bytes:
            self.memory.inflight_live -= plan.wait_live_bytes
        req.pending = 1
        self._begin_cpu(req)

    def _begin_cpu(self, req: Running) -> None:
        plan = req.plan
        mem = self.memory
        mem.inflight_live += plan.live_bytes
        grow = self._take_buffer(req, plan) if plan.buffer_need else 0.0
        if req.link is not None and plan.streamed:
            # Written as it is encoded: the write and the CPU work go on together.
            req.pending = 2
            req.link.send(plan.wire_bytes, self._sent, req)
        steps = plan.alloc_steps
        if steps == 1:
            assist = mem.allocate(plan.alloc_bytes + grow)
            if assist < 0.0:
                return  # the allocation killed the process
            work = plan.cpu_core_s * req.factors[1]
            self.cpu.add(work + assist, self._finish, req)
            return
        # Live bytes now, the garbage in steps between equal parts of the work.
        self._step((req, steps), plan.live_bytes + grow)

    def _take_buffer(self, req: Running, plan: RequestPlan) -> float:
        """The request encodes with a pooled buffer (simapf.server.pool): encoding/json's, or for
        a whole Protobuf response the allocator pool's. Returns the bytes it allocates growing it
        as it starts. A whole response keeps its buffer until it has been written out; streamed
        items give theirs back as each is encoded. A request that allocates in steps allocates
        the arrays its buffer outgrew along its work (`buffer_garbage`), with its other garbage."""
        mem = self.memory
        pool = mem.pools[plan.buffer_growth]
        free = mem.heap_free + mem.lazy_free  # pages a growth reuses before the heap grows
        if not plan.buffer_held:
            return pool.use(pool.proc(req.key, GET), plan.buffer_need, free)
        taken, grown, written, alloc = pool.take(pool.proc(req.key, GET), plan.buffer_need, free)
        req.buffer = grown
        req.buffer_written = written
        mem.inflight_live += grown
        mem.untouched_held += grown - written
        if plan.alloc_steps > 1:
            req.buffer_garbage = alloc - (grown - taken)
            return grown - taken
        return alloc

    def _give_back_buffer(self, req: Running) -> None:
        """The response is written: its buffer goes back to its pool, on whichever P the
        handler woke up on."""
        mem = self.memory
        mem.inflight_live -= req.buffer
        mem.untouched_held -= req.buffer - req.buffer_written
        pool = mem.pools[req.plan.buffer_growth]
        pool.put(pool.proc(req.key, PUT), req.buffer_written)
        req.buffer = req.buffer_written = 0.0
        if mem.untouched_pages:
            mem.note_rss()  # the pool may count fewer of its pages untouched than the request did

    def _step(self, job: tuple[Running, int], first_bytes: float = 0.0) -> None:
        req, left = job
        plan = req.plan
        steps = plan.alloc_steps
        assist = self.memory.allocate(first_bytes + (plan.alloc_bytes - plan.live_bytes + req.buffer_garbage) / steps)
        if assist < 0.0:
            return
        work = plan.cpu_core_s * req.factors[1] / steps
        if left == 1:
            self.cpu.add(work + assist, self._finish, req)
        else:
            self.cpu.add(work + assist, self._step, (req, left - 1))

    def _finish(self, req: Running) -> None:
        plan = req.plan
        link = req.link
        # From here the request holds what it keeps while its response is written.
        self.memory.inflight_live -= plan.live_bytes - plan.write_live_bytes
        if link is not None and not plan.streamed:
            req.pending = 2
            link.send(plan.wire_bytes, self._sent, req)
        self._sent(req)

    def _sent(self, req: Running) -> None:
        """The CPU work or the write on the link has ended; when both have, the client reads."""
        if req.epoch != self.process.epoch:
            return  # the process died meanwhile
        req.pending -= 1
        if req.pending:
            return
        plan = req.plan
        if plan.write_core_s or plan.write_delay_ns:
            # The client reads the response (a co-located one on our cores), and the request
            # keeps its response buffer (and seats) until it has.
            self.writing += 1
            if plan.write_core_s:
                work = plan.write_core_s * req.factors[2]
                self.cpu.add(work, self._read, req, foreign=True)
            else:
                self._read(req)
            return
        self.memory.inflight_live -= plan.write_live_bytes
        if req.buffer:
            self._give_back_buffer(req)
        self.completed += 1
        req.on_done(self.clock.now)

    def _read(self, req: Running) -> None:
        delay = req.plan.write_delay_ns
        if delay:
            self.clock.at(self.clock.now + delay, self._delivered_cb, req, FINISH)
        else:
            self._written(req)

    def _delivered(self, req: Running) -> None:
        if req.epoch == self.process.epoch:  # else the process died meanwhile
            self._written(req)

    def _written(self, req: Running) -> None:
        self.memory.inflight_live -= req.plan.write_live_bytes
        if req.buffer:
            self._give_back_buffer(req)
        self.writing -= 1
        self.completed += 1
        req.on_done(self.clock.now)

    # ------------------------------------------------------------------ watch cache

    def set_watch_cache(self, resources: Iterable[CachedResource]) -> None:
        """Register the watch-cached resources, taken as filled now (call at the start; later
        changes come one event at a time, `watch_cache_event`)."""
        before = self.memory.rss_bytes()
        for res in resources:
            grown = self.caches.register(res, self.up)
            if self.up:
                self._add_base(grown)
        self._check_start(before)

    def watch_cache_event(self, name: str, objects: int, stored_bytes: float) -> None:
        """A write to the watch-cached resource `name` committed: `objects` objects (1 a create,
        -1 a delete) of `stored_bytes` in etcd (negative for a delete). A ready cache applies
        the event now, as kube-apiserver's watch cache applies each event as it arrives: a new
        object is allocated and stays live; a deleted one is garbage for the next GC cycle. A
        cache that is not ready (the process down, or the resource's refill under way) takes
        the resource as it then is when it is filled (`_restart`, `_refill_done`)."""
        caches = self.caches
        if caches.commit(name, objects, stored_bytes):  # ready: the process is up too
            self._resize_cache(name, caches.size_now(name))

    def _resize_cache(self, name: str, nbytes: float) -> None:
        """The ready cache of `name` holds `nbytes` from now on."""
        grown = self.caches.resize(name, nbytes)
        mem = self.memory
        mem.base_live += grown
        if grown > 0.0:
            assist = mem.allocate(grown)
            if assist > 0.0:
                self.cpu.add(assist, _nothing)  # the cache's goroutine pays its GC assist

    def set_crds(self, nbytes: float) -> None:
        """CustomResourceDefinitions installed before the run: `nbytes` of live heap that every
        process of this apiserver holds from its start (call at the start)."""
        before = self.memory.rss_bytes()
        self.crd_bytes += nbytes
        if self.up:
            self._add_base(nbytes)
        self._check_start(before)

    def install_crds(self, nbytes: float) -> None:
        """CRDs created now: their serving structures are allocated (which may start a GC cycle
        or end in an OOM kill) and stay live; a restarted process builds them again."""
        self.crd_bytes += nbytes
        if self.up:
            mem = self.memory
            mem.base_live += nbytes
            mem.allocate(nbytes)

    def _add_base(self, nbytes: float) -> None:
        mem = self.memory
        mem.base_live += nbytes
        mem.heap_live += nbytes

    def _check_start(self, before: float) -> None:
        self.gc.base_changed()
        # What does not fit in the container at the start kills the process as an allocation
        # would (and the same after each restart: a crash loop).
        limit = self.params.process.memory_limit_bytes
        if self.up and limit is not None and self.memory.rss_bytes() > limit:
            self.memory.rss_before_kill = before
            self._oom()
        elif self.up:
            self.memory.note_peaks()

    def watch_cache_ready(self, name: str) -> bool:
        """Whether the resource's watch cache is filled (serving_path's `cache_ready`)."""
        return self.caches.ready(name)

    @property
    def resources(self) -> tuple[CachedResource, ...]:
        return self.caches.current()

    # ------------------------------------------------------------------ life and death

    @property
    def state(self) -> ProcessState:
        return self.process.state

    def kill(self, reason: str = "killed") -> None:
        """Kill the process now (an outage in a scenario); it restarts after `restart_s`."""
        if not self.up:
            return
        now = self.clock.now
        self.up = False
        self._up_s_before += (now - self._up_since_ns) / NS
        self.cpu.clear()
        self.openapi.process_died()
        self.etcd.cancel(self)
        for link in self._links:
            link.clear()  # the process's connections broke with it
        self._links.clear()
        self.writing = 0
        self.gc.stop()
        self.memory.kill()
        self.caches.lost()
        self._refilling = 0
        self.process.went_down(now, reason)
        epoch = self.process.epoch
        delay = int(round(self.params.process.restart_s * NS))
        self.clock.at(self.clock.now + delay, self._restart_cb, epoch, FINISH)

    def _oom(self) -> None:
        # What the process had when the kernel killed it (at most the limit), and what the
        # allocation (or the caches) that did not fit asked for.
        mem = self.memory
        self.oom_demand_bytes = mem.rss_bytes()
        before = mem.rss_before_kill
        limit = self.params.process.memory_limit_bytes or self.oom_demand_bytes
        self.rss_at_oom_bytes = min(before if before is not None else limit, limit)
        mem.rss_before_kill = None
        mem.note_rss_reached(self.rss_at_oom_bytes)  # what it had when it was killed: its peak may be that
        self.kill("oom")

    def _restart(self, epoch: int) -> None:
        if epoch != self.process.epoch or self.up:
            return
        now = self.clock.now
        self.up = True
        self._up_since_ns = now
        self.memory.start_process(self.params.process.live_heap_bytes + self.crd_bytes)
        self.gc.reset()
        epoch = self.process.epoch
        refill = self.resources  # as etcd holds them now
        self.process.came_back(now, refilling=bool(refill))
        if self.process.epoch != epoch:
            return  # a restart hook killed it again
        limit = self.params.process.memory_limit_bytes
        if limit is not None and self.memory.rss_bytes() > limit:
            # The CRDs it must serve do not fit: killed as it starts, again after each restart.
            self._oom()
            return
        self.memory.note_peaks()
        self.own_alloc.start()
        if not refill:
            self.process.became_ready(now)
            return
        self._refilling = len(refill)
        for res in refill:
            plan, nbytes = refill_plan(self.params, res.object_count, res.stored_bytes, res.decoded_multiplier)
            job = _Refill(plan, res.name, nbytes, epoch)
            self._read_range(plan.etcd_work, plan.decode_core_s, self._refill_cpu, job)

    def _refill_cpu(self, job: _Refill) -> None:
        plan, epoch = job.plan, job.epoch
        if epoch != self.process.epoch:
            return
        job.pending -= 1
        if job.pending:
            return
        mem = self.memory
        mem.inflight_live += plan.live_bytes
        assist = mem.allocate(plan.alloc_bytes)
        if assist < 0.0:
            return
        self.cpu.add(plan.cpu_core_s + assist, self._refill_done, job)

    def _refill_done(self, job: _Refill) -> None:
        plan, name, nbytes, epoch = job.plan, job.name, job.cache_bytes, job.epoch
        if epoch != self.process.epoch:
            return
        mem = self.memory
        # The range response is garbage now; the decoded objects stay as the cache.
        mem.inflight_live -= plan.live_bytes
        mem.base_live += nbytes
        self.caches.filled(name, nbytes)
        # Writes committed since its LIST read etcd: the cache applies them now, as its watch
        # delivers them.
        current = self.caches.size_now(name)
        if current != nbytes:
            self._resize_cache(name, current)
            if epoch != self.process.epoch:
                return  # they did not fit
        self._refilling -= 1
        if self._refilling == 0:
            self.process.became_ready(self.clock.now)

    # ------------------------------------------------------------------ observation

    def snapshot(self) -> ServerSnapshot:
        now = self.clock.now
        mem = self.memory
        gc = self.gc
        cpu = self.cpu
        # Read without stepping the scavenger or the CPU integrals: what is read, and how often,
        # must not change the model (their floats, and so every later event).
        req_cpu, mark_cpu, foreign_cpu = cpu.usage_now()
        dedicated, idle_mark, _idle = cpu.p_seconds_now()
        assist = gc.assist_core_s_total
        up_s = self._up_s_before + ((now - self._up_since_ns) / NS if self.up else 0.0)
        return ServerSnapshot(
            t_ns=now,
            up=self.up,
            state=self.process.state.value,
            rss_bytes=mem.rss_now(),
            heap_inuse_bytes=mem.heap_live,
            heap_free_bytes=mem.heap_free_now(),
            heap_goal_bytes=gc.goal if self.up else 0.0,
            heap_trigger_bytes=gc.trigger if self.up else 0.0,
            live_bytes=mem.live_bytes,
            inflight_live_bytes=mem.inflight_live,
            garbage_bytes=mem.garbage_bytes,
            gc_cycles=gc.cycles,
            gc_marking=gc.marking,
            cpu_seconds_total=req_cpu + mark_cpu + self.baseline_cores * up_s,
            request_cpu_seconds_total=req_cpu - assist,
            gc_cpu_seconds_total=dedicated + assist + idle_mark,
            requests_executing=cpu.jobs,
            etcd_reads_in_flight=self.etcd.in_flight,
            requests_completed_total=self.completed,
            oom_kills=self.process.oom_kills,
            alloc_bytes_total=mem.alloc_total,
            responses_writing=self.writing,
            client_cpu_seconds_total=foreign_cpu,
            gc_mark_dedicated_seconds_total=dedicated,
            gc_mark_assist_seconds_total=assist,
            gc_mark_idle_seconds_total=idle_mark,
            gc_limiter_fill=gc.limiter_fill,
        )


def sample_every(model: ResourceModel, interval_ns: int, sink: Callable[[ServerSnapshot], None]) -> None:
    """Pass `model.snapshot()` to `sink` now, before the instant's other work, and every
    `interval_ns` after.

    A snapshot reads the model without changing it, so sampling, at any interval, leaves the
    run as it would be without it."""
    if interval_ns <= 0:
        raise ValueError("interval_ns must be positive")
    clock = model.clock

    def sample(_arg: object) -> None:
        sink(model.snapshot())
        clock.at(clock.now + interval_ns, sample, None, FINISH)

    clock.at(clock.now, sample, None, RELEASE)


def _nothing(_arg: object) -> None:
    """A CPU job nobody waits for."""
