"""Outputs a monitoring user reads: counter rates that count every increment, 429s that APF did
not send, and the peak RSS of a run the OOM killer ended (issue 26's wrong outputs)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import simapf
import simapf.simulation.summary_text
from simapf.simulation.result import Result

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"


def _result(rows: list[tuple[float, str, str, str, float]]) -> Result:
    """A Result of series rows (time_s, metric, priority_level, code, value); two levels idle."""
    series = pd.DataFrame(rows, columns=["time_s", "metric", "priority_level", "code", "value"])
    for label in ("reason", "verb", "resource", "client"):
        series[label] = ""
    table = pd.DataFrame({"priority_level": ["a"], "requests": [1]})
    # A whole summary (the figures read it through its schema): a stored golden run's, one
    # replica, no memory limit, 16 cores, no events, with the fields the golden file leaves out.
    summary = json.loads((GOLDEN / "list-experiment-etcd.json").read_text())
    summary.update({"duration_s": 4.0, "scenario_name": "t", "seed": 1, "simapf_version": "0", "wall_s": 0.0,
                    "source": None})  # fmt: skip
    assert summary["memory"]["memory_limit_bytes"] is None and summary["cpu"]["cores"] == 16.0
    assert summary["events"] == [] and len(summary["replicas"]) == 1
    return Result(summary=summary, series=series, latency=table, levels=table)


def test_a_counter_first_seen_mid_run_counts_its_first_increments():
    # The rejections counter appears at its first increment, t=2 with 5: before, it was 0.
    rows = [(t, "up", "", "", 1.0) for t in (0.0, 1.0, 2.0, 3.0, 4.0)]
    rows += [(2.0, "apiserver_flowcontrol_rejected_requests_total", "workload-low", "", 5.0),
             (3.0, "apiserver_flowcontrol_rejected_requests_total", "workload-low", "", 5.0),
             (4.0, "apiserver_flowcontrol_rejected_requests_total", "workload-low", "", 8.0)]  # fmt: skip
    rate = _result(rows).rate("apiserver_flowcontrol_rejected_requests_total")
    assert list(rate.index) == [1.0, 2.0, 3.0, 4.0]
    assert list(rate["workload-low"]) == [0.0, 5.0, 0.0, 3.0]  # the old diff lost the 5 at t=2
    assert rate["workload-low"].sum() == 8.0


def test_the_overview_plots_the_429s_a_watch_cache_sent():
    from simapf.outputs.figures import overview_figure

    rows = [(t, "up", "", "", 1.0) for t in (0.0, 1.0, 2.0)]
    rows += [(t, "process_resident_memory_bytes", "", "", 1e9) for t in (0.0, 1.0, 2.0)]
    rows += [(t, "process_cpu_seconds_total", "", "", t) for t in (0.0, 1.0, 2.0)]
    rows += [(1.0, "apiserver_flowcontrol_rejected_requests_total", "workload-low", "", 2.0),
             (2.0, "apiserver_flowcontrol_rejected_requests_total", "workload-low", "", 2.0),
             (1.0, "apiserver_request_total", "", "429", 2.0),
             (2.0, "apiserver_request_total", "", "429", 12.0)]  # 10 more 429s, none of them APF's
    fig = overview_figure(_result(rows))
    ax = fig.axes[3]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert "workload-low" in lines
    cache = lines["watch cache not ready"]
    assert list(cache.get_ydata()) == [0.0, 10.0]


def test_an_oom_killed_run_reports_the_rss_it_reached_and_marks_the_kill():
    # 5,000 ConfigMaps of 500 Ki (2.5 GB of watch cache) in a 2 GiB container: killed at start-up,
    # and again at each refill. Before, the peak was the limit itself whatever the run did.
    limit = 2 * 2**30
    sc = {"name": "t", "run": {"duration_s": 60}, "apiserver": {"memory_limit_bytes": limit},
          "resources": [{"name": "configmaps", "count": 5000, "object_size": {"mean_bytes": "500Ki"}}]}  # fmt: skip
    result = simapf.run(sc)
    s, memory = result.summary, result.summary["memory"]
    assert s["process"]["oom_kills"] >= 2 and memory["oom_killed"] is True
    # The process had what it had when the allocation that did not fit came: below the limit,
    # and the highest RSS of the run; the allocation asked for more than the limit.
    assert memory["rss_at_oom_kill_bytes"] < limit < memory["oom_demand_bytes"]
    assert memory["peak_rss_bytes"] == pytest.approx(memory["rss_at_oom_kill_bytes"])
    assert result.metric("process_resident_memory_bytes").max() <= memory["peak_rss_bytes"]
    assert "OOM-killed at" in simapf.simulation.summary_text.format_summary(s)
    from simapf.outputs.figures import overview_figure

    marks = [line for line in overview_figure(result).axes[0].get_lines() if line.get_label() == "OOM kill"]
    assert marks and len(marks[0].get_xdata()) >= 1
    assert marks[0].get_ydata()[0] == pytest.approx(memory["rss_at_oom_kill_bytes"] / 2**30)
    unlimited = simapf.run({**sc, "apiserver": {}}).summary["memory"]
    assert unlimited["oom_killed"] is False and unlimited["rss_at_oom_kill_bytes"] is None
