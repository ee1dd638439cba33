"""What `simapf optimize` names as best: on a tie of the objective the trial better on the
constraints (less memory first), never one another feasible trial dominates; and after an
interrupted search, a report whose counts add up and a `best.yaml` that loads."""

from __future__ import annotations

import math
import random
import re

import pandas as pd
import pytest
import yaml

import simapf
from simapf.search import load_optimize_spec, optimize
from simapf.search.report import OptimizeResult, format_result, write_report

from test_optimize import SPEC, TINY, spec

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)
GiB = 2**30
SEATS = "apf.estimator.list_params.seats"


def _study(trials: list[tuple[float, float, float]]):
    """A finished study of feasible trials: (objective, worst peak RSS, worst OOM kills) each."""
    study = optuna.create_study(direction="minimize")
    dist = {SEATS: optuna.distributions.IntDistribution(1, 40)}
    for i, (objective, peak, kills) in enumerate(trials):
        study.add_trial(optuna.trial.create_trial(
            params={SEATS: 1 + i % 40}, distributions=dist, value=objective,
            user_attrs={"feasible": True, "runs": ["a", "b"], "worst:peak_rss_bytes": peak,
                        "worst:oom_kills": kills},
        ))  # fmt: skip
    return study


def _built(trials) -> OptimizeResult:
    loaded = load_optimize_spec(spec())
    return OptimizeResult.build(loaded, _study(trials), {}, 0, None, "serial", 0.0)


def test_a_tie_of_the_objective_goes_to_the_trial_with_less_memory():
    # Trial 0 reaches the best objective first, but trials 2 and 3 reach it with less memory.
    result = _built([(3.1, 1.9 * GiB, 0), (3.5, 1.0 * GiB, 0), (3.1, 1.6 * GiB, 0), (3.1, 1.6 * GiB, 0)])
    assert result.best["trial"] == 2  # of two trials alike in every respect, the earlier
    assert result.best["peak_rss_bytes"] == 1.6 * GiB
    front = set(result.trials.loc[result.trials["pareto"], "trial"])
    assert front == {1, 2, 3}  # trial 0 is dominated
    text = format_result(result)
    assert "best: trial 2:" in text and "trial    2:   1.60 GiB      3.10 s  (the best)" in text


def test_no_best_when_every_feasible_trial_ties_at_infinity(tmp_path):
    # Memory alone would pick trial 1; the objective tells none of them from another.
    result = _built([(math.inf, 1.9 * GiB, 0), (math.inf, 1.0 * GiB, 0), (math.inf, 1.6 * GiB, 0)])
    assert result.best is None
    text = format_result(result)
    assert "best: trial" not in text and "(the best)" not in text
    assert "no best: p99_s/workload-low/list is ∞ in every feasible trial" in text
    (tmp_path / "best.yaml").write_text("an earlier call's best\n")
    write_report(result, tmp_path)
    assert not (tmp_path / "best.yaml").exists()


def test_a_finite_objective_beats_the_trials_without_one():
    result = _built([(math.inf, 1.0 * GiB, 0), (4.0, 1.9 * GiB, 0), (math.inf, 1.6 * GiB, 0)])
    assert result.best["trial"] == 1 and result.no_best == ""


def test_the_best_is_always_on_the_pareto_front():
    rng = random.Random(51)
    for _ in range(200):
        # Few distinct values, so that ties of the objective and of memory are common.
        trials = [(rng.choice([2.0, 3.0, 3.0, 4.0]), rng.choice([1, 2, 2, 3]) * 0.5 * GiB, 0.0)
                  for _ in range(rng.randint(1, 12))]  # fmt: skip
        result = _built(trials)
        t = result.trials.set_index("trial")
        best = result.best["trial"]
        assert t.loc[best, "pareto"], trials
        assert result.best["objective"] == t["objective"].min()
        assert result.best["peak_rss_bytes"] == t.loc[t["objective"] == t["objective"].min(), "peak_rss_bytes"].min()


def _interrupt_after(monkeypatch, calls: int) -> None:
    """Ctrl-C at the `calls`-th time the search asks for runs (trials asked, none told)."""
    from simapf.search import study

    results = study.Evaluator.results
    seen = []

    def interrupted(self, tasks):
        seen.append(1)
        if len(seen) == calls:
            raise KeyboardInterrupt
        return results(self, tasks)

    monkeypatch.setattr(study.Evaluator, "results", interrupted)


@pytest.fixture(scope="module")
def interrupted_search(tmp_path_factory):
    """A search killed in its third batch (two batches of two trials finished), then run again
    asking for no more trials than had finished."""
    out = tmp_path_factory.mktemp("interrupted") / "search"
    with pytest.MonkeyPatch.context() as mp:
        _interrupt_after(mp, 5)  # each batch asks once per seed: the 5th is the third batch's first
        with pytest.raises(KeyboardInterrupt):
            optimize(spec(trials=8, compare_with={}), out)
    return optimize(spec(trials=4, compare_with={}), out), out


def test_after_an_interruption_the_counts_add_up(interrupted_search):
    result, _ = interrupted_search
    t = result.trials
    assert len(t) == 4 and set(t["trial"]) == {0, 1, 2, 3}
    assert result.waiting == 2  # the third batch's two trials, asked again next time
    line = format_result(result).splitlines()[1]
    m = re.fullmatch(r"  (\d+) trials \((\d+) complete, (\d+) stopped early, (\d+) failed\), .*", line)
    assert m, line
    total, *states = (int(x) for x in m.groups())
    assert total == sum(states) == len(t), line
    assert "2 more cut short by an interruption" in format_result(result)


def test_after_an_interruption_best_yaml_loads_with_integer_settings(interrupted_search):
    result, out = interrupted_search
    best = yaml.safe_load((out / "best.yaml").read_text())
    seats = best["set"][SEATS]
    assert isinstance(seats, int) and not isinstance(seats, bool)
    # As `simapf run --set` would apply it: the scenario's integer field accepts it.
    simapf.load_scenario(TINY, {**SPEC["set"], **best["set"]})
    assert pd.read_csv(out / "trials.csv")[SEATS].dtype.kind == "i"


def test_a_larger_trials_runs_the_trials_an_interruption_cut_short(interrupted_search, tmp_path):
    import shutil

    _, out = interrupted_search
    copy = tmp_path / "search"
    shutil.copytree(out, copy)
    more = optimize(spec(trials=6, compare_with={}), copy)
    assert len(more.trials) == 6 and more.waiting == 0
    counts = more.trials["state"].value_counts()
    assert counts.sum() == 6


def test_the_comparison_phase_shows_its_progress(monkeypatch, capsys):
    import simapf.progress

    monkeypatch.setattr(simapf.progress, "LOG_INTERVAL_S", 0.0)  # every update is due
    optimize(spec(trials=2), progress=True)
    err = capsys.readouterr().err.splitlines()
    compared = [line for line in err if line.startswith("simapf: tiny, compared settings: ")]
    # Two compared settings, two seeds: four runs, each a line, the last one done.
    assert compared[0].startswith("simapf: tiny, compared settings: 1/4 runs (25 %)")
    assert compared[-1].endswith("(done)") and "4/4 runs" in compared[-1]
    trials = [line for line in err if line.startswith("simapf: tiny: ")]
    assert err.index(compared[-1]) < err.index(trials[0])  # before the trials, not after
