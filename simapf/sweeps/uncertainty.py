"""A sweep with its uncertainty: N parameter draws per combination, and intervals on its rows.

`uncertainty: N` in the sweep file (`simapf sweep --uncertainty N`, `simapf.sweep(...,
uncertainty=N)`) adds, to every combination of factor levels, N runs of the combination's
scenario on its replication 0's seed, each with a parameter set drawn from the calibration's
uncertainty (`simapf.uncertainty.draws`). The N draws come from the sweep's seed, so draw d is
the same parameter set for every combination: two combinations' draw d differ only in their
factors, as replication r of two policies does in `compare`.

A draw run is a run of the sweep like any other: stored at once as `run-<id>~d<d>.parquet`
(`<id>` its combination's replication 0), listed in the manifest, resumed. Its row has the
point runs' columns and `draw`. The sweep's table stays one row per point run; every headline
figure column (`simapf.uncertainty.figures.kind_of`) gains `<column>_lo` and `<column>_hi`, the
90 % interval of the combination's replication 0 (`simapf.uncertainty.intervals.interval`: its
value, its draws' values, and the model's validated error for the figure's kind in the run's
regime), on every row of the combination.
"""

from __future__ import annotations

import fnmatch
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from simapf.sweeps.measure import RunTask
from simapf.sweeps.plan import draw_run_id, point_run_id
from simapf.uncertainty.figures import kind_of
from simapf.uncertainty.intervals import drawn_scenario, interval
from simapf.uncertainty.model_error import Band, NoBand, band, load_pool, regime_of_row

if TYPE_CHECKING:
    from simapf.sweeps.spec import LoadedSweep

# The columns a run's regime is read from (`regime_of_row`); a sweep's `metrics` may leave them out.
REGIME_COLUMNS = ("rejected_share", "list_bytes/x", "list_requests/x")


def draw_ids(loaded: LoadedSweep) -> list[str]:
    """The draw runs' ids, combination by combination, draw by draw."""
    reps = loaded.spec.replications
    return [draw_run_id(run.run_id, d) for run in loaded.runs[::reps] for d in range(loaded.spec.uncertainty)]


def draw_tasks(loaded: LoadedSweep, tasks: dict[str, RunTask]) -> dict[str, RunTask]:
    """Each combination's replication 0 task (from the point runs' `tasks`) under each draw."""
    from simapf.uncertainty.draws import draw_parameters

    n = loaded.spec.uncertainty
    if not n:
        return {}
    # Draw d is the same whatever N: the draws are taken row by row from one stream, so a
    # sweep resumed with more draws reuses the runs of the first ones.
    draws = draw_parameters(n, loaded.spec.seed)
    out = {}
    for run in loaded.runs[:: loaded.spec.replications]:
        point = tasks[run.run_id]
        params = loaded.combination(run).loaded.params
        for d in range(n):
            rid = draw_run_id(run.run_id, d)
            out[rid] = RunTask(key={**point.key, "run_id": rid, "draw": d},
                               scenario=drawn_scenario(point.scenario, params, draws, d), files=point.files,
                               metrics=point.metrics, label=f"{point.label} draw {d + 1}/{n}",
                               cost=point.cost)  # fmt: skip
    return out


def with_intervals(points: pd.DataFrame, draws: pd.DataFrame, manifest: dict[str, Any] | None,
                   pool: list | None = None) -> pd.DataFrame:  # fmt: skip
    """`points` with `<column>_lo` and `<column>_hi` for every headline figure column, from the
    `draws` rows of each combination (see the module); NaN where a combination has no draws yet
    or its replication 0 no value."""
    pool = load_pool() if pool is None else pool
    kinds = {c: k for c in points.columns if (k := kind_of(c)) is not None}
    by_point = {rid: rows for rid, rows in draws.groupby(draws["run_id"].map(point_run_id), sort=False)}
    regime_known = _keeps_regime((manifest or {}).get("metrics"))
    computed: dict[str, dict[str, tuple[float, float]]] = {}
    for row in points.to_dict("records"):
        rows = by_point.get(row["run_id"])
        if rows is not None:
            computed[row["run_id"]] = _intervals(row, rows, kinds, pool, regime_known)
    combination = _replication_0(manifest)
    mine = [computed.get(combination.get(rid, rid), {}) for rid in points["run_id"]]
    columns = {}
    for c in kinds:
        bounds = [m.get(c, (math.nan, math.nan)) for m in mine]
        columns[f"{c}_lo"] = [lo for lo, _hi in bounds]
        columns[f"{c}_hi"] = [hi for _lo, hi in bounds]
    return pd.concat([points, pd.DataFrame(columns, index=points.index, dtype=float)], axis=1)


def _intervals(point: dict[str, Any], draws: pd.DataFrame, kinds: dict[str, str], pool: list,
               regime_known: bool) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Each figure's interval for one combination (`kinds`: column -> kind of figure), from its
    replication 0 `point` row and its draws."""
    regime = regime_of_row(point) if regime_known else None
    bands: dict[str, Band | NoBand] = {}
    out = {}
    for c, kind in kinds.items():
        value = point.get(c)
        if value is None or not math.isfinite(float(value)):
            continue
        if kind not in bands:
            bands[kind] = band(pool, kind, regime) if regime is not None else \
                NoBand(kind, "the sweep's metrics leave out the columns that tell a run's regime")  # fmt: skip
        drawn = draws[c].astype(float).to_numpy() if c in draws.columns else np.array([])
        iv = interval(float(value), drawn, bands[kind])
        out[c] = (iv.lo, iv.hi)
    return out


def _keeps_regime(metrics: list[str] | None) -> bool:
    """Whether rows kept by the sweep's `metrics` patterns have the columns of a run's regime."""
    return metrics is None or all(any(fnmatch.fnmatchcase(c, p) for p in metrics) for c in REGIME_COLUMNS)


def _replication_0(manifest: dict[str, Any] | None) -> dict[str, str]:
    """Each point run's combination, as the id of its replication 0 (the manifest lists a
    combination's replications one after another)."""
    if not manifest or not isinstance(manifest.get("runs"), list):
        return {}
    reps = int(manifest.get("replications", 1))
    points = [rid for rid in manifest["runs"] if point_run_id(rid) == rid]
    return {rid: points[i - i % reps] for i, rid in enumerate(points)}


__all__ = ["draw_ids", "draw_tasks", "with_intervals"]
