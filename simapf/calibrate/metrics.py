"""How far predictions are from the measurements: per cell, and summed up.

Relative error is `predicted / measured - 1`. Memory is compared in every measured cell (row x
seat setting); CPU once per row, at 1 seat, the setting at which the experiment found each
row's QPS (its CPU column is one figure per row). An empty cell is "most requests rejected":
the model should reject more than half of the requests there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simapf.calibrate.data import SEATS, Row
from simapf.calibrate.experiment import CellResult

CPU_SEATS = 1  # the setting the experiment's QPS (and its CPU column) was found at
EMPTY_CELL_REJECTION = 0.5


@dataclass(frozen=True)
class Summary:
    memory_cells: int
    memory_median: float  # median |relative error| of peak memory
    memory_max: float
    cpu_rows: int
    cpu_median: float
    cpu_max: float
    empty_cells: int
    empty_min_rejected: float  # lowest predicted rejection fraction over the empty cells
    empty_passing: int  # empty cells with more than half rejected

    def as_dict(self) -> dict[str, float | int]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def memory_errors(rows: list[Row], results: dict[tuple[int, int], CellResult]) -> list[tuple[Row, int, float]]:
    """(row, seats, relative error) for every measured memory cell that was simulated."""
    out = []
    for r in rows:
        for s in SEATS:
            m = r.memory(s)
            res = results.get((r.index, s))
            if m is not None and res is not None:
                out.append((r, s, res.mem_mb / m - 1.0))
    return out


def cpu_errors(rows: list[Row], results: dict[tuple[int, int], CellResult]) -> list[tuple[Row, float]]:
    out = []
    for r in rows:
        res = results.get((r.index, CPU_SEATS))
        if res is not None:
            out.append((r, res.cpu_percent / r.cpu_percent - 1.0))
    return out


def empty_cells(rows: list[Row], results: dict[tuple[int, int], CellResult]) -> list[tuple[Row, int, float]]:
    """(row, seats, predicted rejected fraction) for every empty cell that was simulated."""
    out = []
    for r in rows:
        for s in SEATS:
            res = results.get((r.index, s))
            if r.memory(s) is None and res is not None:
                out.append((r, s, res.rejected_fraction))
    return out


def summarise(rows: list[Row], results: dict[tuple[int, int], CellResult]) -> Summary:
    mem = np.abs([e for _r, _s, e in memory_errors(rows, results)])
    cpu = np.abs([e for _r, e in cpu_errors(rows, results)])
    empty = [f for _r, _s, f in empty_cells(rows, results)]
    return Summary(
        memory_cells=len(mem),
        memory_median=float(np.median(mem)) if len(mem) else float("nan"),
        memory_max=float(np.max(mem)) if len(mem) else float("nan"),
        cpu_rows=len(cpu),
        cpu_median=float(np.median(cpu)) if len(cpu) else float("nan"),
        cpu_max=float(np.max(cpu)) if len(cpu) else float("nan"),
        empty_cells=len(empty),
        empty_min_rejected=float(min(empty)) if empty else float("nan"),
        empty_passing=sum(1 for f in empty if f > EMPTY_CELL_REJECTION),
    )
