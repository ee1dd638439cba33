"""Where the LIST estimator believes a LIST will be served from (apf-mechanics.md §5.3).

Upstream asks `delegator.ShouldDelegateListMeta` with a "cache without snapshots" helper
(k8s.io/apiserver `pkg/storage/cacher/delegator/interface.go`, v0.37.2). The helper cannot parse
continue tokens and knows nothing of cache snapshots, so continue pages and exact-RV reads count
as storage even when the real server would answer them from a snapshot of the cache
(`ListFromCacheSnapshot`). The estimator's view is what sets seats, so that is what is modelled.
"""

from __future__ import annotations

from simapf.apf.types import ListOptions


def served_from_cache_by_estimator(
    list_options: ListOptions, etcd_supports_progress_notify: bool = True
) -> bool:
    """True if the estimator counts this LIST as served from the watch cache.

    `etcd_supports_progress_notify` stands for "consistent reads from cache are possible":
    the ConsistentListFromCache gate on and an etcd that answers progress-notify requests
    (>= 3.4.31 / >= 3.5.13). Without it a consistent LIST (RV unset) goes to etcd.
    """
    rvm = list_options.resource_version_match
    if rvm:
        # NotOlderThan can always be answered by the cache; Exact and anything unrecognised
        # are sent to storage.
        return rvm == "NotOlderThan"
    if list_options.continue_token:
        return False
    rv = list_options.resource_version or ""
    if list_options.limit > 0 and rv and rv != "0":
        # A limit with a specific RV is the legacy spelling of an exact read.
        return False
    if not rv:
        return etcd_supports_progress_notify
    return True
