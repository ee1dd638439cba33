"""Per-level concurrency limits and max seats, computed once per config digest.

Upstream does this in apf_controller.go (`finishQueueSetReconfigsLocked`, `plSpecCommons`):
the server's concurrency limit S is split among all priority levels by their nominal
concurrency shares; lendable and borrowing percentages turn into seat counts that bound
what the borrowing adjuster (`simapf.apf.borrowing`) may do every 10 s. Reference:
apf-mechanics.md §2 and §4.

This module knows nothing of the config models: the caller turns its
PriorityLevelConfiguration objects into `LevelSpec`s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from simapf.errors import ConfigError
from simapf.apf.gomath import go_round

# Share of NominalCL that one request may occupy, before the hand-size bound applies.
PRIORITY_LEVEL_MAX_SEATS_PERCENT = 0.15

# Global caps the work estimators apply on top of a level's max seats.
MAXIMUM_LIST_SEATS_LIMIT = 100
# With the SizeBasedListCostEstimate gate off, LIST and WATCH-init are capped at 10 again.
MAXIMUM_LIST_SEATS_LIMIT_LEGACY = 10
MAXIMUM_MUTATING_SEATS_LIMIT = 10


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """What limit computation needs from one PriorityLevelConfiguration (defaults applied).

    `lendable_percent` is 0 when the field is nil. `borrowing_limit_percent` None means
    unlimited (upstream then uses S as the borrowing bound); it is ignored for exempt levels,
    which upstream never gives a borrowing limit. `queuing` is True only for Limited levels
    whose limitResponse is Queue; `hand_size` is 0 otherwise.
    """

    name: str
    exempt: bool
    nominal_concurrency_shares: int
    lendable_percent: int = 0
    borrowing_limit_percent: int | None = None
    queuing: bool = False
    hand_size: int = 0


@dataclass(frozen=True, slots=True)
class LevelLimits:
    """The seat counts derived from one level's spec and S.

    min_cl = nominal_cl - lendable_cl and max_cl = nominal_cl + borrowing_cl bound the level's
    CurrentCL. `max_seats` is the per-level cap on one request's width; 0 where upstream
    stores none (exempt and Reject levels), so the estimators fall back to their global caps.
    """

    name: str
    exempt: bool
    nominal_cl: int
    lendable_cl: int
    borrowing_cl: int
    min_cl: int
    max_cl: int
    max_seats: int

    @property
    def initial_current_cl(self) -> int:
        """CurrentCL a brand-new level is given before its first adjustment (§3.8).

        The adjustment that follows in the same digest overwrites it; it matters only as the
        fallback when that adjustment's allocation fails.
        """
        return self.nominal_cl - self.lendable_cl // 2


def pl_max_seats(nominal_cl: int, hand_size: int) -> int:
    """Upstream's per-level max seats for a queuing level (§4.1).

    The 15% term is a float multiply then ceil, evaluated as Go does (for NominalCL below 2000
    this equals the exact ceil(15n/100)); the hand-size term is integer division. Depends on
    NominalCL, not CurrentCL, so it changes only when the config does.
    """
    if hand_size <= 0:
        raise ValueError(f"hand_size must be positive for a queuing level, got {hand_size}")
    pct_term = math.ceil(nominal_cl * PRIORITY_LEVEL_MAX_SEATS_PERCENT)
    return max(1, min(pct_term, nominal_cl // hand_size))


def effective_cap(pl_max_seats: int, global_limit: int) -> int:
    """The width cap an estimator applies: the level's own value unless absent (0) or larger."""
    if 0 < pl_max_seats <= global_limit:
        return pl_max_seats
    return global_limit


def maximum_list_seats_limit(size_based_list_cost_estimate: bool = True) -> int:
    return MAXIMUM_LIST_SEATS_LIMIT if size_based_list_cost_estimate else MAXIMUM_LIST_SEATS_LIMIT_LEGACY


def _level_limits(spec: LevelSpec, server_cl: int, share_sum: int) -> LevelLimits:
    # Go computes float64(S) * float64(NCS) / shareSum and takes the ceiling; the same
    # order of float operations here keeps results identical at exact-integer boundaries.
    nominal = math.ceil(float(server_cl) * float(spec.nominal_concurrency_shares) / float(share_sum))
    lendable = go_round(float(nominal) * float(spec.lendable_percent) / 100)
    if spec.exempt or spec.borrowing_limit_percent is None:
        borrowing = server_cl
    else:
        borrowing = go_round(float(nominal) * float(spec.borrowing_limit_percent) / 100)
    if spec.queuing and not spec.exempt:
        max_seats = pl_max_seats(nominal, spec.hand_size)
    else:
        max_seats = 0
    return LevelLimits(
        name=spec.name,
        exempt=spec.exempt,
        nominal_cl=nominal,
        lendable_cl=lendable,
        borrowing_cl=borrowing,
        min_cl=nominal - lendable,
        max_cl=nominal + borrowing,
        max_seats=max_seats,
    )


def compute_limits(levels: Sequence[LevelSpec], server_cl: int) -> dict[str, LevelLimits]:
    """Split `server_cl` among `levels` (all of them, including exempt and draining ones).

    Returns limits keyed by level name, in the order given.
    """
    if server_cl <= 0:
        raise ValueError(f"server concurrency limit must be positive, got {server_cl}")
    names = [spec.name for spec in levels]
    if len(set(names)) != len(names):
        raise ValueError(f"priority level names must be distinct, got {names}")
    for spec in levels:
        if spec.nominal_concurrency_shares < 0:
            raise ValueError(f"level {spec.name!r}: nominal_concurrency_shares must be >= 0")
        if not 0 <= spec.lendable_percent <= 100:
            raise ValueError(f"level {spec.name!r}: lendable_percent must be in 0..100")
        if spec.borrowing_limit_percent is not None and spec.borrowing_limit_percent < 0:
            raise ValueError(f"level {spec.name!r}: borrowing_limit_percent must be >= 0")
    share_sum = sum(spec.nominal_concurrency_shares for spec in levels)
    if share_sum <= 0:
        # Upstream would divide by zero; it cannot happen there because the mandatory
        # catch-all level always carries 5 shares.
        raise LimitsError("the nominalConcurrencyShares of all priority levels sum to 0")
    return {spec.name: _level_limits(spec, server_cl, share_sum) for spec in levels}


class LimitsError(ConfigError, ValueError):
    """A configuration whose limits cannot be computed (shown to the user as a config error)."""


def nominal_cl_sum(limits: Iterable[LevelLimits] | dict[str, LevelLimits]) -> int:
    """Sum of NominalCL over all levels: what the borrowing allocation must add up to."""
    values = limits.values() if isinstance(limits, dict) else limits
    return sum(lim.nominal_cl for lim in values)
