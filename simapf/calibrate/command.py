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
from simapf.calibrate.record import SHIPPED, build_record, load_params, record_free_params, record_loss, write_record
from simapf.calibrate.report import current_values, jacobian_path, load_jacobian, save_jacobian
from simapf.files import check_output_file
from simapf.sweeps.backends import Backend


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
) -> dict[str, Any]:
    """Fit, write the record and its Jacobian; returns the fit's summary figures.

    `free_keys` and `loss` default to the start record's (see the module's docstring).
    `backend`: where the cells run (default: `n_jobs` joblib workers). `noise_floor`: see
    `fit` (default NOISE_FLOOR)."""
    check_output_file(Path(out))
    check_output_file(jacobian_path(out))
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
    write_record(record, out)
    save_jacobian(jacobian_path(out), free, result.values, result.jacobian, result.residuals, result.jacobian_at)
    summary = result.summary.as_dict()
    summary.update(wall_s=round(result.wall_s, 1), iterations=result.iterations, grid_evaluations=result.evaluations)
    return summary
