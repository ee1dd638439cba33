"""Benchmark: `simapf run` as a user runs it, whole process, for the default and shipped scenarios.

Times `simapf run [SCENARIO] --out DIR --no-progress` (interpreter start-up, loading, the run,
writing Parquet, CSV, JSON and the figure), best of a few runs, and reports simulated seconds
and requests per wall second. The issue's target: the built-in default under a minute.

    python benchmarks/run_scenarios.py [--runs K] [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
SIMAPF = [sys.executable, "-m", "simapf.cli"]


def time_run(scenario: str | None, runs: int) -> tuple[float, dict]:
    best = None
    summary: dict = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            cmd = SIMAPF + ["run"] + ([scenario] if scenario else []) + ["--out", str(out), "--no-progress"]
            start = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
            elapsed = time.perf_counter() - start
            summary = json.loads((out / "summary.json").read_text())
        best = elapsed if best is None else min(best, elapsed)
    return best, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("scenarios", nargs="*", help="scenario files (default: the built-in default and scenarios/*.yaml)")
    args = parser.parse_args()
    scenarios = args.scenarios or [None] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").glob("*.yaml"))
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'scenario':<40} {'sim s':>7} {'requests':>10} {'wall s':>8} {'sim s/wall s':>13} {'req/wall s':>11}")
    for sc in scenarios:
        wall, s = time_run(sc, args.runs)
        requests = s["requests"]["total"]
        print(f"{sc or '(built-in default)':<40} {s['duration_s']:>7g} {requests:>10,} {wall:>8.2f} "
              f"{s['duration_s'] / wall:>13.1f} {requests / wall:>11,.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
