"""Benchmark: how long the real bench takes here, as a new user meets it.

1. The binaries built from nothing: a bench cache, a Go build cache and (with `--fresh-modules`)
   a Go module cache of their own, all empty, so every module is downloaded from the proxy and
   every package compiled, as on a new machine.
2. The same build again with the Go caches warm and the bench cache empty (another release's
   first build shares most of its packages).
3. One cell, `simapf measure scenarios/bench/smoke.yaml`, whole command, `--runs` times.

Needs Go, the module proxy and root; docs/benchmarks.md ("The real bench") records the figures.

    python benchmarks/real_bench.py [--fresh-modules] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh-modules", action="store_true", help="Download every module again (a new machine).")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    build = [sys.executable, "-c", "from simapf.bench import build; build.binaries()"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "SIMAPF_BENCH_DIR": str(work / "bench"), "GOCACHE": str(work / "go-build")}
        if args.fresh_modules:
            env["GOMODCACHE"] = str(work / "go-mod")
        cold = timed(build, env)
        env["SIMAPF_BENCH_DIR"] = str(work / "bench-again")
        warm = timed(build, env)
        cell = [sys.executable, "-m", "simapf.cli", "measure", "scenarios/bench/smoke.yaml", "--no-progress"]
        cells = [timed(cell, env) for _ in range(args.runs)]
        if args.fresh_modules:  # the module cache is read-only, as Go makes it
            subprocess.run(["chmod", "-R", "u+w", str(work / "go-mod")], check=False)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")  # fmt: skip
    print(f"build from empty caches{' (modules downloaded)' if args.fresh_modules else ''}: {cold:.0f} s")
    print(f"build again, Go's caches warm: {warm:.0f} s")
    print(f"one smoke cell, whole command: best {min(cells):.1f} s, median {sorted(cells)[len(cells) // 2]:.1f} s")


if __name__ == "__main__":
    main()
