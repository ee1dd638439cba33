"""`simapf optimize`: what it reports is what the runs did, it keeps its constraints, it resumes,
and neither the backend nor an early stop changes its answer."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

import simapf
from simapf.errors import ConfigError, SimapfError
from simapf.search import load_optimize_spec, optimize
from simapf.sweeps.measure import measure

# Ten listers of 40 MB of Secrets (encoded whole) in a 2 GiB container: upstream's 10 seats per
# LIST let so many run at once that the process is OOM-killed; a constant seat count trades
# memory (few seats: many LISTs at once) against queueing (many seats: few at once).
TINY = {
    "name": "tiny-lists",
    "run": {"duration_s": 20, "seed": 1},
    "apiserver": {"cores": 8, "max_requests_inflight": 200, "max_mutating_requests_inflight": 100,
                  "memory_limit_bytes": "2Gi"},
    "kubernetes": {"feature_gates": {"StreamingCollectionEncodingToJSON": False}},
    "resources": [{"name": "secrets", "count": 1000, "namespaces": 10, "object_size": {"mean_bytes": "40Ki"}}],
    "clients": [{"name": "listers", "kind": "open_loop", "count": 10, "identity": {"service_account": "tenants/l-{i}"},
                 "rate_per_s": 1.5, "request": {"verb": "list", "resource": "secrets"}}],
}  # fmt: skip

SPEC = {
    "name": "tiny",
    "scenarios": {"tiny": {"base": TINY}},
    "seeds": [1, 2],
    "set": {"apf.estimator.list_policy": "constant"},
    "parameters": {"apf.estimator.list_params.seats": {"low": 1, "high": 40, "type": "int"}},
    "objective": {"metric": "p99_s/workload-low/list"},
    "constraints": [{"metric": "oom_kills", "max": 0}, {"metric": "peak_rss_bytes", "max": "2Gi"}],
    "compare_with": {"upstream": {"apf.estimator.list_policy": "upstream"},
                     "seats-30": {"apf.estimator.list_params.seats": 30}},
    "trials": 8,
    "batch": 2,
    "startup_trials": 4,
    "backend": {"kind": "serial"},
}  # fmt: skip


def spec(**changes) -> dict:
    s = copy.deepcopy(SPEC)
    s.update(changes)
    return s


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    out = tmp_path_factory.mktemp("search") / "tiny"
    return optimize(spec(), out), out


def _plain_run(settings: dict, seed: int) -> dict:
    """One run of the tiny scenario as `simapf run --set ...` would do it."""
    loaded = simapf.load_scenario(TINY, {"apf.estimator.list_policy": "constant", **settings, "run.seed": seed})
    return measure(loaded)


def test_the_best_is_what_plain_runs_of_its_settings_give(searched):
    result, _ = searched
    assert result.best is not None
    runs = [_plain_run(result.best["settings"], seed) for seed in SPEC["seeds"]]
    assert all(r["oom_kills"] == 0 and r["peak_rss_bytes"] <= 2 * 2**30 for r in runs)
    assert result.best["objective"] == max(r["p99_s/workload-low/list"] for r in runs)
    assert result.best["peak_rss_bytes"] == max(r["peak_rss_bytes"] for r in runs)


def test_the_best_is_the_best_feasible_trial(searched):
    result, _ = searched
    t = result.trials
    feasible = t[t["feasible"]]
    assert len(feasible) >= 1 and (feasible["state"] == "complete").all()
    assert result.best["objective"] == feasible["objective"].min()
    assert result.best["trial"] == int(feasible.loc[feasible["objective"].idxmin(), "trial"])


def test_compared_settings_are_what_plain_runs_give(searched):
    result, _ = searched
    c = result.compare.set_index("setting")
    for name, settings in SPEC["compare_with"].items():
        runs = [_plain_run(settings, seed) for seed in SPEC["seeds"]]
        kept = all(r["oom_kills"] == 0 and r["peak_rss_bytes"] <= 2 * 2**30 for r in runs)
        assert c.loc[name, "feasible"] == kept, name
        assert c.loc[name, "objective"] == max(r["p99_s/workload-low/list"] for r in runs), name
    # Upstream's ten seats per LIST get the process OOM-killed here.
    assert not c.loc["upstream", "feasible"] and c.loc["upstream", "worst:oom_kills"] >= 1


def test_trials_stopped_early_could_not_have_won(searched):
    result, _ = searched
    t = result.trials
    stopped = t[t["state"] == "stopped early"]
    for _, row in stopped.iterrows():
        assert row["runs"] < len(SPEC["seeds"])
        if "constraint fails" in row["note"]:
            assert row["worst:oom_kills"] > 0 or row["worst:peak_rss_bytes"] > 2 * 2**30
        else:
            # The worst run so far is already no better than the best: more runs only add to it.
            assert row["objective"] >= result.best["objective"]


def test_report_files_and_runs_on_disk(searched):
    result, out = searched
    for name in ("best.yaml", "trials.csv", "compare.csv", "optimize.txt", "pareto.png", "pareto.svg", "study.journal"):
        assert (out / name).is_file(), name
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["set"] == result.best["settings"]
    assert pd.read_csv(out / "trials.csv")["trial"].tolist() == result.trials["trial"].tolist()
    assert (out / "optimize.txt").read_text() == result.summary_text()
    # Every run a trial or a compared setting needed is one Parquet file.
    stored = {p.name for p in (out / "runs").glob("run-*.parquet")}
    assert len(stored) == result.runs_ran


def test_resuming_adds_trials_and_reruns_nothing(searched, tmp_path):
    _, out = searched
    before = pd.read_csv(out / "trials.csv")
    more = optimize(spec(trials=10), out)
    assert more.trials["trial"].tolist()[: len(before)] == before["trial"].tolist()
    pd.testing.assert_series_equal(more.trials["objective"][: len(before)], before["objective"], check_names=False)
    # Only the two new trials ran anything: at most one run per seed each, and no compared setting again.
    assert 0 < more.runs_ran <= 2 * len(SPEC["seeds"])
    assert len(more.trials) == 10


def test_backend_and_workers_do_not_change_the_answer():
    serial = optimize(spec(trials=4))
    pooled = optimize(spec(trials=4, backend={"kind": "joblib", "workers": 2}))
    cols = ["trial", "state", "objective", "peak_rss_bytes", "apf.estimator.list_params.seats"]
    pd.testing.assert_frame_equal(serial.trials[cols], pooled.trials[cols])
    assert serial.best == pooled.best


def test_a_mean_over_the_runs_never_stops_a_trial_early():
    result = optimize(spec(trials=4, objective={"metric": "p99_s/workload-low/list", "aggregate": "mean"}))
    assert set(result.trials["state"]) == {"complete"}
    assert (result.trials["runs"] == len(SPEC["seeds"])).all()


def test_a_directory_of_another_search_is_refused(searched):
    _, out = searched
    with pytest.raises(ConfigError, match="holds another search"):
        optimize(spec(seeds=[1, 3]), out)


def test_a_directory_that_is_not_a_search_is_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SimapfError, match="holds no simapf search"):
        optimize(spec(trials=1), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_shipped_spec_loads_and_compares_with_every_shipped_policy():
    loaded = load_optimize_spec("sweeps/optimize-relist-storm.yaml")
    from simapf.apf.estimators.registry import list_policy_names

    assert set(loaded.compare_with) == set(list_policy_names()) - {"constant"}
    assert {c.name for c in loaded.cases} == {"streamed", "whole"}
    assert math.isclose(loaded.spec.constraints[1].max, 4 * 2**30)  # "4Gi"


def test_settings_a_scenario_refuses_fail_their_trial_and_the_search_still_ends(monkeypatch):
    from simapf.search import study

    task = study.Evaluator.task

    def refuse_odd(self, case, settings, seed):
        if settings["apf.estimator.list_params.seats"] % 2:
            raise ConfigError("tiny: the seats must be even here")
        return task(self, case, settings, seed)

    monkeypatch.setattr(study.Evaluator, "task", refuse_odd)
    result = optimize(spec(trials=6, compare_with={}))
    t = result.trials
    assert len(t) == 6
    odd = t["apf.estimator.list_params.seats"] % 2 == 1
    assert odd.any() and (t.loc[odd, "state"] == "failed").all()
    assert t.loc[odd, "note"].str.contains("must be even").all()
    assert (t.loc[~odd, "state"] != "failed").all()


def test_a_constraint_reports_the_run_that_decides_it():
    from simapf.search.spec import Constraint

    floor = Constraint(metric="throughput_ok_per_s", min=10)
    ceiling = Constraint(metric="oom_kills", max=0)
    assert floor.decisive([30.0, 8.0, 12.0]) == 8.0 and floor.violation([30.0, 8.0, 12.0]) > 0
    assert floor.decisive([30.0, 11.0]) == 11.0 and floor.violation([30.0, 11.0]) < 0
    assert ceiling.decisive([0.0, 2.0, 1.0]) == 2.0
    assert math.isnan(ceiling.decisive([0.0, math.nan])) and ceiling.violation([0.0, math.nan]) == math.inf


def _timeout(seconds: int):
    """Fail, rather than hang, what does not end within `seconds`."""
    import signal

    def overtime(_signum, _frame):
        raise TimeoutError(f"over {seconds} s")

    signal.signal(signal.SIGALRM, overtime)
    signal.alarm(seconds)
    return lambda: signal.alarm(0)


def test_a_lock_a_killed_search_left_does_not_stop_its_resumption(searched, tmp_path, monkeypatch):
    # Optuna's symlink lock, as a search SIGKILLed while it held it leaves it (with a relative
    # --out it dangles: the lock's wait could never end).
    import shutil

    _, done = searched
    shutil.copytree(done, tmp_path / "search")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "search" / "study.journal.lock").symlink_to("search/study.journal")
    cancel = _timeout(120)
    try:
        more = optimize(spec(trials=10), Path("search"))
    finally:
        cancel()
    assert len(more.trials) == 10
    assert not (tmp_path / "search" / "study.journal.lock").is_symlink()


@pytest.mark.slow
def test_a_search_killed_with_sigkill_resumes(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(spec(trials=30)))
    args = [sys.executable, "-m", "simapf.cli", "optimize", "tiny.yaml", "--out", "search", "--no-progress", "--no-cache"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = tmp_path / "search" / "study.journal"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not journal.exists() or journal.read_bytes().count(b"\n") < 20):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "30 trials" in resumed.stdout


def test_no_progress_loads_the_scenarios_as_the_trials_run_them(tmp_path):
    # The spec's policy needs the searched parameter (constant's seats): the case alone is no scenario.
    from click.testing import CliRunner

    from simapf.cli import main

    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(spec(trials=2)))
    result = CliRunner().invoke(main, ["optimize", str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "s"),
                                       "--no-progress"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "2 trials" in result.stdout and "error" not in result.stderr
