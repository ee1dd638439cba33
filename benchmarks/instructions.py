"""The engine benchmark counted in instructions and cache misses rather than wall seconds.

    .venv/bin/python benchmarks/instructions.py [--customers 100000]

`benchmarks/engine.py` compares simapf's requests per wall second on the shipped LIST
experiment with the bare SimPy M/M/16 queue's customers per wall second. That ratio moves with
the machine: the bare queue is a tight loop over a few objects, simapf's request touches far
more code and data, and machines differ in how much that costs. This script runs the same two
workloads under Valgrind's cachegrind, which counts every instruction the process executes and
simulates caches of fixed sizes (those of the AMD EPYC VM in docs/benchmarks.md), so its figures
hardly move between runs or x86-64 machines: instructions per request (per customer) and
first-level cache misses per request. Each workload runs in a child process twice, once whole
and once with everything but the run itself (imports, scenario, random draws); the difference
is the run's. It takes about five minutes (cachegrind runs Python some 50 times slower). Needs `valgrind` on the PATH (Debian:
`apt-get install valgrind`); docs/benchmarks.md records the figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import engine

# Cachegrind's events, as its output file names them: instructions, then the simulated caches'
# misses (I1/D1 first level, LL last level; r reads, w writes).
EVENTS = ("Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw")
# The simulated caches (size, associativity, line bytes), fixed rather than read off the host so
# that machines agree: the first levels of the VM in docs/benchmarks.md, and its 32 MiB L3.
CACHES = ("--I1=32768,8,64", "--D1=49152,12,64", "--LL=33554432,16,64")


def child(workload: str, units: int) -> None:
    """Run one workload in this process (under cachegrind, started by `counts`); the LIST
    experiment's whole run prints its request count."""
    if workload == "mm16":
        engine.mm16(units)
    elif units:
        _wall, requests = engine.list_experiment()
        print(requests)
    else:
        import simapf  # what list_experiment does before its run: imports and the scenario

        simapf.load_scenario(engine.ROOT / "scenarios" / "list-experiment.yaml")


def counts(workload: str, units: int, workdir: Path) -> tuple[dict[str, int], str]:
    """Cachegrind's totals for one child process running `workload`, and what it printed."""
    out = workdir / f"{workload}-{units}.cg"
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=yes", *CACHES, f"--cachegrind-out-file={out}",
        f"--log-file={out.with_suffix('.log')}",  # valgrind's own report; stderr is the child's
        sys.executable, __file__, "--child", workload, str(units),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONHASHSEED="0")  # the same dict layouts on every run
    run = subprocess.run(command, env=env, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"cachegrind's run of {workload} failed:\n{run.stderr[-2000:]}")
    events: list[str] = []
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            return dict(zip(events, map(int, line.split()[1:]))), run.stdout
    raise RuntimeError(f"no summary in cachegrind's output {out}")


def per_unit(workload: str, units: int, workdir: Path) -> tuple[dict[str, float], int]:
    """Each event's count per request (customer) of the run alone, and the run's units."""
    whole, printed = counts(workload, units, workdir)
    setup, _ = counts(workload, 0, workdir)
    if workload == "list":
        units = int(printed)  # the requests the instrumented run served
    return {e: (whole[e] - setup[e]) / units for e in EVENTS}, units


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--customers", type=int, default=100_000)
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "UNITS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        sys.exit("benchmarks/instructions.py needs valgrind on the PATH (Debian: apt-get install valgrind)")
    from simapf.compiled_core import compiled

    with tempfile.TemporaryDirectory(prefix="simapf-cachegrind-") as tmp:
        bare, _ = per_unit("mm16", args.customers, Path(tmp))
        ours, requests = per_unit("list", 1, Path(tmp))
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, simapf's core: {compiled()}, "
          f"cachegrind's simulated caches")  # fmt: skip
    rows = [
        ("instructions", "Ir"),
        ("first-level data cache misses", ("D1mr", "D1mw")),
        ("first-level instruction cache misses", "I1mr"),
    ]
    for label, keys in rows:
        keys = (keys,) if isinstance(keys, str) else keys
        b = sum(bare[k] for k in keys)
        o = sum(ours[k] for k in keys)
        print(f"{label}: bare SimPy M/M/16 {b:,.0f} per customer, simapf {o:,.0f} per request "
              f"({requests:,} requests); ratio {b / o:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
