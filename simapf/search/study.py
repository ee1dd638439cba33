"""The search: Optuna's TPE sampler asks for settings `batch` trials at a time, their runs go
through the sweep backends seed by seed, and each trial is told its score (simapf.search.scores).

With the worst case as aggregate a trial stops early, exactly: once a constraint fails in one run,
or the worst value so far is already worse than the best feasible trial's, no further run can
change the verdict. Optuna records such a trial as pruned.

A run is known by what it simulates, so the same scenario and seed asked for by two trials (or by
a compared setting) runs once; with a result directory every finished run is written to `runs/`
(the sweep store's format) at once and the study is an Optuna journal, so a search resumes.

A time budget (simapf.jobs.budget) stops a search inside the runs of the compared settings (every
run finished is kept), or between batches of trials, never inside one (`held`), so that every
trial asked for has been told. The sampler's random state goes into the study when it stops
(`save_sampler`) and is taken up again when the search goes on (`restore_sampler`): the trials
after a budget stop are those a search never stopped would have asked for.
"""

from __future__ import annotations

import hashlib
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from simapf.version import __version__
from simapf.jobs import budget as budgets
from simapf.jobs.budget import Budget
from simapf.errors import ConfigError, SimapfError
from simapf.jobs.estimate import Pace, Runs, Stage, cost, estimate
from simapf.search.scores import Evaluation, largest, objective_value, rank, violations
from simapf.search.spec import LoadedOptimization, Parameter, ScenarioCase
from simapf.sweeps import store
from simapf.sweeps.measure import RunTask, bundle
from simapf.sweeps.plan import canonical_json, digest

MANIFEST = "_optimize.json"
JOURNAL = "study.journal"
RUNS = "runs"


# ------------------------------------------------------------------------------- runs


class Stopped(Exception):
    """The budget was spent before every run asked for was done: `done` of `total`."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"{done} of {total} runs")
        self.done = done
        self.total = total


class Evaluator:
    """Runs of settings in every scenario and seed, each run done once (kept in `runs_dir`);
    `pace` estimates what is left (simapf.jobs.estimate). The runs of the compared settings stop
    once `budget` is spent (simapf.jobs.pool); a batch of trials' runs finish whole."""

    def __init__(self, loaded: LoadedOptimization, run: Callable[[Sequence[RunTask]], Iterator[dict]],
                 runs_dir: Path | None, budget: Budget | None = None, workers: int = 1,
                 pace: Pace | None = None) -> None:  # fmt: skip
        self.loaded = loaded
        self.run = run
        self.runs_dir = runs_dir
        self.budget = budget or Budget()
        self.workers = workers
        self.pace = pace
        self.rows: dict[str, dict[str, Any]] = {}  # run id -> row, this session's and the directory's
        self._read_directory = runs_dir is None
        s = loaded.spec
        self.metrics = list(dict.fromkeys([s.objective.metric, *(c.metric for c in s.constraints), "peak_rss_bytes"]))
        self.ran = 0
        self.on_run: Callable[[], None] = _nothing  # after each run done

    def task(self, case: ScenarioCase, settings: dict[str, Any], seed: int) -> RunTask:
        scenario = self.loaded.load(case, settings, seed)
        data, files = bundle(scenario)
        # A run is known by what it simulates: the same scenario, seed and files is the same run,
        # whichever trial (or compared setting) asked for it.
        rid = digest({"scenario": data, "files": [[n, hashlib.sha256(c).hexdigest()] for n, c in files]}).hex()[:16]
        key = {"run_id": rid, "scenario": case.name, "seed": seed, "settings": canonical_json(settings)}
        return RunTask(key=key, scenario=data, files=files, label=rid, cost=cost(scenario))

    def results(self, tasks: list[RunTask], budgeted: bool = False) -> dict[str, dict[str, Any]]:
        """Rows of `tasks` by run id: finished ones from before, the rest run now; `budgeted`:
        only while the budget lasts (else `Stopped`)."""
        todo = self.todo(tasks)
        ran = 0
        try:
            with self.budget.applied() if budgeted else budgets.held():
                for row in self.run(todo):
                    if self.runs_dir is not None:
                        store.write_run(self.runs_dir, row)
                    self.rows[row["run_id"]] = row
                    self.ran += 1
                    ran += 1
                    self.on_run()
        except budgets.Spent:
            raise Stopped(len(tasks) - len(todo) + ran, len(tasks)) from None
        return {t.key["run_id"]: self.rows[t.key["run_id"]] for t in tasks}

    def todo(self, tasks: list[RunTask]) -> list[RunTask]:
        """Those of `tasks` not done before, each once."""
        self._read_earlier()
        todo, seen = [], set()
        for t in tasks:
            rid = t.key["run_id"]
            if rid not in self.rows and rid not in seen:
                seen.add(rid)
                todo.append(t)
        return todo

    def _read_earlier(self) -> None:
        if not self._read_directory:
            # Once: the runs an earlier session left. After that every run is this session's,
            # so a long search does not list its directory again at every batch.
            self._read_directory = True
            earlier = {rid for rid, _path in store.run_files(self.runs_dir)}
            for rid, table in store.scan(self.runs_dir, earlier).items():
                self.rows[rid] = table.to_pylist()[0]

    def evaluate_all(self, settings: dict[str, dict[str, Any]], progress: bool = False) -> dict[str, Evaluation]:
        """Every run of each labelled setting (the compared ones: no early stop), all at once so
        that they share the workers, with a bar over the runs when `progress`."""
        from simapf.progress import progress_bar

        if not settings:
            return {}
        tasks = {label: [self.task(c, s, seed) for seed in self.loaded.spec.seeds for c in self.loaded.cases]
                 for label, s in settings.items()}  # fmt: skip
        self._read_earlier()
        todo = len({t.key["run_id"] for ts in tasks.values() for t in ts} - set(self.rows))
        bar = progress_bar(todo, f"{self.loaded.name}, compared settings", "runs", progress and todo > 0)
        try:
            self.on_run = lambda: bar.update(1)
            rows = self.results([t for ts in tasks.values() for t in ts], budgeted=True)
        finally:
            self.on_run = _nothing
            bar.close()
        out = {}
        for label, ts in tasks.items():
            out[label] = ev = Evaluation(dict(settings[label]))
            for t in ts:
                ev.add(t.key["run_id"], rows[t.key["run_id"]], self.metrics)
        return out


def _nothing() -> None:
    pass


# ------------------------------------------------------------------------------- the search


def import_optuna():
    try:
        import optuna
    except ImportError:
        raise SimapfError("simapf optimize needs Optuna: pip install 'simapf[optimize]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def study_for(optuna, loaded: LoadedOptimization, storage):
    s = loaded.spec
    sampler = optuna.samplers.TPESampler(seed=s.seed, n_startup_trials=s.startup_trials)
    return optuna.create_study(storage=storage, sampler=sampler, study_name=loaded.name,
                               direction=s.objective.direction, load_if_exists=True)  # fmt: skip


def distributions(optuna, parameters: dict[str, Parameter]) -> dict[str, Any]:
    d = optuna.distributions
    out = {}
    for key, p in parameters.items():
        if p.choices is not None:
            out[key] = d.CategoricalDistribution(p.choices)
        elif p.type == "int":
            out[key] = d.IntDistribution(int(p.low), int(p.high), log=p.log)
        else:
            out[key] = d.FloatDistribution(p.low, p.high, log=p.log)
    return out


def resume(optuna, study) -> None:
    """Trials a killed search left running are failed and asked again, with the same settings."""
    TrialState = optuna.trial.TrialState
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})


def finished_trials(optuna, study) -> int:
    """Trials with a verdict: complete, stopped early, or refused by a scenario (not those a
    killed search left running, which are asked again)."""
    TrialState = optuna.trial.TrialState
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL))
    return sum(1 for t in done if t.state != TrialState.FAIL or "error" in t.user_attrs)


def _best_feasible(optuna, study, loaded: LoadedOptimization) -> tuple[float, ...] | None:
    """The rank (`scores.rank`) of the best feasible trial so far, None before there is one."""
    ranks = [trial_rank(loaded, t) for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
             if t.user_attrs.get("feasible")]  # fmt: skip
    return min(ranks, default=None)


def trial_rank(loaded: LoadedOptimization, trial) -> tuple[float, ...]:
    """A finished trial's rank, from what it recorded (a missing worst case ranks last)."""
    attrs = trial.user_attrs
    decisive = [_number(attrs.get(f"worst:{c.metric}")) for c in loaded.spec.constraints]
    return rank(loaded, trial.value, _number(attrs.get("worst:peak_rss_bytes")), decisive)


def _number(x: float | None) -> float:
    return math.nan if x is None else float(x)


def search(optuna, study, ev: Evaluator, n_trials: int, progress: bool, budget: Budget | None = None,
           kept: str | None = None) -> None:  # fmt: skip
    """Ask, run and tell trials until `n_trials` have a verdict; stop between batches once
    `budget` is spent (`BudgetReached`, the sampler's state saved in the study)."""
    from simapf.progress import progress_bar

    loaded = ev.loaded
    budget = budget or Budget()
    space = distributions(optuna, loaded.spec.parameters)
    done = finished_trials(optuna, study)
    restore_sampler(study, done)
    bar = progress_bar(max(n_trials, done), loaded.name, "trials", progress, initial=done)
    try:
        while done < n_trials:
            if budget.may_stop():  # once this call has done something: it always gets on
                save_sampler(study, done)
                raise budget.reached(f"optimize {loaded.name}", done, n_trials, "trials", kept=kept if ev.rows else None,
                                     left_s=estimate(trial_stages(ev, n_trials - done), ev.pace).seconds)  # fmt: skip
            batch = [study.ask(space) for _ in range(min(loaded.spec.batch, n_trials - done))]
            for trial in _run_batch(optuna, study, ev, batch):
                bar.update(1)
            budget.progressed()
            done = finished_trials(optuna, study)
    finally:
        bar.close()


SAMPLER_STATE = "simapf:sampler_state"  # the study's user attribute that holds it


def _samplers(study) -> list[Any]:
    """The random states the study's sampler draws from (TPE's, and its start-up sampler's)."""
    sampler = study.sampler
    found = [getattr(sampler, "_rng", None), getattr(getattr(sampler, "_random_sampler", None), "_rng", None)]
    return [s.rng for s in found if s is not None and hasattr(s, "rng")]


def save_sampler(study, done: int) -> None:
    """Keep the sampler's random state in the study, with the number of trials it follows."""
    states = []
    for rng in _samplers(study):
        kind, keys, pos, has_gauss, cached = rng.get_state()
        states.append([kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)])
    study.set_user_attr(SAMPLER_STATE, {"trials": done, "states": states})


def restore_sampler(study, done: int) -> None:
    """Take up the random state a budget stop kept, if it follows exactly the trials there are
    (after a search killed instead, the sampler starts afresh, as it always did)."""
    import numpy as np

    kept = study.user_attrs.get(SAMPLER_STATE)
    rngs = _samplers(study)
    if not isinstance(kept, dict) or kept.get("trials") != done or len(kept.get("states") or []) != len(rngs):
        return
    if len(study.get_trials(deepcopy=False)) != done:  # trials asked and never told: not a budget stop
        return
    for rng, (kind, keys, pos, has_gauss, cached) in zip(rngs, kept["states"]):
        rng.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def compared_stage(ev: Evaluator) -> Stage | None:
    """The compared settings' runs not done yet, if any."""
    loaded = ev.loaded
    s = loaded.spec
    compared = ev.todo([ev.task(c, settings, seed) for settings in loaded.compare_with.values()
                        for seed in s.seeds for c in loaded.cases])  # fmt: skip
    if not compared:
        return None
    runs = [Runs(loaded.load(_case(loaded, t.key["scenario"]), _settings(t), t.key["seed"])) for t in compared]
    return Stage(runs, ev.workers)


def trial_stages(ev: Evaluator, trials: int) -> list[Stage]:
    """`trials` trials' runs at most (a trial may stop early), each scenario at the ends of the
    parameters' ranges, a batch's runs at once."""
    loaded = ev.loaded
    s = loaded.spec
    if trials <= 0:
        return []
    ends = [{k: p.ends()[i] for k, p in s.parameters.items()} for i in (0, -1)]
    half = trials * len(s.seeds) / 2
    runs = [Runs(loaded.load(c, settings, s.seeds[0]), count)
            for c in loaded.cases for settings, count in zip(ends, (math.floor(half), math.ceil(half)))]  # fmt: skip
    return [Stage(runs, max(1, min(ev.workers, s.batch * len(loaded.cases))))]


def estimate_line(ev: Evaluator, n_trials: int, done: int, budget: Budget) -> str:
    """The line that says how many runs are left at most (a trial may stop early) and how long
    they take: the compared settings' runs not done yet, then the trials' runs."""
    loaded = ev.loaded
    s = loaded.spec
    compared = compared_stage(ev)
    trials = max(n_trials - done, 0)
    found = estimate(([compared] if compared else []) + trial_stages(ev, trials), ev.pace)
    n_compared = sum(r.count for r in compared.runs) if compared else 0
    n = n_compared + trials * len(s.seeds) * len(loaded.cases)
    parts = [f"{trials:,} trial{'s' if trials != 1 else ''} of {len(s.seeds) * len(loaded.cases)} runs"] if trials else []
    if compared:
        parts.insert(0, f"{n_compared:,} runs of the compared settings")
    planned = f"at most {n:,} runs ({', then '.join(parts) or 'none left'})"
    return found.line(f"optimize {loaded.name}", planned, budget)


def _case(loaded: LoadedOptimization, name: str) -> ScenarioCase:
    return next(c for c in loaded.cases if c.name == name)


def _settings(task: RunTask) -> dict[str, Any]:
    import json

    return json.loads(task.key["settings"])


def _run_batch(optuna, study, ev: Evaluator, batch: list) -> Iterator[Any]:
    """Run a batch of trials seed by seed, stop the ones whose verdict is settled, tell them all."""
    loaded = ev.loaded
    s = loaded.spec
    TrialState = optuna.trial.TrialState
    evals = {t.number: Evaluation(dict(t.params)) for t in batch}
    alive = {t.number: t for t in batch}
    errors: dict[int, str] = {}
    stopped: dict[int, str] = {}
    best = _best_feasible(optuna, study, loaded)
    total = len(s.seeds) * len(loaded.cases)
    for r, seed in enumerate(s.seeds):
        tasks = {}
        for n in list(alive):
            try:
                tasks[n] = [ev.task(c, evals[n].settings, seed) for c in loaded.cases]
            except ConfigError as exc:  # a setting inside the ranges that the scenario refuses
                errors[n] = str(exc)
                del alive[n]
        rows = ev.results([t for ts in tasks.values() for t in ts])
        for n, ts in tasks.items():
            for t in ts:
                evals[n].add(t.key["run_id"], rows[t.key["run_id"]], ev.metrics)
        if s.objective.aggregate != "worst" or r == len(s.seeds) - 1:
            continue
        for n in list(alive):
            e = evals[n]
            if max(violations(loaded, e), default=-1.0) > 0:
                stopped[n] = f"a constraint fails after {len(e.runs)} of {total} runs"
            elif best is not None and _rank_so_far(loaded, e) >= best:
                stopped[n] = f"cannot beat the best feasible trial after {len(e.runs)} of {total} runs"
            else:
                continue
            del alive[n]
    for trial in batch:
        n = trial.number
        e = evals[n]
        if n in errors:
            trial.set_user_attr("error", errors[n])
            study.tell(trial, state=TrialState.FAIL)
            yield trial
            continue
        value = objective_value(loaded, e.values.get(s.objective.metric, []))
        v = violations(loaded, e)
        for c, x in zip(s.constraints, v):
            trial.set_constraint(c.metric, x)  # the sampler ranks trials that break one below all others
        trial.set_user_attr("feasible", all(x <= 0 for x in v))
        trial.set_user_attr("runs", e.runs)
        trial.set_user_attr("runs_total", total)
        trial.set_user_attr("worst:peak_rss_bytes", _json_number(largest(e.values.get("peak_rss_bytes", []))))
        for c in s.constraints:
            trial.set_user_attr(f"worst:{c.metric}", _json_number(c.decisive(e.values.get(c.metric, []))))
        if n in stopped:
            trial.set_user_attr("stopped", stopped[n])
            trial.report(value, step=len(e.runs))
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, value)
        yield trial


def _rank_so_far(loaded: LoadedOptimization, e: Evaluation) -> tuple[float, ...]:
    """A trial's rank on the runs done so far: with the worst case as aggregate, the least it
    can end with (a later trial that only ties the best does not beat it)."""
    s = loaded.spec
    decisive = [c.decisive(e.values.get(c.metric, [])) for c in s.constraints]
    return rank(loaded, objective_value(loaded, e.values[s.objective.metric]),
                largest(e.values.get("peak_rss_bytes", [])), decisive)  # fmt: skip


def _json_number(x: float) -> float | None:
    # Optuna keeps user attributes as JSON, which has no NaN or infinity.
    return x if math.isfinite(x) else None


def refuse_user_code(loaded: LoadedOptimization) -> None:
    from simapf.scenario.load import user_policies

    first = {k: p.ends()[0] for k, p in loaded.spec.parameters.items()}
    for label, settings in [("", first), *loaded.compare_with.items()]:
        for case in loaded.cases:
            for spec, where in user_policies(loaded.load(case, settings, loaded.spec.seeds[0]).scenario):
                raise ConfigError(
                    f"{loaded.source}: scenarios.{case.name}: {where}.list_policy: {spec.list_policy!r} is your own "
                    "Python code; a search runs it on the Dask workers only when you allow it (--allow-user-code)"
                )
    for key, p in loaded.spec.parameters.items():
        for value in p.choices or []:
            if isinstance(value, str) and ":" in value:
                raise ConfigError(
                    f"{loaded.source}: parameters.{key}: {value!r} is your own Python code; a search runs it on the "
                    "Dask workers only when you allow it (--allow-user-code)"
                )


# ------------------------------------------------------------------------------- the directory


@contextmanager
def result_directory(out: Path | None, loaded: LoadedOptimization, force: bool) -> Iterator[tuple[Path | None, Any]]:
    """The runs' directory and the study's storage: in memory without `out`; else `out/runs` and
    an Optuna journal in `out`, which must be new, empty, this search's, or `force`. Locked while
    the search runs; a search that fails before its first run is written leaves no directory it
    made."""
    import optuna

    if out is None:
        yield None, optuna.storages.InMemoryStorage()
        return
    manifest = store.read_manifest_file(out / MANIFEST) if out.is_dir() else None
    key = loaded.definition_key()
    if manifest is not None and manifest.get("key") != key:
        raise ConfigError(
            f"{out}: holds another search ({manifest.get('name')!r}: its scenarios, seeds, parameters, objective, "
            "constraints or sampler differ); use another --out or remove that directory"
        )
    with store.result_directory(out, manifest is not None, force, "simapf search", out / RUNS), store.locked(out):
        store.write_manifest_file(out / MANIFEST, {
            "simapf_version": __version__, "name": loaded.name, "source": loaded.source, "key": key,
        })  # fmt: skip
        yield out / RUNS, _journal(out)


def _journal(out: Path) -> Any:
    """The study's journal in `out`, which `store.locked` keeps to this process: the journal's
    lock between processes is that flock, which dies with its process. Optuna's own locks are
    files, and one a killed search leaves behind (a symlink, dangling where --out was relative)
    makes every resumption wait for it forever: such a file, left by an older simapf, goes."""
    from optuna.storages.journal import JournalFileBackend, JournalStorage
    from optuna.storages.journal._file import LOCK_FILE_SUFFIX, BaseJournalFileLock  # optuna is pinned

    class HeldByTheDirectory(BaseJournalFileLock):
        def acquire(self) -> bool:
            return True

        def release(self) -> None:
            pass

    left = out / (JOURNAL + LOCK_FILE_SUFFIX)
    if left.is_symlink() or left.is_file():
        left.unlink()
    return JournalStorage(JournalFileBackend(str(out / JOURNAL), lock_obj=HeldByTheDirectory()))
