"""`simapf replay` against what kube-apiserver's own queueset did with the same traces.

tests/data/apf/upstream holds, per case, a level, a trace and the output of k8s.io/apiserver
v0.37.2's queueset replaying that trace under the harness's clock (written by
`benchmarks/replay_upstream.py --write-reference`, which needs Go). Every request must be
decided the same way at the same nanosecond: dispatched or rejected, for the same reason,
from the same queue, with the same dispatch, release and wait times.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from simapf.apf.replay import load_level, load_trace, replay, write_output

UPSTREAM = Path(__file__).resolve().parents[1] / "data" / "apf" / "upstream"
CASES = sorted(p.name.removesuffix(".upstream.csv") for p in UPSTREAM.glob("*.upstream.csv"))


def test_the_reference_covers_every_way_upstream_rejects():
    reasons = set()
    for case in CASES:
        with open(UPSTREAM / f"{case}.upstream.csv", newline="") as handle:
            reasons |= {row["rejected_reason"] for row in csv.DictReader(handle)}
    assert reasons == {"", "queue-full", "time-out", "concurrency-limit"}


@pytest.mark.parametrize("case", CASES)
def test_replay_decides_every_request_as_upstream(case: str, tmp_path: Path):
    trace = load_trace(UPSTREAM / f"{case}.trace.csv")
    replay(load_level(UPSTREAM / f"{case}.level.json"), trace)
    write_output(tmp_path / "out.csv", trace)
    with open(tmp_path / "out.csv", newline="") as a, open(UPSTREAM / f"{case}.upstream.csv", newline="") as b:
        ours, theirs = list(csv.DictReader(a)), list(csv.DictReader(b))
    assert len(ours) == len(theirs) > 1000
    for mine, upstream in zip(ours, theirs):
        if mine["rejected_reason"] == "queue-full":
            # upstream returns no request for it, so its output cannot name the queue it was
            # dealt to; simapf's does
            mine = {**mine, "queue": upstream["queue"]}
        assert mine == upstream, mine["id"]


TIED = [case for case in CASES if case.startswith("tied-")]


@pytest.mark.parametrize("case", TIED)
def test_tied_cases_tie_every_kind_of_event(case: str):
    """A tied case is worth its name only if its upstream output has instants where finishes,
    ends of additional latency, wait limits and arrivals coincide with one another."""
    with open(UPSTREAM / f"{case}.trace.csv", newline="") as handle:
        trace = list(csv.DictReader(handle))
    with open(UPSTREAM / f"{case}.upstream.csv", newline="") as handle:
        out = list(csv.DictReader(handle))
    arrivals = [row["arrival_s"] for row in out]
    assert len(arrivals) - len(set(arrivals)) > len(arrivals) // 4  # many arrivals share an instant
    handler_ends, releases = set(), set()
    for row, req in zip(out, trace):
        if row["dispatched"] == "true":
            lingering = float(req["additional_latency_s"]) > 0
            (releases if lingering else handler_ends).add(row["finish_s"])
    arrivals_at = set(arrivals)
    assert len(handler_ends & arrivals_at) > 100  # handlers return as others arrive
    assert len(releases & handler_ends) > 10  # seats linger out as handlers return
    if any(row["rejected_reason"] == "time-out" for row in out):
        deadlines = {f"{float(row['arrival_s']) + float(row['wait_s']):.9f}" for row in out
                     if row["rejected_reason"] == "time-out"}  # fmt: skip
        assert len(deadlines & handler_ends) > 10  # wait limits fall as handlers return


@pytest.mark.slow
def test_the_references_are_what_upstream_writes_now(tmp_path: Path):
    """Build upstream's queueset with the harness and write every reference case again: the
    committed outputs must be what upstream's code gives (so a change to the harness, or to the
    pinned release, cannot leave stale references behind)."""
    import shutil
    import subprocess
    import sys

    if shutil.which("go") is None:
        pytest.skip("needs Go on PATH to build upstream's queueset")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_upstream.py"
    done = subprocess.run([sys.executable, str(script), "--write-reference", str(tmp_path)],
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for case in CASES:
        for suffix in ("level.json", "trace.csv", "upstream.csv"):
            name = f"{case}.{suffix}"
            assert (tmp_path / name).read_bytes() == (UPSTREAM / name).read_bytes(), name
