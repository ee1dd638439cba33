"""What every work estimator reads: object statistics, the level's limits, feature gates.

Upstream's estimators (k8s.io/apiserver `pkg/util/flowcontrol/request`) reach for these through
closures and global feature gates. Here they travel in one `EstimationContext`, so a test or a
what-if run can change any of them without touching global state. Reference: apf-mechanics.md §5.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from simapf.apf.types import RequestAttributes, WorkEstimate
from simapf.errors import ConfigError

if TYPE_CHECKING:
    from simapf.apf.estimators.watch_tracker import WatchTracker

# Upstream constants of the request package (config.go, list_work_estimator.go,
# mutating_work_estimator.go, seat_seconds.go) at k8s.io/apiserver v0.37.2.
MINIMUM_SEATS = 1
OBJECTS_PER_SEAT = 100.0  # legacy (count-based) LIST estimate
WATCHES_PER_SEAT = 10.0
EVENT_ADDITIONAL_DURATION_NS = 5_000_000
BYTES_PER_SEAT = 100_000
CACHE_WITH_STREAMING_MAX_MEMORY_BYTES = 1_000_000
# etcd's recommended maximum request size; stands in for an unknown average object size.
MAX_OBJECT_SIZE_BYTES = 1_500_000
# Stale statistics pretend the resource is enormous, so the estimate lands on the cap.
INFINITE_OBJECT_COUNT = 1_000_000_000
# Work is fixed-point: 1 seat-second = 1e8 units (seat_seconds.go `ssScale`).
SEAT_SECONDS_SCALE = 100_000_000

STATS_OK = "ok"
STATS_STALE = "stale"
STATS_NOT_FOUND = "not-found"
_STATES = (STATS_OK, STATS_STALE, STATS_NOT_FOUND)


class EstimatorConfigError(ConfigError, ValueError):
    """A user asked for an estimator or policy that cannot be built (bad name, bad parameter).

    A `ConfigError`, so the CLI reports it in one line with exit status 2; also a ValueError for
    callers that build estimators from Python.
    """


@dataclass(frozen=True, slots=True)
class ObjectStats:
    """Per group-resource statistics as the object-count tracker holds them.

    `state` is what the tracker's lookup would say: "ok"; "stale" when the last refresh is older
    than 3 min (the estimators then assume the worst); "not-found" when the resource is unknown
    or was pruned after 1 h (the estimators then charge the minimum, because aggregated APIs
    land there too and over-charging them caused trouble upstream, kubernetes#109106).
    """

    object_count: int
    average_object_size_bytes: int
    state: str = STATS_OK

    def __post_init__(self) -> None:
        if self.state not in _STATES:
            raise ValueError(f"ObjectStats.state must be one of {_STATES}, got {self.state!r}")


@runtime_checkable
class ObjectStatsSource(Protocol):
    """Where estimators look up statistics; the simulator feeds it from its inventory.

    Returning None means "not found", the same as an ObjectStats with state "not-found".
    """

    def lookup(self, api_group: str, resource: str) -> ObjectStats | None: ...


class StaticObjectStats:
    """A dict-backed `ObjectStatsSource`, for tests and for inventories that change rarely."""

    __slots__ = ("_stats",)

    def __init__(self, stats: Mapping[tuple[str, str], ObjectStats] | None = None) -> None:
        self._stats: dict[tuple[str, str], ObjectStats] = dict(stats or {})

    def set(self, api_group: str, resource: str, stats: ObjectStats | None) -> None:
        if stats is None:
            self._stats.pop((api_group, resource), None)
        else:
            self._stats[(api_group, resource)] = stats

    def lookup(self, api_group: str, resource: str) -> ObjectStats | None:
        return self._stats.get((api_group, resource))


@dataclass(slots=True)
class EstimationContext:
    """Everything an estimator may read besides the request itself.

    One context per priority level is the intended use: the level's fields change at config
    digest (`pl_max_seats`, `nominal_cl`, `max_cl`, `hand_size`) or every 10 s (`current_cl`),
    and the simulator updates them in place. The context is mutable and unvalidated on purpose:
    it is read on every request.

    * `pl_max_seats`: upstream's per-level max seats (§4.1); 0 for Exempt and Reject levels,
      which makes the estimators fall back to their global caps.
    * `nominal_cl`, `current_cl`, `max_cl`, `hand_size`: the level's limits (§2, §3). Upstream's
      estimators read none of them (PLmaxSeats already folds in NominalCL and handSize); the
      borrowing-aware LIST policies and users' own policies may.
    * `size_based_list_cost_estimate`, `watch_list`: the feature gates (both Beta, on in 1.37).
      The first only matters when no LIST policy was named (see `WorkEstimator`).
    * `etcd_supports_progress_notify`: whether a consistent LIST (RV unset) can be served from
      the watch cache in the estimator's eyes; stands for ConsistentListFromCache being on and
      etcd >= 3.4.31 / 3.5.13.
    * `watch_tracker`: open watches, for the mutating estimator; None counts as no watches.
    * `response_streamed`: whether a cache-served LIST response would actually be streamed
      (WatchList, or streaming collection encoding). Upstream does not ask; only the
      "streamed-cache-cap" policy does. A bool, or a callable taking the request.
    """

    object_stats: ObjectStatsSource | None = None
    pl_max_seats: int = 0
    nominal_cl: int = 0
    current_cl: int = 0
    max_cl: int = 0
    hand_size: int = 0
    size_based_list_cost_estimate: bool = True
    watch_list: bool = True
    etcd_supports_progress_notify: bool = True
    watch_tracker: WatchTracker | None = None
    response_streamed: Callable[[RequestAttributes], bool] | bool = True
    priority_level: str = ""
    flow_schema: str = ""

    def is_response_streamed(self, attrs: RequestAttributes) -> bool:
        rs = self.response_streamed
        if rs is True or rs is False:
            return rs
        return bool(rs(attrs))


# Estimates with only an initial phase are immutable and few: share them instead of
# allocating one per request.
_INITIAL_ONLY = tuple(WorkEstimate(i) for i in range(257))


def initial_only(seats: int) -> WorkEstimate:
    """`WorkEstimate(seats)`, reusing a shared instance for common widths."""
    if 0 <= seats < 257:
        return _INITIAL_ONLY[seats]
    return WorkEstimate(seats)
