"""Intervals a KEP can cite: parameter draws, the model's validated error, and where runs
extrapolate (simapf.uncertainty)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import simapf
from simapf.schema.summary import validate
from simapf.uncertainty.coverage import beyond, covered, run_inputs
from simapf.uncertainty.draws import PRIOR_SD, covariance, draw_parameters
from simapf.uncertainty.figures import headline_figures, kind_of
from simapf.uncertainty.intervals import attach, interval
from simapf.uncertainty.model_error import (
    Band,
    NoBand,
    Regime,
    Residual,
    band,
    conformal,
    fewest_rows,
    regime_of,
)

TINY = Path(__file__).parents[1] / "data" / "bad-commands" / "_files" / "tiny.yaml"


def _residual(i: int, r: float, source: str = "a", path: str = "etcd", size: str = "under 1 MB",
              overloaded: bool = False, kind: str = "memory") -> Residual:  # fmt: skip
    return Residual(f"row{i}", source, kind, path, size, overloaded, math.exp(r), 1.0)


def test_a_conformal_band_needs_enough_rows_and_takes_their_order_statistics():
    assert fewest_rows(0.9) == 19
    assert conformal(range(18), 0.9) is None
    assert conformal(range(19), 0.9) == (0.0, 18.0)  # the 1st and the 19th of 19
    lo, hi = conformal(range(99), 0.9)
    assert (lo, hi) == (4.0, 94.0)  # floor(100 x 0.05) = 5th, ceil(100 x 0.95) = 95th


def test_a_band_keeps_the_path_and_widens_over_load_then_size_before_giving_up():
    pool = [_residual(i, 0.01 * i, source=f"s{i % 3}", overloaded=i < 20) for i in range(30)]
    exact = band(pool, "memory", Regime("etcd", "under 1 MB", True))
    assert isinstance(exact, Band) and exact.rows == 20 and exact.regime == "etcd path, LISTs under 1 MB, overloaded"
    wider = band(pool, "memory", Regime("etcd", "under 1 MB", False))  # 10 such rows: over any load
    assert isinstance(wider, Band) and wider.rows == 30 and wider.regime == "etcd path, LISTs under 1 MB, any load"
    other = band(pool, "memory", Regime("etcd", "1 to 10 MB", True))  # no rows of that size: over any size
    assert isinstance(other, Band) and other.rows == 20 and other.regime == "etcd path, any size, overloaded"
    few = band(pool[:18], "memory", Regime("etcd", "under 1 MB", True))
    assert isinstance(few, NoBand) and "18 validation rows" in few.reason
    missing = band(pool, "memory", Regime("cache", "under 1 MB", False))
    assert isinstance(missing, NoBand) and "cache path" in missing.reason  # never over the path
    assert isinstance(band(pool, "oom_kills", Regime("etcd", "under 1 MB", False)), NoBand)
    # Leaving a source out takes its rows out of the band.
    assert band(pool, "memory", Regime("etcd", "under 1 MB", False), leave_out="s0").rows == 20


def test_a_band_moves_a_prediction_the_other_way_from_its_residuals():
    b = Band("memory", -0.1, 0.2, 0.9, 20, 2, "x", tuple(np.linspace(-0.1, 0.2, 20)))
    lo, hi = b.bounds(100.0)
    assert lo == pytest.approx(100 * math.exp(-0.2)) and hi == pytest.approx(100 * math.exp(0.1))
    share = Band("rejected", -0.05, 0.3, 0.9, 20, 2, "x", (-0.05, 0.3))
    assert share.bounds(0.1) == pytest.approx((0.0, 0.15))  # a share stays within [0, 1]


def test_an_interval_without_a_band_is_the_parameters_alone_and_says_why():
    iv = interval(10.0, [8.0, 9.0, 11.0, 12.0], NoBand("memory", "no rows"))
    assert (iv.lo, iv.hi) == iv.parameters
    assert 8.0 <= iv.lo < 10.0 < iv.hi <= 12.0
    assert iv.as_dict()["parts"]["model_error"] == {"kind": "memory", "none": "no rows"}
    b = Band("memory", -0.1, 0.1, 0.9, 21, 2, "x", tuple(np.linspace(-0.1, 0.1, 21)))
    banded = interval(10.0, [8.0, 9.0, 11.0, 12.0], b)
    # With a band, the point moved by it: its residuals, taken out of sample, already hold the
    # parameters' error, so the draws (still reported) do not widen it a second time.
    assert (banded.lo, banded.hi) == pytest.approx((10.0 * math.exp(-0.1), 10.0 * math.exp(0.1)))
    assert banded.parameters == iv.parameters and banded.lo > iv.lo and banded.hi < iv.hi


def test_a_parameter_the_data_cannot_see_is_drawn_from_the_prior_one_it_pins_barely_moves():
    rng = np.random.default_rng(1)
    J = np.zeros((200, 2))
    J[:, 0] = 10.0  # every residual moves with the first parameter; none with the second
    residuals = rng.normal(0, 0.1, 200)
    sd = np.sqrt(np.diag(covariance(J, residuals)))
    assert sd[1] == pytest.approx(PRIOR_SD, rel=1e-6)
    assert sd[0] < 0.01


def test_draws_of_the_shipped_record_are_reproducible_within_bounds_and_leave_the_experiment_out():
    a, b = draw_parameters(8, seed=3), draw_parameters(8, seed=3)
    assert np.array_equal(a.factors, b.factors) and len(a) == 8
    assert not any(k.startswith("experiment.") for k in a.keys)
    for d in range(len(a)):
        for (lo, hi), v in zip(a.bounds, a.values(d).values()):
            assert lo * (1 - 1e-12) <= v <= hi * (1 + 1e-12)
    assert not np.array_equal(draw_parameters(8, seed=4).factors, a.factors)


@pytest.fixture(scope="module")
def tiny_summary() -> dict:
    return simapf.run(simapf.load_scenario(TINY)).summary


def test_every_headline_figure_gets_its_interval_beside_it(tiny_summary):
    summary = json.loads(json.dumps(tiny_summary))
    figures = list(headline_figures(summary))
    kinds = {f.kind for f in figures}
    assert kinds == {"memory", "cpu", "oom_kills", "rejected", "latency"}
    assert all(kind_of(f.key) == f.kind for f in figures)
    rows = [{f.key: f.value * k for f in figures} for k in (0.9, 1.1)]
    pool = [_residual(i, 0.01 * i - 0.1, path="cache", size="under 1 MB") for i in range(25)]
    attach(summary, rows, pool=pool)
    typed = validate(summary)  # the intervals and the uncertainty section are the summary model's
    assert [f.key for f in headline_figures(typed)] == [f.key for f in figures]
    for f in headline_figures(typed):
        iv = f.interval
        assert iv is not None and iv.level == 0.9 and iv.parts.parameters.runs == 3
    # written where the figure stands in summary.json
    memory = summary["memory"]["peak_rss_bytes_interval"]
    assert memory["parts"]["model_error"]["rows"] == 25  # the tiny run lists from the cache
    assert memory["lo"] < summary["memory"]["peak_rss_bytes"] < memory["hi"]
    assert "none" in summary["cpu"]["mean_cores_interval"]["parts"]["model_error"]
    assert typed.cpu.interval("mean_cores").parameters_only and not typed.memory.interval("peak_rss_bytes").parameters_only
    client_p99 = next(f for f in figures if f.key.startswith("client_p99_s/"))
    assert client_p99.path[0] == "clients" and "p99_s_interval" in summary["clients"][client_p99.path[1]]["by_verb"][client_p99.path[3]]
    assert summary["uncertainty"]["regime"] == {"path": "cache", "size": "under 1 MB", "overloaded": False}
    json.dumps(summary, allow_nan=False)  # strict JSON


def test_a_run_says_which_of_its_inputs_were_never_checked(tiny_summary):
    assert regime_of(tiny_summary) == Regime("cache", "under 1 MB", False)
    scenario = tiny_summary["scenario"]
    mine = run_inputs(tiny_summary, scenario)
    assert mine["objects_per_resource"] == 200 and mine["informers"] == 0
    assert beyond(mine, covered([mine])) == []
    bigger = dict(mine, objects_per_resource=10**6, kubernetes_version="1.30", features=["admission webhooks"])
    said = beyond(bigger, covered([mine]))
    assert len(said) == 3 and any("objects of one resource" in x for x in said)
    assert any("Kubernetes 1.30" in x for x in said) and any("admission webhooks" in x for x in said)
    assert isinstance(tiny_summary["extrapolation"], list)


@pytest.mark.slow
def test_run_with_uncertainty_prints_intervals_and_writes_them(tmp_path):
    from simapf.cli import main

    out = CliRunner().invoke(main, ["run", str(TINY), "--uncertainty", "3", "--workers", "1", "--no-progress",
                                    "--out", str(tmp_path / "r")])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "uncertainty: 90% intervals from 3 parameter draws" in out.stdout
    assert "peak RSS" in out.stdout and " to " in out.stdout
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["uncertainty"]["draws"] == 3
    assert summary["memory"]["peak_rss_bytes_interval"]["parts"]["parameters"]["runs"] == 4
