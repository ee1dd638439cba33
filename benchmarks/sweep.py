"""Benchmark: a 32-run sweep with 1 worker and with all workers, and the Dask path's overhead.

The sweep: the base scenario of sweeps/policies-size-qps.yaml (60 simulated seconds: a LIST
client, controllers writing, readers GETting) with 2 policies x 2 response sizes x 2 LIST rates x
2 serving paths x 2 replications = 32 runs, timed as `simapf.sweep` runs it, writing the Parquet
dataset, best of --repeat:

  1 worker      joblib with one worker: in this process, one run after the other
  all workers   joblib (loky) with every core, worker start-up included
  Dask          a local Dask cluster of as many worker processes (started beforehand; its
                start-up is reported apart)

Per-run overhead of the Dask path: the same 32 runs cut to 1 simulated second (a few ms each),
on a one-worker Dask cluster and in-process; the difference per run is what the path adds
(scheduling, shipping the task and its row, loading the scenario on the worker). Every
backend's table is checked to be identical.

    python benchmarks/sweep.py [--workers N] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

import simapf
from simapf.sweeps.backends import cpu_count

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parents[1]


def sweep_definition(duration_s: float | None = None) -> dict:
    shipped = yaml.safe_load((ROOT / "sweeps" / "policies-size-qps.yaml").read_text())
    base = shipped["base"]
    if duration_s is not None:
        base = {**base, "run": {**base["run"], "duration_s": duration_s}}
    return {
        "name": "bench-32",
        "base": base,
        "factors": {
            "apf.estimator.list_policy": ["upstream", "etcd-uncapped"],
            "resources.widgets.object_size.mean_bytes": ["20Ki", "100Ki"],
            "clients.listers.rate_per_s": [4, 16],
            "kubernetes.feature_gates.ConsistentListFromCache": [True, False],
        },
        "replications": 2,
        "seed": 1,
    }


def timed(label: str, repeat: int, duration_s: float | None = None, **kwargs) -> tuple[pd.DataFrame, float]:
    """Best wall time of `repeat` sweeps, each into a fresh directory."""
    best = None
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            df = simapf.sweep(sweep_definition(duration_s), Path(out) / "results", **kwargs)
            wall = time.perf_counter() - start
        best = wall if best is None else min(best, wall)
    print(f"  {label:<36} best {best:7.2f} s", flush=True)
    return df, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=cpu_count(), help="'all workers' (default: every core)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the best counts")
    args = parser.parse_args()
    n, k = args.workers, args.repeat
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"32 runs; all workers = {n}; best of {k}")

    from distributed import LocalCluster

    one, wall_one = timed("joblib, 1 worker", k, backend="joblib", workers=1)
    many, wall_many = timed(f"joblib, {n} workers", k, backend="joblib", workers=n)
    start = time.perf_counter()
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        cluster_s = time.perf_counter() - start
        dask_df, wall_dask = timed(f"Dask, {n} workers", k, dask=cluster.scheduler_address)
    print(f"  {'(Dask cluster start-up)':<36}      {cluster_s:7.2f} s")

    tiny_serial, wall_tiny_serial = timed("1-second runs, in-process", k, duration_s=1, backend="serial")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        tiny_dask, wall_tiny_dask = timed("1-second runs, Dask, 1 worker", k, duration_s=1, dask=cluster.scheduler_address)

    base = one.drop(columns="wall_s")
    for other in (many, dask_df):
        pd.testing.assert_frame_equal(base, other.drop(columns="wall_s"))
    pd.testing.assert_frame_equal(tiny_serial.drop(columns="wall_s"), tiny_dask.drop(columns="wall_s"))
    print("  tables identical across backends: yes")
    print()
    print("| backend | workers | wall time, 32 runs | speed-up |")
    print("|---|---:|---:|---:|")
    print(f"| joblib | 1 | {wall_one:.1f} s | 1.00 |")
    print(f"| joblib (loky) | {n} | {wall_many:.1f} s | {wall_one / wall_many:.2f} |")
    print(f"| Dask, local cluster | {n} | {wall_dask:.1f} s | {wall_one / wall_dask:.2f} |")
    overhead_ms = (wall_tiny_dask - wall_tiny_serial) / len(tiny_serial) * 1000
    print(f"\nmean run {one['wall_s'].mean():.2f} s in-process; Dask cluster start-up {cluster_s:.1f} s; "
          f"Dask per-run overhead {overhead_ms:.0f} ms ({wall_tiny_dask:.2f} s vs {wall_tiny_serial:.2f} s in-process "
          "for 32 one-second runs)")  # fmt: skip


if __name__ == "__main__":
    main()
