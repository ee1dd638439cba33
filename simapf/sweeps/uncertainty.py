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
regime), on every row of the combination, held to the run's physical range (its `cores` and
`memory_limit_bytes` columns).

`contrasts` sets each level of a factor against the factor's first level, the other factors
equal: for every headline figure, the difference and the ratio between the two combinations'
replication 0 runs, with their intervals from the draws both share
(`simapf.uncertainty.contrast`). `simapf.load_sweep(out, contrasts=True)` returns them.
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
from simapf.uncertainty.contrast import contrast
from simapf.uncertainty.intervals import drawn_scenario, finite, interval, limit_of_row
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
        if not finite(value):
            continue
        if kind not in bands:
            bands[kind] = band(pool, kind, regime) if regime is not None else \
                NoBand(kind, "the sweep's metrics leave out the columns that tell a run's regime")  # fmt: skip
        drawn = draws[c].astype(float).to_numpy() if c in draws.columns else np.array([])
        iv = interval(float(value), drawn, bands[kind], limit=limit_of_row(kind, point))
        out[c] = (iv.lo, iv.hi)
    return out



CONTRAST_COLUMNS = ["factor", "level", "baseline", "metric", "difference", "difference_lo", "difference_hi", "ratio",
                    "ratio_lo", "ratio_hi", "runs", "model_error", "residual_pairs"]  # fmt: skip


def contrasts(points: pd.DataFrame, draws: pd.DataFrame, manifest: dict[str, Any] | None,
              pool: list | None = None) -> pd.DataFrame:  # fmt: skip
    """Each level of each factor against the factor's first level, the other factors equal, for
    every headline figure column (see the module): `CONTRAST_COLUMNS`, and `at/<factor>` the
    other factors' levels (empty for the factor itself), one row per pair of combinations and figure."""
    pool = load_pool() if pool is None else pool
    factors = {f: levels for f, levels in ((manifest or {}).get("factors") or {}).items() if f in points.columns}
    kinds = {c: k for c in points.columns if (k := kind_of(c)) is not None}
    regime_known = _keeps_regime((manifest or {}).get("metrics"))
    first = points[points["replication"] == 0] if "replication" in points.columns else points
    by_point = {rid: rows.sort_values("draw") for rid, rows in draws.groupby(draws["run_id"].map(point_run_id), sort=False)}
    key = {f: first[f].map(repr) for f in factors}
    rows = []
    for f, levels in factors.items():
        if len(levels) < 2:
            continue
        others = [g for g in factors if g != f]
        baseline = first[key[f] == repr(levels[0])]
        for _, row in first[key[f] != repr(levels[0])].iterrows():
            same = baseline[np.logical_and.reduce([key[g][baseline.index] == repr(row[g]) for g in others])] \
                if others else baseline  # fmt: skip
            if same.empty:
                continue
            base = same.iloc[0]
            mine, theirs = by_point.get(row["run_id"]), by_point.get(base["run_id"])
            if mine is None or theirs is None:
                continue
            for c, kind in kinds.items():
                a, b = row.get(c), base.get(c)
                if not (finite(a) and finite(b)):
                    continue
                errors = [band(pool, kind, regime_of_row(r.to_dict())) if regime_known else
                          NoBand(kind, "the sweep's metrics leave out the columns that tell a run's regime")
                          for r in (row, base)]  # fmt: skip
                got = contrast(float(a), _column(mine, c), errors[0], float(b), _column(theirs, c), errors[1],
                               limit=limit_of_row(kind, base.to_dict()))  # fmt: skip
                rows.append({"factor": f, "level": row[f], "baseline": levels[0], "metric": c,
                             **{f"at/{g}": row[g] for g in others}, **got.as_dict()})  # fmt: skip
    at = [f"at/{g}" for g in factors]  # the other factors' levels, where the pair stands
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS[:3] + at + CONTRAST_COLUMNS[3:])


def _column(rows: pd.DataFrame, c: str) -> list[float]:
    """A combination's draws' values of column `c`, in draw order (NaN where a draw has none)."""
    if c not in rows.columns:
        return [math.nan] * len(rows)
    return [float(v) if finite(v) else math.nan for v in rows[c]]




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


__all__ = ["contrasts", "draw_ids", "draw_tasks", "with_intervals"]
