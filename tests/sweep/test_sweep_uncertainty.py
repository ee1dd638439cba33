"""sweep --uncertainty N: parameter draws per combination, stored and resumed as runs, and every
headline figure column's interval on the combination's rows (simapf.sweeps.uncertainty)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import simapf
from simapf.cli import main
from simapf.sweeps import load_sweep_spec, store
from simapf.sweeps.runner import task_for
from simapf.sweeps.measure import bundle
from simapf.sweeps.uncertainty import draw_tasks
from simapf.uncertainty.draws import draw_parameters
from simapf.uncertainty.figures import kind_of
from simapf.uncertainty.intervals import interval, limit_of_row
from simapf.uncertainty.model_error import band, load_pool, regime_of_row

from sweephelp import SMALL, write_sweep

# Two combinations of a few simulated seconds, two replications each.
SWEEP = {
    "base": "scenario.yaml",
    "factors": {"clients.listers.rate_per_s": [4, 8]},
    "set": {"run.duration_s": 8},
    "replications": 2,
    "seed": 7,
}


def _sweep_file(tmp_path: Path, **changes) -> Path:
    return write_sweep(tmp_path / "in", {**SWEEP, **changes}, SMALL)


def _bounds(df: pd.DataFrame) -> list[str]:
    return [c for c in df.columns if c.endswith(("_lo", "_hi"))]


def _without(df: pd.DataFrame, columns) -> pd.DataFrame:
    return df.drop(columns=list(columns)).reset_index(drop=True)


def _run_files(out: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name.startswith("run-")}


@pytest.fixture(scope="module")
def with_draws(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """The sweep with 2 draws per combination, run serially into a directory."""
    tmp = tmp_path_factory.mktemp("draws")
    out = tmp / "out"
    return out, simapf.sweep(_sweep_file(tmp), out, backend="serial", uncertainty=2)


@pytest.fixture(scope="module")
def without_draws(tmp_path_factory) -> pd.DataFrame:
    """The same sweep as it runs without draws."""
    tmp = tmp_path_factory.mktemp("plain")
    return simapf.sweep(_sweep_file(tmp), tmp / "out", backend="serial")


def test_every_headline_column_gets_its_combinations_interval_from_replication_0_and_its_draws(with_draws):
    out, df = with_draws
    draws = simapf.load_sweep(out, draws=True)
    assert len(df) == 4 and len(draws) == 4 and sorted(draws["draw"]) == [0, 0, 1, 1]
    headline = [c for c in df.columns if kind_of(c.removesuffix("_lo").removesuffix("_hi")) is not None
                and not c.endswith(("_lo", "_hi"))]  # fmt: skip
    assert {"peak_rss_bytes", "mean_cores", "rejected_share", "oom_kills"} <= set(headline)
    assert _bounds(df) == [f"{c}{end}" for c in headline for end in ("_lo", "_hi")]
    assert not [c for c in df.columns if c.endswith("_lo") and kind_of(c[:-3]) is None]
    pool = load_pool()
    for rate, rows in df.groupby("clients.listers.rate_per_s"):
        point = rows[rows["replication"] == 0].iloc[0]
        mine = draws[draws["run_id"].str.startswith(point["run_id"] + "~d")]
        assert len(mine) == 2 and (mine["seed"] == point["seed"]).all()
        for col in ("peak_rss_bytes", "mean_cores", "oom_kills"):
            lo, hi = rows[f"{col}_lo"], rows[f"{col}_hi"]
            assert lo.nunique() == 1 and hi.nunique() == 1  # one interval for the combination's rows
            value = float(point[col])
            expected = interval(value, mine[col], band(pool, kind_of(col), regime_of_row(point.to_dict())),
                                limit=limit_of_row(kind_of(col), point.to_dict()))  # held to the cores, as every interval
            assert (lo.iloc[0], hi.iloc[0]) == pytest.approx((expected.lo, expected.hi))
            assert lo.iloc[0] <= hi.iloc[0]
            # The draws move the figure, but around the point run's value, not anywhere.
            assert lo.iloc[0] <= 2 * value + 1e-9 and hi.iloc[0] >= value / 2
        assert rows["peak_rss_bytes_hi"].iloc[0] > rows["peak_rss_bytes_lo"].iloc[0]  # the draws did move it


def test_draw_d_is_the_same_parameter_set_for_every_combination_on_replication_0s_seed(tmp_path):
    loaded = load_sweep_spec(_sweep_file(tmp_path, uncertainty=2))
    bundles = [bundle(c.loaded) for c in loaded.combinations]
    tasks = {r.run_id: task_for(loaded, r, bundles[r.index // 2]) for r in loaded.runs}
    drawn = draw_tasks(loaded, tasks)
    assert len(drawn) == 4
    first, second = loaded.runs[0], loaded.runs[2]  # replication 0 of each combination
    factors = draw_parameters(2, loaded.spec.seed)
    for d in range(2):
        a, b = drawn[f"{first.run_id}~d{d}"], drawn[f"{second.run_id}~d{d}"]
        assert a.scenario["run"]["seed"] == first.seed and b.scenario["run"]["seed"] == second.seed
        # The factors leave the parameters alone, so draw d sets the same values in both.
        assert a.scenario["apiserver"]["params"] == b.scenario["apiserver"]["params"]
        for key, factor in zip(factors.keys, factors.factors[d]):
            section, field = key.split(".")
            fitted = getattr(getattr(loaded.combinations[0].loaded.params, section), field)
            assert a.scenario["apiserver"]["params"][section][field] == pytest.approx(fitted * factor)
        assert a.scenario["clients"] != b.scenario["clients"]  # and the combinations still differ
    params = [drawn[f"{first.run_id}~d{d}"].scenario["apiserver"]["params"] for d in range(2)]
    assert params[0] != params[1]
    # More draws later keep the first ones: a resumed sweep with a larger N reuses their runs.
    assert np.array_equal(draw_parameters(5, loaded.spec.seed).factors[:2], factors.factors)


def test_a_rerun_runs_nothing_more_draws_run_only_the_new_fewer_keep_the_files(with_draws, tmp_path):
    out, first = with_draws
    before = _run_files(out)
    assert len(before) == 8
    manifest = json.loads((out / store.MANIFEST).read_text())
    assert manifest["uncertainty"] == 2 and sorted(manifest["runs"]) == sorted(n[4:-8] for n in before)
    again = simapf.sweep(_sweep_file(tmp_path), out, backend="serial", uncertainty=2)
    assert (again.attrs["status"]["ran"], again.attrs["status"]["skipped"]) == (0, 8)
    pd.testing.assert_frame_equal(first, again)
    assert _run_files(out) == before

    more = simapf.sweep(_sweep_file(tmp_path), out, backend="serial", uncertainty=3)
    assert (more.attrs["status"]["ran"], more.attrs["status"]["runs"]) == (2, 10)
    assert {k: v for k, v in _run_files(out).items() if k in before} == before  # nothing done twice
    assert len(simapf.load_sweep(out, draws=True)) == 6

    fewer = simapf.sweep(_sweep_file(tmp_path), out, backend="serial", uncertainty=2)
    assert fewer.attrs["status"]["ran"] == 0 and len(_run_files(out)) == 10  # the third draws' files stay
    pd.testing.assert_frame_equal(_without(first, ["wall_s"]), _without(fewer, ["wall_s"]))
    assert len(simapf.load_sweep(out, draws=True)) == 4  # but are not used
    pd.testing.assert_frame_equal(fewer, simapf.load_sweep(out))  # one computation for both paths


def test_serial_and_joblib_give_the_same_runs_and_intervals(with_draws, tmp_path):
    out, serial = with_draws
    joblib = simapf.sweep(_sweep_file(tmp_path), tmp_path / "joblib", workers=1, uncertainty=2)
    pd.testing.assert_frame_equal(_without(serial, ["wall_s"]), _without(joblib, ["wall_s"]))
    pd.testing.assert_frame_equal(_without(simapf.load_sweep(out, draws=True), ["wall_s"]),
                                  _without(simapf.load_sweep(tmp_path / "joblib", draws=True), ["wall_s"]))  # fmt: skip


def test_without_draws_the_table_is_exactly_what_it_was(with_draws, without_draws, tmp_path):
    done, drawn = with_draws
    out = tmp_path / "out"
    shutil.copytree(done, out)
    assert not _bounds(without_draws) and "draw" not in without_draws.columns
    assert "uncertainty" not in without_draws.attrs["sweep"]
    # With draws, the point rows are the same runs: only the interval columns are added.
    pd.testing.assert_frame_equal(_without(drawn, _bounds(drawn) + ["wall_s"]), _without(without_draws, ["wall_s"]))
    # The same directory swept without draws: the draw files are there, but nowhere in the table.
    plain = simapf.sweep(_sweep_file(tmp_path), out, backend="serial", uncertainty=0)
    assert plain.attrs["status"]["ran"] == 0
    pd.testing.assert_frame_equal(_without(plain, ["wall_s"]), _without(without_draws, ["wall_s"]))
    pd.testing.assert_frame_equal(simapf.load_sweep(out), plain)
    assert simapf.load_sweep(out, draws=True).empty
    # Without a manifest every run file is read: the draws still never become rows of the table.
    (out / store.MANIFEST).unlink()
    assert len(simapf.load_sweep(out)) == 4 and len(simapf.load_sweep(out, draws=True)) >= 4


def test_an_in_memory_sweep_gives_the_same_table(with_draws, tmp_path):
    _out, on_disk = with_draws
    in_memory = simapf.sweep(_sweep_file(tmp_path), None, backend="serial", uncertainty=2)
    pd.testing.assert_frame_equal(_without(on_disk, ["wall_s"]), _without(in_memory, ["wall_s"]))


def test_the_file_says_uncertainty_and_the_command_line_overrides_it(tmp_path):
    path = _sweep_file(tmp_path, uncertainty=1, factors={"clients.listers.rate_per_s": [4]}, replications=1)
    out = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "o"), "--backend", "serial",
                                    "--no-progress", "--uncertainty", "2"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "3 runs (2 of them parameter draws" in out.stdout
    assert "from 2 parameter draws" in out.stdout
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("4 "))
    assert " to " in line and "[" in line  # peak RSS with its interval
    df = simapf.load_sweep(tmp_path / "o")
    assert df.attrs["sweep"]["uncertainty"] == 2 and math.isfinite(df["peak_rss_bytes_lo"].iloc[0])
    plain = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "p"), "--backend", "serial",
                                      "--no-progress", "--uncertainty", "0"])  # fmt: skip
    assert plain.exit_code == 0 and "parameter draws" not in plain.stdout and " to " not in plain.stdout


@pytest.mark.parametrize("changes, expect", [
    ({"uncertainty": -1}, "uncertainty: Input should be greater than or equal to 0"),
    ({"uncertainty": 1001}, "uncertainty: Input should be less than or equal to 1000"),
    ({"uncertainty": "many"}, "uncertainty: expected an integer"),
    ({"factors": {"clients.writers.rate_per_s": {"range": [1, 201, 1]}}, "replications": 1, "uncertainty": 999},
     "200,000 runs (levels multiplied, times 1 replications and 999 parameter draws"),
])  # fmt: skip
def test_a_bad_uncertainty_is_one_line_before_any_run(tmp_path, changes, expect):
    path = _sweep_file(tmp_path, **changes)
    out = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "o"), "--no-progress"])
    assert out.exit_code == 2
    assert out.stderr.startswith(f"simapf: error: {path}: ") and expect in out.stderr
    assert len(out.stderr.splitlines()) == 1 and not (tmp_path / "o").exists()


def test_the_run_bound_counts_the_draws_the_command_line_asks_for(tmp_path):
    path = _sweep_file(tmp_path, factors={"clients.writers.rate_per_s": {"range": [1, 201, 1]}}, replications=1)
    out = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "o"), "--uncertainty", "600"])
    assert out.exit_code == 2 and "120,200 runs" in out.stderr and "600 parameter draws" in out.stderr
    assert not (tmp_path / "o").exists()


def test_a_sweep_without_factors_prints_its_intervals(tmp_path):
    from simapf.sweeps.report import format_sweep

    loaded = load_sweep_spec(_sweep_file(tmp_path, factors={}, replications=1))
    df = simapf.sweep(loaded, None, backend="serial", uncertainty=1)  # a loaded sweep, its N replaced
    assert df.attrs["sweep"]["name"] == loaded.name and df.attrs["sweep"]["source"] == loaded.source
    text = format_sweep(df)
    assert "2 runs (1 of them parameter draws" in text and "from 1 parameter draws" in text
    assert text.count(" to ") >= 2  # peak RSS and the rest, each with its interval


def test_each_level_gets_its_difference_and_ratio_against_the_first_from_the_shared_draws(with_draws):
    from simapf.sweeps.report import format_sweep
    from simapf.uncertainty.contrast import contrast

    out, df = with_draws
    got = simapf.load_sweep(out, contrasts=True)
    draws = simapf.load_sweep(out, draws=True)
    assert set(got["factor"]) == {"clients.listers.rate_per_s"}
    assert set(got["level"]) == {8} and set(got["baseline"]) == {4}
    assert {"peak_rss_bytes", "mean_cores", "rejected_share"} <= set(got["metric"])
    pool = load_pool()
    point = {rate: rows[rows["replication"] == 0].iloc[0] for rate, rows in df.groupby("clients.listers.rate_per_s")}
    mine = {rate: draws[draws["run_id"].str.startswith(p["run_id"] + "~d")].sort_values("draw")
            for rate, p in point.items()}  # fmt: skip
    for r in got.to_dict("records"):
        c = r["metric"]
        kind = kind_of(c)
        expected = contrast(float(point[8][c]), mine[8][c].astype(float), band(pool, kind, regime_of_row(point[8].to_dict())),
                            float(point[4][c]), mine[4][c].astype(float), band(pool, kind, regime_of_row(point[4].to_dict())),
                            limit=float(point[4]["cores"]) if kind == "cpu" else None)  # fmt: skip
        assert (r["difference_lo"], r["difference_hi"]) == pytest.approx(expected.difference[1:], nan_ok=True)
        assert r["difference_lo"] <= r["difference"] <= r["difference_hi"]
        assert r["difference"] == pytest.approx(float(point[8][c]) - float(point[4][c]))
        if kind == "cpu":
            assert r["difference_hi"] <= point[4]["cores"]
    # What `sweep()` hands the report is what `load_sweep` reads back.
    pd.testing.assert_frame_equal(pd.DataFrame(df.attrs["contrasts"], columns=got.columns), got, check_dtype=False)
    text = format_sweep(df)
    assert "against each factor's first level, the other factors equal" in text
    assert "peak RSS MB, rate_per_s=8 vs 4:" in text


def test_a_sweep_without_draws_has_no_contrasts(without_draws, tmp_path):
    assert "contrasts" not in without_draws.attrs
