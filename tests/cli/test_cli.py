"""The command line as a user meets it: help everywhere, one-line errors with exit 2."""

import csv
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from simapf.cli import main

SUBCOMMANDS = ["apf-report", "replay"]


@pytest.mark.parametrize("args", [["--help"]] + [[c, "--help"] for c in SUBCOMMANDS])
def test_every_subcommand_has_help(args):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_apf_report_csv_columns_and_values_at_800():
    result = CliRunner().invoke(main, ["apf-report", "--server-concurrency", "800", "--format", "csv"])
    assert result.exit_code == 0
    rows = list(csv.DictReader(result.output.splitlines()))
    assert list(rows[0]) == ["priority_level", "nominal_cl", "lendable_cl", "min_cl", "max_cl",
                             "idle_current_cl", "max_seats"]
    by_name = {r["priority_level"]: r for r in rows}
    # apf-mechanics §2.3, S = 800
    assert by_name["global-default"] == {
        "priority_level": "global-default", "nominal_cl": "66", "lendable_cl": "33",
        "min_cl": "33", "max_cl": "866", "idle_current_cl": "77", "max_seats": "10"}
    assert by_name["exempt"]["max_seats"] == "" and by_name["catch-all"]["max_seats"] == ""


def test_apf_report_json_is_parseable():
    result = CliRunner().invoke(main, ["apf-report", "--format", "json"])
    assert result.exit_code == 0
    levels = {r["priority_level"]: r for r in json.loads(result.output)}
    assert levels["workload-low"]["idle_current_cl"] == 56  # §2.3, S = 600


def test_apf_report_reads_a_cluster_config(tmp_path):
    # A cluster with one extra level and a FlowSchema routing a user to it.
    config = tmp_path / "objects.yaml"
    config.write_text("""\
apiVersion: v1
kind: List
items:
- apiVersion: flowcontrol.apiserver.k8s.io/v1
  kind: PriorityLevelConfiguration
  metadata: {name: batch}
  spec:
    type: Limited
    limited:
      nominalConcurrencyShares: 10
      limitResponse: {type: Reject}
""")
    result = CliRunner().invoke(main, ["apf-report", "--config", str(config), "--format", "csv"])
    assert result.exit_code == 0, result.output
    names = [r["priority_level"] for r in csv.DictReader(result.output.splitlines())]
    # the mandatory levels are added, as the apiserver does
    assert names == ["batch", "catch-all", "exempt"]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "simapf.cli", *args], capture_output=True, text=True)


def test_bad_config_is_one_line_exit_2(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("""\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: broken}
spec:
  type: Limited
  limited:
    limitResponse:
      type: Queue
      queuing: {queues: 4, handSize: 8}
""")
    proc = _run("apf-report", "--config", str(config))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "handSize" in lines[0] and "bad.yaml" in lines[0]


LEVEL = {"name": "t", "concurrencyLimit": 2, "queues": 4, "handSize": 2, "queueLengthLimit": 3}
HEADER = "id,arrival_s,flow,initial_seats,final_seats,additional_latency_s,service_s\n"


def _replay_files(tmp_path, trace_text, level=LEVEL):
    level_path = tmp_path / "level.json"
    level_path.write_text(json.dumps(level))
    trace_path = tmp_path / "trace.csv"
    trace_path.write_text(trace_text)
    return level_path, trace_path, tmp_path / "out.csv"


def test_replay_end_to_end(tmp_path):
    # Two flows, CL 2. The third request holds max(1, 2) = 2 seats for its whole execution
    # (seats are held at MaxSeats, not initial then final), so it waits for both others.
    level, trace, out = _replay_files(tmp_path, HEADER
        + "a,0,global-default/alice,1,0,0,0.1\n"
        + "b,0,global-default/bob,1,0,0,0.2\n"
        + "c,0.05,global-default/alice,1,2,0.01,0.1\n")
    result = CliRunner().invoke(main, ["replay", "--level", str(level), "--trace", str(trace),
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    c = rows[2]
    assert c["dispatched"] == "true" and c["dispatch_s"] == "0.200000000"
    # finish = execution end (0.3) + additional latency (0.01): seats held until then
    assert c["finish_s"] == "0.310000000" and c["wait_s"] == "0.150000000"
    assert c["arrival_s"] == "0.050000000"


def test_replay_reject_level_and_columns_any_order(tmp_path):
    level = dict(LEVEL, queues=0, concurrencyLimit=1)
    level_path, trace, out = _replay_files(tmp_path,
        "service_s,id,flow,arrival_s,initial_seats,final_seats,additional_latency_s\n"
        "1,x,f,0,1,0,0\n1,y,f,0,1,0,0\n", level)
    result = CliRunner().invoke(main, ["replay", "--level", str(level_path), "--trace", str(trace),
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [(r["dispatched"], r["rejected_reason"], r["queue"]) for r in rows] == [
        ("true", "", ""), ("false", "concurrency-limit", "")]


@pytest.mark.parametrize("trace_text, message", [
    ("id,arrival_s,flow,initial_seats,final_seats,service_s\n", "additional_latency_s"),
    (HEADER + "a,-1,f,1,0,0,0.1\n", "arrival_s"),
    (HEADER + "a,0,f,0,0,0,0.1\n", "initial_seats"),
    (HEADER + "a,0,f,1,0,0,soon\n", "service_s"),
    (HEADER + "a,0,f,1,0,0\n", "fields"),
])
def test_replay_bad_trace_is_one_line_exit_2(tmp_path, trace_text, message):
    level, trace, out = _replay_files(tmp_path, trace_text)
    proc = _run("replay", "--level", str(level), "--trace", str(trace), "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("level, message", [
    ({**LEVEL, "handSize": 5}, "handSize"),
    ({**LEVEL, "queueLengthLimit": "x"}, "queueLengthLimit"),
    ({k: v for k, v in LEVEL.items() if k != "concurrencyLimit"}, "concurrencyLimit"),
    ({**LEVEL, "queus": 3}, "queus"),
])
def test_replay_bad_level_is_one_line_exit_2(tmp_path, level, message):
    level_path, trace, out = _replay_files(tmp_path, HEADER + "a,0,f,1,0,0,0.1\n", level)
    proc = _run("replay", "--level", str(level_path), "--trace", str(trace), "--out", str(out))
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_replay_unknown_file_exit_2(tmp_path):
    proc = _run("replay", "--level", str(tmp_path / "nope.json"), "--trace", "x.csv", "--out",
                str(tmp_path / "o.csv"))
    assert proc.returncode == 2 and "nope.json" in proc.stderr


def test_wait_limit_is_capped_at_60_seconds(tmp_path):
    from simapf.apf.replay import load_level
    path = tmp_path / "level.json"
    path.write_text(json.dumps({**LEVEL, "requestWaitLimitSeconds": 600}))
    assert load_level(path).wait_limit_ns == 60 * 10**9


def test_dangling_flow_schema_is_a_warning_not_an_error(tmp_path):
    config = tmp_path / "objects.yaml"
    config.write_text("""\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: orphan}
spec:
  matchingPrecedence: 500
  priorityLevelConfiguration: {name: nowhere}
  rules:
  - subjects: [{kind: Group, group: {name: "system:authenticated"}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
""")
    proc = _run("apf-report", "--config", str(config), "--format", "csv")
    assert proc.returncode == 0
    assert "simapf: warning:" in proc.stderr and "orphan" in proc.stderr and "nowhere" in proc.stderr
    assert proc.stdout.startswith("priority_level,")
