"""Runs whose results must not move when the engine changes: a fixed set of scenarios' summaries,
compared with stored values byte for byte (their JSON). An engine change that is meant to leave
results alone (speed, structure) must pass this; a change of the model itself regenerates the
stored files on purpose (`python tests/simulation/test_golden_runs.py`) and says so in its commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import simapf
from simapf.schema.summary import validate

ROOT = Path(__file__).resolve().parents[2]
STORED = Path(__file__).resolve().parents[1] / "data" / "golden"

# (name, scenario file or None for the built-in default, overrides): together they pass through
# etcd and the watch cache, streamed and whole encoding, informers, relists, WatchList, writers,
# kubectl discovery with its token bucket, a process restart, OOM kills and client links.
RUNS = [
    ("list-experiment-etcd", "scenarios/list-experiment.yaml", {"run.duration_s": 8}),
    ("list-experiment-cache-whole", "scenarios/list-experiment.yaml", {
        "run.duration_s": 8, "clients.lister.request.options.resource_version": "0",
        "kubernetes.feature_gates.StreamingCollectionEncodingToJSON": False}),
    ("relist-storm-oom", "scenarios/relist-storm.yaml", {
        "run.duration_s": 300, "apiserver.memory_limit_bytes": "2200Mi",
        "kubernetes.feature_gates.StreamingCollectionEncodingToJSON": False}),
    ("relist-storm-watchlist", "scenarios/relist-storm.yaml", {
        "run.duration_s": 300, "kubernetes.feature_gates.WatchListClient": True}),
    ("mixed-cluster", "scenarios/mixed-cluster.yaml", {"run.duration_s": 200}),
    ("kubectl-discovery", "scenarios/kubectl-discovery.yaml", {"run.duration_s": 20}),
]


def summary_text(scenario: str | None, overrides: dict) -> str:
    """The run's summary as stable JSON: everything but how long it took and which build ran it."""
    loaded = simapf.load_scenario(ROOT / scenario if scenario else None, overrides)
    summary = dict(simapf.run(loaded).summary)
    validate(summary)  # the summary model's schema holds for every golden run
    for volatile in ("wall_s", "simapf_version", "source"):
        summary.pop(volatile, None)
    summary["provenance"] = {k: v for k, v in summary["provenance"].items()
                             if k not in ("simapf_version", "git_commit", "git_dirty")}  # fmt: skip
    return json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n"


@pytest.mark.parametrize("name, scenario, overrides", RUNS, ids=[r[0] for r in RUNS])
def test_summary_is_unchanged(name, scenario, overrides):
    stored = (STORED / f"{name}.json").read_text()
    assert summary_text(scenario, overrides) == stored


if __name__ == "__main__":  # regenerate the stored summaries
    STORED.mkdir(parents=True, exist_ok=True)
    for name, scenario, overrides in RUNS:
        (STORED / f"{name}.json").write_text(summary_text(scenario, overrides))
        print("wrote", name, file=sys.stderr)
