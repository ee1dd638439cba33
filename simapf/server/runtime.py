"""The simulated kube-apiserver: APF in front of the resource model, on one SimPy clock.

A request's life: `submit` → classify and estimate (APF) → queue → dispatch → the resource
model runs it (etcd, memory, CPU under processor sharing, GC) → its handler returns → APF
finish (seats may linger for additional latency) → the caller's `on_done`. Everything is a
callback on the SimPy environment, whose time unit is the nanosecond; no request is a process.

When the process dies (OOM or a kill), every request it held, queued or executing, fails; while
it is down new requests are refused; it comes back with a fresh APF state (empty queues, idle
limits, a new borrowing timer) and empty watch caches that refill from etcd.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Final, Iterable, NamedTuple

import numpy as np

from simapf.apf.config import bootstrap_objects
from simapf.apf.controller import DEFAULT_WAIT_LIMIT_NS, APFController
from simapf.apf.estimators import ObjectStatsSource, WorkEstimator
from simapf.apf.estimators.watch_tracker import WatchTracker
from simapf.apf.objects import APFObjects
from simapf.apf.queueset import Request
from simapf.apf.retry_after import DroppedRequestsTracker
from simapf.apf.types import RequestAttributes
from simapf.engine.clock import FINISH
from simapf.engine.environment import RunClock
from simapf.server.model import CachedResource, ResourceModel, ServerSnapshot
from simapf.server.network import Link
from simapf.server.params import FeatureGates, ServerParams
from simapf.server.paths import RequestCost
from simapf.server.process import Hook

if TYPE_CHECKING:
    from simapf.server.etcd import EmbeddedEtcd, EtcdModel
    from simapf.server.webhooks import Admission

# Outcomes a client sees
OK: Final = "ok"
REJECTED: Final = "rejected"  # HTTP 429 from APF; `reason` says queue-full, time-out or concurrency-limit
UNAVAILABLE: Final = "unavailable"  # the process was down: connection refused
FAILED: Final = "failed"  # the process died while holding the request, or the request failed (a 500)


class ServerRequest:
    """One request to the simulated apiserver, and what became of it.

    Give either `cost` (the resource model runs it) or `service_ns` (it simply takes that long
    and uses no modelled resource: for tests and requests whose cost does not matter)."""

    __slots__ = (
        "attrs", "cost", "service_ns", "on_done", "received_ns", "dispatch_ns", "done_ns",
        "outcome", "reason", "priority_level", "flow_schema", "seats", "exempt", "apf", "replica",
        "incarnation", "tag", "retry_after_s", "link",
    )  # fmt: skip

    def __init__(self, attrs: RequestAttributes, cost: RequestCost | None, service_ns: int | None,
                 on_done: Callable[[ServerRequest], None] | None, now_ns: int, tag: Any,
                 link: Link | None = None) -> None:  # fmt: skip
        self.attrs = attrs
        self.cost = cost
        self.service_ns = service_ns
        self.on_done = on_done
        self.received_ns = now_ns
        self.dispatch_ns = -1
        self.done_ns = -1
        self.outcome = ""  # "" until the request ends: then OK, REJECTED, UNAVAILABLE or FAILED
        self.reason = ""
        self.priority_level = ""
        self.flow_schema = ""
        self.seats = 0
        self.exempt = False  # dispatched by an exempt priority level (set at dispatch)
        self.apf: Request | None = None  # APF's record of it, while APF holds it
        self.replica = 0  # which apiserver replica took it, and its process incarnation then
        self.incarnation = 0
        self.tag = tag
        self.retry_after_s = 0  # the Retry-After of a 429: whole seconds, as the header
        self.link = link  # the way its response goes to its client (None: taken at once)

    @property
    def latency_ns(self) -> int:
        return self.done_ns - self.received_ns


class LevelGauges(NamedTuple):
    """One priority level's gauges, as upstream's apiserver_flowcontrol_* metrics name them."""

    name: str
    executing_seats: int
    executing_requests: int
    inqueue_requests: int
    limit_seats: int  # the current limit, borrowing included
    nominal_limit_seats: int


class APIServerSnapshot(NamedTuple):
    """One apiserver replica at one instant: everything the rest of simapf reads of it.

    Counters run across restarts and reconfigurations. A snapshot is a reading: taking one
    changes nothing in the model, so how often it is taken never changes a run."""

    t_ns: int
    replica: int
    resources: ServerSnapshot  # the process's memory, GC and CPU (simapf.server.model)
    oom_kills: int
    kills: int  # every death, OOM kills included
    restarts: int
    down_ns: int  # time spent down so far, a downtime still open included
    last_down_reason: str | None  # why the process last died ("oom", or the reason of a kill)
    rss_at_oom_bytes: float  # the RSS the last OOM kill ended (at most the limit)
    oom_demand_bytes: float  # what the allocation that did not fit would have made it
    openapi_v2_eager: bool  # the OpenAPI v2 document is rebuilt on every CRD change (before 1.28)
    openapi_v2_rebuilds: int
    openapi_v2_rebuild_core_s: float
    etcd_busy_core_s: float  # the etcd it reads (shared by the replicas): server-seconds of ranges
    etcd_ranges: int
    etcd_read_index_rounds: int
    levels: tuple[LevelGauges, ...]  # the current APF configuration's levels, in its order
    completed: dict[str, int]  # requests ended, by outcome
    pending: int  # requests queued or executing
    dispatched_by_flow: dict[tuple[str, str], int]  # (priority level, flow schema)
    ended_by_level: dict[str, int]  # requests ended after APF dispatched or rejected them, by priority level
    rejected_by_flow: dict[tuple[str, str, str], int]  # (priority level, flow schema, reason)


def by_level(dispatched_by_flow: dict[tuple[str, str], int]) -> dict[str, int]:
    """Dispatches per priority level, from those per (level, flow schema)."""
    out: dict[str, int] = {}
    for (level, _fs), n in dispatched_by_flow.items():
        out[level] = out.get(level, 0) + n
    return out


def by_level_and_reason(rejected_by_flow: dict[tuple[str, str, str], int]) -> dict[tuple[str, str], int]:
    """Rejections per (priority level, reason), from those per (level, flow schema, reason)."""
    out: dict[tuple[str, str], int] = {}
    for (level, _fs, reason), n in rejected_by_flow.items():
        out[(level, reason)] = out.get((level, reason), 0) + n
    return out


class SimulatedAPIServer:
    """One kube-apiserver (one replica): APF (`apf`) and its resources (`model`) on `clock`."""

    def __init__(
        self,
        clock: RunClock,
        apf_objects: APFObjects | None = None,
        server_concurrency: int = 600,
        params: ServerParams | None = None,
        estimator: WorkEstimator | None = None,
        gates: FeatureGates | None = None,
        object_stats: ObjectStatsSource | None = None,
        wait_limit_ns: int = DEFAULT_WAIT_LIMIT_NS,
        rng: np.random.Generator | None = None,
        admission: "Admission | None" = None,
        replica: int = 0,
        etcd: "EtcdModel | EmbeddedEtcd | None" = None,
    ) -> None:
        """`rng`: the stream that varies each request's work (`request_cpu.work_cv`).
        `admission`: the admission webhooks writes pass through while they hold their seats.
        `replica`: its number among the apiserver replicas; `etcd`: the etcd they share (by
        default one of its own)."""
        self.clock = clock  # the time and its alarms
        self.replica = replica
        self.admission = admission
        self.model = ResourceModel(clock, params, rng, etcd)
        # What each new APF controller is built from (after a restart or a reconfiguration).
        self._apf_objects = apf_objects if apf_objects is not None else bootstrap_objects()
        self._server_concurrency = server_concurrency
        self._estimator = estimator
        self._gates = gates if gates is not None else FeatureGates()
        self._object_stats = object_stats
        self._wait_limit_ns = wait_limit_ns
        self.incarnation = 0
        self.up_since_ns = self.clock.now  # when this process started: its watch caches hold history from then
        self.watch_tracker = WatchTracker()  # open watches; emptied when the process dies
        # Whether the response of the request being estimated is streamed: the work estimator
        # asks (EstimationContext.response_streamed) while `submit` hands the request to APF, as
        # upstream's estimator reads the request's negotiated media type.
        self._streamed_now = True
        self.apf = self._new_apf()
        self._draining: list[APFController] = []  # controllers replaced by a config change
        self._pending: dict[int, ServerRequest] = {}  # queued or executing, by id
        self._seq = 0
        self.completed = {OK: 0, REJECTED: 0, UNAVAILABLE: 0, FAILED: 0}
        # Counters that run across restarts and reconfigurations, for metrics.
        # APF's counters, keyed as upstream labels them: (priority level, flow schema[, reason]).
        self.dispatched_by_flow: dict[tuple[str, str], int] = {}
        self.ended_by_level: dict[str, int] = {}
        self.rejected_by_flow: dict[tuple[str, str, str], int] = {}
        self.dropped = DroppedRequestsTracker()
        self.model.process.on_death.append(self._died)
        self.model.process.on_restart.append(self._restarted)

    def _new_apf(self) -> APFController:
        apf = APFController(
            self._apf_objects, self.clock, self, server_concurrency=self._server_concurrency,
            estimator=self._estimator, object_stats=self._object_stats, gates=self._gates,
            wait_limit_ns=self._wait_limit_ns, watch_tracker=self.watch_tracker,
            response_streamed=self._response_streamed,
        )  # fmt: skip
        apf.start_borrowing()
        return apf

    def set_estimator(self, estimator: WorkEstimator) -> None:
        """Use another work estimator from now on (and after restarts)."""
        self._estimator = estimator
        self.apf.estimator = estimator

    def reconfigure_apf(self, objects: APFObjects) -> None:
        """A new APF configuration takes effect now. New requests go to the new levels; the old
        controller keeps dispatching what it had queued until it is empty, as upstream drains a
        removed level (simapf rebuilds every level, where upstream keeps a level whose name
        survives: see docs/apf-model.md)."""
        self._apf_objects = objects
        old = self.apf
        old.stop()
        self._draining.append(old)
        self.apf = self._new_apf()

    # ----------------------------------------------------------------- the front door
    # What the cluster, its clients, the scenario's events and the observers may do to an
    # apiserver and read of it. The resource model (`model`) is simapf.server's own: nothing
    # outside the package reaches into it.

    @property
    def params(self) -> ServerParams:
        return self.model.params

    @property
    def up(self) -> bool:
        """The process runs: from its death to its restart it does not."""
        return self.model.up

    def on_death(self, hook: Hook) -> None:
        """`hook(now_ns)` is called whenever the process dies (an OOM kill, or `kill`), after
        the apiserver has failed every request it held. Hooks run in the order they were given."""
        self.model.process.on_death.append(hook)

    def on_restart(self, hook: Hook) -> None:
        """`hook(now_ns)` is called whenever a new process is up, its watch caches empty."""
        self.model.process.on_restart.append(hook)

    def kill(self, reason: str = "killed") -> None:
        """Kill the process now (a scenario's restart); it restarts after `restart_s`."""
        self.model.kill(reason)

    def set_watch_cache(self, resources: Iterable[CachedResource]) -> None:
        """The watch-cached resources, taken as filled now (at the start of a run)."""
        self.model.set_watch_cache(resources)

    def watch_cache_event(self, name: str, objects: int, stored_bytes: float) -> None:
        """A write to the watch-cached resource `name` committed (`ResourceModel.watch_cache_event`)."""
        self.model.watch_cache_event(name, objects, stored_bytes)

    def watch_cache_ready(self, name: str) -> bool:
        """Whether the watch cache of resource `name` is filled."""
        return self.model.watch_cache_ready(name)

    def hold(self, nbytes: float) -> bool:
        """`nbytes` stay live (an open watch's) until `release(nbytes)`. False if allocating
        them killed the process (then nothing is held)."""
        return self.model.hold(nbytes)

    def release(self, nbytes: float) -> None:
        """What `hold(nbytes)` held is freed (not called for a process that died since)."""
        self.model.release(nbytes)

    def spend_cpu(self, core_s: float) -> None:
        """CPU work on the apiserver's cores that nobody waits for (a watch event's fan-out)."""
        self.model.cpu.add(core_s, _nothing)

    def install_crds(self, count: int, served_versions: int, schema_bytes: float, at_start: bool = False) -> None:
        """`count` CustomResourceDefinitions, each serving `served_versions` versions of a
        `schema_bytes` schema, are created now: the process builds their serving structures and
        adds their specs to the OpenAPI document (which an eager one rebuilds). `at_start`:
        installed before the run, so every process holds them from its start and publishes
        them when it starts, with nothing to rebuild."""
        crds = self.model.params.crds
        heap = count * crds.crd_bytes(served_versions, schema_bytes)
        spec = count * crds.crd_openapi_bytes(served_versions, schema_bytes)
        model = self.model
        if at_start:
            model.set_crds(heap)
            model.openapi.crds_changed(spec, rebuild=False)
        else:
            model.install_crds(heap)  # may kill the process: then it publishes them when it restarts
            model.openapi.crds_changed(spec, rebuild=model.up)

    def restart_peaks(self) -> tuple[float, float]:
        """The true peaks (RSS, heap in use) since the last call; they start again from now."""
        return self.model.memory.restart_peaks()

    def snapshot(self) -> APIServerSnapshot:
        """The apiserver now: its process, its counters, its APF levels' gauges."""
        model = self.model
        process = model.process
        openapi = model.openapi
        etcd = model.etcd
        now = self.clock.now
        levels = []
        for name, level in self.apf.levels.items():
            g = level.queueset.gauges()
            levels.append(LevelGauges(name, g.executing_seats, g.executing_requests, g.waiting_requests,
                                      g.concurrency_limit, level.limits.nominal_cl))  # fmt: skip
        return APIServerSnapshot(
            t_ns=now,
            replica=self.replica,
            resources=model.snapshot(),
            oom_kills=process.oom_kills,
            kills=process.kills,
            restarts=process.restarts,
            down_ns=process.down_ns_until(now),
            last_down_reason=process.last_down_reason,
            rss_at_oom_bytes=model.rss_at_oom_bytes,
            oom_demand_bytes=model.oom_demand_bytes,
            openapi_v2_eager=openapi.eager,
            openapi_v2_rebuilds=openapi.rebuilds,
            openapi_v2_rebuild_core_s=openapi.core_s_total,
            etcd_busy_core_s=etcd.busy_seconds(),
            etcd_ranges=etcd.ranges,
            etcd_read_index_rounds=etcd.read_index_rounds,
            levels=tuple(levels),
            completed=dict(self.completed),
            pending=len(self._pending),
            dispatched_by_flow=dict(self.dispatched_by_flow),
            ended_by_level=dict(self.ended_by_level),
            rejected_by_flow=dict(self.rejected_by_flow),
        )

    # ----------------------------------------------------------------- requests

    @property
    def pending(self) -> int:
        """Requests queued or executing now."""
        return len(self._pending)

    def submit(
        self,
        attrs: RequestAttributes,
        cost: RequestCost | None = None,
        on_done: Callable[[ServerRequest], None] | None = None,
        service_ns: int | None = None,
        tag: Any = None,
        link: Link | None = None,
    ) -> ServerRequest:
        """A request arrives now. `on_done(request)` is called once, with `request.outcome`
        set, when its response is complete or it was refused, rejected or lost. `link`: the way
        to its client (simapf.server.network): the handler returns once its response has gone."""
        if cost is None and service_ns is None:
            raise ValueError("a request needs a cost or a service time")
        rec = ServerRequest(attrs, cost, service_ns, on_done, self.clock.now, tag, link)
        if not self.model.up:
            self._end(rec, UNAVAILABLE, "down")
            return rec
        self._seq += 1
        rec.replica = self.replica
        rec.incarnation = self.incarnation
        self._pending[id(rec)] = rec
        if not self.model.hold_request():
            return rec  # its memory killed the process, and the request with it
        self._streamed_now = cost.streaming if cost is not None else True
        apf_request = self.apf.submit(attrs, self._seq, payload=rec)
        if not rec.outcome:  # not rejected on arrival (see _end)
            rec.apf = apf_request
        return rec

    def _response_streamed(self, _attrs: RequestAttributes) -> bool:
        return self._streamed_now

    def refuse(self, attrs: RequestAttributes, on_done: Callable[[ServerRequest], None], tag: Any,
               outcome: str, reason: str, retry_after_s: int | None = None) -> None:
        """End a request before APF sees it: no process listens (UNAVAILABLE), or the watch
        cache it needs is refilling (REJECTED, with a Retry-After)."""
        rec = ServerRequest(attrs, None, 0, on_done, self.clock.now, tag)
        if retry_after_s is not None:
            rec.retry_after_s = retry_after_s
        self._end(rec, outcome, reason)

    def _end(self, rec: ServerRequest, outcome: str, reason: str = "") -> None:
        rec.outcome = outcome
        rec.reason = reason
        rec.done_ns = self.clock.now
        # APF's record of the request points back at it (its payload): dropping ours once the
        # request has ended lets reference counting free both, instead of Python's cycle
        # collector, whose full collections over a busy run's objects cost a fifth of its time.
        rec.apf = None
        if self._pending.pop(id(rec), None) is not None and rec.incarnation == self.incarnation:
            self.model.release_request()
        self.completed[outcome] += 1
        level = rec.priority_level  # set when APF dispatched or rejected it
        if level:
            self.ended_by_level[level] = self.ended_by_level.get(level, 0) + 1
        if rec.on_done is not None:
            rec.on_done(rec)

    @property
    def dispatched_by_level(self) -> dict[str, int]:
        return by_level(self.dispatched_by_flow)

    @property
    def rejected_by_level(self) -> dict[tuple[str, str], int]:
        """(priority level, reason) -> rejections."""
        return by_level_and_reason(self.rejected_by_flow)

    # APF's listener --------------------------------------------------

    def dispatched(self, req: Request) -> None:
        rec: ServerRequest = req.payload
        if rec.outcome or rec.incarnation != self.incarnation:
            return
        rec.dispatch_ns = self.clock.now
        level = req.level
        assert level is not None  # a request APF dispatches has arrived at a level
        name = rec.priority_level = level.name
        fs = rec.flow_schema = req.flow_schema
        key = (name, fs)
        self.dispatched_by_flow[key] = self.dispatched_by_flow.get(key, 0) + 1
        rec.seats = req.max_seats
        rec.exempt = level.exempt
        if self.admission is not None:
            a = rec.attrs
            hooks = self.admission.matching(a.verb, a.resource)
            if hooks:
                def admitted(reason: str) -> None:
                    self._admitted(rec, req, reason)

                self.admission.admit(hooks, self.clock.now, admitted)
                return
        self._run_handler(rec, req)

    def _admitted(self, rec: ServerRequest, req: Request, reason: str) -> None:
        if rec.outcome or rec.incarnation != self.incarnation:
            return  # the process died meanwhile, or the request timed out
        if reason:
            self.apf.finish(req)
            if not rec.outcome:  # as in _handler_returned: finishing can kill the process
                self._end(rec, FAILED, reason)
            return
        self._run_handler(rec, req)

    def _run_handler(self, rec: ServerRequest, req: Request) -> None:
        cost = rec.cost
        if rec.service_ns is not None or cost is None:  # a fixed service time: as in a replay,
            # handlers that return at one instant return in the order their requests arrived
            self.clock.at_ticket(self.clock.now + (rec.service_ns or 0), self._handler_returned, req, FINISH, req.ticket)
            return

        def handler_returned(_now_ns: int) -> None:
            self._handler_returned(req)

        if not self.model.start(cost, handler_returned, req.seq, rec.link):
            self._end(rec, FAILED, "down")

    def _handler_returned(self, req: Request) -> None:
        rec: ServerRequest = req.payload
        if rec.outcome or rec.incarnation != self.incarnation:
            return
        self.apf.finish(req)
        # Finishing dispatches the next request, whose memory can OOM-kill the process, which
        # ends every request it held, this one too: it has had its answer.
        if rec.outcome:
            return
        error = self.model.plan(rec.cost).error if rec.cost is not None else ""
        self._end(rec, FAILED if error else OK, error)

    def rejected(self, req: Request, reason: str) -> None:
        rec: ServerRequest = req.payload
        if rec.outcome or rec.incarnation != self.incarnation:
            return
        level = req.level
        assert level is not None  # a request APF rejects has arrived at a level
        name = rec.priority_level = level.name
        fs = rec.flow_schema = req.flow_schema
        key = (name, fs, reason)
        self.rejected_by_flow[key] = self.rejected_by_flow.get(key, 0) + 1
        now = self.clock.now
        self.dropped.record(name, now)
        rec.retry_after_s = self.dropped.retry_after_s(name)
        self._end(rec, REJECTED, reason)

    def released(self, req: Request) -> None:
        pass

    # ----------------------------------------------------------------- deaths and restarts

    def _died(self, now_ns: int) -> None:
        """Every request the process held is lost; its APF state goes with it."""
        self.apf.stop()
        self._draining.clear()
        self.watch_tracker = WatchTracker()
        self.dropped = DroppedRequestsTracker()
        self.incarnation += 1
        for rec in list(self._pending.values()):
            self._end(rec, FAILED, self.model.process.last_down_reason or "killed")

    def _restarted(self, now_ns: int) -> None:
        self.up_since_ns = now_ns
        self.apf = self._new_apf()


def _nothing(_arg: object) -> None:
    """A CPU job nobody waits for."""
