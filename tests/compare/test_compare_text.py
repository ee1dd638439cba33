"""What `simapf compare` prints says no more than it shows: a difference that prints as zero is
never starred (nor printed as `-0.0`), and two policies that behaved alike are named, though a
third differs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

import simapf
from simapf.comparison.stats import fmt, shows_as_zero
from simapf.comparison.text import format_comparison


@pytest.mark.parametrize("value, kind, text", [
    (-1e-6, "s", "0.0 ms"), (-0.04e-3, "s", "0.0 ms"), (-0.06e-3, "s", "-0.1 ms"), (2e-3, "s", "+2.0 ms"),
    (-0.4e6, "bytes", "0 MB"), (-0.6e6, "bytes", "-1 MB"), (-1e-5, "ratio", "0.00 %"), (-0.004, "cores", "0.00"),
    (-0.2, "count", "-0.2"), (-0.04, "count", "0.0"), (0.0, "count", "0"), (-math.inf, "s", "-inf s"),
])  # fmt: skip
def test_a_value_that_prints_as_zero_has_no_sign(value, kind, text):
    assert fmt(value, kind, signed=True) == text
    assert shows_as_zero(value, kind) == (not any(c in "123456789" for c in text) and "inf" not in text)


def _comparison(mean: float, lo: float, hi: float) -> SimpleNamespace:
    """Two policies over three replications with one metric, a p99 latency in seconds."""
    metric = "p99_s/workload-low/list"
    table = pd.DataFrame([{"metric": metric, "policy": p, "n": 3, "mean": 1.0, "sd": 0.1, "min": 0.9, "max": 1.1}
                          for p in ("a", "b")])  # fmt: skip
    differences = pd.DataFrame([{"metric": metric, "policy": "b", "baseline": "a", "n": 3, "mean_diff": mean,
                                 "ci_low": lo, "ci_high": hi, "relative_diff": mean,
                                 "excludes_zero": lo > 0 or hi < 0}])  # fmt: skip
    return SimpleNamespace(policies=["a", "b"], table=table, differences=differences, confidence=0.95,
                           scenario_name="s", source="s.yaml", seeds=[1, 2, 3], info={}, metrics=[metric])  # fmt: skip


def _difference_row(text: str) -> str:
    return [line for line in text.splitlines() if line.strip().startswith("p99 workload-low/list")][-1]


def test_a_significant_difference_too_small_to_show_is_not_starred():
    # A real difference (its interval excludes 0), but of microseconds: it prints as zero.
    row = _difference_row(format_comparison(_comparison(-3e-6, -4e-6, -2e-6)))
    assert row.rstrip().endswith("0.0 ms [0.0 ms, 0.0 ms]") and "-0.0" not in row and "*" not in row
    # One end prints as zero: the interval as shown does not exclude it.
    row = _difference_row(format_comparison(_comparison(-0.2e-3, -0.3e-3, -0.01e-3)))
    assert row.rstrip().endswith("-0.2 ms [-0.3 ms, 0.0 ms]") and "*" not in row


def test_a_difference_that_shows_is_starred():
    row = _difference_row(format_comparison(_comparison(-0.2e-3, -0.3e-3, -0.1e-3)))
    assert row.rstrip().endswith("-0.2 ms [-0.3 ms, -0.1 ms]*")


def test_two_policies_alike_are_named_though_a_third_differs():
    from test_compare import SCENARIO

    c = simapf.compare(SCENARIO, [{"name": "size-based", "label": "a"}, "constant:seats=4",
                                  {"name": "size-based", "label": "b"}], replications=2, workers=1)  # fmt: skip
    warning = c.info["identical"]
    assert "the policies a, b behaved identically" in warning and "constant" not in warning
    assert "the differences of b below are all zero" in warning
    assert f"warning: {warning}" in c.text()


def _readme_compare_command() -> list[str]:
    """The README's first `simapf compare` command, its arguments as a shell would split them."""
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("simapf compare "))
    return shlex.split(line.split("#", 1)[0])[1:]


@pytest.mark.slow
def test_the_readmes_first_comparison_shows_what_the_policies_change(monkeypatch):
    # What the README says of it: the policies differ, upstream caps the LISTs at 10 seats, the
    # other lowers peak memory and raises the low-priority LISTs' latency, each starred.
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from simapf.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    args = _readme_compare_command()
    assert args[:2] == ["compare", "scenarios/relist-storm.yaml"]
    result = CliRunner().invoke(main, [*args, "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    d = {r["metric"]: r for r in doc["differences"]}
    assert d["peak_rss_bytes"]["ci_high"] < 0 and d["p99_s/workload-low/list"]["ci_low"] > 0
    assert "warning" not in result.stderr
    upstream = {r["metric"]: r for r in doc["table"] if r["policy"] == "upstream"}
    assert upstream["seats_per_list_max"]["max"] == 10  # "where upstream caps them at 10 seats"
