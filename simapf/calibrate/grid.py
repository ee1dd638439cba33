"""Running many cells at once: every row x every seat setting, in parallel over processes.

Cells are independent simulations, so they go to joblib workers (loky processes, reused from
one call to the next, which matters for a fit that evaluates the grid many times) or to the
workers of a Dask cluster (one client for the simulator's life). The costliest cells (most
requests to simulate) are handed out first so that the workers finish together; the many
cheap ones travel in small batches to save per-task overhead. One batch may hold cells of
several parameter sets (a fit's Jacobian: up to a grid per free parameter at once, which a
cluster runs side by side). A cell's result is the same wherever it runs; one the result cache
holds (simapf.simulation.cache) is not run again.
"""

from __future__ import annotations

import functools
from contextlib import ExitStack
from typing import Any, Callable, Iterable, Iterator

from simapf.calibrate.data import Cell
from simapf.calibrate.experiment import CellResult, ExperimentSetup
from simapf.calibrate.scenario import run_cell
from simapf.server.params import ServerParams
from simapf.sweeps.backends import Backend, cpu_count, dask_client

CHEAP_REQUESTS = 20_000  # cells below this many simulated requests are batched

Batch = list[tuple[int, Cell]]  # (parameter set, cell) pairs run by one task


def make_batches(tasks: list[tuple[int, Cell]], setups: list[ExperimentSetup]) -> list[Batch]:
    """The tasks in the order they are handed out: the costliest cells first, one to a task,
    then the cheap ones in eights."""

    def cost(kc: tuple[int, Cell]) -> float:
        return setups[kc[0]].requests_for(kc[1].row.qps)

    tasks = sorted(tasks, key=cost, reverse=True)
    batches = [[kc] for kc in tasks if cost(kc) > CHEAP_REQUESTS]
    cheap = [kc for kc in tasks if cost(kc) <= CHEAP_REQUESTS]
    return batches + [cheap[i : i + 8] for i in range(0, len(cheap), 8)]


def _run_batch(batch: Batch, params: list[ServerParams], setup: list[ExperimentSetup]) -> list[tuple[int, CellResult]]:
    return [(k, run_cell(c, params[k], setup[k])) for k, c in batch]


def cell_key(cell: Cell, params: ServerParams, setup: ExperimentSetup) -> str:
    """A cell's key in the result cache (simapf.simulation.cache): its scenario, and how it is read."""
    from simapf.simulation import cache
    from simapf.calibrate.scenario import scenario_for

    return cache.key("cell", {"scenario": scenario_for(cell, params, setup), "setup": setup.model_dump(mode="json"),
                              "cell": [cell.row.index, cell.seats]})  # fmt: skip


def _from_cache(tasks: list[tuple[int, Cell]], params: list[ServerParams], setups: list[ExperimentSetup]
                ) -> tuple[list[tuple[int, CellResult]], list[tuple[int, Cell]], dict]:  # fmt: skip
    """The results the cache holds, the tasks left to run and their keys by (set, row, seats)."""
    from simapf.simulation import cache

    store = cache.active()
    if store is None:
        return [], tasks, {}
    found, todo, keys = [], [], {}
    for k, c in tasks:
        key = cell_key(c, params[k], setups[k])
        got = store.get("cell", key, lambda r, c=c: isinstance(r, CellResult)
                        and (r.row, r.seats) == (c.row.index, c.seats))  # this cell's, not another's
        if got is cache.MISS:
            todo.append((k, c))
            keys[(k, c.row.index, c.seats)] = key
        else:
            found.append((k, got))
    return found, todo, keys


def _keep(key: str | None, result: CellResult) -> None:
    from simapf.simulation import cache

    cache.tally.ran += 1
    store = cache.active() if key is not None else None
    if store is not None and key is not None:
        store.put("cell", key, result)


class Simulator:
    """Runs cells for several parameter sets in one parallel batch.

    `n_jobs` joblib workers (1: in this process), or `backend` (`simapf.sweeps.backends`):
    serial, joblib, or Dask, on a scheduler's cluster or on a local one. A Dask client is opened
    on entering a `with` block (or at the first run) and kept until its end (or `close()`)."""

    def __init__(self, n_jobs: int | None = None, backend: Backend | None = None) -> None:
        if backend is None:
            n = n_jobs or cpu_count()
            backend = Backend("joblib", n) if n > 1 else Backend("serial", 1)
        self.backend = backend
        self._workers = 1 if backend.kind == "serial" else backend.workers or cpu_count()
        self._costs: dict[tuple[int, int], float] = {}  # a cell's cost (simapf.jobs.estimate), by (row, seats)
        self._client: Any = None
        self._resources = ExitStack()

    def __enter__(self) -> "Simulator":
        if self.backend.kind == "dask":
            self._connect()  # now, so a scheduler that does not answer fails before any work
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect from Dask (and stop a local cluster); local workers need nothing."""
        self._client = None
        self._resources.close()

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
        found, todo, keys = _from_cache(tasks, params, setups)
        for k, res in found:
            out[k][(res.row, res.seats)] = res
        if progress and found:
            progress(len(found))
        for batch in self._batches(make_batches(todo, setups), params, setups):
            for k, res in batch:
                out[k][(res.row, res.seats)] = res
                _keep(keys.get((k, res.row, res.seats)), res)
            if progress:
                progress(len(batch))
        return out

    def _batches(self, batches: list[Batch], params: list[ServerParams], setups: list[ExperimentSetup]) -> Iterator[list]:
        """The results of each batch, in whatever order they finish (simapf.jobs.pool, which a
        time budget stops)."""
        from simapf.jobs.estimate import recording
        from simapf.jobs.pool import run_each, run_on_dask

        run = functools.partial(_run_batch, params=params, setup=setups)
        each = self._batch_costs(batches, params, setups) if recording() else None
        if self.backend.kind == "dask":
            return (out for _i, out in run_on_dask(self._connect(), run, batches, costs=each, workers=self._workers))
        return (out for _i, out in run_each(run, batches, self._workers, each))

    def _batch_costs(self, batches: list[Batch], params: list[ServerParams], setups: list[ExperimentSetup]) -> list[float]:
        """Each batch's cost: its cells' (each cell's taken once: a fit's steps hardly change it)."""
        from simapf.calibrate.scenario import scenario_for
        from simapf.jobs.estimate import cost
        from simapf.scenario import load_scenario

        for batch in batches:
            for k, c in batch:
                if (c.row.index, c.seats) not in self._costs:
                    self._costs[(c.row.index, c.seats)] = cost(load_scenario(scenario_for(c, params[k], setups[k])))
        return [sum(self._costs[(c.row.index, c.seats)] for _k, c in batch) for batch in batches]

    def _connect(self) -> Any:
        if self._client is None:
            self._client = self._resources.enter_context(dask_client(self.backend))
        return self._client


def run_grid(
    cells: Iterable[Cell],
    params: ServerParams,
    setup: ExperimentSetup,
    n_jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[tuple[int, int], CellResult]:
    """Simulate every cell with one parameter set; results keyed by (row index, seats)."""
    return Simulator(n_jobs).run([(params, setup, list(cells))], progress=progress)[0]
