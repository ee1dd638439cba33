"""Concurrency limits and max seats against the measured tables of apf-mechanics.md §2.3, §4.3."""

from __future__ import annotations

import pytest

from simapf.apf.limits import (
    MAXIMUM_LIST_SEATS_LIMIT,
    MAXIMUM_LIST_SEATS_LIMIT_LEGACY,
    MAXIMUM_MUTATING_SEATS_LIMIT,
    LevelSpec,
    compute_limits,
    effective_cap,
    maximum_list_seats_limit,
    nominal_cl_sum,
    pl_max_seats,
)

from bootstrap_levels import BOOTSTRAP_LEVELS  # noqa: E402  (apf-mechanics §1.3)

# §2.3, S = 600: name -> (NominalCL, LendableCL, MinCL, MaxCL, PL maxSeats (0 = none))
TABLE_600 = {
    "catch-all": (13, 0, 13, 613, 0),
    "exempt": (0, 0, 0, 600, 0),
    "global-default": (49, 25, 24, 649, 8),
    "leader-election": (25, 0, 25, 625, 4),
    "node-high": (98, 25, 73, 698, 15),
    "system": (74, 24, 50, 674, 12),
    "workload-high": (98, 49, 49, 698, 15),
    "workload-low": (245, 221, 24, 845, 37),
}

# §2.3, S = 800
TABLE_800 = {
    "catch-all": (17, 0, 17, 817, 0),
    "exempt": (0, 0, 0, 800, 0),
    "global-default": (66, 33, 33, 866, 10),
    "leader-election": (33, 0, 33, 833, 5),
    "node-high": (131, 33, 98, 931, 20),
    "system": (98, 32, 66, 898, 15),
    "workload-high": (131, 66, 65, 931, 20),
    "workload-low": (327, 294, 33, 1127, 50),
}


@pytest.mark.parametrize(
    ("server_cl", "table", "expected_sum"),
    [(600, TABLE_600, 602), (800, TABLE_800, 803)],
)
def test_bootstrap_limits_match_measured_table(server_cl, table, expected_sum):
    limits = compute_limits(BOOTSTRAP_LEVELS, server_cl)
    assert set(limits) == set(table)
    for name, (nominal, lendable, min_cl, max_cl, max_seats) in table.items():
        lim = limits[name]
        assert (lim.nominal_cl, lim.lendable_cl, lim.min_cl, lim.max_cl, lim.max_seats) == (
            nominal,
            lendable,
            min_cl,
            max_cl,
            max_seats,
        ), name
        # No level sets borrowingLimitPercent, so each may borrow up to S.
        assert lim.borrowing_cl == server_cl
    assert nominal_cl_sum(limits) == expected_sum
    assert nominal_cl_sum(limits.values()) == expected_sum


def test_go_rounding_of_lendable_half_values():
    # At S = 600, global-default has NominalCL 49 (50% lendable) and node-high 98 (25%):
    # both lendable products are exactly 24.5. Go rounds them to 25, giving the measured
    # MinCLs 24 and 73; banker's rounding would give 25 and 74.
    limits = compute_limits(BOOTSTRAP_LEVELS, 600)
    assert limits["global-default"].lendable_cl == 25
    assert limits["global-default"].min_cl == 24
    assert limits["node-high"].lendable_cl == 25
    assert limits["node-high"].min_cl == 73
    assert round(24.5) == 24  # why the distinction matters


def test_borrowing_limit_percent_rounds_half_away_from_zero():
    # §2.2: BorrowingCL = round(NominalCL * pct / 100) when set. With global-default's
    # NominalCL 49 at S = 600, 150% gives 73.5 -> 74 and 50% gives 24.5 -> 25.
    levels = list(BOOTSTRAP_LEVELS)
    idx = next(i for i, s in enumerate(levels) if s.name == "global-default")
    levels[idx] = LevelSpec("global-default", False, 20, 50, 150, queuing=True, hand_size=6)
    assert compute_limits(levels, 600)["global-default"].max_cl == 49 + 74
    levels[idx] = LevelSpec("global-default", False, 20, 50, 50, queuing=True, hand_size=6)
    assert compute_limits(levels, 600)["global-default"].max_cl == 49 + 25
    levels[idx] = LevelSpec("global-default", False, 20, 50, 0, queuing=True, hand_size=6)
    assert compute_limits(levels, 600)["global-default"].max_cl == 49


def test_exempt_level_ignores_borrowing_limit_and_may_have_shares():
    # Upstream never gives the exempt level a borrowing limit: MaxCL = NominalCL + S.
    # With NCS 10 on exempt, shares sum to 255: NominalCL = ceil(600*10/255) = ceil(23.53) = 24.
    levels = [
        LevelSpec("exempt", True, 10, 50, 20) if s.name == "exempt" else s for s in BOOTSTRAP_LEVELS
    ]
    ex = compute_limits(levels, 600)["exempt"]
    assert ex.nominal_cl == 24
    assert ex.lendable_cl == 12
    assert ex.min_cl == 12
    assert ex.max_cl == 24 + 600
    assert ex.max_seats == 0


def test_initial_current_cl_of_new_level():
    # §3.8: NominalCL - floor(LendableCL / 2). workload-low at S = 600: 245 - 110 = 135.
    limits = compute_limits(BOOTSTRAP_LEVELS, 600)
    assert limits["workload-low"].initial_current_cl == 135
    assert limits["global-default"].initial_current_cl == 49 - 12


# §4.3: ServerCL -> (global-default, leader-election, node-high, system, workload-high, workload-low)
PL_MAX_SEATS_TABLE = {
    50: (1, 1, 1, 1, 1, 3),
    100: (1, 1, 2, 2, 2, 6),
    200: (2, 2, 5, 4, 5, 13),
    400: (5, 3, 10, 8, 10, 25),
    600: (8, 4, 15, 12, 15, 37),
    800: (10, 5, 20, 15, 20, 50),
    1000: (13, 7, 25, 19, 25, 62),
    1600: (20, 10, 40, 30, 40, 99),
    3000: (37, 19, 74, 56, 74, 184),
}
QUEUING_ORDER = ("global-default", "leader-election", "node-high", "system", "workload-high", "workload-low")


@pytest.mark.parametrize("server_cl", sorted(PL_MAX_SEATS_TABLE))
def test_pl_max_seats_table(server_cl):
    limits = compute_limits(BOOTSTRAP_LEVELS, server_cl)
    got = tuple(limits[name].max_seats for name in QUEUING_ORDER)
    assert got == PL_MAX_SEATS_TABLE[server_cl]
    # Reject and exempt levels carry none.
    assert limits["catch-all"].max_seats == 0
    assert limits["exempt"].max_seats == 0


def test_pl_max_seats_formula_cases():
    # §4.2: NominalCL 66, hand 6: min(ceil(9.9)=10, 11) = 10; NominalCL 49: min(8, 8) = 8.
    assert pl_max_seats(66, 6) == 10
    assert pl_max_seats(49, 6) == 8
    # Never below 1, even for a tiny level.
    assert pl_max_seats(3, 6) == 1
    assert pl_max_seats(0, 6) == 1
    with pytest.raises(ValueError):
        pl_max_seats(10, 0)


def test_global_caps_and_effective_cap():
    assert MAXIMUM_LIST_SEATS_LIMIT == 100
    assert MAXIMUM_LIST_SEATS_LIMIT_LEGACY == 10
    assert MAXIMUM_MUTATING_SEATS_LIMIT == 10
    assert maximum_list_seats_limit(True) == 100
    assert maximum_list_seats_limit(False) == 10
    # §4.3 effective caps at S = 600.
    limits = compute_limits(BOOTSTRAP_LEVELS, 600)
    mutating = tuple(effective_cap(limits[n].max_seats, MAXIMUM_MUTATING_SEATS_LIMIT) for n in QUEUING_ORDER)
    listing = tuple(effective_cap(limits[n].max_seats, MAXIMUM_LIST_SEATS_LIMIT) for n in QUEUING_ORDER)
    assert mutating == (8, 4, 10, 10, 10, 10)
    assert listing == (8, 4, 15, 12, 15, 37)
    for name in ("catch-all", "exempt"):
        assert effective_cap(limits[name].max_seats, MAXIMUM_MUTATING_SEATS_LIMIT) == 10
        assert effective_cap(limits[name].max_seats, MAXIMUM_LIST_SEATS_LIMIT) == 100
    # §4.3, S = 3000: workload-low's 184 is capped to 100 for lists.
    wl3000 = compute_limits(BOOTSTRAP_LEVELS, 3000)["workload-low"].max_seats
    assert effective_cap(wl3000, MAXIMUM_LIST_SEATS_LIMIT) == 100


def test_invalid_inputs_are_rejected():
    with pytest.raises(ValueError):
        compute_limits(BOOTSTRAP_LEVELS, 0)
    with pytest.raises(ValueError):
        compute_limits([LevelSpec("a", False, 0), LevelSpec("b", False, 0)], 600)
    with pytest.raises(ValueError):
        compute_limits([LevelSpec("a", False, 5), LevelSpec("a", False, 5)], 600)
    with pytest.raises(ValueError):
        compute_limits([LevelSpec("a", False, 5, lendable_percent=101)], 600)
