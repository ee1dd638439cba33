"""LIST work policies: how many seats a LIST (or an initializing WATCH) occupies.

A policy turns one request into a `WorkEstimate`. The dispatcher (`WorkEstimator`) has already
decided that the request is costed as a LIST and whether the estimator would consider it served
from the watch cache (`from_cache`: always True for a WATCH). Policies are plain classes so that a
user's own can be plugged in by "package.module:ClassName"; see `simapf.apf.estimators.registry`.

Shipped policies and where they come from:

* `size-based` (`SizeBasedListPolicy`): upstream since 1.34 (SizeBasedListCostEstimate on,
  kubernetes PRs #132932, #133034, #133061): one seat per 100 kB held in memory at once.
  Its three options make the variants argued in kubernetes#132233 and follow-ups, and the
  named presets below are those options fixed.
* `count-based` (`CountBasedListPolicy`): upstream before 1.34, or with the gate off: one seat
  per 100 objects touched, at most 10.
* `upstream` (`UpstreamListPolicy`): whichever of the two the context's gate selects.
* `constant` (`ConstantListPolicy`): a fixed width, bypassing every cap; how the measurements
  in kubernetes#132233 were taken.
* `etcd-uncapped`, `streamed-cache-cap`, `borrowing-aware`: presets of the size-based policy.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from simapf.apf.estimators.base import (
    BYTES_PER_SEAT,
    CACHE_WITH_STREAMING_MAX_MEMORY_BYTES,
    INFINITE_OBJECT_COUNT,
    MAX_OBJECT_SIZE_BYTES,
    MINIMUM_SEATS,
    OBJECTS_PER_SEAT,
    STATS_NOT_FOUND,
    STATS_OK,
    STATS_STALE,
    EstimationContext,
    EstimatorConfigError,
    initial_only,
)
from simapf.apf.limits import (
    MAXIMUM_LIST_SEATS_LIMIT,
    MAXIMUM_LIST_SEATS_LIMIT_LEGACY,
    pl_max_seats,
)
from simapf.apf.types import RequestAttributes, WorkEstimate

STORAGE_CAP_CHOICES = ("level", "global")
CACHE_CAP_WHEN_CHOICES = ("always", "streamed")
MAX_SEATS_BASIS_CHOICES = ("nominal", "current", "max")


def _positive_int(policy: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EstimatorConfigError(f"LIST policy {policy!r}: {name} must be an integer >= 1, got {value!r}")
    return value


def _positive_number(policy: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
        raise EstimatorConfigError(f"LIST policy {policy!r}: {name} must be a number > 0, got {value!r}")
    return value


def _non_negative_int(policy: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise EstimatorConfigError(f"LIST policy {policy!r}: {name} must be an integer >= 0, got {value!r}")
    return value


def _choice(policy: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise EstimatorConfigError(
            f"LIST policy {policy!r}: {name} must be one of {list(choices)}, got {value!r}")
    return value


class ListWorkPolicy:
    """Base class of LIST policies. Subclasses implement `estimate`.

    A user's policy need not subclass this: any class whose instances have
    `estimate(attrs, ctx, from_cache) -> WorkEstimate` is accepted. Subclassing gives a name,
    a `config()` for results, and a default `seat_cap`.

    `estimate` is called once per LIST and initializing WATCH, so keep it cheap: no pydantic,
    no allocation beyond the returned estimate (`initial_only(n)` returns shared instances).
    """

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self._params: dict[str, Any] = {}

    def estimate(self, attrs: RequestAttributes, ctx: EstimationContext, from_cache: bool) -> WorkEstimate:
        raise NotImplementedError

    def _clamped(self, seats: int, ctx: EstimationContext, from_cache: bool) -> WorkEstimate:
        """The estimate for `seats`, held to [min_seats, the policy's cap]."""
        cap = self.seat_cap(ctx, from_cache)
        if seats < self.min_seats:
            seats = self.min_seats
        if seats > cap:
            seats = cap
        return initial_only(seats)

    def seat_cap(self, ctx: EstimationContext, from_cache: bool) -> int | None:
        """The most seats this policy gives such a request at this level; None if unbounded."""
        return None

    def config(self) -> dict[str, Any]:
        """Resolved name and parameters, for embedding in a run's results."""
        params = getattr(self, "_params", {})  # a subclass may not call our __init__
        return {"name": self.name or f"{type(self).__module__}:{type(self).__qualname__}", **params}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in getattr(self, "_params", {}).items())
        return f"{type(self).__name__}({args})"


class SizeBasedListPolicy(ListWorkPolicy):
    """Seats from the bytes a LIST holds in memory at once; upstream's default since 1.34.

    Source: k8s.io/apiserver v0.37.2 `list_work_estimator.go` (`seatsBasedOnObjectSize`),
    apf-mechanics.md §5.3. With default options, exactly upstream:

    1. Statistics not found -> 1 seat. Stale -> 1e9 objects of 1.5 MB (lands on the cap).
       Average size unknown (<= 0) while objects exist -> 1.5 MB.
    2. limited = min(count, limit) if a limit is set, else count.
    3. Objects in memory: 1 if the request names an object; `limited` from the cache; from
       storage with a label or field selector, max(limited, count // 2), because etcd returns
       unfiltered pages until the limit is met; otherwise `limited`.
    4. bytes = objects * average size; from the cache, at most `cache_max_memory_bytes`
       (the cache streams its answer, the reasoning goes).
    5. seats = ceil(bytes / bytes_per_seat), clamped to [1, cap].

    The cap is the level's max seats when it is set and at most `max_list_seats`, else
    `max_list_seats` (MaximumListSeatsLimit, 100).

    Options, each a change argued in kubernetes#132233 and its follow-ups:

    * `storage_cap="global"`: storage-served LISTs are capped only by `max_list_seats`, not by
      the level's max seats. The level cap was meant to bound CPU for fairness, but an etcd
      LIST loads its whole answer whatever the level (memory grows with response size and is
      uncapped, #132233); #138478 asks for the global cap to scale with the server.
    * `cache_cap_when="streamed"`: apply the cache cap only when the response is really
      streamed (an initializing WATCH, or `ctx.response_streamed(attrs)` for a LIST);
      a non-streamed cache LIST materialises the whole result and is charged fully
      (kubernetes PR #138313, open).
    * `max_seats_basis="current"|"max"`: derive the level's max seats from CurrentCL or MaxCL
      instead of NominalCL, with upstream's formula max(1, min(ceil(0.15 x), x // handSize)),
      so a level that borrows can admit wider LISTs. #132233 proposed "account for borrowing";
      it was not implemented upstream. Needs `ctx.hand_size`.
    """

    name: ClassVar[str] = "size-based"


    def __init__(
        self,
        *,
        bytes_per_seat: int = BYTES_PER_SEAT,
        cache_max_memory_bytes: int = CACHE_WITH_STREAMING_MAX_MEMORY_BYTES,
        max_list_seats: int = MAXIMUM_LIST_SEATS_LIMIT,
        storage_cap: str = "level",
        cache_cap_when: str = "always",
        max_seats_basis: str = "nominal",
        max_object_size_bytes: int = MAX_OBJECT_SIZE_BYTES,
        stale_object_count: int = INFINITE_OBJECT_COUNT,
        min_seats: int = MINIMUM_SEATS,
    ) -> None:
        super().__init__()
        n = self.name
        self.bytes_per_seat = _positive_number(n, "bytes_per_seat", bytes_per_seat)
        self.cache_max_memory_bytes = _non_negative_int(n, "cache_max_memory_bytes", cache_max_memory_bytes)
        self.max_list_seats = _positive_int(n, "max_list_seats", max_list_seats)
        self.storage_cap = _choice(n, "storage_cap", storage_cap, STORAGE_CAP_CHOICES)
        self.cache_cap_when = _choice(n, "cache_cap_when", cache_cap_when, CACHE_CAP_WHEN_CHOICES)
        self.max_seats_basis = _choice(n, "max_seats_basis", max_seats_basis, MAX_SEATS_BASIS_CHOICES)
        self.max_object_size_bytes = _positive_int(n, "max_object_size_bytes", max_object_size_bytes)
        self.stale_object_count = _non_negative_int(n, "stale_object_count", stale_object_count)
        self.min_seats = _positive_int(n, "min_seats", min_seats)
        if self.min_seats > self.max_list_seats:
            raise EstimatorConfigError(
                f"LIST policy {n!r}: min_seats ({min_seats}) exceeds max_list_seats ({max_list_seats})")
        self._global_storage = storage_cap == "global"
        self._streamed_only = cache_cap_when == "streamed"
        self._basis = max_seats_basis
        self._params = {
            "bytes_per_seat": bytes_per_seat,
            "cache_max_memory_bytes": cache_max_memory_bytes,
            "max_list_seats": max_list_seats,
            "storage_cap": storage_cap,
            "cache_cap_when": cache_cap_when,
            "max_seats_basis": max_seats_basis,
            "max_object_size_bytes": max_object_size_bytes,
            "stale_object_count": stale_object_count,
            "min_seats": min_seats,
        }

    def level_max_seats(self, ctx: EstimationContext) -> int:
        """The level's own max seats on this policy's basis; 0 for levels without one."""
        pl = ctx.pl_max_seats
        basis = self._basis
        if basis == "nominal" or pl <= 0:
            # Exempt and Reject levels have no max seats of their own whatever the basis.
            return pl
        if ctx.hand_size <= 0:
            raise EstimatorConfigError(
                f"LIST policy {self.name!r} with max_seats_basis={basis!r} needs EstimationContext.hand_size "
                f"for queuing level {ctx.priority_level!r}"
            )
        cl = ctx.current_cl if basis == "current" else ctx.max_cl
        return pl_max_seats(cl, ctx.hand_size)

    def seat_cap(self, ctx: EstimationContext, from_cache: bool) -> int:
        limit = self.max_list_seats
        if self._global_storage and not from_cache:
            return limit
        pl = self.level_max_seats(ctx)
        return pl if 0 < pl <= limit else limit

    def estimate(self, attrs: RequestAttributes, ctx: EstimationContext, from_cache: bool) -> WorkEstimate:
        src = ctx.object_stats
        stats = src.lookup(attrs.api_group, attrs.resource) if src is not None else None
        if stats is None:
            return initial_only(self.min_seats)
        state = stats.state
        if state == STATS_OK:
            count = stats.object_count
            avg = stats.average_object_size_bytes
        elif state == STATS_NOT_FOUND:
            return initial_only(self.min_seats)
        else:  # stale
            count = self.stale_object_count
            avg = self.max_object_size_bytes
        if avg <= 0 and count != 0:
            avg = self.max_object_size_bytes

        opts = attrs.list_options
        limit = opts.limit
        limited = limit if 0 < limit < count else count
        if attrs.name:
            objects = 1
        elif from_cache:
            objects = limited
        elif opts.field_selector or opts.label_selector:
            half = count // 2
            objects = limited if limited >= half else half
        else:
            objects = limited
        nbytes = objects * avg
        if from_cache:
            cache_max = self.cache_max_memory_bytes
            if nbytes > cache_max and (
                not self._streamed_only or attrs.verb == "watch" or ctx.is_response_streamed(attrs)
            ):
                nbytes = cache_max
        # Go computes ceil(float64(bytes) / bytesPerSeat); true division of Python ints
        # rounds the same way for every value below 2**53.
        seats = math.ceil(nbytes / self.bytes_per_seat)

        return self._clamped(seats, ctx, from_cache)


class EtcdUncappedListPolicy(SizeBasedListPolicy):
    """`size-based` with storage-served LISTs capped only by the global `max_list_seats`.

    Cache-served LISTs and WATCH initialisations keep the level's cap. Argument: kubernetes#132233
    (memory of an etcd LIST grows with the response, whatever the level's concurrency) and
    #138478 (make the list cap configurable / scale with large control planes).
    """

    name: ClassVar[str] = "etcd-uncapped"

    def __init__(self, *, max_list_seats: int = MAXIMUM_LIST_SEATS_LIMIT, **options: Any) -> None:
        _reject_fixed(self.name, options, "storage_cap")
        super().__init__(max_list_seats=max_list_seats, storage_cap="global", **options)
        del self._params["storage_cap"]  # fixed by the preset; keeps config() round-trippable


class StreamedCacheCapListPolicy(SizeBasedListPolicy):
    """`size-based` with the 1 MB cache cap applied only to responses that are really streamed.

    Source: kubernetes PR #138313 (open, 2026-04): only WatchList and streaming-encoded responses
    are memory-bounded; a non-streamed cache LIST materialises everything in `Cacher.GetList`.
    Whether a LIST response is streamed comes from `EstimationContext.response_streamed`.
    """

    name: ClassVar[str] = "streamed-cache-cap"

    def __init__(self, **options: Any) -> None:
        _reject_fixed(self.name, options, "cache_cap_when")
        super().__init__(cache_cap_when="streamed", **options)
        del self._params["cache_cap_when"]


class BorrowingAwareListPolicy(SizeBasedListPolicy):
    """`size-based` with the level's max seats derived from CurrentCL (`basis="current"`) or MaxCL.

    Source: the "account for borrowing" proposal of kubernetes#132233 (not implemented upstream,
    where max seats follow NominalCL only). Same formula, max(1, min(ceil(0.15 x), x // handSize)),
    on the other limit; Exempt and Reject levels still use the global cap.
    """

    name: ClassVar[str] = "borrowing-aware"

    def __init__(self, *, basis: str = "current", **options: Any) -> None:
        _reject_fixed(self.name, options, "max_seats_basis")
        if basis not in ("current", "max"):
            raise EstimatorConfigError(
                f"LIST policy {self.name!r}: basis must be 'current' or 'max', got {basis!r}")
        super().__init__(max_seats_basis=basis, **options)
        self._params = {"basis": basis, **{k: v for k, v in self._params.items() if k != "max_seats_basis"}}


def _reject_fixed(policy: str, options: dict[str, Any], fixed: str) -> None:
    if fixed in options:
        raise EstimatorConfigError(
            f"LIST policy {policy!r} fixes {fixed}; use 'size-based' to choose it freely")


class CountBasedListPolicy(ListWorkPolicy):
    """Seats from the number of objects touched: upstream before 1.34, or with the gate off.

    Source: k8s.io/apiserver v0.37.2 `list_work_estimator.go` (`seatsBasedOnObjectCount`),
    apf-mechanics.md §5.3. Objects: 1 if named; `count` from the cache (it filters everything);
    `count + limited` from storage with selectors; `2 * limited` from storage otherwise
    (read from etcd, then decoded and served). seats = ceil(objects / objects_per_seat),
    clamped to [1, cap] with MaximumListSeatsLimit = 10. Not-found and stale as size-based.
    """

    name: ClassVar[str] = "count-based"


    def __init__(
        self,
        *,
        objects_per_seat: float = OBJECTS_PER_SEAT,
        max_list_seats: int = MAXIMUM_LIST_SEATS_LIMIT_LEGACY,
        stale_object_count: int = INFINITE_OBJECT_COUNT,
        min_seats: int = MINIMUM_SEATS,
    ) -> None:
        super().__init__()
        n = self.name
        self.objects_per_seat = float(_positive_number(n, "objects_per_seat", objects_per_seat))
        self.max_list_seats = _positive_int(n, "max_list_seats", max_list_seats)
        self.stale_object_count = _non_negative_int(n, "stale_object_count", stale_object_count)
        self.min_seats = _positive_int(n, "min_seats", min_seats)
        if self.min_seats > self.max_list_seats:
            raise EstimatorConfigError(
                f"LIST policy {n!r}: min_seats ({min_seats}) exceeds max_list_seats ({max_list_seats})")
        self._params = {
            "objects_per_seat": objects_per_seat,
            "max_list_seats": max_list_seats,
            "stale_object_count": stale_object_count,
            "min_seats": min_seats,
        }

    def seat_cap(self, ctx: EstimationContext, from_cache: bool) -> int:
        pl = ctx.pl_max_seats
        limit = self.max_list_seats
        return pl if 0 < pl <= limit else limit

    def estimate(self, attrs: RequestAttributes, ctx: EstimationContext, from_cache: bool) -> WorkEstimate:
        src = ctx.object_stats
        stats = src.lookup(attrs.api_group, attrs.resource) if src is not None else None
        if stats is None or stats.state == STATS_NOT_FOUND:
            return initial_only(self.min_seats)
        count = self.stale_object_count if stats.state == STATS_STALE else stats.object_count

        opts = attrs.list_options
        limit = opts.limit
        limited = limit if 0 < limit < count else count
        if attrs.name:
            objects = 1
        elif from_cache:
            objects = count
        elif opts.field_selector or opts.label_selector:
            objects = count + limited
        else:
            objects = 2 * limited
        seats = math.ceil(objects / self.objects_per_seat)

        return self._clamped(seats, ctx, from_cache)


class UpstreamListPolicy(ListWorkPolicy):
    """Whatever upstream v0.37.2 does: size-based if `ctx.size_based_list_cost_estimate`, else count-based.

    The gate also switches the global cap (100 or 10), as upstream's config does. Takes no
    parameters: to tune either formula, name it.
    """

    name: ClassVar[str] = "upstream"


    def __init__(self) -> None:
        super().__init__()
        self._size = SizeBasedListPolicy()
        self._count = CountBasedListPolicy()

    def seat_cap(self, ctx: EstimationContext, from_cache: bool) -> int:
        p = self._size if ctx.size_based_list_cost_estimate else self._count
        return p.seat_cap(ctx, from_cache)

    def estimate(self, attrs: RequestAttributes, ctx: EstimationContext, from_cache: bool) -> WorkEstimate:
        if ctx.size_based_list_cost_estimate:
            return self._size.estimate(attrs, ctx, from_cache)
        return self._count.estimate(attrs, ctx, from_cache)


class ConstantListPolicy(ListWorkPolicy):
    """Every LIST gets exactly `seats` seats, whatever the level's max seats or any global cap.

    This is how the measurements in kubernetes#132233 were taken: an apiserver patched to give
    every LIST 1, 10 or 100 seats. With `include_watch=False`, initializing WATCHes get 1 seat
    instead (the patch's effect on WATCH was not reported).
    """

    name: ClassVar[str] = "constant"


    def __init__(self, *, seats: int, include_watch: bool = True) -> None:
        super().__init__()
        self.seats = _positive_int(self.name, "seats", seats)
        if not isinstance(include_watch, bool):
            raise EstimatorConfigError(
                f"LIST policy {self.name!r}: include_watch must be true or false, got {include_watch!r}")
        self.include_watch = include_watch
        self._estimate = initial_only(seats)
        self._params = {"seats": seats, "include_watch": include_watch}

    def seat_cap(self, ctx: EstimationContext, from_cache: bool) -> int:
        return self.seats

    def estimate(self, attrs: RequestAttributes, ctx: EstimationContext, from_cache: bool) -> WorkEstimate:
        if not self.include_watch and attrs.verb == "watch":
            return initial_only(MINIMUM_SEATS)
        return self._estimate
