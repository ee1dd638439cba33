"""Intervals checked one experiment left out (simapf.calibrate.checked), and the bench's cells
as residuals of the pool (simapf.calibrate.bench_residuals)."""

from __future__ import annotations

import statistics

import numpy as np

from simapf.calibrate.checked import coverage_table, leave_one_experiment_out, where
from simapf.uncertainty.model_error import Band, Regime, Residual, band, experiment_of


def residuals(source: str, n: int, bias: float, spread: float = 0.05) -> list[Residual]:
    errors = np.linspace(bias - spread, bias + spread, n)
    return [Residual(f"{source} {i}", source, "memory", "etcd", "under 1 MB", False, 100.0 * np.exp(e), 100.0)
            for i, e in enumerate(errors)]  # fmt: skip


def test_a_publication_is_one_experiment_and_each_bench_group_is_one():
    assert experiment_of("issue132233-etcd-table-100KB-10MB") == experiment_of("issue132233-calibration-data")
    assert experiment_of("kep2340-etcd-list-large-objects-cpu") == "kep2340"
    assert experiment_of("bench/etcd-1MB-10obj-json") == "bench/etcd-1MB-10obj-json"
    assert experiment_of("bench/etcd-1MB-10obj-json") != experiment_of("bench/etcd-10MB-100obj-json")


def test_leaving_an_experiment_out_takes_all_of_its_tables_out():
    # One publication in two tables, biased alike, and another experiment unbiased: a row of the
    # first gets its band from the second alone, so the shared bias shows as a miss.
    pool = residuals("issue1-a", 20, 0.5) + residuals("issue1-b", 20, 0.5) + residuals("other-x", 20, 0.0)
    here = Regime("etcd", "under 1 MB", False)
    kept = band(pool, "memory", here, leave_out="issue1")
    assert isinstance(kept, Band) and kept.rows == 20 and kept.sources == 1
    checked = leave_one_experiment_out(pool)
    first = [c for c in checked if c.residual.source.startswith("issue1")]
    assert first and all(c.banded and not c.covered for c in first)
    # Left out one table at a time, the publication's other table would have covered them.
    table_out = band([r for r in pool if r.source != "issue1-a"], "memory", here)
    assert isinstance(table_out, Band)
    assert sum(table_out.lo <= c.residual.residual <= table_out.hi for c in first if c.residual.source == "issue1-a") >= 18


def test_the_coverage_table_splits_the_bench_from_the_published_rows():
    pool = residuals("bench/g1", 20, 0.0) + residuals("bench/g2", 20, 0.0) + residuals("pub-x", 20, 0.0)
    checked = leave_one_experiment_out(pool)
    table = coverage_table(checked, where)
    bench = table[(table["kind"] == "memory") & (table["group"] == "bench")].iloc[0]
    published = table[(table["kind"] == "memory") & (table["group"] == "published")].iloc[0]
    assert bench["rows"] == 40 and published["rows"] == 20
    assert bench["with_band"] == 40 and bench["covered"] == 40
    assert published["with_band"] == 20 and published["coverage"] == 1.0
    assert table.iloc[-1]["kind"] == "all" and table.iloc[-1]["rows"] == 60


def test_a_bench_cell_becomes_residuals_of_its_measured_figures():
    from simapf.calibrate.bench_report import REPEAT, measured_cells
    from simapf.calibrate.bench_residuals import TABLES, predictions
    from simapf.uncertainty.draws import draw_parameters

    name = "etcd-1MB-10obj-json-c4"
    got = predictions(draw_parameters(2, 7), only={name})
    by_kind = {p.residual.kind: p for p in got}
    assert set(by_kind) == {"memory", "cpu", "latency"}
    first, repeat = measured_cells(TABLES["first"])[name], measured_cells(REPEAT)[name]
    assert by_kind["memory"].residual.measured == statistics.median(first["peak_rss_bytes"])
    assert by_kind["cpu"].residual.measured == statistics.median(repeat["mean_cores"])
    assert by_kind["latency"].residual.measured == statistics.median(repeat["list_mean_s"])
    for p in got:
        assert p.residual.source == "bench/etcd-1MB-10obj-json" and p.residual.path == "etcd"
        assert len(p.drawn) == 2 and all(v > 0 for v in p.drawn)
        assert p.residual.predicted > 0


def test_a_row_with_no_band_left_is_checked_on_its_parameters_interval_as_a_run_gets_it():
    pool = residuals("alone-x", 20, 0.2)  # one experiment: left out, nothing speaks for its rows
    wide = {r.id: [r.predicted * f for f in (0.6, 0.8, 1.2)] for r in pool}  # draws that reach the measurement
    narrow = {r.id: [r.predicted * f for f in (0.99, 1.01)] for r in pool}
    held, missed = leave_one_experiment_out(pool, wide), leave_one_experiment_out(pool, narrow)
    assert all(not c.banded for c in held + missed)
    assert all(c.covered for c in held) and not any(c.covered for c in missed)
    table = coverage_table(missed)
    assert table.iloc[0]["rows"] == 20 and table.iloc[0]["with_band"] == 0 and table.iloc[0]["coverage"] == 0.0
