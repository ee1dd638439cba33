"""The fit report: what it writes is reproducible, and the shipped page is current."""

from __future__ import annotations

import numpy as np
import pytest

from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.fit import free_params_by_key, residual_rows
from simapf.calibrate.report import NOTES, REPORT, load_jacobian, save_jacobian


def test_the_shipped_report_carries_the_current_notes():
    # docs/validation.md copies calibration/validation-notes.md when it is generated: a note edited
    # since has not reached the page until the report is run again.
    assert NOTES.read_text(encoding="utf-8").rstrip() in REPORT.read_text(encoding="utf-8")


def test_a_stored_jacobian_is_reused_only_for_the_same_residuals(tmp_path):
    # The report and `simapf calibrate` both reuse a Jacobian stored beside a record; one taken
    # on other data, or with another residual layout, is not theirs.
    rows = load_rows()
    free = free_params_by_key(["process.live_heap_bytes"])
    values = {"process.live_heap_bytes": 2e8}
    n = len(residual_rows(cells(rows)))
    path = tmp_path / "p.jacobian.json"
    save_jacobian(path, free, values, np.ones((n, 1)), np.zeros(n))
    J, r, taken_at = load_jacobian(path, free, values, rows)
    assert J.shape == (n, 1) and len(r) == n and taken_at is None
    assert load_jacobian(path, free, values, rows[:-1]) is None
    # One updated along a fit's steps says where its finite differences were taken.
    save_jacobian(path, free, values, np.ones((n, 1)), np.zeros(n), taken_at={"process.live_heap_bytes": 1.9e8})
    assert load_jacobian(path, free, values, rows).taken_at == pytest.approx([1.9e8])
    save_jacobian(path, free, values, np.ones((n - 1, 1)), np.zeros(n - 1))
    assert load_jacobian(path, free, values, rows) is None
