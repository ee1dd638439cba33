"""`simapf import`: the shipped example artefacts (examples/cluster/, in the formats kubectl
prints) become a scenario that loads, says where its numbers came from, and runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import simapf
from simapf.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cluster"
SCRAPED_AT = 1763716400  # a day after the example's process_start_time_seconds


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("import") / "cluster.yaml"
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(out), "--scraped-at", str(SCRAPED_AT)])
    assert res.exit_code == 0, res.output
    return out


def test_the_scenario_holds_the_clusters_objects_rates_and_apf(imported):
    loaded = simapf.load_scenario(imported)
    sc = loaded.scenario
    counts = {(r.group, r.name): r.count for r in sc.resources}
    assert counts[("", "pods")] == 6000 and counts[("example.com", "widgets")] == 5000
    sizes = {r.name: r.object_size.mean_bytes for r in sc.resources}
    assert sizes["pods"] == 12000 and sizes["events"] == 4096  # mean GET size; no GET: the default
    clients = {c.name: c for c in sc.clients}
    assert clients["get-pods-resource"].rate_per_s == pytest.approx(30)  # 2,592,000 GETs in a day
    assert clients["list-pods-cluster"].rate_per_s == pytest.approx(0.5)
    writes = clients["write-pods"]
    assert writes.rate_per_s == pytest.approx(20.4) and writes.mix == pytest.approx({"create": 0.2 / 20.4,
                                                                                     "delete": 0.2 / 20.4,
                                                                                     "patch": 20 / 20.4}, rel=0.01)  # fmt: skip
    assert clients["watch-configmaps"].count == 400
    assert sc.apf.config == "cluster.apf.yaml" and (imported.parent / "cluster.apf.yaml").is_file()
    from simapf.scenario.load import apf_objects

    levels = {pl.name for pl in apf_objects(sc.apf.config, {}, loaded.base_dir, "apf").priority_levels}
    assert "batch" in levels  # the cluster's own priority level came along
    text = imported.read_text()
    assert 'count: apiserver_storage_objects{resource="pods"}' in text and "uptime 86,400 s" in text


def test_the_imported_scenario_runs(imported):
    result = simapf.run(imported, {"run.duration_s": 10})
    assert result.summary["requests"]["by_outcome"]["ok"] > 1000


def test_without_a_time_the_counters_cannot_be_rates(tmp_path):
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(tmp_path / "x.yaml")])
    assert res.exit_code == 2 and "--uptime-s" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []
    res = CliRunner().invoke(main, ["import", str(tmp_path), "-o", str(tmp_path / "x.yaml"), "--uptime-s", "60"])
    assert res.exit_code == 2 and "no apf.yaml here" in res.stderr


def test_an_existing_scenario_file_is_not_replaced(imported):
    before = imported.read_text()
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(imported), "--uptime-s", "60"])
    assert res.exit_code == 2 and "exists" in res.stderr and "--force" in res.stderr
    assert imported.read_text() == before
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(imported), "--uptime-s", "60", "--force"])
    assert res.exit_code == 0 and "uptime 60 s" in imported.read_text()
