"""A run with its uncertainty: the point run and N draws of the model, on the sweep backends.

`simapf run --uncertainty N` (`simapf.run(..., uncertainty=N)`, `run` here) runs the scenario
once with the fitted parameters (the point run, whose figures the summary reports as before) and
N times more, each with a parameter set drawn from the calibration's uncertainty
(`simapf.uncertainty.draws`), on the point run's random streams (its seed). Each headline figure
then gets its interval beside it (`simapf.uncertainty.intervals.attach`, which says what an
interval is made of).
"""

from __future__ import annotations

from typing import Any

from simapf.uncertainty.draws import ParameterDraws, draw_parameters
from simapf.uncertainty.intervals import attach, drawn_scenario


def draw_tasks(loaded: Any, draws: ParameterDraws, key: dict[str, Any], label: str = "") -> list:
    """A sweep task per draw: the loaded scenario, its seed unchanged, with the draw's parameters."""
    from simapf.jobs.estimate import cost
    from simapf.sweeps.measure import RunTask, bundle

    data, files = bundle(loaded)
    cost_s = cost(loaded)
    return [RunTask(key={**key, "draw": d}, scenario=drawn_scenario(data, loaded.params, draws, d), files=files,
                    label=f"{label}draw {d + 1}/{len(draws)}", cost=cost_s)  # fmt: skip
            for d in range(len(draws))]


def run_draw_tasks(tasks: list, workers: int | None = None, backend: str | None = None, dask: str | None = None,
                   progress: bool = False, name: str = "") -> list[dict[str, Any]]:  # fmt: skip
    """Each task's row (a sweep row: the headline figures among its columns), in task order."""
    from simapf.jobs.estimate import recorded
    from simapf.sweeps.backends import choose, release_workers, run_tasks
    from simapf.sweeps.progress import with_progress

    chosen = choose(backend, workers, dask)
    rows = {}
    try:
        with recorded():  # their times teach the estimates this machine's pace
            for row in with_progress(run_tasks(tasks, chosen), len(tasks), 0, f"{name} draws", progress):
                rows[_task_id(row)] = row
    finally:
        release_workers()
    return [rows[_task_id(t.key)] for t in tasks]


def _task_id(key: dict[str, Any]) -> tuple:
    return (key.get("policy"), key["draw"])


def run(scenario: Any, overrides: Any = (), progress: bool = False, uncertainty: int = 0, *,
        workers: int | None = None, backend: str | None = None, dask: str | None = None,
        cache: bool = True) -> Any:  # fmt: skip
    """`simapf.run`: run a scenario (a loaded one, a Scenario, a dict or a file path) and return
    its Result (`simapf.simulation.runner.run`); with `uncertainty` = N > 0, also N parameter draws (on
    `workers` local processes, or `backend`/`dask` as for sweeps), and every headline figure of
    the summary with its interval. `cache`: read the point run and the draws from the result
    cache when it holds them, and keep them there (simapf.simulation.cache)."""
    from simapf.simulation.cache import turned_off
    from simapf.simulation.runner import load
    from simapf.simulation.runner import run as point_run

    loaded = load(scenario, overrides)
    with turned_off(not cache):
        result = point_run(loaded, progress=progress)
        if uncertainty:
            add_uncertainty(result, loaded, uncertainty, workers=workers, backend=backend, dask=dask, progress=progress)
    return result


def add_uncertainty(result: Any, loaded: Any, n: int, *, workers: int | None = None, backend: str | None = None,
                    dask: str | None = None, progress: bool = False) -> Any:  # fmt: skip
    """`result` (the point run of `loaded`) with every headline figure's interval from `n` draws."""
    draws = draw_parameters(n, loaded.scenario.run.seed)
    rows = run_draw_tasks(draw_tasks(loaded, draws, {}), workers, backend, dask, progress, loaded.scenario.name)
    attach(result.summary, rows, draws=draws)
    return result
