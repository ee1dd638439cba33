"""Benchmark: one evaluation of the calibration grid (every measured row at 1, 10 and 100 seats).

This is what a fit repeats for every iteration and the report once: 24 rows x 3 seat settings
simulated as the experiment ran them (simapf.calibrate.experiment), with the shipped parameters,
in parallel over the machine's cores. Target: under 60 s on 2 cores.

    python benchmarks/calibration_grid.py [--runs K] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup, run_cell
from simapf.calibrate.grid import Simulator, default_jobs
from simapf.calibrate.metrics import summarise
from simapf.server.params import ServerParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    rows = load_rows()
    grid = cells(rows)
    params, setup = ServerParams(), ExperimentSetup()
    jobs = args.jobs or default_jobs()
    sim = Simulator(jobs)
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
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; workers: {jobs}")
    print(f"grid: {len(grid)} cells, {requests:,} simulated requests")
    print(f"wall seconds: best {min(walls):.1f}, median {sorted(walls)[len(walls) // 2]:.1f} (of {args.runs})")
    print(f"CPU seconds, one process: total {sum(cpu.values()):.1f}; costliest cell {max(cpu.values()):.1f}")
    print(f"fit figures: memory median {s.memory_median:.1%}, worst {s.memory_max:.1%}; CPU median {s.cpu_median:.1%}")


if __name__ == "__main__":
    main()
