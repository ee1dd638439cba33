"""compare: policies side by side on common random numbers, with paired confidence intervals."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

import simapf
from simapf.cli import main
from simapf.comparison import parse_policy
from simapf.comparison.core import replication_seeds
from simapf.comparison.stats import paired_differences
from simapf.errors import ConfigError

from builders import small_lists

SCENARIO = small_lists(name="cmp-small", duration_s=15, list_rate_per_s=8)


@pytest.fixture
def scenario_file(tmp_path):
    import yaml

    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    return path


@pytest.mark.parametrize("text,name,params", [
    ("upstream", "upstream", {}),
    ("etcd-uncapped:max_list_seats=200", "etcd-uncapped", {"max_list_seats": 200}),
    ("constant:seats=4,include_watch=false", "constant", {"seats": 4, "include_watch": False}),
    ("mypkg.policies:HalfPrice", "mypkg.policies:HalfPrice", {}),
    ("mypkg.policies:HalfPrice:factor=0.5", "mypkg.policies:HalfPrice", {"factor": 0.5}),
])  # fmt: skip
def test_parse_policy(text, name, params):
    p = parse_policy(text)
    assert (p.label, p.name, p.params) == (text, name, params)


def test_parse_policy_errors():
    with pytest.raises(ConfigError, match="given twice"):
        parse_policy("constant:seats=1,seats=2")
    with pytest.raises(ConfigError, match="not key=value"):
        parse_policy("constant:seats=1,oops")
    assert parse_policy({"name": "constant", "params": {"seats": 2}}).label == "constant:seats=2"


def test_identical_policies_differ_by_exactly_nothing():
    # Common random numbers: the same policy under two labels sees the same streams in every
    # replication, so every paired difference is 0 with a zero-width interval.
    c = simapf.compare(SCENARIO, [{"name": "size-based", "label": "a"}, {"name": "size-based", "label": "b"}],
                       replications=3, workers=1)  # fmt: skip
    a = c.runs[c.runs["policy"] == "a"].drop(columns=["policy", "run_id", "wall_s"]).reset_index(drop=True)
    b = c.runs[c.runs["policy"] == "b"].drop(columns=["policy", "run_id", "wall_s"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert (c.differences["mean_diff"].fillna(0) == 0).all()
    assert (c.differences["ci_low"].fillna(0) == 0).all() and (c.differences["ci_high"].fillna(0) == 0).all()
    # ... while the replications themselves differ (else the test above proves nothing).
    rss = c.table[(c.table["metric"] == "peak_rss_bytes") & (c.table["policy"] == "a")].iloc[0]
    assert rss["sd"] > 0 and rss["min"] < rss["max"]


def test_replication_zero_is_the_scenario_seed():
    seeds = replication_seeds(3, 3)
    assert seeds[0] == 3 and len(set(seeds)) == 3
    c = simapf.compare(SCENARIO, ["upstream", "size-based"], replications=1, workers=1)
    alone = simapf.run(SCENARIO)
    row = c.runs[(c.runs["policy"] == "upstream")].iloc[0]
    assert row["seed"] == 3
    assert row["peak_rss_bytes"] == alone.summary["memory"]["peak_rss_bytes"]
    assert row["requests_total"] == alone.summary["requests"]["total"]
    assert c.differences["ci_low"].isna().all()  # one replication: no interval
    assert "no confidence intervals" in c.text()


def test_a_real_difference_is_reported_with_its_interval():
    c = simapf.compare(SCENARIO, ["upstream", "constant:seats=4"], replications=3, workers=1)
    d = c.differences.set_index("metric")
    seats = d.loc["seats_per_list_mean"]
    assert seats["mean_diff"] == pytest.approx(3.0) and seats["excludes_zero"]
    # Four seats a LIST on a level of few seats: the LISTs wait longer.
    p99 = d.loc["p99_s/global-default/list"]
    assert p99["mean_diff"] > 0 and p99["ci_low"] > 0 and p99["n"] == 3
    wide = c.side_by_side()
    assert list(wide.columns) == ["upstream", "constant:seats=4"]
    assert wide.loc["seats_per_list_mean", "constant:seats=4"] == pytest.approx(4.0)
    assert wide.index[0] == "peak_rss_bytes"
    assert len(c.figure().axes) == 6


def test_paired_interval_is_students_t_on_the_differences():
    rng = np.random.default_rng(0)
    base = rng.normal(100, 10, 6)
    other = base + rng.normal(3, 1, 6)
    runs = pd.DataFrame({"policy": ["a"] * 6 + ["b"] * 6, "replication": list(range(6)) * 2,
                         "m": np.concatenate([base, other])})  # fmt: skip
    d = paired_differences(runs, ["a", "b"], ["m"], confidence=0.9).iloc[0]
    ci = stats.ttest_rel(other, base).confidence_interval(0.9)
    assert d["mean_diff"] == pytest.approx(np.mean(other - base))
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((ci.low, ci.high))
    assert d["n"] == 6 and d["excludes_zero"]
    # Pairs with a missing value are left out, not counted as zero.
    runs.loc[3, "m"] = math.nan
    assert paired_differences(runs, ["a", "b"], ["m"]).iloc[0]["n"] == 5


def test_cli_compare_writes_table_differences_and_figure(scenario_file, tmp_path):
    out = tmp_path / "cmp"
    result = CliRunner().invoke(main, ["compare", str(scenario_file), "--policy", "upstream", "--policy",
                                       "constant:seats=4", "--replications", "2", "--workers", "1", "--out", str(out),
                                       "--set", "run.duration_s=10", "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "2 replications per policy" in text and "difference from upstream" in text
    assert "seats per LIST, mean" in text and "p99 global-default/list" in text
    assert sorted(p.name for p in out.iterdir()) == [".simapf-output.json", "comparison.png", "comparison.provenance.json",
                                                     "comparison.svg", "comparison.txt", "differences.csv", "runs.csv",
                                                     "runs.parquet", "table.csv"]  # fmt: skip
    record = json.loads((out / "comparison.provenance.json").read_text())
    assert record["replications"] == 2 and len(record["seeds"]) == 2
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 4 and set(runs["policy"]) == {"upstream", "constant:seats=4"}

    as_json = CliRunner().invoke(main, ["compare", str(scenario_file), "--policy", "upstream", "--policy",
                                        "size-based", "--replications", "2", "--workers", "1", "--json",
                                        "--set", "run.duration_s=10", "--no-progress"])  # fmt: skip
    doc = json.loads(as_json.stdout)
    assert doc["policies"] == ["upstream", "size-based"] and doc["differences"][0]["baseline"] == "upstream"


@pytest.mark.parametrize("args,message", [
    (["--policy", "upstream", "--policy", "nope"], "--policy nope: apf.estimator.list_policy: unknown LIST policy 'nope'"),
    (["--policy", "upstream", "--policy", "constant"], "--policy constant: apf.estimator"),
    (["--policy", "upstream"], "at least two policies"),
    (["--policy", "upstream", "--policy", "upstream"], "--policy upstream: given more than once"),
    (["--policy", "upstream", "--policy", "size-based", "--set", "run.duration_s=-1"], "run.duration_s"),
])  # fmt: skip
def test_cli_compare_errors_are_one_line(scenario_file, args, message):
    result = CliRunner().invoke(main, ["compare", str(scenario_file), *args, "--workers", "1", "--no-progress"])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
