"""What the model was checked against, as residuals, and how well its intervals cover them.

The calibration report (`simapf calibrate --report`) builds the residual pool that
`simapf.uncertainty.model_error` draws bands from: every row of the validation table and every
calibration cell predicted with its own group of rows left out of the fit, and the bench's
cells (`simapf.calibrate.bench_residuals`). It checks the intervals the same way a user's run
gets them, leaving one experiment out at a time (`experiment_of`: one harness, one set-up):
each row's interval is built from the other experiments' residuals (and, when parameter draws
are given, its own draws), and the report counts how many rows' measurements fall within (the
coverage) and how wide the intervals are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from simapf.calibrate.metrics import CPU_SEATS
from simapf.uncertainty.intervals import interval
from simapf.uncertainty.model_error import (
    BENCH_SOURCE,
    LEVEL,
    OVERLOADED,
    Band,
    Regime,
    Residual,
    band,
    experiment_of,
    residual_ok,
    size_class,
)

# The kind of figure each validation quantity is (quantities of no kind a run reports as a
# headline figure, such as throughput or a ratio of two runs, stay out of the pool).
QUANTITY_KINDS = {
    "peak_rss_bytes": "memory", "peak_rss_steady_bytes": "memory", "peak_rss_scraped_bytes": "memory",
    "peak_rss_minus_idle_bytes": "memory",
    "mean_cores": "cpu", "mean_cores_steady": "cpu", "cpu_core_s_per_request": "cpu", "refill_cpu_core_s": "cpu",
    "rejected_fraction": "rejected",
    "latency_p50_s": "latency", "latency_p99_s": "latency", "client_latency_p50_s": "latency",
    "client_latency_p99_s": "latency", "discovery_run_s": "latency",
}  # fmt: skip
CALIBRATION_SOURCE = "issue132233-calibration-data"


def validation_residuals(table: pd.DataFrame) -> list[Residual]:
    """The validation table's rows (`simapf.calibrate.published.run_table`) as residuals."""
    out = []
    for row in table.to_dict("records"):
        kind = QUANTITY_KINDS.get(row["quantity"])
        if kind is None or not residual_ok(kind, row["predicted"], row["measured"]):
            continue
        out.append(Residual(row["id"], row["source"], kind, row["path"], row["size"], bool(row["overloaded"]),
                            float(row["predicted"]), float(row["measured"])))  # fmt: skip
    return out


def calibration_residuals(logo: Iterable[Any], results: dict[tuple[int, int], Any]) -> list[Residual]:
    """The calibration cells as residuals, each predicted by the fit without its group
    (`simapf.calibrate.logo.GroupPrediction`); the regime from the point run's cell (`results`)."""
    out = []
    for g in logo:
        for row, seats, measured, predicted in g.memory:
            overloaded = results[(row.index, seats)].rejected_fraction >= OVERLOADED
            out.append(Residual(f"{row.label} {seats} seats", CALIBRATION_SOURCE, "memory", row.source,
                                size_class(row.response_bytes), overloaded, predicted * 1e6, measured * 1e6))  # fmt: skip
        for row, measured, predicted in g.cpu:
            overloaded = results[(row.index, CPU_SEATS)].rejected_fraction >= OVERLOADED
            out.append(Residual(f"{row.label} CPU", CALIBRATION_SOURCE, "cpu", row.source, size_class(row.response_bytes),
                                overloaded, predicted / 100, measured / 100))  # fmt: skip
    return out


def cell_inputs(cell: Any, results: dict[tuple[int, int], Any]) -> dict[str, Any]:
    """A calibration cell's inputs (`simapf.uncertainty.coverage.run_inputs`), from its row and its run."""
    from simapf.calibrate.scenario import scenario_for
    from simapf.uncertainty.coverage import features, minor_version

    row = cell.row
    scenario = scenario_for(cell)
    served = row.qps * (1.0 - results[(row.index, cell.seats)].rejected_fraction)
    return {
        "list_response_bytes": row.response_bytes,
        "objects_per_resource": row.object_count,
        "etcd_list_bytes_per_s": served * row.response_bytes if row.source == "etcd" else 0.0,
        "informers": 0,
        "kubernetes_version": minor_version(scenario.get("kubernetes", {}).get("version") or _default_version()),
        "features": sorted(features(scenario)),
    }


def _default_version() -> str:
    from simapf.scenario.schema import Scenario

    return Scenario.model_validate({"name": "x"}).kubernetes.version


@dataclass(frozen=True)
class Checked:
    """One row's interval as a user's run would give it, built without the row's experiment."""

    residual: Residual
    lo: float
    hi: float
    band: str  # the band's regime, or why there was none
    banded: bool  # False: no band spoke for it, and the interval is the parameters' alone

    @property
    def covered(self) -> bool:
        return self.lo <= self.residual.measured <= self.hi


def leave_one_experiment_out(pool: list[Residual], drawn: dict[str, list[float]] | None = None,
                             level: float = LEVEL) -> list[Checked]:  # fmt: skip
    """Every residual's interval from the pool without its experiment (`experiment_of`), around
    its prediction, and (if `drawn` has them, by id) its parameter draws' predictions, which
    are the whole interval where no band is left."""
    out = []
    for r in pool:
        b = band(pool, r.kind, Regime(r.path, r.size, r.overloaded), level, leave_out=experiment_of(r.source))
        iv = interval(r.predicted, (drawn or {}).get(r.id) or [], b, level)
        banded = isinstance(b, Band)
        out.append(Checked(r, iv.lo, iv.hi, b.regime if banded else b.reason, banded))
    return out


def where(r: Residual) -> str:
    """Whether a residual is the bench's or a published measurement's."""
    return "bench" if r.source.startswith(BENCH_SOURCE) else "published"


def _coverage_row(checked: list[Checked], **labels: Any) -> dict[str, Any]:
    covered = sum(1 for c in checked if c.covered)
    ratios = [c.hi / c.lo for c in checked if c.lo > 0]
    return {
        **labels, "rows": len(checked), "with_band": sum(1 for c in checked if c.banded), "covered": covered,
        "coverage": covered / len(checked) if checked else math.nan,
        "median_upper_over_lower": float(np.median(ratios)) if ratios else math.nan,
        "median_width": float(np.median([c.hi - c.lo for c in checked])) if checked else math.nan,
    }  # fmt: skip


def coverage_table(checked: list[Checked], by: Any = None) -> pd.DataFrame:
    """Per kind (and per `by(residual)`, when given): rows, rows with a band, rows whose
    measurement is within their interval (banded or not, as a user's run gives it), coverage,
    median upper/lower bound; then all rows together."""
    groups: dict[tuple[str, ...], list[Checked]] = {}
    for c in checked:
        key = (c.residual.kind,) if by is None else (c.residual.kind, by(c.residual))
        groups.setdefault(key, []).append(c)
    rows = []
    for key in sorted(groups):
        labels = {"kind": key[0]} if by is None else {"kind": key[0], "group": key[1]}
        rows.append(_coverage_row(groups[key], **labels))
    everything = _coverage_row(checked, kind="all", **({} if by is None else {"group": "all"}))
    everything.update(median_upper_over_lower=math.nan, median_width=math.nan)
    rows.append(everything)
    return pd.DataFrame(rows)
