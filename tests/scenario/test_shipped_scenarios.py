"""The scenarios shipped in scenarios/: each loads, runs, explains itself, and means what it says."""

import shlex
from pathlib import Path

import pytest
import yaml

from simapf.simulation.runner import run
from simapf.scenario import load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
SHORT_S = 10  # simulated seconds: every scenario is under way by then, and the fast suite stays fast


def _ids(paths):
    return [p.stem for p in paths]


def _short(path: Path) -> dict:
    """Overrides that make a scenario run SHORT_S simulated seconds, its events moved inside."""
    data = yaml.safe_load(path.read_text())
    over = {"run.duration_s": SHORT_S}
    for k, _event in enumerate(data.get("events") or []):
        over[f"events.{k}.at_s"] = SHORT_S / 2
    return over


def _header(path: Path) -> list[str]:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:])
    return lines


def test_there_are_shipped_scenarios():
    names = {p.name for p in SCENARIOS}
    assert {"list-experiment.yaml", "relist-storm.yaml", "kubectl-discovery.yaml", "mixed-cluster.yaml"} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=_ids(SCENARIOS))
def test_loads(path):
    sc = load_scenario(path).scenario
    assert sc.name == path.stem
    assert sc.description.strip()
    assert sc.clients and sc.resources


@pytest.mark.parametrize("path", SCENARIOS, ids=_ids(SCENARIOS))
def test_header_says_what_it_shows_how_to_vary_it_and_its_wall_time(path):
    header = "\n".join(_header(path))
    assert len(_header(path)) >= 5, "a header comment says what the scenario shows"
    assert "--set" in header
    assert "Wall time" in header


@pytest.mark.parametrize("path", SCENARIOS, ids=_ids(SCENARIOS))
def test_every_set_in_the_header_is_valid(path):
    # The header's --set examples are what users copy: each must name a real field.
    overrides = []
    for line in _header(path):
        if "--set" not in line:
            continue
        words = shlex.split(line[line.index("--set"):].rstrip().rstrip("\\"), comments=True)
        overrides += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--set"]
    assert overrides
    for o in overrides:
        load_scenario(path, [o])


@pytest.mark.parametrize("path", SCENARIOS, ids=_ids(SCENARIOS))
def test_runs_short_and_produces_series_and_summary(path):
    result = run(load_scenario(path, _short(path)))
    assert not result.series.empty
    assert result.series["time_s"].max() == SHORT_S
    assert result.metric("process_resident_memory_bytes").max() > 0
    s = result.summary
    assert s["duration_s"] == SHORT_S
    assert s["requests"]["total"] > 0
    assert s["memory"]["peak_rss_bytes"] > 0
    assert len(s["clients"]) == len(load_scenario(path).scenario.clients)


def test_list_experiment_lists_land_in_global_default_with_the_seats_asked_for():
    path = next(p for p in SCENARIOS if p.stem == "list-experiment")
    over = {"run.duration_s": 5, "run.request_records": True, "apf.estimator.list_params.seats": 10}
    records = run(load_scenario(path, over)).requests
    assert set(records["priority_level"]) == {"global-default"}
    assert set(records["verb"]) == {"list"}
    assert set(records["seats"]) == {10}


def _who(user: str) -> str:
    if user.startswith("system:node:"):
        return "kubelet"
    if user.startswith("system:serviceaccount:operators:"):
        return "operator"
    if user.startswith("user-"):
        return "developer"
    return user


def test_mixed_cluster_identities_are_classified_as_upstream_does():
    path = next(p for p in SCENARIOS if p.stem == "mixed-cluster")
    # 60 s: every client has started (they start over the first minute).
    over = {"run.duration_s": 60, "run.request_records": True, "events": []}
    records = run(load_scenario(path, over)).requests
    records["who"] = records["user"].map(_who)
    levels = records.groupby(["who", "resource"])["priority_level"].agg(lambda x: set(x)).to_dict()
    assert levels[("kubelet", "leases")] == {"node-high"}  # FlowSchema system-node-high
    assert levels[("kubelet", "nodes")] == {"node-high"}
    assert levels[("kubelet", "pods")] == {"system"}  # system-nodes: the rest
    for resource in ("pods", "nodes", "endpointslices"):
        assert levels[("system:kube-controller-manager", resource)] == {"workload-high"}
    assert levels[("system:kube-scheduler", "pods")] == {"workload-high"}
    assert levels[("operator", "widgets")] == {"workload-low"}  # service-accounts
    assert levels[("developer", "pods")] == {"global-default"}
