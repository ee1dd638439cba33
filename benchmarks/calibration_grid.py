"""Benchmark: one evaluation of the calibration grid (every measured row at 1, 10 and 100 seats).

This is what a fit repeats for every iteration and the report once: 24 rows x 3 seat settings
simulated as the experiment ran them (simapf.calibrate.experiment), with the shipped parameters,
in parallel over the machine's cores (or a Dask cluster's workers). Target: under 60 s on 2 cores.

    python benchmarks/calibration_grid.py [--runs K] [--jobs N] [--backend joblib|dask|serial] [--dask ADDRESS]
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import time

import numpy as np

from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.scenario import run_cell
from simapf.calibrate.fit import Problem
from simapf.calibrate.grid import Simulator, make_batches
from simapf.calibrate.metrics import summarise
from simapf.calibrate.record import SHIPPED, read_record, record_free_params
from simapf.server.params import ServerParams
from simapf.sweeps.backends import choose

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="workers (default: one per core)")
    parser.add_argument("--backend", choices=["joblib", "dask", "serial"], default=None)
    parser.add_argument("--dask", default=None, metavar="SCHEDULER_ADDRESS", help="an existing Dask cluster")
    args = parser.parse_args()
    rows = load_rows()
    grid = cells(rows)
    params, setup = ServerParams(), ExperimentSetup()
    backend = choose(args.backend, args.jobs, args.dask)
    with Simulator(backend=backend) as sim:
        sim.run([(params, setup, grid[:2])])  # start the worker processes outside the timing
        walls = []
        for _ in range(args.runs):
            start = time.perf_counter()
            results = sim.run([(params, setup, grid)])[0]
            walls.append(time.perf_counter() - start)
    # One process, cell by cell, for the CPU time each cell needs.
    cpu = {}
    for c in grid:
        t = time.process_time()
        run_cell(c, params, setup)
        cpu[c.key] = time.process_time() - t
    requests = sum(r.requests for r in results.values())
    s = summarise(rows, results)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; {backend.describe()}")
    print(f"grid: {len(grid)} cells, {requests:,} simulated requests")
    print(f"wall seconds: best {min(walls):.1f}, median {sorted(walls)[len(walls) // 2]:.1f} (of {args.runs})")
    print(f"CPU seconds, one process: total {sum(cpu.values()):.1f}; costliest cell {max(cpu.values()):.1f}")
    print(f"fit figures: memory median {s.memory_median:.1%}, worst {s.memory_max:.1%}; CPU median {s.cpu_median:.1%}")
    # What more workers would give: the tasks as the simulator hands them out, each taking the
    # CPU time its cells took here, to whichever worker is free first (no transfer costs).
    jacobian = finite_difference_tasks(rows, params, setup, record_free_params(read_record(SHIPPED)), results)
    for workers in (2, 8, 16, 32, 64):
        g = makespan([(0, c) for c in grid], cpu, setup, workers)
        j = makespan(jacobian, cpu, setup, workers)
        print(f"estimated on {workers} workers: grid {g:.1f} s, finite differences ({len(jacobian)} cells) {j:.0f} s")


class _Recorder:
    """A stand-in for the simulator that answers every cell with its result at the shipped point
    and keeps the cells each parameter set asked for."""

    def __init__(self, results: dict) -> None:
        self.results = results
        self.asked: list[list] = []

    def run(self, work, progress=None):
        self.asked += [cells_ for _p, _s, cells_ in work]
        return [{c.key: self.results[c.key] for c in cells_} for _p, _s, cells_ in work]


def finite_difference_tasks(rows, params, setup, free, results) -> list:
    """(parameter set, cell) for each cell one set of finite differences at the shipped point
    simulates, as the fit chooses them (`Problem.finite_differences`)."""
    recorder = _Recorder(results)
    Problem(rows, params, setup, free, recorder).finite_differences(np.zeros(len(free)))
    return [(k, c) for k, cells_ in enumerate(recorder.asked[1:], 1) for c in cells_]


def makespan(tasks: list, cpu: dict, setup: ExperimentSetup, workers: int) -> float:
    """When the last task ends if each free worker takes the next batch in `make_batches` order."""
    ends = [0.0] * workers
    for batch in make_batches(tasks, [setup] * (1 + max(k for k, _ in tasks))):
        heapq.heapreplace(ends, ends[0] + sum(cpu[c.key] for _, c in batch))
    return max(ends)


if __name__ == "__main__":
    main()
