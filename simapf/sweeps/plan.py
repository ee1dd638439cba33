"""A sweep's runs: the cartesian product of its factors times its replications, each run with
an identity and a seed that do not depend on where or in what order it runs.

A run is known by its factor values and replication. Both its id (the name of its result file)
and its seed are SHA-256 digests of a canonical JSON of those, so a run started on a laptop,
by joblib or on a Dask worker, first or last, today or in a resumed sweep, gets the same seed and
writes the same file. Python's `hash()` is salted per process and must never be used for this.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

# Range values are rounded to this many decimals so that 0.1 + 0.2 shows (and hashes) as 0.3.
_RANGE_DECIMALS = 12


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, no NaN."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(value: Any) -> bytes:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).digest()


def derive_seed(base_seed: int, identity: Mapping[str, Any], replication: int) -> int:
    """A 63-bit seed (fits Parquet's int64) from a base seed, what the run is and its replication."""
    raw = digest({"seed": base_seed, "identity": dict(identity), "replication": replication})
    return int.from_bytes(raw[:8], "big") >> 1


def run_id(base_seed: int, factors: Mapping[str, Any], replication: int) -> str:
    """The run's name in the result directory: 16 hex digits (64 bits; collisions need ~4e9 runs)."""
    return digest({"sweep_seed": base_seed, "factors": dict(factors), "replication": replication}).hex()[:16]


# A parameter draw of a combination (`sweep --uncertainty N`) is named after the combination's
# replication 0, whose seed it runs on: <id>~d<draw>.
DRAW_MARK = "~d"


def draw_run_id(point_run_id: str, draw: int) -> str:
    return f"{point_run_id}{DRAW_MARK}{draw}"


def point_run_id(any_run_id: str) -> str:
    """The run a run id is, or is a parameter draw of."""
    return any_run_id.split(DRAW_MARK, 1)[0]


def range_values(start: float, stop: float, step: float, limit: int | None = None) -> list[float | int]:
    """Python's range for numbers: start, start + step, ... while before stop (stop excluded).

    Integers stay integers when start, stop and step all are. More than `limit` values is a
    ValueError, raised before any is made."""
    if step == 0:
        raise ValueError("step must not be 0")
    if not all(math.isfinite(x) for x in (start, stop, step)):
        raise ValueError("start, stop and step must be finite numbers")
    whole = all(isinstance(x, int) and not isinstance(x, bool) for x in (start, stop, step))
    # Count first, then multiply: adding step repeatedly accumulates error.
    n = len(range(int(start), int(stop), int(step))) if whole else max(math.ceil(round((stop - start) / step, _RANGE_DECIMALS)), 0)
    if limit is not None and n > limit:
        raise ValueError(f"{n:,} values, more than the {limit:,} runs a sweep may have")
    if whole:
        return list(range(int(start), int(stop), int(step)))
    return [round(start + i * step, _RANGE_DECIMALS) for i in range(n)]


@dataclass(frozen=True)
class PlannedRun:
    index: int  # position in the sweep's order (factors in file order, replication innermost)
    run_id: str
    replication: int
    seed: int
    factors: dict[str, Any]  # dotted key -> value, in the sweep file's order


def plan_runs(factors: Mapping[str, list[Any]], replications: int, seed: int,
              common_random_numbers: Iterable[str] = ()) -> list[PlannedRun]:  # fmt: skip
    """Every run of a sweep, in order. Factors named in `common_random_numbers` are left out of
    the seed, so runs that differ only in them see the same random streams."""
    keys = list(factors)
    shared = set(common_random_numbers)
    runs: list[PlannedRun] = []
    for combo in itertools.product(*(factors[k] for k in keys)):
        values = dict(zip(keys, combo))
        seeded = {k: v for k, v in values.items() if k not in shared}
        for r in range(replications):
            runs.append(PlannedRun(
                index=len(runs), run_id=run_id(seed, values, r), replication=r,
                seed=derive_seed(seed, seeded, r), factors=values,
            ))  # fmt: skip
    return runs
