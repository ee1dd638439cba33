"""Benchmark: the shipped policy search, `sweeps/optimize-relist-storm.yaml`, from scratch.

Its 60 trials (each the relist storm streamed and encoded whole, with two seeds) and the six
shipped policies it compares with, on this machine's cores, as `simapf optimize` runs them:
joblib with every core by default, or a local Dask cluster (`--backend dask`, its start-up
included). Prints the trials by state, the runs done and the wall time.

    python benchmarks/optimize.py [--backend joblib|dask] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import simapf
from simapf.sweeps.backends import cpu_count

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="joblib", choices=["joblib", "dask"])
    ap.add_argument("--workers", type=int, default=cpu_count())
    args = ap.parse_args()
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = simapf.optimize("sweeps/optimize-relist-storm.yaml", Path(tmp) / "search", backend=args.backend,
                                 workers=args.workers)  # fmt: skip
        wall = time.perf_counter() - started
    states = result.trials["state"].value_counts().to_dict()
    print(f"{platform.processor() or platform.machine()}, {cpu_count()} cores, Python {platform.python_version()}")
    print(f"backend: {result.backend}")
    print(f"trials: {len(result.trials)} ({states})")
    print(f"runs: {result.runs_ran} (trials' and the compared policies'), {result.runs_ran / wall:.2f} per wall s")
    print(f"wall: {wall:.0f} s")
    print(f"best: trial {result.best['trial']}, {result.metric} {result.best['objective']:.2f}" if result.best else "best: none")


if __name__ == "__main__":
    main()
