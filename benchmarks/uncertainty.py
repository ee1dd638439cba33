"""Benchmark: what trust costs, `simapf run SCENARIO --uncertainty N` against the point run.

Both as a user runs them, each a whole `simapf run` process (its start-up, the point run, the
draws on this machine's cores, the text it prints), with the result cache off, alternating one
of each, `--runs` times; prints each pair's wall and CPU seconds and the ratio of their walls.
simapf runs compiled when its compiled core is built (`simapf compile`), in the draws' workers
too; the first line says which. docs/benchmarks.md records the figures and the machine.

    python benchmarks/uncertainty.py [--scenario scenarios/relist-storm.yaml] [--draws 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from simapf import compiled_core
from simapf.sweeps.backends import cpu_count

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of it and its children) of one `simapf` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simapf.cli", *argv], check=True, stdout=subprocess.DEVNULL, cwd=ROOT,
                   env={**os.environ, "SIMAPF_NO_CACHE": "1"})  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/relist-storm.yaml")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    core = compiled_core.compiled()
    print(f"{platform.processor() or platform.machine()}, {cpu_count()} cores, Python {platform.python_version()}, "
          f"simapf's core: {core}")  # fmt: skip
    ratios = []
    for _ in range(args.runs):
        point_wall, point_cpu = timed(["run", args.scenario])
        wall, cpu = timed(["run", args.scenario, "--uncertainty", str(args.draws)])
        ratios.append(wall / point_wall)
        print(f"point run {point_wall:.2f} s ({point_cpu:.2f} CPU s); --uncertainty {args.draws} {wall:.2f} s "
              f"({cpu:.2f} CPU s): {ratios[-1]:.2f}x")  # fmt: skip
    print(f"ratio: median {statistics.median(ratios):.2f}x over {len(ratios)} pair(s)")


if __name__ == "__main__":
    main()
