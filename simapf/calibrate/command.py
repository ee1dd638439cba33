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

It first says how many runs the fit takes at most and about how long (simapf.jobs.estimate). With a
time budget (simapf.jobs.budget) the fit stops once the budget is spent, inside a grid evaluation
too when the result cache keeps the cells it finished (else between grid evaluations, once it
has done an iteration), and writes nothing to `--out`: the best point so far goes, as a whole
record marked unfinished (`fit.unfinished`, and in its name), to `<out stem>.unfinished.yaml`
with the fit's last Jacobian beside it, and the fit goes on from there with `--start` that
record (and the iterations left). Stopped before its first iteration, it writes nothing at all:
the same command goes on, its cells done read from the result cache.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable

from simapf.simulation import cache
from simapf.jobs.budget import Budget, Spent

from simapf.calibrate.data import DEFAULT_DATA, load_rows
from simapf.calibrate.fit import NOISE_FLOOR, GivenJacobian, fit, free_params_by_key
from simapf.calibrate.grid import Simulator
from simapf.calibrate.record import (SHIPPED, build_record, is_record_file, load_params, record_free_params,
                                     record_loss, record_text)  # fmt: skip
from simapf.calibrate.record import jacobian_path
from simapf.calibrate.report import current_values, is_jacobian_file, jacobian_text, load_jacobian
from simapf.files import check_output_file, write_output_file
from simapf.sweeps.backends import Backend, cpu_count


def _outputs(out: str | Path) -> list[tuple[Path, str, Any]]:
    """The files a fit writes: (path, what it is called in an error, which existing file is an
    earlier one of simapf's). An earlier record and its Jacobian are replaced without --force:
    refitting a record in place is how the shipped one is updated."""
    return [(Path(out), "--out", is_record_file), (jacobian_path(out), "--out's Jacobian", is_jacobian_file)]


def unfinished_path(out: str | Path) -> Path:
    """Where a fit its budget stopped keeps the best point so far: `<out stem>.unfinished.yaml`."""
    p = Path(out)
    return p.with_name(f"{p.stem}.unfinished{p.suffix or '.yaml'}")


def check_out(out: str | Path, data: str | Path | None, force: bool = False, budget: bool = False) -> None:
    """Refuse, before the fit, an --out that cannot be written or would lose the user's data (as
    every output file: `simapf.files.check_output_file`); never the measured data. With a
    `budget`, the unfinished record's files too."""
    inputs = [Path(data) if data is not None else DEFAULT_DATA]
    check_output_file(out, "--out", force, inputs, is_record_file)  # first: a directory has no Jacobian's name
    for path, option, ours in _outputs(out)[1:]:
        check_output_file(path, option, force, inputs, ours)
    if budget:
        for path, option, ours in _outputs(unfinished_path(out)):
            check_output_file(path, f"{option} (unfinished, for --budget)", force, inputs, ours)


def planned_grids(free: int, max_iterations: int, given: bool) -> int:
    """The most grid evaluations a fit takes: the start; finite differences there (unless
    given), every REFRESH_EVERY iterations and at the solution, each at most one grid per free
    parameter; and one per iteration."""
    from simapf.calibrate.fit import REFRESH_EVERY

    refreshes = (0 if given else 1) + (max_iterations - 1) // REFRESH_EVERY + 1
    return 1 + max_iterations + free * refreshes


# Grid evaluations a fit takes from a record's solution, with its Jacobian (measured: the shipped
# record's refit, docs/benchmarks.md): the start, a trial step or two, and the steps' cells.
REFIT_GRIDS = 4.0


def expected_grids(start_record: dict[str, Any], given: bool) -> float | None:
    """The grid evaluations a fit is expected to take: REFIT_GRIDS from a record's solution
    with its Jacobian (`given`), else as many as the start record's own fit took, if it says."""
    if given:
        return REFIT_GRIDS
    got = (start_record.get("fit") or {}).get("grid_evaluations") if isinstance(start_record, dict) else None
    return float(got) if isinstance(got, (int, float)) and not isinstance(got, bool) and got > 0 else None


def _grid(rows, params, setup) -> list[Any]:
    """The cells of a grid evaluation, as runs (simapf.jobs.estimate)."""
    from simapf.calibrate.data import cells
    from simapf.calibrate.scenario import scenario_for
    from simapf.jobs.estimate import Runs
    from simapf.scenario import load_scenario

    return [Runs(load_scenario(scenario_for(c, params, setup))) for c in cells(rows)]


def _estimate_line(grid: list[Any], workers: int, grids: float, most: int, free: int, max_iterations: int,
                   why: str, budget: Budget, pace: Any) -> str:  # fmt: skip
    """The line a fit starts with: its runs, `grids` grid evaluations (`expected_grids`, or
    else, and at most, `most`: as many as `max_iterations` allow)."""
    from simapf.jobs.estimate import Stage, estimate

    found = estimate([Stage(grid, workers, times=grids)], pace)
    bound = f"{most} grid evaluations of {len(grid)} cells: {max_iterations} iterations, finite differences over {free} parameters"
    if grids >= most:
        return found.line("calibrate", f"at most {found.runs:,} runs ({bound})", budget, most=True)
    planned = f"about {found.runs:,} runs ({grids:g} grid evaluations, {why}; at most {most * len(grid):,}: {bound})"
    return found.line("calibrate", planned, budget)


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
    budget: Budget | None = None,
    announce: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit, write the record and its Jacobian; returns the fit's summary figures.

    `free_keys` and `loss` default to the start record's (see the module's docstring).
    `backend`: where the cells run (default: `n_jobs` joblib workers). `noise_floor`: see
    `fit` (default NOISE_FLOOR). `force`: replace an existing `out` that is not a record (see
    `check_out`). `budget`: stop between grid evaluations once it is spent, write the best point
    so far as an unfinished record (see the module's docstring) and raise
    `simapf.jobs.budget.BudgetReached`. `announce`: called, before the fit, with a line that says how
    many runs it takes at most and how long."""
    from simapf.jobs.estimate import Stage, estimate, recorded

    budget = budget or Budget()
    check_out(out, data, force, budget.limited)
    data_path = Path(data) if data is not None else DEFAULT_DATA
    rows = load_rows(data_path)
    start_path = Path(start) if start is not None else SHIPPED
    params, setup, start_record = load_params(start_path)
    free = free_params_by_key(free_keys) if free_keys else record_free_params(start_record)
    loss = loss or record_loss(start_record)
    stored = load_jacobian(jacobian_path(start_path), free, current_values(free, params, setup), rows)
    given = GivenJacobian(*stored) if stored is not None else None
    grid = _grid(rows, params, setup)
    most = planned_grids(len(free), max_iterations, given is not None)
    grids = min(expected_grids(start_record, given is not None) or most, most)
    with Simulator(n_jobs, backend) as sim, recorded() as pace:
        workers = sim.backend.workers or (1 if sim.backend.kind == "serial" else cpu_count())
        if announce is not None:
            why = "as a refit from a solution with its Jacobian takes" if given is not None else "as the start's own fit took"
            announce(_estimate_line(grid, workers, grids, most, len(free), max_iterations, why, budget, pace))

        def left_s(done: float) -> float:
            return estimate([Stage(grid, workers, times=max(grids - done, 1.0))], pace).seconds

        # Inside a grid evaluation only where the cells it finished are kept for the next call.
        inside = budget.applied() if cache.active() is not None else contextlib.nullcontext()
        before = sum(cache.tally.snapshot())
        try:
            with inside:
                result = fit(rows, params, setup, free, max_iterations=max_iterations, simulator=sim,
                             progress=progress, log=log, given=given, loss=loss,
                             noise_floor=NOISE_FLOOR if noise_floor is None else noise_floor, budget=budget)  # fmt: skip
        except Spent:
            done = (sum(cache.tally.snapshot()) - before) / len(grid)
            raise budget.reached("calibrate", 0, max_iterations, "iterations", kept="the result cache (the cells it ran)",
                                 left_s=left_s(done)) from None  # fmt: skip
        rest_s = left_s(result.evaluations)
    section = result.fit_section()
    if result.stopped:
        section["unfinished"] = result.stopped
    record = build_record(
        result.params, result.setup, data_path=data_path, rows=len(rows),
        fit=section, error=result.summary.as_dict(),
    )  # fmt: skip
    texts = [record_text(record)]
    if result.jacobian is not None:
        texts.append(jacobian_text(free, result.values, result.jacobian, result.residuals, result.jacobian_at))
    written = unfinished_path(out) if result.stopped else out
    for (path, option, ours), text in zip(_outputs(written), texts):
        write_output_file(path, text, "calibration", option, force, [data_path], ours)
    if result.stopped:
        left = max(max_iterations - result.iterations, 1)
        raise budget.reached("calibrate", max_iterations - left, max_iterations, "iterations", kept=str(written), left_s=rest_s,
                             resume=("--start", str(written), "--max-iterations", str(left)))  # fmt: skip
    summary = result.summary.as_dict()
    summary.update(wall_s=round(result.wall_s, 1), iterations=result.iterations, grid_evaluations=result.evaluations)
    return summary
