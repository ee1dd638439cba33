"""Benchmark: replay a generated 100 000-request trace through one level, whole process.

The trace: Poisson arrivals at 1 500 req/s from 20 flows, exponential service with mean
20 ms, seats 80 % 1 / 12 % 2 / 8 % uniform 3-10, and 10 % of requests with final seats
(1-5 seats for 1-20 ms). The level: concurrency 50, 64 queues, hand 6, queue length limit
50, wait limit 15 s. We time `simapf replay` as a user runs it (start-up included), pinned
to one core, best of several runs.

    python benchmarks/replay_trace.py [--requests N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


LEVEL = {
    "name": "bench", "concurrencyLimit": 50, "queues": 64, "handSize": 6,
    "queueLengthLimit": 50, "requestWaitLimitSeconds": 15,
}  # fmt: skip


def generate_trace(path: Path, n: int, seed: int = 1, rate: float = 1500, flows: int = 20) -> None:
    """The benchmark's trace: `n` Poisson arrivals at `rate` a second from `flows` flows."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    flow = rng.integers(0, flows, n)
    service = rng.exponential(0.020, n)
    u = rng.random(n)
    seats = np.where(u < 0.80, 1, np.where(u < 0.92, 2, rng.integers(3, 11, n)))
    has_final = rng.random(n) < 0.10
    final = np.where(has_final, rng.integers(1, 6, n), 0)
    latency = np.where(has_final, rng.uniform(0.001, 0.020, n), 0.0)
    with open(path, "w") as out:
        out.write("id,arrival_s,flow,initial_seats,final_seats,additional_latency_s,service_s\n")
        for i in range(n):
            out.write(
                f"r{i},{arrivals[i]:.9f},global-default/user-{flow[i]},{seats[i]},"
                f"{final[i]},{latency[i]:.9f},{service[i]:.9f}\n"
            )


def generate_tied_trace(path: Path, n: int, seed: int = 1, rate: float = 400, flows: int = 8,
                        grid_s: float = 0.010, final_latency_s: float = 0.005) -> None:
    """A trace whose events tie: Poisson arrivals at `rate` a second from `flows` flows rounded to
    a `grid_s` grid, service times with a 20 ms mean rounded up to it (at least one step), 8 % of
    requests 3 to 10 seats wide, and one in ten with 1 to 5 final seats for `final_latency_s`. Arrivals share
    instants, and handlers return, additional latencies end and wait limits fall on the same
    instants as arrivals and one another."""
    rng = np.random.default_rng(seed)
    arrivals = np.round(np.cumsum(rng.exponential(1 / rate, n)) / grid_s) * grid_s
    flow = rng.integers(0, flows, n)
    service = np.maximum(np.ceil(rng.exponential(0.020, n) / grid_s), 1) * grid_s
    seats = np.where(rng.random(n) < 0.08, rng.integers(3, 11, n), 1)
    has_final = rng.random(n) < 0.10
    final = np.where(has_final, rng.integers(1, 6, n), 0)
    latency = np.where(has_final, final_latency_s, 0.0)
    with open(path, "w") as out:
        out.write("id,arrival_s,flow,initial_seats,final_seats,additional_latency_s,service_s\n")
        for i in range(n):
            out.write(
                f"r{i},{arrivals[i]:.9f},global-default/user-{flow[i]},{seats[i]},"
                f"{final[i]},{latency[i]:.9f},{service[i]:.9f}\n"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    simapf = shutil.which("simapf", path=str(Path(sys.executable).parent)) or "simapf"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        trace = tmp_path / "trace.csv"
        level = tmp_path / "level.json"
        out = tmp_path / "out.csv"
        generate_trace(trace, args.requests)
        level.write_text(json.dumps(LEVEL))
        command = [simapf, "replay", "--level", str(level), "--trace", str(trace), "--out", str(out)]
        if shutil.which("taskset"):
            command = ["taskset", "-c", "0"] + command
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
        rows = out.read_text().splitlines()[1:]
        dispatched = sum(1 for r in rows if r.split(",")[2] == "true")
    best = min(times)
    print(f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print(f"requests: {args.requests}, dispatched: {dispatched}, rejected: {args.requests - dispatched}")
    print(f"wall seconds per run (whole process): best {best:.3f}, median {sorted(times)[len(times)//2]:.3f}")
    print(f"requests per wall second: {args.requests / best:,.0f}")


if __name__ == "__main__":
    main()
