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

from typing import TYPE_CHECKING, Any, Callable, Final

import numpy as np

from simapf.apf.config import bootstrap_objects
from simapf.apf.controller import DEFAULT_WAIT_LIMIT_NS, APFController, FeatureGates
from simapf.apf.estimators import ObjectStatsSource, WorkEstimator
from simapf.apf.estimators.watch_tracker import WatchTracker
from simapf.apf.objects import APFObjects
from simapf.apf.queueset import Request
from simapf.apf.retry_after import DroppedRequestsTracker
from simapf.apf.types import RequestAttributes
from simapf.clock import FINISH
from simapf.environment import Environment
from simapf.server.model import ResourceModel
from simapf.server.network import Link
from simapf.server.params import ServerParams
from simapf.server.paths import RequestCost

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
        "outcome", "reason", "priority_level", "flow_schema", "seats", "apf", "replica", "incarnation",
        "tag", "retry_after_s", "link",
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
        self.apf: Request | None = None  # APF's record of it, while APF holds it
        self.replica = 0  # which apiserver replica took it, and its process incarnation then
        self.incarnation = 0
        self.tag = tag
        self.retry_after_s = 0  # the Retry-After of a 429: whole seconds, as the header
        self.link = link  # the way its response goes to its client (None: taken at once)

    @property
    def latency_ns(self) -> int:
        return self.done_ns - self.received_ns


class SimulatedAPIServer:
    """One kube-apiserver (one replica): APF (`apf`) and its resources (`model`) on `env`."""

    def __init__(
        self,
        env: Environment,
        apf_objects: APFObjects | None = None,
        server_concurrency: int = 600,
        params: ServerParams | None = None,
        estimator: WorkEstimator | None = None,
        gates: FeatureGates = FeatureGates(),
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
        self.env = env
        self.clock = env.clock  # the time and its alarms (simapf.environment.RunClock)
        self.replica = replica
        self.admission = admission
        self.model = ResourceModel(env, params, rng, etcd)
        # What each new APF controller is built from (after a restart or a reconfiguration).
        self._apf_objects = apf_objects if apf_objects is not None else bootstrap_objects()
        self._server_concurrency = server_concurrency
        self._estimator = estimator
        self._gates = gates
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
        if rec.on_done is not None:
            rec.on_done(rec)

    @property
    def dispatched_by_level(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (level, _fs), n in self.dispatched_by_flow.items():
            out[level] = out.get(level, 0) + n
        return out

    @property
    def rejected_by_level(self) -> dict[tuple[str, str], int]:
        """(priority level, reason) -> rejections."""
        out: dict[tuple[str, str], int] = {}
        for (level, _fs, reason), n in self.rejected_by_flow.items():
            out[(level, reason)] = out.get((level, reason), 0) + n
        return out

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
            self._end(rec, FAILED, reason)
            return
        self._run_handler(rec, req)

    def _run_handler(self, rec: ServerRequest, req: Request) -> None:
        cost = rec.cost
        if rec.service_ns is not None or cost is None:  # a fixed service time
            self.clock.at(self.clock.now + (rec.service_ns or 0), self._handler_returned, req, FINISH)
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
