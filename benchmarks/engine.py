"""simapf's requests per wall second against a textbook SimPy queue, in one process.

    .venv/bin/python benchmarks/engine.py [--runs 3] [--customers 200000]

The yardstick is the bare M/M/16 queue every SimPy tutorial writes: a process per customer
that requests a `simpy.Resource` of 16 servers, holds it for an exponential service time and
leaves, with Poisson arrivals at 90 % of capacity. Against it, `simapf.run` of the shipped LIST
experiment (`scenarios/list-experiment.yaml`: ~108,000 LISTs through classification, fair
queuing, etcd or the watch cache, memory, the Go GC and processor sharing, and the client).
Both run in this process, alternately, best of `--runs`; the ratio is what machines do not
change much. simapf runs compiled when its compiled core is built (`simapf compile`), else pure
Python; the first line printed says which. docs/benchmarks.md records the figures and the machine.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from pathlib import Path

import numpy as np
import simpy

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parents[1]


def mm16(customers: int, seed: int = 1) -> float:
    """Wall seconds to simulate `customers` through a bare SimPy M/M/16 queue."""
    rng = np.random.default_rng(seed)
    servers, mean_service = 16, 1.0
    rate = 0.9 * servers / mean_service
    gaps = rng.exponential(1.0 / rate, customers).tolist()
    services = rng.exponential(mean_service, customers).tolist()
    env = simpy.Environment()
    counter = simpy.Resource(env, capacity=servers)

    def customer(service: float):
        with counter.request() as req:
            yield req
            yield env.timeout(service)

    def source():
        for gap, service in zip(gaps, services):
            yield env.timeout(gap)
            env.process(customer(service))

    env.process(source())
    started = time.perf_counter()
    env.run()
    return time.perf_counter() - started


def list_experiment() -> tuple[float, int]:
    """Wall seconds of `simapf.run` on the shipped LIST experiment, and its requests."""
    import simapf

    loaded = simapf.load_scenario(ROOT / "scenarios" / "list-experiment.yaml")
    started = time.perf_counter()
    result = simapf.run(loaded)
    wall = time.perf_counter() - started
    return wall, result.typed.requests.total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--customers", type=int, default=200_000)
    args = ap.parse_args()
    bare, ours, requests = [], [], 0
    for _ in range(args.runs):
        gc.collect()
        bare.append(args.customers / mm16(args.customers))
        gc.collect()
        wall, requests = list_experiment()
        ours.append(requests / wall)
    from simapf.compiled_core import compiled

    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"simapf's core: {compiled()}")
    print(f"bare SimPy M/M/16: {max(bare):,.0f} customers per wall second (best of {args.runs})")
    print(f"simapf, LIST experiment ({requests:,} requests): {max(ours):,.0f} requests per wall second")
    print(f"ratio: {max(ours) / max(bare):.3f}")


if __name__ == "__main__":
    main()
