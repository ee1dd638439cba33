"""APF work estimators: seats and additional latency per request (apf-mechanics.md §5).

`WorkEstimator.estimate(attrs, ctx)` is the entry point. The LIST cost is a pluggable policy
(`make_list_policy`), the rest follows upstream k8s.io/apiserver v0.37.2.
"""

from simapf.apf.estimators.base import (
    BYTES_PER_SEAT,
    CACHE_WITH_STREAMING_MAX_MEMORY_BYTES,
    EVENT_ADDITIONAL_DURATION_NS,
    INFINITE_OBJECT_COUNT,
    MAX_OBJECT_SIZE_BYTES,
    MINIMUM_SEATS,
    OBJECTS_PER_SEAT,
    SEAT_SECONDS_SCALE,
    STATS_NOT_FOUND,
    STATS_OK,
    STATS_STALE,
    WATCHES_PER_SEAT,
    EstimationContext,
    EstimatorConfigError,
    ObjectStats,
    ObjectStatsSource,
    StaticObjectStats,
    initial_only,
)
from simapf.apf.estimators.listing import (
    BorrowingAwareListPolicy,
    ConstantListPolicy,
    CountBasedListPolicy,
    EtcdUncappedListPolicy,
    ListWorkPolicy,
    SizeBasedListPolicy,
    StreamedCacheCapListPolicy,
    UpstreamListPolicy,
)
from simapf.apf.estimators.registry import (
    DEFAULT_LIST_POLICY,
    list_policy_names,
    make_list_policy,
    register_list_policy,
    resolve_list_policy_class,
)
from simapf.apf.estimators.serving import served_from_cache_by_estimator
from simapf.apf.estimators.watch_tracker import (
    READ_ONLY_VERBS,
    WatchKey,
    WatchTracker,
    field_selector_exact_value,
)
from simapf.apf.estimators.work import (
    MUTATING_VERBS,
    MutatingEstimatorConfig,
    WatchInitConfig,
    WorkEstimator,
    duration_per_seat_ns,
    seats_times_duration,
)

__all__ = [
    "BYTES_PER_SEAT",
    "CACHE_WITH_STREAMING_MAX_MEMORY_BYTES",
    "DEFAULT_LIST_POLICY",
    "EVENT_ADDITIONAL_DURATION_NS",
    "INFINITE_OBJECT_COUNT",
    "MAX_OBJECT_SIZE_BYTES",
    "MINIMUM_SEATS",
    "MUTATING_VERBS",
    "OBJECTS_PER_SEAT",
    "READ_ONLY_VERBS",
    "SEAT_SECONDS_SCALE",
    "STATS_NOT_FOUND",
    "STATS_OK",
    "STATS_STALE",
    "WATCHES_PER_SEAT",
    "BorrowingAwareListPolicy",
    "ConstantListPolicy",
    "CountBasedListPolicy",
    "EstimationContext",
    "EstimatorConfigError",
    "EtcdUncappedListPolicy",
    "ListWorkPolicy",
    "MutatingEstimatorConfig",
    "ObjectStats",
    "ObjectStatsSource",
    "SizeBasedListPolicy",
    "StaticObjectStats",
    "StreamedCacheCapListPolicy",
    "UpstreamListPolicy",
    "WatchInitConfig",
    "WatchKey",
    "WatchTracker",
    "WorkEstimator",
    "duration_per_seat_ns",
    "field_selector_exact_value",
    "initial_only",
    "list_policy_names",
    "make_list_policy",
    "register_list_policy",
    "resolve_list_policy_class",
    "seats_times_duration",
]
