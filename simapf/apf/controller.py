"""The APF filter of one kube-apiserver: classify, estimate, queue, and borrow.

`APFController` owns one `QueueSet` per priority level, the classifier, the work estimator and
the borrowing adjuster. The caller (the SimPy runtime, or a test with an `EventLoop`) submits a
request with its attributes and is told through its listener when the request is dispatched,
rejected or has released its seats; it calls `finish` when the request's handler returns.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from simapf.apf.borrowing import BORROWING_ADJUSTMENT_PERIOD_NS, BorrowingAdjuster
from simapf.apf.classify import Classification, Classifier
from simapf.engine.clock import OTHER, Clock
from simapf.apf.config import EffectiveConfig, build_effective_config
from simapf.apf.objects import APFObjects
from simapf.apf.estimators import EstimationContext, ObjectStatsSource, WorkEstimator
from simapf.apf.estimators.watch_tracker import WatchTracker
from simapf.apf.integrator import Integrator
from simapf.apf.limits import LevelLimits, LevelSpec, compute_limits
from simapf.apf.queueset import NO_DEADLINE, Listener, QueueSet, Request
from simapf.apf.types import NS_PER_S, RequestAttributes, WorkEstimate

DEFAULT_SERVER_CONCURRENCY: Final = 600  # --max-requests-inflight 400 + --max-mutating-requests-inflight 200
DEFAULT_WAIT_LIMIT_NS: Final = 15 * NS_PER_S  # --request-timeout 60 s / 4
MAX_WAIT_LIMIT_NS: Final = 60 * NS_PER_S


class Gates(Protocol):
    """The feature gates APF reads, named as upstream names them (simapf.server.params.FeatureGates
    declares them)."""

    # Read-only: the scenario's gates are a frozen model.
    @property
    def SizeBasedListCostEstimate(self) -> bool: ...  # LISTs charged by response size

    @property
    def WatchList(self) -> bool: ...  # WATCH initialisation charged like a LIST

    @property
    def ConsistentListFromCache(self) -> bool: ...  # consistent LISTs count as cache-served (etcd supports progress notify)


def _context_gates(gates: Gates | None) -> tuple[bool, bool, bool]:
    """The gates as an estimation context holds them (size-based LIST cost, WatchList, etcd's
    progress notify); none given: 1.37's, every gate on, as the context's own defaults."""
    if gates is None:
        return True, True, True
    return gates.SizeBasedListCostEstimate, gates.WatchList, gates.ConsistentListFromCache


def level_spec(pl: Any) -> LevelSpec:
    """A PriorityLevelConfiguration as the limits arithmetic needs it."""
    queuing = pl.queuing
    return LevelSpec(
        name=pl.name,
        exempt=pl.is_exempt,
        nominal_concurrency_shares=pl.nominal_concurrency_shares,
        lendable_percent=pl.lendable_percent,
        borrowing_limit_percent=pl.borrowing_limit_percent,
        queuing=queuing is not None,
        hand_size=queuing.hand_size if queuing is not None else 0,
    )


class Level:
    """One priority level: its limits, its queueset and what its estimators see."""

    __slots__ = ("name", "config", "limits", "queueset", "context", "integrator")

    def __init__(self, name: str, config: Any, limits: LevelLimits, queueset: QueueSet,
                 context: EstimationContext, integrator: Integrator) -> None:  # fmt: skip
        self.name = name
        self.config = config
        self.limits = limits
        self.queueset = queueset
        self.context = context
        self.integrator = integrator

    @property
    def current_cl(self) -> int:
        return self.queueset.cl


class APFController:
    def __init__(
        self,
        objects: APFObjects | EffectiveConfig,
        clock: Clock,
        listener: Listener,
        server_concurrency: int = DEFAULT_SERVER_CONCURRENCY,
        estimator: WorkEstimator | None = None,
        object_stats: ObjectStatsSource | None = None,
        gates: Gates | None = None,
        wait_limit_ns: int = DEFAULT_WAIT_LIMIT_NS,
        response_streamed: Any = True,
        watch_tracker: WatchTracker | None = None,
    ) -> None:
        if server_concurrency <= 0:
            raise ValueError("server concurrency must be > 0")
        self.clock = clock
        self.listener = listener
        self.server_concurrency = server_concurrency
        self.gates = gates
        self.estimator = estimator if estimator is not None else WorkEstimator()
        self.object_stats = object_stats
        # Open watches belong to the server, not to one configuration of APF.
        self.watch_tracker = watch_tracker if watch_tracker is not None else WatchTracker()
        self.wait_limit_ns = min(wait_limit_ns, MAX_WAIT_LIMIT_NS)
        self.response_streamed = response_streamed
        self.config = objects if isinstance(objects, EffectiveConfig) else build_effective_config(objects)
        self.classifier = Classifier(self.config)
        self.levels: dict[str, Level] = {}
        self._build_levels()
        self.adjuster = BorrowingAdjuster(
            {name: lv.limits for name, lv in self.levels.items()},
            {name: lv.integrator for name, lv in self.levels.items()},
        )
        self._borrowing_started = False
        self._stopped = False
        self.adjust_borrowing()  # the config digest's own adjustment: the idle CurrentCLs

    # ----------------------------------------------------------------- set-up

    def _build_levels(self) -> None:
        pls = self.config.priority_levels
        limits = compute_limits([level_spec(pl) for pl in pls.values()], self.server_concurrency)
        now = self.clock.now
        for name, pl in pls.items():
            lim = limits[name]
            integrator = Integrator(now)
            queuing = pl.queuing
            if pl.is_exempt:
                qs = QueueSet(name, self.clock, self.listener, lim.nominal_cl, queues=0,
                              exempt=True, integrator=integrator)  # fmt: skip
            elif queuing is None:  # Reject
                qs = QueueSet(name, self.clock, self.listener, lim.initial_current_cl, queues=0,
                              integrator=integrator)  # fmt: skip
            else:
                qs = QueueSet(
                    name, self.clock, self.listener, lim.initial_current_cl,
                    queues=queuing.queues, hand_size=queuing.hand_size,
                    queue_length_limit=queuing.queue_length_limit,
                    wait_limit_ns=self.wait_limit_ns, integrator=integrator,
                )  # fmt: skip
            size_based, watch_list, progress_notify = _context_gates(self.gates)
            context = EstimationContext(
                object_stats=self.object_stats,
                pl_max_seats=lim.max_seats,
                nominal_cl=lim.nominal_cl,
                current_cl=qs.cl,
                max_cl=lim.max_cl,
                hand_size=queuing.hand_size if queuing is not None else 0,
                size_based_list_cost_estimate=size_based,
                watch_list=watch_list,
                etcd_supports_progress_notify=progress_notify,
                watch_tracker=self.watch_tracker,
                response_streamed=self.response_streamed,
                priority_level=name,
            )
            self.levels[name] = Level(name, pl, lim, qs, context, integrator)

    # ----------------------------------------------------------------- borrowing

    def adjust_borrowing(self) -> dict[str, int]:
        """Recompute every level's CurrentCL from its seat demand, and apply it."""
        current = self.adjuster.adjust(self.clock.now)
        for name, cl in current.items():
            level = self.levels[name]
            level.context.current_cl = cl
            if not level.queueset.exempt:  # the exempt level's limit is informational only
                level.queueset.set_concurrency_limit(cl)
            else:
                level.queueset.cl = cl
        return current

    def start_borrowing(self) -> None:
        """Run the adjuster every 10 s from now on, as upstream's sliding timer does."""
        if not self._borrowing_started:
            self._borrowing_started = True
            self._schedule_adjustment()

    def _schedule_adjustment(self) -> None:
        when = self.clock.now + BORROWING_ADJUSTMENT_PERIOD_NS
        self.clock.at(when, self._periodic_adjustment, None, OTHER)

    def _periodic_adjustment(self, _: object) -> None:
        if self._stopped:
            return
        self.adjust_borrowing()
        self._schedule_adjustment()

    def stop(self) -> None:
        """The process this controller belongs to has died: no more adjustments."""
        self._stopped = True

    # ----------------------------------------------------------------- requests

    def classify(self, attrs: RequestAttributes) -> Classification:
        return self.classifier.classify(attrs)

    def estimate(self, attrs: RequestAttributes, classification: Classification) -> WorkEstimate:
        context = self.levels[classification.priority_level].context
        context.flow_schema = classification.flow_schema
        return self.estimator.estimate(attrs, context)

    def submit(
        self,
        attrs: RequestAttributes,
        seq: int,
        payload: Any = None,
        deadline_ns: int | None = None,
    ) -> Request:
        """A request reaches APF now: classify, estimate and hand it to its level.

        `deadline_ns` is the end of its queue wait (server receipt + wait limit); by default
        the controller's wait limit from now. The listener hears of the decision, possibly
        before this returns."""
        classification = self.classifier.classify(attrs)
        estimate = self.estimate(attrs, classification)
        req = Request(
            seq, classification.flow_hash, estimate.initial_seats, estimate.final_seats,
            estimate.additional_latency_ns, deadline_ns=NO_DEADLINE if deadline_ns is None else deadline_ns,
            payload=payload,
        )  # fmt: skip
        req.flow_schema = classification.flow_schema
        self.levels[classification.priority_level].queueset.arrive(req)
        return req

    @staticmethod
    def finish(req: Request) -> None:
        """The request's handler returned (its seats may linger for additional latency)."""
        level = req.level
        assert level is not None, "finish of a request that never arrived"
        level.finish(req)
