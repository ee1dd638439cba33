"""`simapf export`: a run as OpenMetrics text (parsed back with prometheus-client's parser) and
as clusterloader2's PerfData JSON (checked against the shape CL2 writes)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner
from prometheus_client.openmetrics.parser import text_string_to_metric_families

import simapf
from simapf.cli import main
from simapf.outputs.rundir import write_run

START = 1_767_225_600  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    result = simapf.run("scenarios/list-experiment.yaml", {"run.duration_s": 4})
    write_run(result, out)
    return out, result.summary


def _export(out, tmp_path, *extra: str) -> str:
    """`simapf export --format openmetrics` of the run in `out`; the text it wrote."""
    res = CliRunner().invoke(main, ["export", str(out), "--format", "openmetrics", "-o", str(tmp_path / "run.om"), *extra])
    assert res.exit_code == 0, res.output
    return (tmp_path / "run.om").read_text()


def test_openmetrics_parses_back_with_the_runs_counts(run_dir, tmp_path):
    out, summary = run_dir
    text = _export(out, tmp_path, "--start", str(START))
    assert text.rstrip().endswith("# EOF")
    families = {f.name: f for f in text_string_to_metric_families(_without_histograms(text))}
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


def _without_histograms(text: str) -> str:
    """The exposition without its histogram families (parsed a point at a time: `_last_point`)."""
    kept, histogram = [], set()
    for line in text.splitlines():
        if line.startswith("# TYPE ") and line.endswith(" histogram"):
            histogram.add(line.split()[2])
        name = line.split()[2] if line.startswith(("# HELP ", "# TYPE ")) else line.split("{")[0].split(" ")[0]
        if not any(name == h or name.startswith(h + "_") for h in histogram):
            kept.append(line)
    return "\n".join(kept) + "\n"


def _last_point(text: str) -> str:
    """The exposition with only its last scrape's samples. prometheus-client's parser drops the
    buckets of a histogram's second and later timestamped points as duplicates (it remembers
    them per label set, not per timestamp), so a histogram is parsed one point at a time; the
    whole file is checked by promtool below when it is installed."""
    last = max(line.rsplit(" ", 1)[1] for line in text.splitlines() if line and not line.startswith("#"))
    return "\n".join(line for line in text.splitlines() if line.startswith("#") or line.endswith(" " + last)) + "\n"


def _last_histogram(family, **match) -> tuple[list[float], list[float], float]:
    """(bounds, cumulative counts, sum) of the last scrape of the histogram whose labels match."""
    t_last = max(s.timestamp for s in family.samples)
    buckets, total = [], None
    for s in family.samples:
        if s.timestamp != t_last or any(s.labels.get(k) != v for k, v in match.items()):
            continue
        if s.name.endswith("_bucket"):
            buckets.append((float(s.labels["le"]), s.value))
        elif s.name.endswith("_sum"):
            total = s.value
    buckets.sort()
    return [b for b, _ in buckets], [c for _, c in buckets], total


def test_histograms_have_upstreams_buckets_and_give_the_summarys_percentiles_within_a_bucket(run_dir, tmp_path):
    from simapf.simulation.histograms import APF_WAIT, REQUEST_DURATION, quantile

    out, summary = run_dir
    families = {f.name: f for f in text_string_to_metric_families(_last_point(_export(out, tmp_path)))}
    duration = families["apiserver_request_duration_seconds"]
    assert duration.type == "histogram"
    bounds, cumulative, total = _last_histogram(duration, verb="LIST", resource="configmaps", scope="cluster")
    assert bounds == [*map(float, REQUEST_DURATION.bounds), float("inf")]
    (row,) = [r for r in summary["latency"] if r["verb"] == "list"]
    assert cumulative[-1] == row["count"]  # every LIST of the run was answered 200 here
    assert row["p50_s"] * 0.5 < total / cumulative[-1] < row["max_s"]  # the mean, from _sum
    for q, key in ((0.5, "p50_s"), (0.9, "p90_s"), (0.99, "p99_s")):
        estimate, exact = quantile(q, bounds, cumulative), row[key]
        i = next(k for k, b in enumerate(bounds) if estimate <= b)
        lower = bounds[i - 1] if i else 0.0
        assert lower <= exact <= bounds[i], (q, estimate, exact)  # the same bucket
    wait = families["apiserver_flowcontrol_request_wait_duration_seconds"]
    labels = {tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")) for s in wait.samples}
    assert ("flow_schema", "global-default") in {x for key in labels for x in key}
    bounds, cumulative, _ = _last_histogram(wait, priority_level="global-default", execute="true")
    assert bounds == [*map(float, APF_WAIT.bounds), float("inf")] and cumulative[-1] == row["count"]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Prometheus) is not installed")
def test_promtool_loads_the_export_into_a_prometheus_tsdb(run_dir, tmp_path):
    out, summary = run_dir
    _export(out, tmp_path, "--start", str(START))
    proc = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(tmp_path / "run.om"),
                           str(tmp_path / "tsdb")], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert any((tmp_path / "tsdb").iterdir())
    (tmp_path / "tsdb" / "wal").mkdir(exist_ok=True)  # dump reads a WAL; the backfilled blocks have none
    dump = subprocess.run(["promtool", "tsdb", "dump", str(tmp_path / "tsdb"), "--match",
                           'apiserver_request_duration_seconds_count{verb="LIST"}'],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert dump.returncode == 0, dump.stderr
    last = max(dump.stdout.splitlines(), key=lambda line: int(line.rsplit(" ", 1)[1]))
    (row,) = [r for r in summary["latency"] if r["verb"] == "list"]
    assert float(last.split()[-2]) == row["count"]


def test_apf_counters_carry_the_flow_schema_label(run_dir, tmp_path):
    out, summary = run_dir
    families = {f.name: f for f in text_string_to_metric_families(_without_histograms(_export(out, tmp_path)))}
    dispatched = families["apiserver_flowcontrol_dispatched_requests"]
    assert {s.labels["flow_schema"] for s in dispatched.samples} == {"global-default"}
    assert {s.labels["priority_level"] for s in dispatched.samples} == {"global-default"}


def _metadata(text: str) -> dict[str, dict[str, str]]:
    """Per family of an OpenMetrics text, its HELP, TYPE and UNIT as written."""
    meta: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ", "# UNIT ")):
            _, key, name, *rest = line.split(" ", 3)
            meta.setdefault(name, {})[key] = rest[0] if rest else ""
    return meta


def test_every_family_has_the_type_unit_and_help_text_of_the_table(run_dir, tmp_path):
    from simapf.outputs.metric_help import FAMILIES, family_name

    out, _ = run_dir
    meta = _metadata(_export(out, tmp_path))
    by_family = {family_name(series, f): f for series, f in FAMILIES.items()}
    assert set(meta) <= set(by_family), set(meta) - set(by_family)
    for name, written in meta.items():
        family = by_family[name]
        assert written["HELP"] == family.help.replace("\\", "\\\\"), name
        assert written["TYPE"] == family.type, name
        assert written.get("UNIT", "") == family.unit, name
    assert "apiserver_request_duration_seconds" in meta and "process_resident_memory_bytes" in meta


def test_every_metric_a_run_records_is_in_the_table():
    """What simapf.simulation.observe and simapf.simulation.histograms can write, found in their source: a metric
    without a help text would reach the export with none."""
    import inspect

    from simapf.simulation import observe
    from simapf.simulation.histograms import SPECS
    from simapf.outputs.metric_help import FAMILIES

    recorded = set(re.findall(r'\badd\(t, "([a-z_:0-9]+)"', inspect.getsource(observe)))
    assert {"up", "apiserver_request_total", "simapf_client_connections"} <= recorded  # the search finds them
    missing = (recorded | {s.name for s in SPECS}) - set(FAMILIES)
    assert not missing, missing


def test_the_tables_units_and_help_texts_follow_their_sources():
    from simapf.outputs.metric_help import FAMILIES, family_name

    for series, family in FAMILIES.items():
        assert family.type in ("counter", "gauge", "histogram", "summary", "unknown"), series
        if family.type == "counter":
            assert series.endswith("_total"), series
        if family.unit:  # OpenMetrics: a family's name ends with its unit
            assert family_name(series, family).endswith("_" + family.unit), series
        ours = series.startswith("simapf_") or series == "up"
        assert family.help.startswith("simapf: ") == ours, series
        kubernetes = series.startswith(("apiserver_", "aggregator_"))
        assert re.match(r"\[(ALPHA|BETA|STABLE)\] ", family.help) or not kubernetes, series


def test_the_metadata_the_docs_quote_is_the_tables():
    from pathlib import Path

    from simapf.outputs.metric_help import FAMILIES, family_name

    quoted = _metadata((Path(__file__).resolve().parents[2] / "docs" / "tutorial.md").read_text())
    assert quoted
    by_family = {family_name(series, f): f for series, f in FAMILIES.items()}
    for name, meta in quoted.items():
        family = by_family[name]
        assert meta.get("HELP", family.help) == family.help and meta.get("TYPE", family.type) == family.type, name
        assert meta.get("UNIT", family.unit) == family.unit, name


@pytest.mark.parametrize("fmt, unreadable", [("openmetrics", "series.parquet"), ("perfdata", "latency.csv")])
def test_a_run_file_that_cannot_be_read_is_named_not_the_output(run_dir, tmp_path, monkeypatch, fmt, unreadable):
    # (As root every file is readable: the OS's refusal is made here.)
    import builtins
    import errno

    out, _ = run_dir
    real_open = builtins.open

    def refusing(path, *args, **kwargs):
        if str(path).endswith(unreadable):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing)
    target = tmp_path / ("run.om" if fmt == "openmetrics" else "perf")
    res = CliRunner().invoke(main, ["export", str(out), "--format", fmt, "-o", str(target)])
    assert res.exit_code == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr == f"simapf: error: {out / unreadable}: cannot read: Permission denied\n", res.stderr
    assert not target.exists()
