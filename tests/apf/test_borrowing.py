"""The borrowing adjuster against the measured examples of apf-mechanics.md §2.3 and §3.

Integrators are driven with a fake time in ns: demand is set at the start of a period and
`adjust` is called 10 s later, as upstream's controller does with its fake clock.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simapf.apf.borrowing import (
    BORROWING_ADJUSTMENT_PERIOD_NS,
    MIN_TARGET,
    SEAT_DEMAND_SMOOTHING,
    AllocationError,
    BorrowingAdjuster,
    SeatDemandStats,
    compute_allocation,
    concurrency_denominator,
)
from simapf.apf.integrator import Integrator, IntegratorResults
from simapf.apf.limits import compute_limits

PERIOD = BORROWING_ADJUSTMENT_PERIOD_NS

from bootstrap_levels import BOOTSTRAP_LEVELS  # noqa: E402  (apf-mechanics §1.3)

# §2.3 MinCL at S = 600, and the idle CurrentCL columns at S = 600 and S = 800.
MIN_CL_600 = {
    "catch-all": 13,
    "global-default": 24,
    "leader-election": 25,
    "node-high": 73,
    "system": 50,
    "workload-high": 49,
    "workload-low": 24,
}
IDLE_600 = {
    "catch-all": 30,
    "exempt": 0,
    "global-default": 56,
    "leader-election": 58,
    "node-high": 170,
    "system": 117,
    "workload-high": 114,
    "workload-low": 56,
}
IDLE_800 = {
    "catch-all": 40,
    "exempt": 0,
    "global-default": 77,
    "leader-election": 77,
    "node-high": 228,
    "system": 154,
    "workload-high": 151,
    "workload-low": 77,
}


class Harness:
    """The bootstrap config on a fake clock: fresh integrators at t = 0 and the digest's
    immediate adjustment, as on a freshly started server."""

    def __init__(self, server_cl: int = 600, levels=BOOTSTRAP_LEVELS) -> None:
        self.now = 0
        self.limits = compute_limits(levels, server_cl)
        self.integrators = {name: Integrator(self.now) for name in self.limits}
        self.adjuster = BorrowingAdjuster(self.limits, self.integrators)
        self.first = self.adjuster.adjust(self.now)

    def set(self, **demand: float) -> None:
        for key, value in demand.items():
            self.integrators[key.replace("_", "-")].set(self.now, value)

    def period(self) -> dict[str, int]:
        self.now += PERIOD
        return self.adjuster.adjust(self.now)


def non_exempt(cls: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in cls.items() if k != "exempt"}


@pytest.mark.parametrize(("server_cl", "idle"), [(600, IDLE_600), (800, IDLE_800)])
def test_idle_current_cl_after_first_adjustment(server_cl, idle):
    h = Harness(server_cl)
    assert h.first == idle
    assert h.adjuster.regime == "allocate"
    # And it stays there while nothing happens.
    assert h.period() == idle


def test_idle_sum_misses_nominal_cl_sum_by_rounding():
    # §2.3: the non-exempt idle CurrentCLs sum to 601 while the target is 602.
    h = Harness(600)
    assert h.adjuster.nominal_cl_sum == 602
    assert sum(non_exempt(h.first).values()) == 601
    # Every target is its MinCL, so fair_prop = 602 / sum(MinCL) = 602 / 258.
    assert h.adjuster.fair_prop == pytest.approx(602 / 258, rel=1e-12)


def test_worked_examples_p1_p2_p3_p32():
    h = Harness(600)

    # P1: workload-low 500, others 0.
    h.set(workload_low=500)
    p1 = h.period()
    assert p1["workload-low"] == 368
    for name, min_cl in MIN_CL_600.items():
        if name != "workload-low":
            assert p1[name] == min_cl, name
    assert sum(non_exempt(p1).values()) == 602

    # P2: workload-low 500, global-default 100.
    h.set(global_default=100)
    p2 = h.period()
    assert p2["global-default"] == 65
    assert p2["workload-low"] == 327
    for name, min_cl in MIN_CL_600.items():
        if name not in ("workload-low", "global-default"):
            assert p2[name] == min_cl, name
    # §3.7 P2 check: fairProp = (602 - 210) / 600.
    assert h.adjuster.fair_prop == pytest.approx(392 / 600, rel=1e-9)
    diag = h.adjuster.diagnostics()
    assert diag["workload-low"].min_current_cl == 245
    assert diag["workload-low"].target == pytest.approx(500)
    assert diag["global-default"].min_current_cl == 49
    assert diag["global-default"].target == pytest.approx(100)

    # P3: everything drops to 0 at period start: unchanged, because the watermarks still
    # hold the start-of-period values and smoothed decays to 97.7 / 488.5.
    h.set(workload_low=0, global_default=0)
    p3 = h.period()
    assert p3["global-default"] == 65
    assert p3["workload-low"] == 327
    diag = h.adjuster.diagnostics()
    assert diag["global-default"].high_watermark == 100
    assert diag["workload-low"].high_watermark == 500
    assert diag["global-default"].smoothed == pytest.approx(97.7, abs=1e-9)
    assert diag["workload-low"].smoothed == pytest.approx(488.5, abs=1e-9)
    assert diag["workload-low"].average == 0
    assert diag["workload-low"].std_dev == 0

    # P32: 0 for 30 periods (P3 was the first of them).
    for _ in range(29):
        p32 = h.period()
    assert non_exempt(p32) == {
        "workload-low": 295,
        "global-default": 59,
        "catch-all": 15,
        "leader-election": 30,
        "node-high": 86,
        "system": 59,
        "workload-high": 58,
    }
    diag = h.adjuster.diagnostics()
    assert diag["workload-low"].smoothed == pytest.approx(248.8, abs=0.05)
    assert diag["global-default"].smoothed == pytest.approx(49.8, abs=0.05)
    assert diag["workload-low"].high_watermark == 0


def test_exempt_demand_below_threshold_does_not_reduce_limited_levels():
    # §3.4: exempt demand 300 with all other demand 0: remaining = 302 > sum(minCurrentCL) =
    # 258, so the solver still divides the full 602 among the limited levels (measured:
    # they "still sum to 602"; with Go rounding the idle split sums to 601, §2.3).
    h = Harness(600)
    h.set(exempt=300)
    cls = h.period()
    assert cls["exempt"] == 300
    assert non_exempt(cls) == non_exempt(IDLE_600)
    assert abs(sum(non_exempt(cls).values()) - 602) <= 1
    assert h.adjuster.regime == "allocate"
    assert h.adjuster.fair_prop == pytest.approx(602 / 258, rel=1e-12)


def test_exempt_demand_above_threshold_drops_everyone_to_min_cl():
    # §3.4: exempt demand 590 -> remaining = 12 <= 258 -> every limited level at MinCL.
    h = Harness(600)
    h.set(exempt=590)
    cls = h.period()
    assert cls["exempt"] == 590
    assert non_exempt(cls) == MIN_CL_600
    assert sum(non_exempt(cls).values()) == 258
    assert h.adjuster.regime == "floor"
    assert h.adjuster.fair_prop == 0


def test_share_regime_between_min_cl_and_demand_floor():
    # §3.4(b) by hand: workload-low demand 500 makes its floor min(245, 500) = 245, so
    # sum(minCurrentCL) = 258 - 24 + 245 = 479. Exempt demand 200 leaves remaining = 402:
    # shareFrac = (402 - 258) / (479 - 258) = 144/221, and workload-low gets
    # 24 + round(221 * 144/221) = 168; the others have minCurrentCL = MinCL and stay there.
    h = Harness(600)
    h.set(exempt=200, workload_low=500)
    cls = h.period()
    assert h.adjuster.regime == "share"
    assert h.adjuster.fair_prop == 0
    assert cls["exempt"] == 200
    assert cls["workload-low"] == 168
    for name, min_cl in MIN_CL_600.items():
        if name != "workload-low":
            assert cls[name] == min_cl


def test_upstream_update_borrowing_scenarios():
    # Port of upstream's TestUpdateBorrowing (apf_controller borrowing test): exempt,
    # workload-high, workload-low and catch-all at S = (40 + 100 + 5) * 6 = 870, where
    # nominalCLSum == S (no rounding).
    names = ("workload-high", "workload-low", "catch-all")
    levels = [s for s in BOOTSTRAP_LEVELS if s.name in ("exempt", *names)]
    server_cl = (40 + 100 + 5) * 6
    h = Harness(server_cl, levels)
    lim = h.limits
    assert h.adjuster.nominal_cl_sum == server_cl

    # Scenario 1: everybody wants S + 100; exempt takes it all, the rest drop to MinCL.
    flood = server_cl + 100
    h.set(exempt=flood, workload_high=flood, workload_low=flood, catch_all=flood)
    cls = h.period()
    assert cls["exempt"] == flood
    for name in names:
        assert cls[name] == lim[name].min_cl

    # Scenario 2: exempt leaves just enough for each to get halfway from MinCL to NominalCL.
    exp = {n: (lim[n].nominal_cl + lim[n].min_cl) // 2 for n in names}
    exp_exempt = server_cl - sum(exp.values())
    h.set(exempt=exp_exempt)
    h.period()  # the watermark still holds S + 100 for this one
    cls = h.period()
    assert cls["exempt"] == exp_exempt
    for name, value in exp.items():
        assert cls[name] == value

    # Scenario 3: only workload-low lends, and exempt borrows all of it.
    exp = {
        "workload-high": lim["workload-high"].nominal_cl,
        "workload-low": lim["workload-low"].min_cl,
        "catch-all": lim["catch-all"].nominal_cl,
    }
    exp_exempt = server_cl - sum(exp.values())
    h.set(exempt=exp_exempt, workload_low=1)
    h.period()
    cls = h.period()
    assert cls["exempt"] == exp_exempt
    for name, value in exp.items():
        assert cls[name] == value


def test_solver_error_keeps_previous_current_cls():
    # A level whose MaxCL is below what it is floored at cannot happen from compute_limits;
    # inject one to check the backstop: previous CurrentCLs are kept and fair_prop is 0.
    h = Harness(600)
    before = h.adjuster.current_cls
    broken = dict(h.limits)
    broken["workload-low"] = dataclasses.replace(broken["workload-low"], max_cl=10)
    cls = h.adjuster.reconfigure(broken, h.integrators, h.now)
    assert h.adjuster.regime == "backstop"
    assert h.adjuster.fair_prop == 0
    assert non_exempt(cls) == non_exempt(before)


def test_reconfigure_keeps_surviving_level_state():
    # Statistics of levels that survive a digest are kept (upstream zeroes them only for
    # levels that are new), and a digest adjusts at once.
    h = Harness(600)
    h.set(workload_low=500)
    h.period()
    h.now += PERIOD // 2
    cls = h.adjuster.reconfigure(h.limits, h.integrators, h.now)
    assert h.adjuster.stats("workload-low").smoothed == pytest.approx(500)
    assert cls["workload-low"] == 368


# ---- SeatDemandStats (§3.3) ----


def test_stats_update_over_empty_period_only_moves_watermark():
    stats = SeatDemandStats(avg=3.0, std_dev=1.0, high_watermark=7, smoothed=9.0)
    stats.update(IntegratorResults(duration_s=0.0, average=math.nan, deviation=math.nan, min=2.5, max=2.5))
    # Watermark is Go-rounded (2.5 -> 3, half away from zero); the rest is untouched.
    assert stats.high_watermark == 3
    assert (stats.avg, stats.std_dev, stats.smoothed) == (3.0, 1.0, 9.0)


def test_stats_update_smoothing_and_nan_deviation():
    stats = SeatDemandStats(smoothed=100.0)
    stats.update(IntegratorResults(duration_s=10.0, average=10.0, deviation=math.nan, min=0.0, max=20.4))
    assert stats.high_watermark == 20
    assert stats.std_dev == 0.0
    # envelope 10 < A * 100 + (1 - A) * 10 = 97.93
    assert stats.smoothed == pytest.approx(0.977 * 100 + 0.023 * 10)
    stats.update(IntegratorResults(duration_s=10.0, average=150.0, deviation=10.0, min=0.0, max=170.0))
    # A new peak is taken at once.
    assert stats.smoothed == pytest.approx(160.0)
    assert SEAT_DEMAND_SMOOTHING == 0.977
    assert PERIOD == 10 * 10**9


def test_concurrency_denominator():
    # §3.6: CurrentCL, or max(1, round(S / 10)) when CurrentCL is 0.
    assert concurrency_denominator(37, 600) == 37
    assert concurrency_denominator(0, 600) == 60
    assert concurrency_denominator(0, 5) == 1  # 0.5 -> 1 under Go rounding
    assert concurrency_denominator(0, 4) == 1


# ---- compute_allocation (§3.5) ----


def test_allocation_no_bound_binds():
    allocs, fair = compute_allocation([10, 20, 30], [0, 0, 0], [100, 100, 100], 30)
    assert fair == pytest.approx(0.5)
    assert allocs == pytest.approx([5, 10, 15])


def test_allocation_all_at_lower():
    allocs, fair = compute_allocation([10, 20], [4, 6], [50, 50], 10)
    assert allocs == [4, 6]
    assert fair == pytest.approx(0.3)  # min(4/10, 6/20)


def test_allocation_all_at_upper():
    allocs, fair = compute_allocation([10, 20], [0, 0], [5, 7], 12)
    assert allocs == [5, 7]
    assert fair == pytest.approx(0.5)  # max(5/10, 7/20)


def test_allocation_mixed_bounds():
    # R / sum(targets) = 100/210 is below item 0's relative floor 40/50, so bounds bind.
    # Item 2 is capped at 10; items 0 and 1 share the rest: 100 = fair*(50 + 60) + 10 ->
    # fair = 9/11, and item 0's 40.9 clears its floor of 40.
    allocs, fair = compute_allocation([50, 60, 100], [40, 0, 0], [200, 200, 10], 100)
    assert fair == pytest.approx(90 / 110)
    assert allocs == pytest.approx([50 * 90 / 110, 60 * 90 / 110, 10])
    # Raise item 0's floor above fair*target: it binds, the others share the rest.
    allocs, fair = compute_allocation([50, 60, 100], [45, 0, 0], [200, 200, 10], 100)
    assert fair == pytest.approx(45 / 60)
    assert allocs == pytest.approx([45, 45, 10])


def test_allocation_zero_targets_use_min_target():
    # Both targets floored at 0.001, so the split is even.
    allocs, fair = compute_allocation([0, 0], [0, 0], [10, 10], 4)
    assert allocs == pytest.approx([2, 2])
    assert fair == pytest.approx(2 / MIN_TARGET)


@pytest.mark.parametrize(
    ("targets", "lowers", "uppers", "required"),
    [
        ([1, 1], [-1, 0], [5, 5], 2),  # negative lower bound
        ([1, 1], [2, 0], [5, 5], 2),  # target below lower bound
        ([3, 3], [2, 2], [1, 5], 4),  # upper below lower
        ([3, 3], [2, 2], [5, 5], 3),  # lower bounds exceed the sum
        ([3, 3], [0, 0], [1, 1], 3),  # upper bounds fall short
        ([3, 3], [0, 0], [5, 5], -1),  # negative sum
    ],
)
def test_allocation_errors(targets, lowers, uppers, required):
    with pytest.raises(AllocationError):
        compute_allocation(targets, lowers, uppers, required)


@st.composite
def allocation_problems(draw):
    n = draw(st.integers(min_value=1, max_value=10))
    items = []
    for _ in range(n):
        lower = draw(st.floats(min_value=0, max_value=500, allow_nan=False))
        target = lower + draw(st.floats(min_value=0, max_value=500, allow_nan=False))
        upper = lower + draw(st.floats(min_value=0, max_value=1000, allow_nan=False))
        items.append((target, lower, upper))
    low = sum(i[1] for i in items)
    high = sum(i[2] for i in items)
    lo_int, hi_int = math.ceil(low), math.floor(high)
    if lo_int > hi_int:
        required = draw(st.sampled_from([low, high]))
    else:
        required = draw(st.integers(min_value=lo_int, max_value=hi_int))
    return items, required


@settings(max_examples=400, deadline=None)
@given(allocation_problems())
def test_allocation_properties(problem):
    items, required = problem
    targets = [i[0] for i in items]
    lowers = [i[1] for i in items]
    uppers = [i[2] for i in items]
    allocs, fair = compute_allocation(targets, lowers, uppers, required)
    assert len(allocs) == len(items)
    assert sum(allocs) == pytest.approx(required, abs=1e-6)
    tol = 1e-9 * max(1.0, required)
    for alloc, (target, lower, upper) in zip(allocs, items):
        assert lower - tol <= alloc <= upper + tol
        if required == 0:
            continue
        # Each item is either scaled, or held at a bound that the scaled value crosses.
        scaled = fair * max(target, MIN_TARGET)
        at_scale = math.isclose(alloc, scaled, rel_tol=1e-6, abs_tol=1e-6)
        at_lower = math.isclose(alloc, lower, rel_tol=1e-9, abs_tol=1e-9) and lower >= scaled - 1e-6
        at_upper = math.isclose(alloc, upper, rel_tol=1e-9, abs_tol=1e-9) and upper <= scaled + 1e-6
        # The two no-wiggle-room shortcuts return bounds without checking fairness.
        pinned = abs(sum(lowers) - required) < 1e-7 or abs(sum(uppers) - required) < 1e-7
        assert at_scale or at_lower or at_upper or pinned
