"""Peak memory of one long run: does anything grow with the number of requests?

    .venv/bin/python benchmarks/long_run.py --requests 10000000

Runs the shipped LIST experiment (`scenarios/list-experiment.yaml`, ~1,800 LISTs a simulated
second) long enough for `--requests` requests, scraping every 10 simulated seconds (the series
grow with simulated time, not with requests), and prints the process's peak RSS before and
after, and the wall time. docs/benchmarks.md records the figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parents[1]
RATE_PER_S = 1800.0  # the scenario's LISTs per simulated second


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    args = ap.parse_args()
    import simapf

    duration = args.requests / RATE_PER_S
    loaded = simapf.load_scenario(ROOT / "scenarios" / "list-experiment.yaml",
                                  {"run.duration_s": duration, "run.scrape_interval_s": 10})  # fmt: skip
    before = peak_rss_mb()
    started = time.perf_counter()
    result = simapf.run(loaded)
    wall = time.perf_counter() - started
    total = result.typed.requests.total
    print(f"{total:,} requests in {duration:,.0f} simulated s, {wall:,.1f} wall s "
          f"({total / wall:,.0f} a wall second)")  # fmt: skip
    print(f"peak RSS of the process: {before:,.0f} MB after loading, {peak_rss_mb():,.0f} MB at the end")


if __name__ == "__main__":
    main()
