"""Policy search: settings that keep constraints (no OOM kill, peak RSS under a bound) in every
scenario and seed at the best objective (a p99 latency, say), found with Optuna.

    spec     the optimisation file (scenarios, seeds, parameters, objective, constraints)
    scores   a trial's objective over its runs, its constraints' worst cases
    study    the sampler's loop, runs through the sweep backends, the resumable directory
    report   the best settings, the trials, the compared settings, the Pareto figure

    result = simapf.optimize("sweeps/optimize-relist-storm.yaml", out="results/opt")
    print(result.summary_text())
    simapf.optimize("sweeps/optimize-relist-storm.yaml", out="results/opt", budget="10m")  # then goes on

A search given a time budget (simapf.jobs.budget) stops once it is spent: during the compared
settings' runs, inside them (every run finished is kept); during the search, between batches of
trials (every trial asked is told), with the sampler's state in the study, so that the same call
goes on from there and finds what a search never stopped finds.

The package is `search`, not `optimize`, so that importing it never replaces the function
`simapf.optimize` with a module.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from simapf.jobs.budget import Budget
from simapf.jobs.estimate import estimate, recorded
from simapf.errors import ConfigError
from simapf.search.report import OptimizeResult, write_report
from simapf.search.study import (
    Evaluator,
    Stopped,
    compared_stage,
    estimate_line,
    finished_trials,
    import_optuna,
    refuse_user_code,
    result_directory,
    resume,
    search,
    study_for,
    trial_stages,
)
from simapf.search.spec import MAX_TRIALS, LoadedOptimization, OptimizeSpec, load_optimize_spec
from simapf.sweeps.spec import MAX_SWEEP_RUNS
from simapf.sweeps.backends import choose, release_workers, session

__all__ = ["LoadedOptimization", "OptimizeResult", "OptimizeSpec", "check_trials", "load_optimize_spec", "optimize"]


def check_trials(loaded: LoadedOptimization, trials: int | None) -> int:
    """The number of trials to run (--trials, else the file's), or a ConfigError if it is out of bounds."""
    s = loaded.spec
    n_trials = trials if trials is not None else s.trials
    if n_trials < 1:
        raise ConfigError(f"--trials: must be at least 1, got {n_trials}")
    n_runs = n_trials * len(s.scenarios) * len(s.seeds)
    if n_trials > MAX_TRIALS or n_runs > MAX_SWEEP_RUNS:
        raise ConfigError(f"--trials: {n_trials:,} trials ({n_runs:,} runs with {len(s.scenarios)} scenarios x "
                          f"{len(s.seeds)} seeds), more than {MAX_TRIALS:,} trials or {MAX_SWEEP_RUNS:,} runs")  # fmt: skip
    return n_trials


def optimize(
    spec: str | Path | dict | LoadedOptimization,
    out: str | Path | None = None,
    *,
    trials: int | None = None,
    workers: int | None = None,
    backend: str | None = None,
    dask: str | None = None,
    progress: bool = False,
    force: bool = False,
    allow_user_code: bool = False,
    budget: Budget | str | None = None,
    announce: Callable[[str], None] | None = None,
) -> OptimizeResult:
    """Run (or resume) a search and return what it found.

    `out`: the result directory (default: the file's `out`; neither: in memory only). It must
    be new, empty, this search's own directory (which resumes it), or `force`. `trials`
    overrides the file's. `workers`, `backend` ("joblib", "dask", "serial") and `dask` (a
    scheduler address) choose where runs execute, as for sweeps; the result does not depend on
    them. On Dask workers a scenario's own policy module runs only with `allow_user_code`.

    `budget` (a `simapf.jobs.budget.Budget`, or a duration such as "10m" counted from now): stop once
    it is spent (see the module's docstring), raising `simapf.jobs.budget.BudgetReached`; a budget
    needs `out`. `announce`: called, before any run, with a line that says how many runs are
    left at most and how long they should take (`simapf.jobs.estimate`).
    """
    if not isinstance(budget, Budget):
        budget = Budget.parse(budget)
    optuna = import_optuna()
    loaded = spec if isinstance(spec, LoadedOptimization) else load_optimize_spec(spec)
    s = loaded.spec
    chosen = choose(backend, workers, dask, s.backend.kind, s.backend.workers, s.backend.address)
    if chosen.kind == "dask" and not allow_user_code:
        refuse_user_code(loaded)
    n_trials = check_trials(loaded, trials)
    out_dir = Path(out) if out is not None else (loaded.base_dir / s.out if s.out else None)
    if budget.limited and out_dir is None:
        raise ConfigError("optimize: a budget needs a result directory (out) to continue from")
    start = time.perf_counter()
    workers = chosen.at_once()
    with result_directory(out_dir, loaded, force) as (runs_dir, storage), recorded() as pace:
        study = study_for(optuna, loaded, storage)
        try:
            with session(chosen) as run:
                ev = Evaluator(loaded, run, runs_dir, budget, workers, pace)
                if announce is not None:
                    announce(estimate_line(ev, n_trials, finished_trials(optuna, study), budget))
                try:
                    compared = ev.evaluate_all(loaded.compare_with, progress)
                except Stopped as stop:
                    left = [st for st in [compared_stage(ev)] if st]
                    left += trial_stages(ev, n_trials - finished_trials(optuna, study))
                    raise budget.reached(f"optimize {loaded.name}, the compared settings' runs (then {n_trials} "
                                         "trials)", stop.done, stop.total, "runs", kept=str(out_dir) if stop.done else None,
                                         left_s=estimate(left, pace).seconds) from None  # fmt: skip
                resume(optuna, study)
                search(optuna, study, ev, n_trials, progress, budget, str(out_dir))
        finally:
            release_workers()
        result = OptimizeResult.build(loaded, study, compared, ev.ran, out_dir, chosen.describe(),
                                      time.perf_counter() - start)  # fmt: skip
        if out_dir is not None:
            write_report(result, out_dir)
    return result
