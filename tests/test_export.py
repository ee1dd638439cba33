"""`simapf export`: a run as OpenMetrics text (parsed back with prometheus-client's parser) and
as clusterloader2's PerfData JSON (checked against the shape CL2 writes)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import simapf
from simapf.cli import main

START = 1_767_225_600  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    result = simapf.run("scenarios/list-experiment.yaml", {"run.duration_s": 4})
    result.write(out)
    return out, result.summary


def test_openmetrics_parses_back_with_the_runs_counts(run_dir, tmp_path):
    out, summary = run_dir
    res = CliRunner().invoke(main, ["export", str(out), "--format", "openmetrics", "-o", str(tmp_path / "run.om"),
                                    "--start", str(START)])  # fmt: skip
    assert res.exit_code == 0, res.output
    text = (tmp_path / "run.om").read_text()
    assert text.rstrip().endswith("# EOF")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    requests = families["apiserver_request"]
    assert requests.type == "counter"
    last = {}
    for s in requests.samples:
        key = tuple(sorted(s.labels.items()))
        if key not in last or s.timestamp > last[key].timestamp:
            last[key] = s
    assert sum(s.value for s in last.values()) == summary["requests"]["by_outcome"]["ok"]
    rss = families["process_resident_memory_bytes"]
    assert rss.type == "gauge"
    times = sorted(float(s.timestamp.sec + s.timestamp.nsec / 1e9) for s in rss.samples)
    assert times[0] == START and times[-1] == START + 4
    assert max(s.value for s in rss.samples) == pytest.approx(summary["memory"]["peak_rss_bytes"])


def test_perfdata_has_cl2s_shape(run_dir, tmp_path):
    out, summary = run_dir
    res = CliRunner().invoke(main, ["export", str(out), "--format", "perfdata", "-o", str(tmp_path / "perf")])
    assert res.exit_code == 0, res.output
    api = json.loads((tmp_path / "perf" / "APIResponsiveness_simapf.json").read_text())
    usage = json.loads((tmp_path / "perf" / "ResourceUsageSummary_simapf.json").read_text())
    for doc in (api, usage):
        assert doc["version"] == "v1" and doc["dataItems"]
        for item in doc["dataItems"]:
            assert set(item) == {"data", "unit", "labels"}
            assert set(item["data"]) == {"Perc50", "Perc90", "Perc99"}
            assert item["data"]["Perc50"] <= item["data"]["Perc90"] <= item["data"]["Perc99"]
            assert all(isinstance(v, str) for v in item["labels"].values())
    (lat,) = [i for i in api["dataItems"] if i["labels"]["Verb"] == "LIST"]
    row = summary["latency"][0]
    assert lat["unit"] == "ms" and lat["data"]["Perc99"] == pytest.approx(row["p99_s"] * 1e3)
    assert lat["labels"]["Count"] == str(row["count"])


def test_export_of_a_directory_that_is_not_a_run_is_one_line(tmp_path):
    res = CliRunner().invoke(main, ["export", str(tmp_path), "--format", "openmetrics", "-o", str(tmp_path / "x")])
    assert res.exit_code == 2 and "no series.parquet here" in res.output and not (tmp_path / "x").exists()
