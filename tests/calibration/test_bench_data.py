"""The bench data set as committed: every cell of the grid measured at least three times, with
its provenance and spread, and docs/validation.md's bench section computed from it by the report
(its measured columns here; its predicted columns by running the model, in the slow test)."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from simapf.calibrate import bench_report
from simapf.calibrate.bench_cells import BENCH, COLUMNS, cells

CELLS = BENCH / "cells.csv"


def rows() -> list[dict[str, str]]:
    with open(CELLS, newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_cell_of_the_grid_is_measured_three_times_or_more():
    names = [c.name for c in cells()]
    assert len(names) >= 40 and len(set(names)) == len(names)
    counts: dict[str, int] = {}
    for row in rows():
        counts[row["cell"]] = counts.get(row["cell"], 0) + 1
    assert sorted(counts) == sorted(names)
    assert min(counts.values()) >= 3
    # Its columns, but for those added after it was measured (the load generator's CPU).
    header = list(rows()[0])
    assert header == ["cell", "group", "replication", *COLUMNS[: len(header) - 3]] and "client_mean_cores" not in header


def test_each_cell_says_what_made_it():
    record = json.loads((BENCH / "provenance.json").read_text())["cells"]
    assert sorted(record) == sorted(c.name for c in cells())
    for name, cell in record.items():
        assert cell["versions"]["kube-apiserver"] == "v1.37.2" and cell["versions"]["etcd"] == "3.7.0", name
        assert cell["machine"]["cores"] and cell["simapf_commit"], name
        assert any(f.startswith("--max-requests-inflight=") for f in cell["kube_apiserver_flags"]), name
        assert (BENCH / "profiles" / f"{name}.pb.gz").read_bytes()[:2] == b"\x1f\x8b", name


def test_the_spread_is_the_replications():
    with open(BENCH / "spread.csv", newline="") as handle:
        spread = {(r["cell"], r["figure"]): r for r in csv.DictReader(handle)}
    by_cell: dict[str, list[dict[str, str]]] = {}
    for row in rows():
        by_cell.setdefault(row["cell"], []).append(row)
    for cell, reps in by_cell.items():
        values = [float(r["peak_rss_bytes"]) for r in reps]
        got = spread[(cell, "peak_rss_bytes")]
        assert float(got["median"]) == pytest.approx(statistics.median(values))
        assert float(got["min"]) == min(values) and float(got["max"]) == max(values)


def test_validation_md_shows_the_report_and_its_measured_columns_are_the_data():
    page = bench_report.VALIDATION.read_text()
    block = bench_report.REPORT.read_text()
    assert block.strip() in page, "run: python -m simapf.calibrate.bench_report"
    measured = bench_report.measured_cells()
    for cell, columns in measured.items():
        line = next(line for line in block.splitlines() if line.startswith(f"| {cell} |"))
        rss = columns["peak_rss_bytes"]
        shown = f"{statistics.median(rss) / 1e6:,.0f} [{min(rss) / 1e6:,.0f}, {max(rss) / 1e6:,.0f}]"
        assert line.split(" | ")[1] == shown, cell


@pytest.mark.slow
def test_the_predicted_columns_are_the_models_now(tmp_path):
    page = tmp_path / "validation.md"
    page.write_text(bench_report.VALIDATION.read_text())
    block = bench_report.generate(report=tmp_path / "report.md", page=page)
    assert block == bench_report.REPORT.read_text(), "the model moved: run python -m simapf.calibrate.bench_report"
