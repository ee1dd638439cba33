"""A replication's readings become the Result a simulated run is: the same summary keys for what
was measured, the same files, read by the same tools (text summary, headline figures, export)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import simapf
from simapf.bench.build import Binaries
from simapf.bench.measure import Death, Readings
from simapf.bench.observe import result
from simapf.bench.plan import bench_plan
from simapf.bench.sampler import Samples, parse_metrics
from simapf.scenario import load_scenario
from simapf.schema.summary import validate
from simapf.simulation.summary_text import format_summary
from simapf.uncertainty.figures import figure_values

SMOKE = "scenarios/bench/smoke.yaml"
METRICS = """# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes {rss}
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes {heap}
# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{{flow_schema="global-default",priority_level="global-default"}} {dispatched}
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{{flow_schema="global-default",priority_level="global-default",reason="queue-full"}} {rejected}
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{{quantile="0.5"}} 0.001
go_gc_duration_seconds_sum 0.1
go_gc_duration_seconds_count {gcs}
# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter
go_cpu_classes_gc_total_cpu_seconds_total {gc_cpu}
# TYPE go_gc_heap_live_bytes gauge
go_gc_heap_live_bytes {live}
# TYPE etcd_request_duration_seconds histogram
etcd_request_duration_seconds_bucket{{le="+Inf"}} 3
"""


def readings(deaths=()) -> Readings:
    loaded = load_scenario(SMOKE)
    plan = bench_plan(loaded, None, machine_cores=2)
    s = Samples()
    for k in range(11):
        t = 2.0 * k
        s.scrape_times.append(t)
        s.metrics.append((t, "up", {}, 1.0))
        s.metrics.extend(parse_metrics(METRICS.format(rss=300e6 + 1e6 * k, heap=150e6 + 1e6 * k, dispatched=10 * k,
                                                      rejected=k // 5, gcs=k, gc_cpu=0.1 * k, live=90e6 + 2e6 * k), t))  # fmt: skip
    for k in range(401):
        t = 0.05 * k
        s.rss.append((t, int(300e6 + 0.5e6 * t)))
        s.cpu.append((t, 4242, 10.0 + 0.3 * t))
    attempts = []
    for n in range(1, 101):
        start = 0.2 * n
        code = "429" if n % 25 == 0 else "200"
        attempts.append({"instance": str(n % 2), "verb": "list", "logical": str(n), "start_s": f"{start:.6f}",
                         "end_s": f"{start + 0.02:.6f}", "code": code, "priority_level_uid": "uid-gd",
                         "flow_schema_uid": "uid-fs", "bytes": "2000000", "final": str(code == "200").lower(),
                         "error": ""})  # fmt: skip
    attempts.append({**attempts[0], "logical": "101", "error": "context canceled", "start_s": "19.99", "end_s": "20.0"})
    binaries = Binaries(Path("kube-apiserver"), Path("etcd"), Path("loadgen"), "1.37.2",
                        {"kube-apiserver": "v1.37.2", "etcd": "3.7.0", "go": "go1.26.8"})  # fmt: skip
    return Readings(plan, binaries, 20.0, 31.0, 290_000_000, 312_000_000, 1.5, 4.0, s, list(deaths), {"lister": attempts},
                    {"uid-gd": "global-default"}, ["--max-requests-inflight=400"], {"GOMAXPROCS": "2"},
                    {"cpu": "test", "cores": 2}, "v1.37.2", {"kube-apiserver.log": b"ok\n"})  # fmt: skip


def _keys(x, prefix=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _keys(v, f"{prefix}.{k}")
    elif isinstance(x, list):
        for v in x[:1]:
            yield from _keys(v, f"{prefix}[]")
    else:
        yield prefix


def test_a_measured_summary_has_the_simulated_keys_for_what_it_measured():
    measured = result(readings(), load_scenario(SMOKE)).summary
    simulated = simapf.run(load_scenario(SMOKE)).summary
    validate(measured), validate(simulated)  # one schema for both
    assert measured["measured"] is True and "measured" not in simulated
    simulated_keys = set(_keys(simulated))
    extra = {k for k in _keys(measured) if not k.startswith((".bench", ".measured"))} - simulated_keys
    # a level's rejections by reason and a client's outcomes are keyed by what happened: only
    # those that did appear
    extra = {k for k in extra if not k.startswith((".priority_levels[].rejected_", ".clients[].outcomes."))}
    assert not extra, f"keys a simulated summary does not have: {sorted(extra)}"
    for section in ("memory", "cpu", "process", "requests"):
        for key, value in measured[section].items():
            assert value is None or type(value) in (int, float, bool, dict) or isinstance(value, type(simulated[section][key])), key


def test_the_figures_are_read_as_the_docstring_says():
    s = result(readings(), load_scenario(SMOKE)).summary
    m, c = s["memory"], s["cpu"]
    assert m["peak_rss_bytes"] == 312_000_000  # VmHWM over the load
    assert m["scraped_peak_rss_bytes"] == 310e6 and m["peak_heap_inuse_bytes"] == 160e6  # the highest scrapes
    assert c["mean_cores"] == pytest.approx(0.3) and c["gc_cycles"] == 10
    assert c["client_mean_cores"] == pytest.approx(4.0 / 20.0)  # the load generator's CPU over the load
    assert c["gc_mean_cores"] == pytest.approx(1.0 / 20.0)  # the GC's CPU counter rose by 1 s
    assert s["bench"]["base_heap_live_bytes"] == 90e6  # the live heap of the first scrape, as the load starts
    assert s["requests"] == {"total": 100, "by_outcome": {"ok": 96, "rejected": 4, "unavailable": 0, "failed": 0},
                             "rejected_share": 0.04}  # fmt: skip
    (lister,) = s["clients"]
    assert lister["in_flight_at_end"] == 1 and lister["outcomes"] == {"ok": 96, "rejected": 4}
    (row,) = s["latency"]
    assert row["priority_level"] == "global-default" and row["count"] == 96 and row["p50_s"] == pytest.approx(0.02)
    (level,) = s["priority_levels"]
    assert level["dispatched"] == 100 and level["rejected"] == 2 and level["rejected_queue_full"] == 2
    assert s["provenance"]["scenario_sha256"] and s["bench"]["versions"]["kube-apiserver"] == "v1.37.2"
    assert "peak_rss_bytes" in figure_values(s) and "p99_s/global-default/list" in figure_values(s)


def _level_row(text: str, level: str) -> str:
    """The row of the summary text's priority-level table for `level`."""
    return next(line for line in text.splitlines() if line.split()[:1] == [level] and line.split()[1].replace(",", "").isdigit())


def test_a_level_whose_rejection_rate_is_unknown_shows_none_not_zero():
    s = result(readings(), load_scenario(SMOKE)).summary
    assert _level_row(format_summary(s), "global-default").split()[3:5] == [f"{100 * s['priority_levels'][0]['rejection_rate']:.2f}", "%"]
    del s["priority_levels"][0]["rejection_rate"]  # as a level the bench could not read
    row = _level_row(format_summary(s), "global-default")
    assert "%" not in row and row.split()[3] == "-"


def test_a_death_is_counted_as_a_simulated_one_is():
    deaths = [Death(5.0, "oom-killed", 700_000_000, restarted_at_s=9.0), Death(12.0, "oom-killed", 701_000_000)]
    s = result(readings(deaths), load_scenario(SMOKE)).summary
    validate(s)
    assert s["process"] == {"oom_kills": 2, "kills": 2, "restarts": 1, "down_s": pytest.approx(4.0 + 8.0)}
    assert s["memory"]["oom_killed"] and s["memory"]["rss_at_oom_kill_bytes"] == 700_000_000
    assert [d["at_s"] for d in s["deaths"]] == [5.0, 12.0]
    text = format_summary(s)
    assert "measured on kube-apiserver v1.37.2 and etcd 3.7.0" in text and "2 OOM kill(s)" in text


def test_a_measured_run_is_written_and_read_as_a_simulated_one(tmp_path):
    from click.testing import CliRunner

    from simapf.bench.run import Measurement, write
    from simapf.cli import main

    loaded = load_scenario(SMOKE)
    one = readings()
    write(Measurement(loaded, [result(one, loaded)], [one]), tmp_path / "run")
    out = tmp_path / "run"
    assert {p.name for p in out.iterdir()} >= {"summary.json", "series.parquet", "series.csv", "latency.csv",
                                               "priority_levels.csv", "client_latency.csv", "overview.png",
                                               "attempts", "logs"}  # fmt: skip
    assert json.loads((out / "summary.json").read_text())["measured"] is True
    assert (out / "logs" / "kube-apiserver.log").read_bytes() == b"ok\n"
    done = CliRunner().invoke(main, ["export", str(out), "--format", "openmetrics", "-o", str(tmp_path / "run.om")])
    assert done.exit_code == 0, done.output
    assert "process_resident_memory_bytes" in (tmp_path / "run.om").read_text()
