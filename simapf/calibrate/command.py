"""What `simapf calibrate` does, apart from parsing its options (simapf/cli.py).

    simapf calibrate [--data FILE] [--out params.yaml] [--start FILE] [--max-iterations N]
                     [--noise-floor X] [--free KEYS] [--loss soft_l1|linear|worst]
    simapf calibrate --report [--params FILE] [--logo linear|refit|skip]

A fit starts from the shipped record (`calibration/params.yaml`) unless `--start` names
another record or ServerParams YAML. It fits the start record's own free parameters with its
own loss (`fit.free_parameters`, `fit.loss`) unless `--free` and `--loss` say otherwise (a plain
ServerParams YAML gets the built-in set and the default loss). It reuses the Jacobian stored
next to the start record when it belongs to the same values (so a refit costs its iterations
only), and writes the new record to `--out` with its Jacobian beside it (`<out stem>.jacobian.json`,
which says where its finite differences were taken if not at the record's values).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from simapf.calibrate.data import DEFAULT_DATA, load_rows
from simapf.calibrate.fit import NOISE_FLOOR, GivenJacobian, fit, free_params_by_key
from simapf.calibrate.grid import Simulator
from simapf.calibrate.record import (SHIPPED, build_record, is_record_file, load_params, record_free_params,
                                     record_loss, record_text)  # fmt: skip
from simapf.calibrate.record import jacobian_path
from simapf.calibrate.report import current_values, is_jacobian_file, jacobian_text, load_jacobian
from simapf.files import check_output_file, write_output_file
from simapf.sweeps.backends import Backend


def _outputs(out: str | Path) -> list[tuple[Path, str, Any]]:
    """The files a fit writes: (path, what it is called in an error, which existing file is an
    earlier one of simapf's). An earlier record and its Jacobian are replaced without --force:
    refitting a record in place is how the shipped one is updated."""
    return [(Path(out), "--out", is_record_file), (jacobian_path(out), "--out's Jacobian", is_jacobian_file)]


def check_out(out: str | Path, data: str | Path | None, force: bool = False) -> None:
    """Refuse, before the fit, an --out that cannot be written or would lose the user's data (as
    every output file: `simapf.files.check_output_file`); never the measured data."""
    inputs = [Path(data) if data is not None else DEFAULT_DATA]
    check_output_file(out, "--out", force, inputs, is_record_file)  # first: a directory has no Jacobian's name
    for path, option, ours in _outputs(out)[1:]:
        check_output_file(path, option, force, inputs, ours)


def calibrate(
    data: str | Path | None = None,
    out: str | Path = "params.yaml",
    start: str | Path | None = None,
    max_iterations: int = 10,
    n_jobs: int | None = None,
    free_keys: list[str] | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    loss: str | None = None,
    backend: Backend | None = None,
    noise_floor: float | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Fit, write the record and its Jacobian; returns the fit's summary figures.

    `free_keys` and `loss` default to the start record's (see the module's docstring).
    `backend`: where the cells run (default: `n_jobs` joblib workers). `noise_floor`: see
    `fit` (default NOISE_FLOOR). `force`: replace an existing `out` that is not a record (see
    `check_out`)."""
    check_out(out, data, force)
    data_path = Path(data) if data is not None else DEFAULT_DATA
    rows = load_rows(data_path)
    start_path = Path(start) if start is not None else SHIPPED
    params, setup, start_record = load_params(start_path)
    free = free_params_by_key(free_keys) if free_keys else record_free_params(start_record)
    loss = loss or record_loss(start_record)
    stored = load_jacobian(jacobian_path(start_path), free, current_values(free, params, setup), rows)
    given = GivenJacobian(*stored) if stored is not None else None
    with Simulator(n_jobs, backend) as sim:
        result = fit(rows, params, setup, free, max_iterations=max_iterations, simulator=sim,
                     progress=progress, log=log, given=given, loss=loss,
                     noise_floor=NOISE_FLOOR if noise_floor is None else noise_floor)  # fmt: skip
    record = build_record(
        result.params, result.setup, data_path=data_path, rows=len(rows),
        fit=result.fit_section(), error=result.summary.as_dict(),
    )  # fmt: skip
    texts = [record_text(record), jacobian_text(free, result.values, result.jacobian, result.residuals,
                                                result.jacobian_at)]  # fmt: skip
    for (path, option, ours), text in zip(_outputs(out), texts):
        write_output_file(path, text, "calibration", option, force, [data_path], ours)
    summary = result.summary.as_dict()
    summary.update(wall_s=round(result.wall_s, 1), iterations=result.iterations, grid_evaluations=result.evaluations)
    return summary
