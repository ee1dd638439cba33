"""Running many cells at once: every row x every seat setting, in parallel over processes.

Cells are independent simulations, so they go to joblib workers (loky processes, reused from
one call to the next, which matters for a fit that evaluates the grid many times). The
costliest cells (most requests to simulate) are handed out first so that the workers finish
together; the many cheap ones travel in small batches to save per-task overhead. One batch
may hold cells of several parameter sets (a fit's Jacobian).
"""

from __future__ import annotations

import os
from typing import Callable, Iterable

from joblib import Parallel, delayed

from simapf.calibrate.data import Cell
from simapf.calibrate.experiment import CellResult, ExperimentSetup, run_cell
from simapf.server.params import ServerParams

CHEAP_REQUESTS = 20_000  # cells below this many simulated requests are batched


def default_jobs() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _run_batch(batch: list[tuple[int, Cell]], params: list[ServerParams], setup: list[ExperimentSetup]):
    return [(k, run_cell(c, params[k], setup[k])) for k, c in batch]


class Simulator:
    """Runs cells for several parameter sets in one parallel batch (one joblib pool, reused)."""

    def __init__(self, n_jobs: int | None = None) -> None:
        self.n_jobs = n_jobs or default_jobs()
        self._pool = Parallel(n_jobs=self.n_jobs, return_as="generator_unordered") if self.n_jobs > 1 else None

    def run(
        self,
        work: list[tuple[ServerParams, ExperimentSetup, list[Cell]]],
        progress: Callable[[int], None] | None = None,
    ) -> list[dict[tuple[int, int], CellResult]]:
        """For each (params, setup, cells): the results of those cells, by (row, seats)."""
        params = [w[0] for w in work]
        setups = [w[1] for w in work]
        tasks = [(k, c) for k, w in enumerate(work) for c in w[2]]
        out: list[dict[tuple[int, int], CellResult]] = [{} for _ in work]

        def cost(kc: tuple[int, Cell]) -> float:
            return setups[kc[0]].requests_for(kc[1].row.qps)

        tasks.sort(key=cost, reverse=True)
        batches = [[kc] for kc in tasks if cost(kc) > CHEAP_REQUESTS]
        cheap = [kc for kc in tasks if cost(kc) <= CHEAP_REQUESTS]
        batches += [cheap[i : i + 8] for i in range(0, len(cheap), 8)]
        if self._pool is None:
            results = (_run_batch(b, params, setups) for b in batches)
        else:
            results = self._pool(delayed(_run_batch)(b, params, setups) for b in batches)
        for batch in results:
            for k, res in batch:
                out[k][(res.row, res.seats)] = res
            if progress:
                progress(len(batch))
        return out


def run_grid(
    cells: Iterable[Cell],
    params: ServerParams,
    setup: ExperimentSetup,
    n_jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[tuple[int, int], CellResult]:
    """Simulate every cell with one parameter set; results keyed by (row index, seats)."""
    return Simulator(n_jobs).run([(params, setup, list(cells))], progress=progress)[0]
