"""`simapf replay` against what kube-apiserver's own queueset did with the same traces.

tests/data/apf/upstream holds, per case, a level, a trace and the output of k8s.io/apiserver
v0.37.2's queueset replaying that trace under its test clock (written by
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
