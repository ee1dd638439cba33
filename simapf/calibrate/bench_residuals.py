"""The bench's cells as the model's residuals: what real kube-apiservers say of its error.

Every cell of the bench data set is run as a user runs a scenario (`calibration/bench/base.yaml`
with the cell's settings) on the bench's machine fitted without the cell's group
(`bench_machine.machine_without`), once with the machine's parameters and once per parameter
draw, and each figure the bench measures becomes a residual of the pool the model-error bands
come from (`simapf.uncertainty.model_error`), its source `bench/<cell group>`, one experiment:

- peak RSS against the median of the data set's replications (`calibration/bench/cells.csv`);
- the apiserver's mean CPU and the client's mean LIST latency against the second measurement
  of the grid (`calibration/bench/repeat/cells.csv`), the one taken on an otherwise idle
  machine (the first table's CPU ran beside other work).

The calibration report (`simapf.calibrate.report`) adds them to the pool it writes and checks
every row's interval with the row's experiment left out, the bench's cells among them.
"""

from __future__ import annotations

import hashlib
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simapf.calibrate.bench_cells import BASE, BENCH, cells
from simapf.schema.summary import Summary
from simapf.uncertainty.model_error import BENCH_SOURCE, Residual, regime_of, residual_ok

# Each figure a residual is taken of: (kind, its name in a residual's id, the table it is
# measured in, its column there).
FIGURES = (
    ("memory", "peak RSS", "first", "peak_rss_bytes"),
    ("cpu", "CPU", "repeat", "mean_cores"),
    ("latency", "LIST latency", "repeat", "list_mean_s"),
)
TABLES = {"first": BENCH / "cells.csv", "repeat": BENCH / "repeat" / "cells.csv"}
FILES = (*TABLES.values(), BENCH / "machine.yaml")  # what the residuals are made from, beside the model


@dataclass(frozen=True)
class Predicted:
    """One figure of one bench cell: its residual and the figure under each parameter draw."""

    residual: Residual
    drawn: tuple[float, ...]


def digest() -> str:
    """SHA-256 of the bench's files the residuals come from and of this module."""
    h = hashlib.sha256()
    for path in (*FILES, Path(__file__)):
        h.update(path.read_bytes() if path.exists() else b"")
    return h.hexdigest()


def _figure_key(summary: Summary, kind: str) -> str | None:
    """The headline figure (`simapf.uncertainty.figures`) of `kind` that the bench measures."""
    if kind == "memory":
        return "peak_rss_bytes"
    if kind == "cpu":
        return "mean_cores"
    client = next((c for c in summary.clients if "list" in c.by_verb), None)
    return f"client_mean_s/{client.client}/list" if client is not None else None


def predictions(draws: Any, only: set[str] | None = None, say=lambda _line: None) -> list[Predicted]:
    """Every bench cell's residuals (or those of the cells `only` names), each with its figure
    under `draws` (see the module's docstring)."""
    from simapf.sweeps.drawn_runs import run
    from simapf.calibrate import bench_machine
    from simapf.calibrate.bench_report import measured_cells
    from simapf.scenario import load_scenario
    from simapf.server.params import ServerParams
    from simapf.uncertainty.figures import figure_values
    from simapf.sweeps.drawn_runs import draw_tasks, run_draw_tasks

    tables = {name: measured_cells(path) for name, path in TABLES.items()}
    fitted_on = bench_machine.measured(TABLES["repeat"])
    params = ServerParams()
    machines: dict[str, dict[str, Any]] = {}
    out = []
    for cell in cells():
        if not any(cell.name in t for t in tables.values()) or (only is not None and cell.name not in only):
            continue
        if cell.group not in machines:
            machines[cell.group] = bench_machine.machine_without(cell.group, fitted_on, params)
        loaded = load_scenario(BASE, {**cell.overrides, **bench_machine.overrides(machines[cell.group])})
        summary = run(loaded).typed
        rows = run_draw_tasks(draw_tasks(loaded, draws, {}))
        values, regime = figure_values(summary), regime_of(summary)
        for kind, what, table, column in FIGURES:
            measured = tables[table].get(cell.name, {}).get(column)
            key = _figure_key(summary, kind)
            if not measured or key is None or key not in values:
                continue
            point, median = values[key], statistics.median(measured)
            if not residual_ok(kind, point, median):
                continue
            residual = Residual(f"{cell.name} {what}", f"{BENCH_SOURCE}{cell.group}", kind, regime.path, regime.size,
                                regime.overloaded, point, median)  # fmt: skip
            out.append(Predicted(residual, tuple(float(r[key]) for r in rows if r.get(key) is not None)))
        say(f"bench: {cell.name}")
    return out
