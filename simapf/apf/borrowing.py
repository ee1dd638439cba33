"""The periodic borrowing adjuster: every level's CurrentCL from its recent seat demand.

Upstream (apf_controller.go `updateBorrowingLocked`, `seatDemandStats.update`; conc_alloc.go
`computeConcurrencyAllocation`) runs this every 10 s and at every config digest. Each level's
queueset feeds its seat demand (seats in use + seats waiting) into a time-weighted
integrator; the adjuster drains those integrators, updates smoothed demand statistics, and
divides nominalCLSum among the non-exempt levels in proportion to their smoothed demand,
each held between a floor (what it recently used, up to its NominalCL) and its MaxCL.
Exempt levels are not limited, but what they used is taken off the top first.
Reference: apf-mechanics.md §3.

Scheduling is the caller's job: call `adjust(now_ns)` `BORROWING_ADJUSTMENT_PERIOD_NS`
after the previous call finished (upstream uses a sliding `wait.Until` timer), and call
`reconfigure` at every config digest, which also adjusts at once, as upstream does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from simapf.apf.gomath import go_round
from simapf.apf.integrator import IntegratorResults
from simapf.apf.limits import LevelLimits

BORROWING_ADJUSTMENT_PERIOD_NS = 10_000_000_000
# Weight of history in the smoothed demand; 0.977**30 ~ 0.5, a 5-minute half-life at 10 s.
SEAT_DEMAND_SMOOTHING = 0.977

# The allocation solver scales targets; a zero target would make a level's relative bounds
# infinite, so targets are floored here for the scaling only.
MIN_TARGET = 0.001
ALLOCATION_EPSILON = 1e-7
# Go's minMax starts its minimum at math.MaxFloat32 (and its maximum at 0); the shortcut
# results for degenerate inputs depend on those starting values.
_GO_MAX_FLOAT32 = 3.4028234663852886e38


class AllocationError(ValueError):
    """The allocation problem has no solution; upstream then keeps every previous CurrentCL."""


class DemandIntegrator(Protocol):
    """What the adjuster needs from a level's seat-demand integrator."""

    def reset(self, now_ns: int) -> IntegratorResults: ...


@dataclass(slots=True)
class SeatDemandStats:
    """Per-level demand statistics, carried from one adjustment to the next.

    A new level starts with all zeros (upstream zeroes them; the KEP's NominalCL-based start
    was never implemented).
    """

    avg: float = 0.0
    std_dev: float = 0.0
    high_watermark: int = 0
    smoothed: float = 0.0

    def update(self, results: IntegratorResults) -> None:
        # The watermark is refreshed even over an empty period: it then is the integrator's
        # current value, which is what a config digest right after a period sees.
        self.high_watermark = go_round(results.max)
        if results.duration_s <= 0:
            return
        deviation = 0.0 if math.isnan(results.deviation) else results.deviation
        self.avg = results.average
        self.std_dev = deviation
        envelope = results.average + deviation
        # Rises at once to a new peak, decays slowly after it.
        self.smoothed = max(
            envelope,
            SEAT_DEMAND_SMOOTHING * self.smoothed + (1 - SEAT_DEMAND_SMOOTHING) * envelope,
        )


def compute_allocation(
    targets: Sequence[float],
    lowers: Sequence[float],
    uppers: Sequence[float],
    required_sum: float,
) -> tuple[list[float], float]:
    """Find fair_prop with sum(clamp(fair_prop * target_i, lower_i, upper_i)) == required_sum.

    Returns the clamped allocations and fair_prop. Follows upstream's order of checks and
    shortcuts so that degenerate inputs report the same fair_prop (the
    `apiserver_flowcontrol_seat_fair_frac` metric). Raises AllocationError where upstream
    returns an error.
    """
    n = len(targets)
    if len(lowers) != n or len(uppers) != n:
        raise ValueError("targets, lowers and uppers must have the same length")
    if required_sum < 0:
        raise AllocationError("negative required sums are not supported")
    required = float(required_sum)

    scaled_targets: list[float] = []
    rel_lowers: list[float] = []
    rel_uppers: list[float] = []
    low_sum = high_sum = target_sum = 0.0
    for idx in range(n):
        target, lower, upper = float(targets[idx]), float(lowers[idx]), float(uppers[idx])
        if lower < 0:
            raise AllocationError(f"item {idx}: lower bound {lower} is negative")
        if target < lower:
            raise AllocationError(f"item {idx}: target {target} is below its lower bound {lower}")
        if upper < lower:
            raise AllocationError(f"item {idx}: upper bound {upper} is below its lower bound {lower}")
        target = max(target, MIN_TARGET)
        low_sum += lower
        high_sum += upper
        target_sum += target
        scaled_targets.append(target)
        rel_lowers.append(lower / target)
        rel_uppers.append(upper / target)

    rel_lower_min = min([_GO_MAX_FLOAT32, *rel_lowers])
    rel_lower_max = max([0.0, *rel_lowers])
    rel_upper_min = min([_GO_MAX_FLOAT32, *rel_uppers])
    rel_upper_max = max([0.0, *rel_uppers])

    if rel_lower_max > 1:
        raise AllocationError(f"a lower bound exceeds its target (relative {rel_lower_max})")
    if low_sum - required > ALLOCATION_EPSILON:
        raise AllocationError(f"lower bounds sum to {low_sum}, above the required {required_sum}")
    if required - high_sum > ALLOCATION_EPSILON:
        raise AllocationError(f"upper bounds sum to {high_sum}, below the required {required_sum}")

    if required == 0:
        return [0.0] * n, 0.0
    if low_sum - required > -ALLOCATION_EPSILON:
        # No room above the floors.
        return [float(x) for x in lowers], rel_lower_min
    if required - high_sum > -ALLOCATION_EPSILON:
        # Every level has to be at its ceiling.
        return [float(x) for x in uppers], rel_upper_max

    fair_prop = required / target_sum
    if rel_lower_max <= fair_prop <= rel_upper_min:
        # No bound binds: plain proportional scaling (deliberately not clamped, as upstream).
        return [t * fair_prop for t in scaled_targets], fair_prop

    fair_prop = _sweep(scaled_targets, rel_lowers, rel_uppers, low_sum, required, rel_lower_min)
    allocs = [
        max(float(lowers[i]), min(float(uppers[i]), fair_prop * scaled_targets[i])) for i in range(n)
    ]
    return allocs, fair_prop


def _sweep(
    targets: list[float],
    rel_lowers: list[float],
    rel_uppers: list[float],
    low_sum: float,
    required: float,
    start: float,
) -> float:
    """Exact solve of the piecewise-linear sum, raising fair_prop from the smallest floor.

    Between consecutive relative bounds the sum grows linearly with slope = sum of targets
    of the items strictly between their bounds; walk the sorted bounds until the sum would
    reach `required` inside the current segment. Same walk as upstream, so the float
    arithmetic (and hence Go-rounded CurrentCLs at .5 edges) comes out the same.
    """
    # (relative bound, +target when an item leaves its floor / -target when it hits its ceiling)
    events = sorted(
        [(rel_lowers[i], targets[i]) for i in range(len(targets))]
        + [(rel_uppers[i], -targets[i]) for i in range(len(targets))],
        key=lambda e: e[0],
    )
    fair_prop = start
    total = low_sum
    slope = 0.0
    n_free = 0
    k = 0
    while total < required:
        # Take in every bound at or below the current fair_prop; they shape the next segment.
        while k < len(events) and events[k][0] <= fair_prop:
            slope += events[k][1]
            n_free += 1 if events[k][1] > 0 else -1
            k += 1
        if k >= len(events):
            raise AllocationError("ran out of bounds before reaching the required sum")
        next_bound = events[k][0]
        if n_free > 0:
            candidate = fair_prop + (required - total) / slope
            if candidate <= next_bound:
                return candidate
            total += (next_bound - fair_prop) * slope
        fair_prop = next_bound
    return fair_prop


@dataclass(frozen=True, slots=True)
class LevelDiagnostics:
    """What the last adjustment decided for one level and why (for metrics and logs).

    `target` is the allocation target of a non-exempt level. Exempt levels take no part in
    the allocation; upstream's metric then reports an arbitrary other level's target (an
    index-0 slip in updateBorrowingLocked), and we report the exempt level's
    `min_current_cl` instead.
    """

    name: str
    exempt: bool
    current_cl: int
    min_current_cl: int
    target: float
    smoothed: float
    high_watermark: int
    average: float
    std_dev: float


class _LevelState:
    __slots__ = ("limits", "integrator", "stats", "current_cl", "min_current_cl", "target")

    def __init__(self, limits: LevelLimits, integrator: DemandIntegrator, current_cl: int) -> None:
        self.limits = limits
        self.integrator = integrator
        self.stats = SeatDemandStats()
        self.current_cl = current_cl
        self.min_current_cl = limits.min_cl
        self.target = float(limits.min_cl)


class BorrowingAdjuster:
    """Holds every level's borrowing state and recomputes CurrentCLs on demand.

    `limits` and `integrators` are keyed by level name and must cover the same levels (all of
    them, exempt included). A new level starts at `LevelLimits.initial_current_cl` until the
    first adjustment. Construction does not adjust; upstream's digest does, so a caller
    mirroring a server start calls `adjust(now_ns)` right away.
    """

    def __init__(
        self,
        limits: Mapping[str, LevelLimits],
        integrators: Mapping[str, DemandIntegrator],
    ) -> None:
        self._levels: dict[str, _LevelState] = {}
        self._nominal_cl_sum = 0
        self.fair_prop = 0.0
        # Which case the last adjustment fell into: "floor" (everyone at MinCL), "share"
        # (between MinCL and the demand floor), "allocate" (the solver), "backstop" (the
        # solver failed and previous CurrentCLs were kept), or "none" (no non-exempt levels).
        self.regime = "none"
        self._install(limits, integrators)

    def _install(
        self,
        limits: Mapping[str, LevelLimits],
        integrators: Mapping[str, DemandIntegrator],
    ) -> None:
        if set(limits) != set(integrators):
            raise ValueError(
                f"limits and integrators must name the same levels: {sorted(limits)} vs {sorted(integrators)}"
            )
        levels: dict[str, _LevelState] = {}
        for name, lim in limits.items():
            old = self._levels.get(name)
            if old is None:
                levels[name] = _LevelState(lim, integrators[name], lim.initial_current_cl)
            else:
                # A surviving level keeps its statistics and CurrentCL across a digest.
                old.limits = lim
                old.integrator = integrators[name]
                levels[name] = old
        self._levels = levels
        self._nominal_cl_sum = sum(lim.nominal_cl for lim in limits.values())

    def reconfigure(
        self,
        limits: Mapping[str, LevelLimits],
        integrators: Mapping[str, DemandIntegrator],
        now_ns: int,
    ) -> dict[str, int]:
        """Apply a config digest: new limits for all levels, then an immediate adjustment.

        Levels not in `limits` are forgotten (upstream keeps draining levels in the config, so
        the caller includes them until they are idle).
        """
        self._install(limits, integrators)
        return self.adjust(now_ns)

    @property
    def nominal_cl_sum(self) -> int:
        return self._nominal_cl_sum

    @property
    def current_cls(self) -> dict[str, int]:
        return {name: st.current_cl for name, st in self._levels.items()}

    def current_cl(self, name: str) -> int:
        return self._levels[name].current_cl

    def stats(self, name: str) -> SeatDemandStats:
        return self._levels[name].stats

    def diagnostics(self) -> dict[str, LevelDiagnostics]:
        out: dict[str, LevelDiagnostics] = {}
        for name, st in self._levels.items():
            out[name] = LevelDiagnostics(
                name=name,
                exempt=st.limits.exempt,
                current_cl=st.current_cl,
                min_current_cl=st.min_current_cl,
                target=st.target,
                smoothed=st.stats.smoothed,
                high_watermark=st.stats.high_watermark,
                average=st.stats.avg,
                std_dev=st.stats.std_dev,
            )
        return out

    def adjust(self, now_ns: int) -> dict[str, int]:
        """Drain every level's integrator and set every level's new CurrentCL (§3.4)."""
        remaining = self._nominal_cl_sum
        non_exempt: list[_LevelState] = []
        min_cl_sum = 0
        min_current_cl_sum = 0
        for st in self._levels.values():
            st.stats.update(st.integrator.reset(now_ns))
            lim = st.limits
            hwm = st.stats.high_watermark
            if lim.exempt:
                # Exempt levels are never limited: their floor is everything they used.
                st.min_current_cl = max(lim.min_cl, hwm)
                st.target = float(st.min_current_cl)
                remaining -= st.min_current_cl
            else:
                # Keep what the level recently used, but never promise more than its
                # NominalCL from demand alone, nor go below what it refuses to lend.
                st.min_current_cl = max(lim.min_cl, min(lim.nominal_cl, hwm))
                st.target = max(float(st.min_current_cl), st.stats.smoothed)
                non_exempt.append(st)
                min_cl_sum += lim.min_cl
                min_current_cl_sum += st.min_current_cl

        if not non_exempt and self._nominal_cl_sum > 0:
            # Upstream logs "impossible" and changes nothing (statistics are already updated).
            self.regime = "none"
            self.fair_prop = 0.0
            return self.current_cls

        new_cls: dict[int, int] = {}
        if remaining <= min_cl_sum:
            # Exempt use ate into the lendable seats: everyone falls back to MinCL.
            self.regime = "floor"
            self.fair_prop = 0.0
            for st in non_exempt:
                new_cls[id(st)] = st.limits.min_cl
        elif remaining <= min_current_cl_sum:
            # Not enough for every demand floor: share what is left above MinCL pro rata.
            self.regime = "share"
            self.fair_prop = 0.0
            share_frac = (remaining - min_cl_sum) / (min_current_cl_sum - min_cl_sum)
            for st in non_exempt:
                extra = go_round((st.min_current_cl - st.limits.min_cl) * share_frac)
                new_cls[id(st)] = st.limits.min_cl + extra
        else:
            # Note the required sum is nominalCLSum, not `remaining`: once exempt use fits,
            # it does not reduce what the limited levels share (upstream behaviour, §3.4).
            try:
                allocs, fair_prop = compute_allocation(
                    [st.target for st in non_exempt],
                    [float(st.min_current_cl) for st in non_exempt],
                    [float(st.limits.max_cl) for st in non_exempt],
                    self._nominal_cl_sum,
                )
            except AllocationError:
                self.regime = "backstop"
                self.fair_prop = 0.0
                for st in non_exempt:
                    new_cls[id(st)] = st.current_cl
            else:
                self.regime = "allocate"
                self.fair_prop = fair_prop
                for st, alloc in zip(non_exempt, allocs):
                    new_cls[id(st)] = go_round(alloc)

        for st in self._levels.values():
            if st.limits.exempt:
                # Not enforced by any queueset; kept for metrics and the denominators.
                st.current_cl = st.min_current_cl
            else:
                st.current_cl = new_cls[id(st)]
        return self.current_cls


def concurrency_denominator(current_cl: int, server_cl: int) -> int:
    """Denominator upstream uses for a level's ratioed gauges after an adjustment (§3.6)."""
    if current_cl > 0:
        return current_cl
    return max(1, go_round(server_cl / 10))
