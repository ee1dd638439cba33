"""Two settings against each other, and intervals that hold their point and their physical range
(simapf.uncertainty.contrast, simapf.uncertainty.intervals.within)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import simapf

from simapf.uncertainty.contrast import contrast, residual_pairs
from simapf.uncertainty.intervals import interval, limit_of, within
from simapf.uncertainty.model_error import Band, NoBand

TINY = Path(__file__).parents[1] / "data" / "bad-commands" / "_files" / "tiny.yaml"


def _band(residuals, sources, kind: str = "memory") -> Band:
    members = tuple((s, f"row{i}") for i, s in enumerate(sources))
    return Band(kind, min(residuals), max(residuals), 0.9, len(residuals), len(set(sources)), "x", tuple(residuals),
                members)  # fmt: skip


def test_a_band_biased_to_one_side_reaches_the_point_instead_of_denying_it():
    # Every residual says the model predicts low (ln(predicted/measured) < 0): the measurements
    # the band implies all lie above the prediction.
    biased = _band(list(np.linspace(-0.6, -0.4, 21)), ["a"] * 21)
    assert biased.measured(np.array([10.0])).min() > 10.0
    iv = interval(10.0, [9.5, 10.5], biased)
    assert iv.lo == 10.0 and iv.hi == pytest.approx(10.5 * math.exp(0.6), rel=0.05)


def test_no_bound_passes_the_cores_or_the_memory_limit():
    high = _band(list(np.linspace(-0.6, -0.4, 21)), ["a"] * 21, kind="cpu")
    iv = interval(1.9, [1.8, 2.0], high, limit=2.0)
    assert iv.lo == pytest.approx(1.9) and iv.hi == 2.0
    assert within(0.5, 3.0, 1.0, 2.0) == (0.5, 2.0)
    assert within(-1.0, 0.5, 1.0, None) == (0.0, 1.0)  # a size is not negative, and holds its point
    assert limit_of("cpu", 2, None) == 2.0 and limit_of("memory", 2, None) is None
    assert limit_of("memory", None, 4e9) == 4e9 and limit_of("latency", 2, 4e9) is None


def test_an_error_shared_within_an_experiment_cancels_from_the_ratio_one_across_experiments_does_not():
    rng = np.random.default_rng(3)
    # Two experiments, each biased its own way and alike within itself.
    residuals = list(0.3 + rng.normal(0, 0.01, 15)) + list(-0.3 + rng.normal(0, 0.01, 15))
    shared = _band(residuals, ["one"] * 15 + ["two"] * 15)
    apart = _band(residuals, [f"s{i}" for i in range(30)])  # no two rows from one experiment
    i, j, same = residual_pairs(shared, shared)
    assert same and len(i) == 2 * 15 * 14 and not np.any(i == j)
    assert not residual_pairs(apart, apart)[2]
    # Two tables of one publication are one experiment: their rows pair with each other.
    tables = _band(residuals[:4], ["issue9-table-a", "issue9-table-a", "issue9-table-b", "bench/g1"])
    ti, tj, paired = residual_pairs(tables, tables)
    assert paired and sorted(zip(ti.tolist(), tj.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    a, b = [120.0, 118.0, 125.0, 121.0], [100.0, 99.0, 104.0, 100.5]  # draw d of a beside draw d of b
    within_exp = contrast(a[0], a[1:], shared, b[0], b[1:], shared)
    across = contrast(a[0], a[1:], apart, b[0], b[1:], apart)
    params = [x / y for x, y in zip(a, b)]
    assert within_exp.error == "shared within experiments" and across.error == "independent"
    assert within_exp.ratio[0] == pytest.approx(1.2)
    assert min(params) * 0.95 < within_exp.ratio[1] <= 1.2 <= within_exp.ratio[2] < max(params) * 1.05
    assert across.ratio[1] < 0.7 and across.ratio[2] > 2.0  # e^(±0.6): the two biases do not cancel
    for got in (within_exp, across):
        for point, lo, hi in (got.difference, got.ratio):
            assert lo <= point <= hi


def test_a_contrast_without_a_band_is_the_parameters_alone_and_the_same_runs_contrast_to_nothing():
    got = contrast(2.0, [1.0, 3.0], NoBand("latency", "no rows"), 1.0, [1.0, 1.0], NoBand("latency", "no rows"))
    assert got.error == "none: no rows" and got.pairs == 0
    assert got.ratio[0] == 2.0 and got.ratio[1] >= 1.0 and got.ratio[2] <= 3.0
    same = _band(list(np.linspace(-0.2, 0.2, 21)), ["one"] * 21)
    zero = contrast(5.0, [4.0, 6.0], same, 5.0, [4.0, 6.0], same)
    assert zero.difference[0] == 0.0 and zero.difference[1] <= 0.0 <= zero.difference[2]
    assert zero.ratio[1] <= 1.0 <= zero.ratio[2]


def test_a_cpu_contrast_stays_within_the_cores():
    high = _band(list(np.linspace(-1.0, 0.5, 21)), ["one"] * 21, kind="cpu")
    got = contrast(1.9, [1.95, 1.8], high, 0.2, [0.25, 0.15], high, limit=2.0)
    assert -2.0 <= got.difference[1] <= got.difference[0] <= got.difference[2] <= 2.0


@pytest.mark.slow
def test_compare_prints_and_writes_the_difference_and_ratio_with_intervals_that_hold_their_points(tmp_path):
    from simapf.cli import main

    args = ["compare", str(TINY), "--policy", "upstream", "--policy", "size-based", "--uncertainty", "3",
            "--workers", "1", "--no-progress"]  # fmt: skip
    text = CliRunner().invoke(main, args + ["--out", str(tmp_path / "c")])
    assert text.exit_code == 0, text.output
    assert "against upstream, draw by draw: difference [90 %] and ratio [90 %]" in text.stdout
    doc = json.loads(CliRunner().invoke(main, args + ["--json"]).stdout)
    rows = doc["contrasts"]
    assert {r["metric"] for r in rows} >= {"peak_rss_bytes", "mean_cores"}
    assert all(r["policy"] == "size-based" and r["baseline"] == "upstream" and r["runs"] == 4 for r in rows)
    for r in rows:
        assert r["difference_lo"] <= r["difference"] <= r["difference_hi"], r
        if r["ratio"] is not None:
            assert r["ratio_lo"] <= r["ratio"] <= r["ratio_hi"], r
    cores = simapf.load_scenario(TINY).params.cpu.cores
    for r in doc["intervals"]:
        assert r["lo"] <= r["value"] <= r["hi"], r
        if r["metric"] == "mean_cores":
            assert r["hi"] <= cores
    for r in rows:
        if r["metric"] == "mean_cores":
            assert -cores <= r["difference_lo"] and r["difference_hi"] <= cores
    written = (tmp_path / "c" / "contrasts.csv").read_text().splitlines()
    assert written[0].startswith("metric,policy,baseline,difference,difference_lo,difference_hi,ratio")
    assert len(written) == len(rows) + 1
