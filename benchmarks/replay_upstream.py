"""Benchmark: `simapf replay` against kube-apiserver's own queueset, on the same trace.

The trace and level are `replay_trace.py`'s. Upstream's side is k8s.io/apiserver's
`fairqueuing/queueset` package (UPSTREAM_VERSION), built with the harness in
`upstream_queueset/replay_test.go` into one Go test binary that reads the same level and
trace and writes the same output; it runs the queueset with the package's own counting
promises, as upstream's tests do (the only way to run it off the wall clock), under the
harness's clock, which runs events that tie one at a time (docs/apf-model.md, section 8). Both are timed whole
process, alternately, pinned to one core, best of `--runs`; then their outputs are compared
request by request.

`--write-reference DIR` writes instead the reference cases of `tests/apf/test_replay_upstream.py`
(REFERENCE_CASES: traces that also reach time-outs and a Reject level, and traces whose events
tie), each as its level, trace and upstream's output.

Needs Go and the Go module proxy (the first build downloads the module and its
dependencies, about a minute). docs/benchmarks.md records the figures.

    python benchmarks/replay_upstream.py [--requests N] [--runs K]
    python benchmarks/replay_upstream.py --write-reference tests/data/apf/upstream
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from replay_trace import LEVEL, generate_tied_trace, generate_trace

UPSTREAM_MODULE = "k8s.io/apiserver"
UPSTREAM_VERSION = "v0.37.2"
PACKAGE = "pkg/util/flowcontrol/fairqueuing/queueset"
HARNESS = Path(__file__).resolve().parent / "upstream_queueset" / "replay_test.go"

# name: (level, trace generator, its arguments). Overloaded levels, so that requests are
# rejected every way upstream rejects them: queue-full, time-out (a short wait limit) and
# concurrency-limit; and the same on a 10 ms grid, where arrivals, finishes, the ends of
# additional latency and wait limits tie.
REFERENCE_CASES = {
    "queued-timeouts": (
        {"name": "timeouts", "concurrencyLimit": 20, "queues": 16, "handSize": 4,
         "queueLengthLimit": 10, "requestWaitLimitSeconds": 0.25},
        generate_trace, {"n": 5000, "seed": 2, "rate": 1200, "flows": 12},
    ),
    "reject-level": (
        {"name": "reject", "concurrencyLimit": 10, "queues": 0},
        generate_trace, {"n": 3000, "seed": 3, "rate": 600, "flows": 5},
    ),
    "tied-grid": (
        {"name": "tied", "concurrencyLimit": 10, "queues": 16, "handSize": 4,
         "queueLengthLimit": 5, "requestWaitLimitSeconds": 1},
        generate_tied_trace, {"n": 5000, "seed": 1},
    ),
    "tied-timeouts": (
        {"name": "tied-timeouts", "concurrencyLimit": 6, "queues": 8, "handSize": 3,
         "queueLengthLimit": 20, "requestWaitLimitSeconds": 0.1},
        generate_tied_trace, {"n": 5000, "seed": 4, "rate": 500, "flows": 10},
    ),
    "tied-reject-level": (
        {"name": "tied-reject", "concurrencyLimit": 10, "queues": 0},
        # seats that linger for a whole step of the grid: a Reject level dispatches only as
        # requests arrive, so this is how its releases meet its handlers' returns
        generate_tied_trace, {"n": 3000, "seed": 5, "rate": 500, "flows": 6, "final_latency_s": 0.010},
    ),
}  # fmt: skip


def build_upstream(work: Path) -> Path:
    """The Go test binary of upstream's queueset package with the replay harness in it."""
    go = shutil.which("go")
    if go is None:
        sys.exit("replay_upstream: needs Go (https://go.dev/dl/) on PATH")
    found = subprocess.run(
        [go, "mod", "download", "-json", f"{UPSTREAM_MODULE}@{UPSTREAM_VERSION}"],
        check=True, capture_output=True, text=True, cwd=work,
    )  # fmt: skip
    module = work / "apiserver"
    # The module cache is read-only; the harness must sit in the package's own folder to
    # use its unexported test clock and promises, so build from a copy.
    shutil.copytree(json.loads(found.stdout)["Dir"], module)
    for path in [module, *module.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    shutil.copy(HARNESS, module / PACKAGE / "simapf_replay_test.go")
    binary = work / "queueset.test"
    subprocess.run([go, "test", "-c", "-o", str(binary), f"./{PACKAGE}"], check=True, cwd=module)
    return binary


def compare(simapf_out: Path, upstream_out: Path) -> tuple[int, int]:
    """(rows compared, rows that differ). A request rejected as queue-full names the queue it
    was dealt to in simapf's output; upstream returns no request then, so that field is not
    compared."""
    with open(simapf_out, newline="") as a, open(upstream_out, newline="") as b:
        ours, theirs = list(csv.reader(a)), list(csv.reader(b))
    if len(ours) != len(theirs) or ours[0] != theirs[0]:
        return max(len(ours), len(theirs)) - 1, max(len(ours), len(theirs)) - 1
    queue = ours[0].index("queue")
    differ = 0
    for x, y in zip(ours[1:], theirs[1:]):
        if x[2] == "false" and x[3] == "queue-full":
            x, y = x[:queue] + x[queue + 1:], y[:queue] + y[queue + 1:]
        differ += x != y
    return len(ours) - 1, differ


def run_upstream(binary: Path, level: Path, trace: Path, out: Path, pin: list[str]) -> None:
    env = {"SIMAPF_LEVEL": str(level), "SIMAPF_TRACE": str(trace), "SIMAPF_OUT": str(out),
           "PATH": "/usr/bin:/bin", "HOME": str(binary.parent)}  # fmt: skip
    subprocess.run(pin + [str(binary), "-test.run", "^TestSimapfReplay$"], check=True,
                   stdout=subprocess.DEVNULL, env=env)  # fmt: skip


def write_reference(binary: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, (level_doc, generate, trace_args) in REFERENCE_CASES.items():
        level, trace = folder / f"{name}.level.json", folder / f"{name}.trace.csv"
        level.write_text(json.dumps(level_doc, indent=1) + "\n")
        generate(trace, **trace_args)
        run_upstream(binary, level, trace, folder / f"{name}.upstream.csv", [])
        print(f"wrote {folder / name}.*")


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write-reference", type=Path, metavar="DIR")
    args = parser.parse_args()

    simapf = shutil.which("simapf", path=str(Path(sys.executable).parent)) or "simapf"
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        binary = build_upstream(work)
        if args.write_reference:
            write_reference(binary, args.write_reference)
            return
        trace, level = work / "trace.csv", work / "level.json"
        generate_trace(trace, args.requests)
        level.write_text(json.dumps(LEVEL))
        ours, theirs = work / "simapf.csv", work / "upstream.csv"
        simapf_cmd = pin + [simapf, "replay", "--level", str(level), "--trace", str(trace), "--out", str(ours)]
        simapf_times, upstream_times = [], []
        for _ in range(args.runs):  # alternately, so a slower spell of the machine hits both
            simapf_times.append(timed(lambda: subprocess.run(simapf_cmd, check=True, capture_output=True)))
            upstream_times.append(timed(lambda: run_upstream(binary, level, trace, theirs, pin)))
        compared, differ = compare(ours, theirs)
        dispatched = sum(1 for row in ours.read_text().splitlines()[1:] if row.split(",")[2] == "true")
    ours_best, theirs_best = min(simapf_times), min(upstream_times)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, Python {platform.python_version()}")
    print(f"requests: {args.requests}, dispatched: {dispatched}, rejected: {args.requests - dispatched}")
    print(f"outputs compared request by request: {compared}, differing: {differ}")
    print(f"simapf replay, wall s (whole process): best {ours_best:.3f}, "
          f"median {sorted(simapf_times)[len(simapf_times) // 2]:.3f}")
    print(f"upstream queueset {UPSTREAM_VERSION}, wall s (whole process): best {theirs_best:.3f}, "
          f"median {sorted(upstream_times)[len(upstream_times) // 2]:.3f}")
    print(f"simapf / upstream, requests per wall second: {theirs_best / ours_best:.2f}x")

if __name__ == "__main__":
    main()
