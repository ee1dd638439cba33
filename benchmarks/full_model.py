"""Benchmark: the full simulated apiserver (APF + resource model) under a steady LIST stream.

60 simulated seconds of 2 400 LIST/s of 100 KB (10 objects, evenly paced) into global-default of
an apiserver with 16 cores and server concurrency 800, through the client, classification,
work estimation, fair queuing, etcd or the watch cache, memory, the Go GC and CPU under
processor sharing: a measured cell's scenario (`simapf.calibrate.scenario`) at 1 seat, run as
the calibration runs it (observed lean). Reports simulated requests per wall second, best of
several runs.

    python benchmarks/full_model.py [--runs K] [--path cache|etcd] [--qps Q]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from simapf.calibrate.data import Cell, Row
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.scenario import scenario_for
from simapf.simulation.runner import run_lean
from simapf.scenario import load_scenario
from simapf.server.params import ServerParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--path", choices=["cache", "etcd"], default="cache")
    parser.add_argument("--qps", type=float, default=2400.0, help="LISTs a second (default 2400)")
    args = parser.parse_args()
    row = Row(index=0, source=args.path, response_bytes=100_000, object_count=10, qps=args.qps, load="max",
              cpu_percent=0.0, mem_mb=((1, None),))  # fmt: skip
    setup = ExperimentSetup(warmup_s=10, window_s=50, warmup_requests=None, window_requests=None, ramp_s=0)
    loaded = load_scenario(scenario_for(Cell(row, 1), ServerParams(), setup))
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})  # one core
    best = None
    for _ in range(args.runs):
        start = time.perf_counter()
        result = run_lean(loaded)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    peak = max(r.rss_bytes for r in result.scrapes)
    a, b = result.scrapes[0], result.scrapes[-1]
    cores = (b.cpu_seconds_total - a.cpu_seconds_total) / (b.t_s - a.t_s)
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"path {args.path}: {result.due_total} requests ({result.ok_total} ok, {result.rejected_total} rejected), "
          f"peak RSS {peak / 1e6:.0f} MB, CPU {cores:.2f} cores")
    print(f"wall seconds: best {best:.2f}; simulated requests per wall second: {result.due_total / best:,.0f}")


if __name__ == "__main__":
    main()
