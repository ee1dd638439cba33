"""`sweep`: run every combination of a sweep's factors, replicated, and collect one row per run.

    df = simapf.sweep("sweeps/policies-size-qps.yaml", out="results/psq")   # all local cores
    df = simapf.sweep("sweep.yaml", out="results/x", dask="tcp://scheduler:8786")
    df = simapf.sweep("sweep.yaml", out="results/x", uncertainty=20)   # and 90 % intervals
    df = simapf.sweep("sweep.yaml", out="results/x", budget="10m")     # stop after 10 minutes

With an output directory, every finished run is written there at once (see `store`), and calling
`sweep` again with the same directory resumes: runs already there are not run again. So a sweep
given a time budget (simapf.jobs.budget) stops once it is spent, keeping every run finished, and
the same call without it (or with another) goes on from there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any, Callable

from simapf.version import __version__
from simapf.jobs.budget import Budget, Spent
from simapf.errors import ConfigError, SimapfError
from simapf.jobs.estimate import Pace, Runs, Stage, cost, estimate, recorded
from simapf.sweeps import store
from simapf.sweeps.backends import Backend, choose, release_workers, run_tasks, session
from simapf.sweeps.measure import RunTask, bundle
from simapf.sweeps.plan import PlannedRun, point_run_id
from simapf.sweeps.progress import with_progress
from simapf.sweeps.spec import LoadedSweep, SweepSpec, load_sweep_spec
from simapf.sweeps.uncertainty import draw_ids, draw_tasks
from simapf.uncertainty.model_error import load_pool


def sweep(
    spec: str | Path | dict | SweepSpec | LoadedSweep,
    out: str | Path | None = None,
    *,
    workers: int | None = None,
    backend: str | None = None,
    dask: str | None = None,
    progress: bool = False,
    base_dir: str | Path | None = None,
    force: bool = False,
    allow_user_code: bool = False,
    uncertainty: int | None = None,
    budget: Budget | str | None = None,
    announce: Callable[[str], None] | None = None,
):
    """Run a sweep and return its summary DataFrame (one row per run: run_id, replication,
    seed, the factor values, then the metrics; see docs/compare-and-sweep.md).

    `uncertainty` = N (default: the sweep file's): also run each combination under N parameter
    draws, and give every headline figure column its interval, `<column>_lo` and `<column>_hi`
    (`simapf.sweeps.uncertainty`; the draws' own rows: `simapf.load_sweep(out, draws=True)`).

    `out`: the result directory (default: the sweep file's `out`; neither: keep results in
    memory only). It must be new, empty, or this sweep's own directory (which resumes), unless
    `force` (runs are added beside what is there). `workers`, `backend` ("joblib", "dask", "serial") and `dask` (a scheduler
    address; implies the dask backend) override the sweep file's `backend`. Results are the same
    whichever backend and however many workers run them; only `wall_s` differs.
    A scenario that names the user's own policy module runs that code wherever it runs; on
    Dask workers (other machines, other people's) only with `allow_user_code`.

    `budget` (a `simapf.jobs.budget.Budget`, or a duration such as "10m" counted from now): stop
    once it is spent (simapf.jobs.pool), raising `simapf.jobs.budget.BudgetReached`; the runs finished are
    in `out` (which a budget needs), and calling `sweep` again goes on from there. `announce`:
    called, before any run, with a line that says how many runs are left and how long they
    should take (`simapf.jobs.estimate`).
    """
    if not isinstance(budget, Budget):
        budget = Budget.parse(budget)
    loaded = _loaded(spec, base_dir, uncertainty)
    chosen = choose_backend(loaded.spec, backend, workers, dask)
    if chosen.kind == "dask" and not allow_user_code:
        _refuse_user_code_on_workers(loaded)
    out_dir = Path(out) if out is not None else (loaded.base_dir / loaded.spec.out if loaded.spec.out else None)
    if budget.limited and out_dir is None:
        raise ConfigError("sweep: a budget needs a result directory (out) to continue from")
    bundles = [bundle(c.loaded) for c in loaded.combinations]  # shared by a combination's replications
    costs = [cost(c.loaded) for c in loaded.combinations]
    reps = loaded.spec.replications
    tasks = {run.run_id: task_for(loaded, run, bundles[run.index // reps], costs[run.index // reps])
             for run in loaded.runs}  # fmt: skip
    if loaded.spec.uncertainty:
        load_pool()  # the model's error is needed for the intervals: missing, say so before the runs
    tasks.update(draw_tasks(loaded, tasks))
    mine = manifest(loaded)
    order = mine["runs"]
    start = time.perf_counter()
    try:
        if out_dir is None:
            rows = {}
            with recorded() as pace:
                if announce is not None:
                    announce(_estimate_line(loaded, list(tasks.values()), len(order), chosen, budget, pace))
                for row in with_progress(run_tasks(list(tasks.values()), chosen), len(tasks), 0, loaded.name, progress):
                    rows[row["run_id"]] = store.row_table(row)
            tables, skipped = rows, 0
        else:
            tables, skipped = _run_into(out_dir, loaded, tasks, order, chosen, progress, force, budget, announce)
    finally:
        release_workers()
    df = store.results({rid: tables[rid] for rid in order}, mine)
    df.attrs["sweep"] = mine
    if loaded.spec.uncertainty:  # what the report prints of them (`load_sweep(out, contrasts=True)`: all)
        df.attrs["contrasts"] = store.results({rid: tables[rid] for rid in order}, mine, contrasts=True).to_dict("records")
    df.attrs["status"] = {
        "runs": len(order), "draw_runs": len(order) - len(loaded.runs), "skipped": skipped, "ran": len(order) - skipped,
        "wall_s": time.perf_counter() - start, "backend": chosen.describe(),
        "out": str(out_dir) if out_dir is not None else None,
    }  # fmt: skip
    return df


def _loaded(spec: str | Path | dict | SweepSpec | LoadedSweep, base_dir: str | Path | None,
            uncertainty: int | None) -> LoadedSweep:  # fmt: skip
    """The sweep, its `uncertainty` replaced when the caller gives one (checked as the file's)."""
    if not isinstance(spec, LoadedSweep):
        return load_sweep_spec(spec, base_dir, uncertainty)
    if uncertainty is None or uncertainty == spec.spec.uncertainty:
        return spec
    again = load_sweep_spec(spec.spec, spec.base_dir, uncertainty)
    return dataclasses.replace(again, name=spec.name, source=spec.source)


def _refuse_user_code_on_workers(loaded: LoadedSweep) -> None:
    from simapf.scenario.load import user_policies

    for combination in loaded.combinations:
        for spec, where in user_policies(combination.loaded.scenario):
            raise ConfigError(
                f"{loaded.source}: {where}.list_policy: {spec.list_policy!r} is your own Python code; a sweep runs it on "
                "the Dask workers only when you allow it (--allow-user-code; the module must be importable there)"
            )


def choose_backend(spec: SweepSpec, kind: str | None, workers: int | None, address: str | None) -> Backend:
    """The backend the caller asked for, the sweep file's where the caller said nothing."""
    b = spec.backend
    return choose(kind, workers, address, b.kind, b.workers, b.address)


def task_for(loaded: LoadedSweep, run: PlannedRun, bundled, cost_s: float | None = None) -> RunTask:
    """The task of one run; `bundled` is its combination's scenario data and files, `cost_s` its
    cost (simapf.jobs.estimate)."""
    data, files = bundled
    data = {**data, "run": {**data["run"], "seed": run.seed}}
    key = {"run_id": run.run_id, "replication": run.replication, "seed": run.seed, **run.factors}
    return RunTask(key=key, scenario=data, files=files,
                   metrics=tuple(loaded.spec.metrics) if loaded.spec.metrics else None, label=run.run_id,
                   cost=cost_s)  # fmt: skip


def manifest(loaded: LoadedSweep) -> dict[str, Any]:
    spec = loaded.spec
    # `uncertainty` only when there are draws: a sweep without them writes what it always did.
    draws = {"uncertainty": spec.uncertainty} if spec.uncertainty else {}
    return {
        "simapf_version": __version__,
        "name": loaded.name,
        "description": spec.description,
        "source": loaded.source,
        "key": loaded.definition_key(),
        "seed": spec.seed,
        "replications": spec.replications,
        **draws,
        "common_random_numbers": spec.common_random_numbers,
        "metrics": spec.metrics,
        "factors": loaded.factors,
        "base": loaded.base,
        "runs": [run.run_id for run in loaded.runs] + draw_ids(loaded),  # the point runs, then the draws
    }


def _stage(loaded: LoadedSweep, todo: list[RunTask], chosen: Backend) -> Stage:
    """The runs of `todo` (their parameter draws too) as their combinations' scenarios."""
    by_id = {run.run_id: loaded.combination(run).loaded for run in loaded.runs}
    counts: dict[int, int] = {}
    scenario_of: dict[int, Any] = {}
    for t in todo:
        scenario = by_id[point_run_id(t.key["run_id"])]
        counts[id(scenario)] = counts.get(id(scenario), 0) + 1
        scenario_of[id(scenario)] = scenario
    return Stage([Runs(scenario_of[k], n) for k, n in counts.items()], chosen.at_once())


def _estimate_line(loaded: LoadedSweep, todo: list[RunTask], total: int, chosen: Backend, budget: Budget,
                   pace: Pace) -> str:  # fmt: skip
    """The line that says how many of the sweep's runs are to be done and how long they take."""
    found = estimate([_stage(loaded, todo, chosen)], pace)
    planned = f"about {len(todo):,} runs" + (f" ({total - len(todo):,} of {total:,} already done)" if len(todo) < total else "")
    return found.line(f"sweep {loaded.name}", planned, budget)


@contextlib.contextmanager
def _no_session():
    yield lambda tasks: iter(())


def _run_into(out: Path, loaded: LoadedSweep, tasks: dict[str, RunTask], order: list[str], chosen: Backend,
              progress: bool, force: bool, budget: Budget, announce: Callable[[str], None] | None,
              ) -> tuple[dict[str, Any], int]:  # fmt: skip
    with store.result_directory(out, out.is_dir() and store.read_manifest(out) is not None, force, "sweep", out):
        return _run_locked(out, loaded, tasks, order, chosen, progress, budget, announce)


def _run_locked(out: Path, loaded: LoadedSweep, tasks: dict[str, RunTask], order: list[str], chosen: Backend,
                progress: bool, budget: Budget, announce: Callable[[str], None] | None) -> tuple[dict[str, Any], int]:  # fmt: skip
    with store.locked(out):
        mine = manifest(loaded)
        theirs = store.read_manifest(out)
        if theirs is not None and theirs.get("key") != mine["key"]:
            raise ConfigError(
                f"{out}: holds results of another sweep ({theirs.get('name')!r}: its base scenario, seed, factors "
                "or metrics differ); use another --out or remove that directory"
            )
        store.write_manifest(out, mine)
        tables = store.scan(out, set(order))
        skipped = len(tables)
        todo = [tasks[rid] for rid in order if rid not in tables]
        ran = 0
        finished: set[str] = set()
        with recorded() as pace, session(chosen) if todo else _no_session() as run:
            if announce is not None and todo:
                announce(_estimate_line(loaded, todo, len(order), chosen, budget, pace))
            try:
                with budget.applied():
                    for row in with_progress(run(todo), len(order), skipped, loaded.name, progress):
                        store.write_run(out, row)
                        finished.add(row["run_id"])
                        ran += 1
            except Spent:
                pass
        if ran < len(todo):
            left = [t for t in todo if t.key["run_id"] not in finished]
            raise budget.reached(f"sweep {loaded.name}", len(order) - len(left), len(order), "runs",
                                 kept=str(out) if skipped + ran else None,
                                 left_s=estimate([_stage(loaded, left, chosen)], pace).seconds)  # fmt: skip
        # Read back what is on disk: the table is what load_sweep(out) will give, whoever wrote it.
        for rid in order:
            if rid not in tables:
                table = store._read_run(store.run_path(out, rid), rid)
                if table is None:
                    raise SimapfError(f"{store.run_path(out, rid)}: written but unreadable")
                tables[rid] = table
    return tables, skipped
