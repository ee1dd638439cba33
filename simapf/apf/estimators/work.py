"""The work estimator: one request in, one `WorkEstimate` out, dispatched by verb (§5.2).

Mirrors upstream's `workEstimator` (k8s.io/apiserver v0.37.2 `pkg/util/flowcontrol/request/
width.go`), with the LIST formula a pluggable policy:

| verb                              | estimate                                                     |
|-----------------------------------|--------------------------------------------------------------|
| list                              | LIST policy                                                  |
| watch                             | 1 seat with WatchList off; else WATCH rules, then LIST policy |
| create, update, patch, delete     | mutating estimator                                           |
| anything else                     | 1 seat                                                       |

The dispatch looks at the verb only, as upstream does, so a non-resource DELETE reaches the
mutating estimator too (and, watching nothing, costs 1 seat).

Not done here: cutting FinalSeats to the level's CurrentCL at dispatch (§5.5 step 5) belongs to
the queueset, which knows CurrentCL at that moment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from simapf.apf.estimators.base import (
    EVENT_ADDITIONAL_DURATION_NS,
    MINIMUM_SEATS,
    WATCHES_PER_SEAT,
    EstimationContext,
    EstimatorConfigError,
    initial_only,
)
from simapf.apf.estimators.registry import DEFAULT_LIST_POLICY, make_list_policy, policy_estimate
from simapf.apf.estimators.serving import served_from_cache_by_estimator
from simapf.apf.gomath import go_round
from simapf.apf.limits import MAXIMUM_MUTATING_SEATS_LIMIT
from simapf.apf.types import NS_PER_S, RequestAttributes, WorkEstimate

MUTATING_VERBS = frozenset({"create", "update", "patch", "delete"})

# Nanoseconds per fixed-point work unit: 1 seat-second is 1e8 units, so one unit is 10 ns.
_NS_PER_WORK_UNIT: Final = NS_PER_S / 100_000_000


@dataclass(frozen=True, slots=True)
class WatchInitConfig:
    """How an initializing WATCH is costed when WatchList is on (§5.4).

    `cost_legacy_watches`: upstream v0.37.2 also costs "legacy" watches (RV unset or "0"),
    which make the cache replay current state, as a cache LIST. Earlier releases charged every
    watch without `sendInitialEvents=true` the minimum; False gives that behaviour back.
    """

    cost_legacy_watches: bool = True
    min_seats: int = MINIMUM_SEATS

    def __post_init__(self) -> None:
        if isinstance(self.min_seats, bool) or not isinstance(self.min_seats, int) or self.min_seats < 1:
            raise EstimatorConfigError(f"watch estimator: min_seats must be an integer >= 1, got {self.min_seats!r}")


@dataclass(frozen=True, slots=True)
class MutatingEstimatorConfig:
    """Parameters of the mutating estimator (§5.5); defaults are upstream's.

    A write that `watches_per_seat` or more open watches may care about gets
    final = ceil(W / watches_per_seat) seats for `event_additional_duration_s`, reshaped to at
    most `max_mutating_seats` (or the level's max seats if lower) with the same area.
    """

    enabled: bool = True
    watches_per_seat: float = WATCHES_PER_SEAT
    event_additional_duration_s: float = EVENT_ADDITIONAL_DURATION_NS / NS_PER_S
    max_mutating_seats: int = MAXIMUM_MUTATING_SEATS_LIMIT
    min_seats: int = MINIMUM_SEATS

    def __post_init__(self) -> None:
        def bad(name: str, need: str) -> EstimatorConfigError:
            return EstimatorConfigError(f"mutating estimator: {name} must be {need}, got {getattr(self, name)!r}")

        if not isinstance(self.enabled, bool):
            raise bad("enabled", "true or false")
        wps = self.watches_per_seat
        if isinstance(wps, bool) or not isinstance(wps, (int, float)) or not (math.isfinite(wps) and wps >= 1):
            # Below 1 the threshold int(watches_per_seat) would be 0 and every write would pay.
            raise bad("watches_per_seat", "a number >= 1")
        ead = self.event_additional_duration_s
        if isinstance(ead, bool) or not isinstance(ead, (int, float)) or not (math.isfinite(ead) and ead >= 0):
            raise bad("event_additional_duration_s", "a number of seconds >= 0")
        for name in ("max_mutating_seats", "min_seats"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, "an integer >= 1")

    @property
    def event_additional_duration_ns(self) -> int:
        # Upstream holds this as a time.Duration: whole nanoseconds.
        return go_round(self.event_additional_duration_s * NS_PER_S)


def seats_times_duration(seats: float, duration_ns: int) -> int:
    """Upstream `SeatsTimesDuration`: seat-seconds in 1e-8 units, Go-rounded (seat_seconds.go)."""
    return go_round(seats * float(duration_ns) / _NS_PER_WORK_UNIT)


def duration_per_seat_ns(work: int, seats: float) -> int:
    """Upstream `SeatSeconds.DurationPerSeat`: the float result converted to a Duration (truncated)."""
    return int(float(work) / seats * _NS_PER_WORK_UNIT)


class WorkEstimator:
    """Estimates the work of every request; the LIST policy is pluggable.

    `list_policy`: None (default) behaves as upstream: size-based when
    `ctx.size_based_list_cost_estimate` is on, count-based when it is off. A name, import path,
    class (built with `list_params`) or a built policy instance selects a policy explicitly; the
    gate then has no say in LIST cost.
    """

    __slots__ = ("list_policy", "watch_config", "mutating_config", "_list_estimate", "_mut_enabled",
                 "_mut_threshold", "_mut_wps", "_mut_ead_ns", "_mut_max", "_mut_min", "_watch_legacy",
                 "_watch_min")

    def __init__(
        self,
        list_policy: Any = None,
        *,
        list_params: dict[str, Any] | None = None,
        watch: WatchInitConfig | None = None,
        mutating: MutatingEstimatorConfig | None = None,
    ) -> None:
        if list_policy is None:
            list_policy = DEFAULT_LIST_POLICY
        self.list_policy = make_list_policy(list_policy, **(list_params or {}))
        self.watch_config = watch or WatchInitConfig()
        self.mutating_config = mutating or MutatingEstimatorConfig()
        # Bound method and plain fields: the per-request path reads no dataclass properties. A
        # user's policy is called through a check, a shipped one directly.
        self._list_estimate = policy_estimate(self.list_policy, list_policy)
        m = self.mutating_config
        self._mut_enabled = m.enabled
        self._mut_threshold = int(m.watches_per_seat)  # upstream compares with int(WatchesPerSeat)
        self._mut_wps = float(m.watches_per_seat)
        self._mut_ead_ns = m.event_additional_duration_ns
        self._mut_max = m.max_mutating_seats
        self._mut_min = m.min_seats
        self._watch_legacy = self.watch_config.cost_legacy_watches
        self._watch_min = self.watch_config.min_seats

    def config(self) -> dict[str, Any]:
        """Resolved configuration, for embedding in a run's results."""
        lp = self.list_policy
        list_cfg = lp.config() if callable(getattr(lp, "config", None)) else {
            "name": f"{type(lp).__module__}:{type(lp).__qualname__}"}
        m = self.mutating_config
        return {
            "list_policy": list_cfg,
            "watch": {"cost_legacy_watches": self.watch_config.cost_legacy_watches,
                      "min_seats": self.watch_config.min_seats},
            "mutating": {"enabled": m.enabled, "watches_per_seat": m.watches_per_seat,
                         "event_additional_duration_s": m.event_additional_duration_s,
                         "max_mutating_seats": m.max_mutating_seats, "min_seats": m.min_seats},
        }

    def estimate(self, attrs: RequestAttributes, ctx: EstimationContext) -> WorkEstimate:
        verb = attrs.verb
        if verb == "list":
            return self._list_estimate(
                attrs, ctx, served_from_cache_by_estimator(attrs.list_options, ctx.etcd_supports_progress_notify))
        if verb in MUTATING_VERBS:
            return self.estimate_mutating(attrs, ctx)
        if verb == "watch":
            return self.estimate_watch(attrs, ctx)
        return initial_only(MINIMUM_SEATS)

    def estimate_list(self, attrs: RequestAttributes, ctx: EstimationContext) -> WorkEstimate:
        return self._list_estimate(
            attrs, ctx, served_from_cache_by_estimator(attrs.list_options, ctx.etcd_supports_progress_notify))

    def estimate_watch(self, attrs: RequestAttributes, ctx: EstimationContext) -> WorkEstimate:
        """WATCH initialisation (§5.4). Seats are held only until the watch is initialised."""
        if not ctx.watch_list:
            return initial_only(MINIMUM_SEATS)
        opts = attrs.list_options
        if opts.send_initial_events is not True:
            rv = opts.resource_version
            legacy = rv is None or rv == "" or rv == "0"
            if not (legacy and self._watch_legacy):
                # Starts from a known RV and asks for no replay: nothing to load.
                return initial_only(self._watch_min)
        # The watch cache replays its state: costed as a LIST served from the cache.
        return self._list_estimate(attrs, ctx, True)

    def estimate_mutating(self, attrs: RequestAttributes, ctx: EstimationContext) -> WorkEstimate:
        """create/update/patch/delete (§5.5), as upstream's mutating estimator."""
        if not self._mut_enabled:
            return initial_only(self._mut_min)
        if attrs.resource == "serviceaccounts" and attrs.subresource == "token":
            # A token request writes nothing, so no watcher hears of it.
            return initial_only(self._mut_min)
        tracker = ctx.watch_tracker
        watches = tracker.count_for(attrs) if tracker is not None else 0
        if watches < self._mut_threshold:
            return initial_only(1)
        final = math.ceil(watches / self._mut_wps)
        # The fan-out work is fixed first, then reshaped into a narrower, longer rectangle.
        final_work = seats_times_duration(float(final), self._mut_ead_ns)
        pl = ctx.pl_max_seats
        limit = self._mut_max
        cap = pl if 0 < pl <= limit else limit
        if final > cap:
            final = cap
        return WorkEstimate(1, final, duration_per_seat_ns(final_work, float(final)))
