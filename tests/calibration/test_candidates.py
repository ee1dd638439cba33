"""Candidate calibrations (calibration/candidates/): each loads, and its record is consistent."""

from __future__ import annotations

from pathlib import Path

import pytest

from simapf.calibrate.fit import _get, free_params_by_key
from simapf.calibrate.record import load_params
from simapf.calibrate.report import jacobian_path

CANDIDATES = sorted((Path(__file__).resolve().parents[2] / "calibration" / "candidates").glob("*.yaml"))


def test_there_are_candidates():
    assert CANDIDATES


@pytest.mark.parametrize("path", CANDIDATES, ids=lambda p: p.stem)
def test_a_candidate_loads_and_holds_its_fitted_values(path):
    params, setup, record = load_params(path)
    fitted = record["fit"]["free_parameters"]
    free_params_by_key(list(fitted))  # every fitted key is one the fit knows
    values = {**params.model_dump(), "experiment": setup.model_dump()}
    for key, entry in fitted.items():
        assert _get(values, key) == pytest.approx(entry["fitted"]), key
    assert record["error"]["memory_cells"] == 54
    assert jacobian_path(path).is_file()
