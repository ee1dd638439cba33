"""Long work states its cost first and honours `--budget` (simapf.jobs.estimate, simapf.jobs.budget).

Each of `sweep`, `optimize`, `figures` and `calibrate` prints an estimate line before any
work; under a budget far shorter than the work it stops at a resumable point with exit status 3,
says what is left and the command that continues; that command (run until it ends with 0)
finishes the work, and what it leaves is what a run never stopped leaves: the same sweep and
search results, byte-identical figures, a calibration record where the budget's own fit
left none half-written.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from simapf.jobs import budget as budgets
from simapf.jobs.budget import BUDGET_EXIT, Budget, BudgetReached, Spent, budget_problem, continue_command
from simapf.jobs.pool import run_each
from simapf.cli import main

# A few seconds of LISTs and GETs: a run takes a few hundredths of a second.
TINY = {
    "name": "tiny",
    "run": {"duration_s": 10, "seed": 1},
    "resources": [{"name": "configmaps", "count": 200, "object_size": {"mean_bytes": 2048}}],
    "clients": [
        {"name": "lister", "kind": "open_loop", "identity": {"user": "lister"}, "rate_per_s": 5,
         "request": {"verb": "list", "resource": "configmaps"}},
        {"name": "getter", "kind": "open_loop", "identity": {"user": "getter"}, "rate_per_s": 20,
         "request": {"verb": "get", "resource": "configmaps"}},
    ],
}  # fmt: skip

# A budget already spent when the work starts: each call does its first step only.
SPENT = "1ms"
MAX_CALLS = 20


@pytest.fixture(autouse=True)
def own_state(tmp_path, monkeypatch):
    """Each test's machine has no pace yet: its first estimate measures one (a reference run)."""
    monkeypatch.setenv("SIMAPF_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)


def simapf(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def stderr_lines(res) -> list[str]:
    return res.stderr.splitlines()


def assert_estimate_first(res, what: str) -> None:
    """The first line on stderr is the estimate: runs, a time and the workers, and its source."""
    first = stderr_lines(res)[0]
    assert first.startswith(f"simapf: {what}") and " runs" in first and "~" in first and " worker" in first, first
    assert "(model: the runs' size at this machine's pace, from " in first, first


def continue_args(res) -> list[str]:
    """The command the budget stop says continues the work (without `simapf`)."""
    lines = [line for line in stderr_lines(res) if line.startswith("simapf: continue with: simapf ")]
    assert len(lines) == 1, res.stderr
    return shlex.split(lines[0].removeprefix("simapf: continue with: simapf "))


def until_done(args: list[str]) -> list:
    """Run `args` with a budget spent at once, then the command each stop names, until one ends
    the work; every call but the last a clean budget stop."""
    calls = [simapf(*args, "--budget", SPENT)]
    while calls[-1].exit_code == BUDGET_EXIT:
        assert len(calls) < MAX_CALLS, "the work does not get on under its budget"
        assert "budget of 1ms spent" in calls[-1].stderr and " left" in calls[-1].stderr
        assert calls[-1].stdout == ""
        calls.append(simapf(*continue_args(calls[-1]), "--budget", SPENT))
    assert calls[-1].exit_code == 0, calls[-1].output
    return calls


# ------------------------------------------------------------------------------ sweep


def write_sweep(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    sweep = {"name": "tiny-sweep", "base": "tiny.yaml",
             "factors": {"clients.lister.rate_per_s": [1, 5, 10], "apf.estimator.list_policy": ["upstream", "size-based"]},
             "replications": 2, "backend": {"kind": "serial"}}  # fmt: skip
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))
    return path


def results(out: Path) -> pd.DataFrame:
    import simapf

    return simapf.load_sweep(out).drop(columns=["wall_s"])


def test_a_sweep_estimates_stops_under_its_budget_and_resumes_to_the_same_result(tmp_path):
    path = write_sweep(tmp_path / "in")
    whole = simapf("sweep", path, "--out", "whole")
    assert whole.exit_code == 0, whole.output
    assert_estimate_first(whole, "sweep tiny-sweep: about 12 runs")

    first = simapf("sweep", path, "--out", "stopped", "--budget", SPENT)
    assert first.exit_code == BUDGET_EXIT, first.output
    assert_estimate_first(first, "sweep tiny-sweep: about 12 runs")
    assert first.stdout == ""
    done = len(list(Path("stopped").glob("run-*.parquet")))
    assert 0 < done < 12
    assert f"{done} of 12 runs done, kept in stopped; {12 - done} left" in first.stderr
    assert continue_args(first) == ["sweep", str(path), "--out", "stopped"]

    calls = until_done(["sweep", path, "--out", "stopped"])
    assert "already done" in stderr_lines(calls[0])[0]  # a resumed sweep estimates what is left
    pd.testing.assert_frame_equal(results(Path("stopped")), results(Path("whole")))
    # The table it prints is the same too (its first line says how much was run now and how fast).
    assert calls[-1].stdout.split("\n", 1)[1] == whole.stdout.split("\n", 1)[1]


def test_the_runs_of_a_command_teach_the_next_its_pace_and_a_stop_estimates_what_the_next_call_does(tmp_path):
    """One model: what is left when a budget stops the work is what the call that goes on
    estimates, at the pace the runs before it took."""
    import json
    import re

    path = write_sweep(tmp_path / "in")
    first = simapf("sweep", path, "--out", "stopped", "--budget", SPENT)
    assert first.exit_code == BUDGET_EXIT, first.output
    assert "from a reference run here)" in stderr_lines(first)[0]
    observed = json.loads((tmp_path / "state" / "pace.json").read_text())["observed"]
    done = len(list(Path("stopped").glob("run-*.parquet")))
    assert list(observed) == ["1"] and len(observed["1"]) == 1 + done  # a reference run, then the sweep's
    left = re.search(r"left \(~([^)]+)\)", first.stderr)
    assert left, first.stderr

    again = simapf(*continue_args(first), "--budget", SPENT)
    line = stderr_lines(again)[0]
    assert f"from {1 + done} runs here)" in line and f"~{left.group(1)} on 1 worker " in line, (first.stderr, line)


# ------------------------------------------------------------------------------ optimize


def write_search(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "name": "tiny-search",
        "scenarios": {"tiny": {"base": TINY}},
        "seeds": [1, 2],
        "parameters": {"apf.estimator.list_params.seats": {"low": 1, "high": 20, "type": "int"}},
        "set": {"apf.estimator.list_policy": "constant"},
        "objective": {"metric": "p99_s/global-default/list"},  # the lister's level
        "constraints": [{"metric": "oom_kills", "max": 0}],
        "compare_with": {"upstream": {"apf.estimator.list_policy": "upstream"}},
        "trials": 6, "batch": 2, "startup_trials": 3,
        "backend": {"kind": "serial"},
    }  # fmt: skip
    path = folder / "search.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_search_estimates_stops_under_its_budget_and_resumes_to_the_same_result(tmp_path):
    pytest.importorskip("optuna")
    path = write_search(tmp_path / "in")
    whole = simapf("optimize", path, "--out", "whole")
    assert whole.exit_code == 0, whole.output
    assert_estimate_first(whole, "optimize tiny-search: at most 14 runs")

    calls = until_done(["optimize", path, "--out", "stopped"])
    assert len(calls) > 2  # stopped in the compared settings' runs and between batches of trials
    assert_estimate_first(calls[0], "optimize tiny-search: at most 14 runs")
    assert any(" trials done, kept in stopped" in c.stderr for c in calls[:-1])
    cols = ["trial", "state", "objective", "peak_rss_bytes", "apf.estimator.list_params.seats"]
    pd.testing.assert_frame_equal(pd.read_csv("stopped/trials.csv")[cols], pd.read_csv("whole/trials.csv")[cols])
    assert Path("stopped/best.yaml").read_text() == Path("whole/best.yaml").read_text()
    assert Path("stopped/compare.csv").read_text() == Path("whole/compare.csv").read_text()


# ------------------------------------------------------------------------------ figures


def write_figures(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    spec = {"name": "tiny-figures", "figures": [
        {"name": "memory", "kind": "timeseries", "scenario": "tiny.yaml", "metrics": ["memory"]},
        {"name": "seats", "kind": "timeseries", "scenario": "tiny.yaml", "set": {"run.duration_s": 12}, "metrics": ["seats"]},
        {"name": "policies", "kind": "policies", "scenario": "tiny.yaml", "policies": ["upstream", "size-based"],
         "replications": 2},
    ]}  # fmt: skip
    path = folder / "figures.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_figures_estimate_stop_between_figures_and_the_rest_make_the_same_bytes(tmp_path):
    path = write_figures(tmp_path / "in")
    whole = simapf("figures", path, "--out", "whole")
    assert whole.exit_code == 0, whole.output
    assert_estimate_first(whole, "figures tiny-figures: about 6 runs for 3 figures")

    first = simapf("figures", path, "--out", "stopped", "--budget", SPENT)
    assert first.exit_code == BUDGET_EXIT, first.output
    assert_estimate_first(first, "figures tiny-figures: about 6 runs for 3 figures")
    assert "1 of 3 figures done, kept in stopped; 2 left" in first.stderr
    assert continue_args(first)[-4:] == ["--only", "seats", "--only", "policies"]
    assert sorted(p.name for p in Path("stopped").iterdir() if not p.name.startswith(".")) == \
        ["memory.pdf", "memory.png", "memory.provenance.json", "memory.svg"]  # fmt: skip

    until_done(continue_args(first))
    made = sorted(p.name for p in Path("whole").iterdir())
    assert sorted(p.name for p in Path("stopped").iterdir()) == made
    for name in made:
        assert (Path("stopped") / name).read_bytes() == (Path("whole") / name).read_bytes(), name


def test_a_budget_stops_inside_a_figure_writes_those_made_and_keeps_its_runs_for_the_next_call(tmp_path, monkeypatch):
    """A figure of many runs (the docs' validation figure: 330) is no unit a budget must wait
    for: it stops between its runs, the figures before it are written, and the runs it
    finished are in the result cache, so the call that goes on does not run them again."""
    from simapf.simulation import cache
    from simapf.figures import kepfigures

    monkeypatch.setenv("SIMAPF_NO_CACHE", "0")
    monkeypatch.setenv("SIMAPF_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    spec = folder / "figures.yaml"
    spec.write_text(yaml.safe_dump({"name": "inside", "figures": [
        {"name": "memory", "kind": "timeseries", "scenario": "tiny.yaml", "metrics": ["memory"]},
        {"name": "policies", "kind": "policies", "scenario": "tiny.yaml", "replications": 2,
         "policies": ["upstream", "size-based", "constant:seats=4"]},
    ]}))  # fmt: skip
    ran = cache.tally.ran
    # The budget ends once the time series' run and two of the policies figure's six are done.
    budget = Budget(60.0, "1m", started=0.0, clock=lambda: 0.0 if cache.tally.ran - ran < 3 else 61.0)
    lines: list[str] = []
    with pytest.raises(BudgetReached) as stop:
        kepfigures.make(spec, tmp_path / "out", budget=budget, log=lines.append)
    assert (stop.value.done, stop.value.total) == (1, 2)
    assert "kept in " in stop.value.summary() and "the runs of policies finished so far in the result cache" \
        in stop.value.summary()  # fmt: skip
    assert stop.value.resume == ("--only", "policies")
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")) == \
        ["memory.pdf", "memory.png", "memory.provenance.json", "memory.svg"]  # fmt: skip
    assert cache.tally.ran - ran == 3
    assert "figure 2/2 policies: stopped by the budget, 2 runs, kept in the result cache" in lines

    lines.clear()
    kepfigures.make(spec, tmp_path / "out", only=["policies"], log=lines.append)
    assert any(line.startswith("figure 1/1 policies: 6 runs (2 from the cache), ") for line in lines), lines
    assert (tmp_path / "out" / "policies.png").is_file() and (tmp_path / "out" / "memory.png").is_file()


# ------------------------------------------------------------------------------ calibrate

# Two rows of the measured experiment at 15 LISTs a second: six cells of a few hundredths of a second.
MINI_DATA = """source,response_bytes,object_count,qps,load,cpu_percent,mem_mb_seats_1,mem_mb_seats_10,mem_mb_seats_100
etcd,10000000,100,15,max,380,532.1,520.2,583.3
cache,10000000,100,15,max,380,532.1,520.2,583.3
"""
FIT = ["--free", "cpu.usable_fraction,process.live_heap_bytes", "--max-iterations", "4", "--noise-floor", "0",
       "--jobs", "1"]  # fmt: skip


def test_a_fit_estimates_stops_under_its_budget_writes_an_unfinished_record_and_goes_on(tmp_path):
    from simapf.calibrate.record import load_params

    Path("mini.csv").write_text(MINI_DATA)
    first = simapf("calibrate", "--data", "mini.csv", "--out", "fit.yaml", *FIT, "--budget", SPENT)
    assert first.exit_code == BUDGET_EXIT, first.output
    assert_estimate_first(first, "calibrate: at most ")
    assert first.stdout == ""
    # Nothing half-done at --out: the best point so far is a whole record, marked unfinished.
    assert not Path("fit.yaml").exists()
    unfinished = yaml.safe_load(Path("fit.unfinished.yaml").read_text())
    assert "budget of 1ms" in unfinished["fit"]["unfinished"]
    load_params("fit.unfinished.yaml")  # it loads, as a start
    assert "kept in fit.unfinished.yaml" in first.stderr
    resume = continue_args(first)
    assert resume[-4:-1] == ["--start", "fit.unfinished.yaml", "--max-iterations"] and int(resume[-1]) < 4

    calls = until_done(continue_args(first))
    done = yaml.safe_load(Path("fit.yaml").read_text())
    assert "unfinished" not in done["fit"]
    assert done["data"]["rows"] == 2 and Path("fit.jacobian.json").is_file()
    # The fit that goes on from the stopped one's point expects a refit's grid evaluations, at the
    # pace the runs before it took here.
    line = stderr_lines(calls[-1])[0]
    assert " grid evaluations, as a refit from a solution with its Jacobian takes; " in line and " runs here)" in line


def test_a_report_takes_no_budget(tmp_path):
    res = simapf("calibrate", "--report", "--budget", "10m")
    assert res.exit_code == 2 and res.stderr.startswith("simapf: error: calibrate: --budget is for a fit")


# ------------------------------------------------------------------------------ the mechanism


def test_a_budget_is_a_go_duration_with_a_unit():
    assert budget_problem("10m") is None and budget_problem("1h30m") is None and budget_problem(" 90s ") is None
    assert "give a unit" in budget_problem("600")
    assert "not a duration" in budget_problem("10 minutes")
    assert "more than 0" in budget_problem("0s")
    assert "more than a year" in budget_problem("9000h")
    assert Budget.parse("1h30m").seconds == 5400


def test_the_continue_command_drops_the_budget_and_replaces_what_it_resumes_with():
    args = ["figures", "f.yaml", "--budget", "10m", "--only", "a", "--out=d", "--budget=5s"]
    assert continue_command(args, ["--only", "b"]) == ["figures", "f.yaml", "--out=d", "--only", "b"]
    assert continue_command(["sweep", "s.yaml"]) == ["sweep", "s.yaml"]


def test_in_this_process_runs_stop_between_runs_once_the_budget_is_spent_and_the_first_always_runs():
    clock = [0.0]
    budget = Budget(10.0, clock=lambda: clock[0])

    def run(seconds):
        clock[0] += seconds
        return seconds

    got = []
    with budget.applied(), pytest.raises(Spent):
        for _i, seconds in run_each(run, [4.0] * 10, workers=1):
            got.append(seconds)
    assert got == [4.0] * 3  # 4, 8: within; 12: past the end, so no fourth
    spent = Budget(1.0, clock=lambda: 5.0, started=0.0)
    with spent.applied(), pytest.raises(Spent):
        assert [r for _i, r in run_each(lambda x: x, [1, 2, 3])] == [1]  # something gets done
    # Without a budget, or in a unit held whole, every run is done.
    assert [r for _i, r in run_each(lambda x: x, [1, 2, 3])] == [1, 2, 3]
    with spent.applied(), budgets.held():
        assert [r for _i, r in run_each(lambda x: x, [1, 2, 3])] == [1, 2, 3]


def test_on_workers_the_budget_stops_the_runs_keeping_those_done_and_abandons_one_past_its_grace(monkeypatch):
    """No run starts once the budget is spent; one under way past the budget's grace is given
    up (its worker stopped), and every run finished before is handed over first."""
    import time

    monkeypatch.setattr(budgets, "OVERRUN_MIN_S", 2.0)  # a grace of 1 s
    list(run_each(time.sleep, [0.0, 0.0], workers=2))  # the workers started, as a command's would be
    budget = Budget(1.5)
    got = []
    began = time.monotonic()
    with budget.applied(), pytest.raises(Spent):
        for i, _none in run_each(time.sleep, [0.3, 0.3, 0.3, 120.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3], workers=2):
            got.append(i)
    took = time.monotonic() - began
    assert 3 <= len(got) < 9 and 3 not in got, got  # the long run is never handed over
    assert took < 1.5 + 1.0 + 1.0, took  # the budget, its grace, and stopping the workers
    # The workers are started again for the next work.
    assert sorted(i for i, _none in run_each(time.sleep, [0.0, 0.0, 0.0], workers=2)) == [0, 1, 2]


def test_one_model_a_runs_cost_at_this_machines_pace_for_as_many_runs_at_once(tmp_path):
    """A stage's time is its runs' cost shared over the workers (or its longest run) at the pace
    of that many runs at once here; a pace not known yet is measured once and kept."""
    import json

    from simapf.jobs.estimate import Pace, Runs, Stage, cost, estimate
    from simapf.scenario import load_scenario

    loaded = load_scenario(TINY)
    c = cost(loaded)
    assert c > 0 and cost(load_scenario({**TINY, "run": {"duration_s": 40, "seed": 1}})) > c  # more requests
    path = tmp_path / "state" / "pace.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"version": 1, "observed": {"1": [[2.0, 3.0]], "2": [[1.0, 2.0], [1.0, 2.0]]}}))
    pace = Pace(path)
    found = estimate([Stage([Runs(loaded, 4)], workers=2), Stage([Runs(loaded)], workers=2)], pace)
    assert found.runs == 5 and found.seconds == pytest.approx(4 * c / 2 * 2.0 + c * 1.5)
    assert found.source.endswith("pace, 1 at a time from 1 run here and 2 at once from 2 runs here")

    # No run of 3 at once here yet: three reference runs at once measure it, kept for the next.
    found = estimate([Stage([Runs(loaded, 6)], workers=3)], pace)
    assert found.source.endswith("pace, from 3 reference runs at once here") and pace.runs(3) == 3
    pace.save()
    assert len(json.loads(path.read_text())["observed"]["3"]) == 3


def test_a_budget_stop_says_what_is_done_and_left():
    stop = Budget(60.0, "1m", started=0.0, clock=lambda: 75.0).reached("sweep x", 4, 10, "runs", kept="out", left_s=30)
    assert isinstance(stop, BudgetReached)
    assert stop.summary() == "sweep x: budget of 1m spent (75 s): 4 of 10 runs done, kept in out; 6 left (~30 s)"


# ------------------------------------------------------------------------------ compare, run --uncertainty


def test_a_comparison_estimates_its_replications_and_draws_first(tmp_path):
    Path("tiny.yaml").write_text(yaml.safe_dump(TINY))
    res = simapf("compare", "tiny.yaml", "--policy", "upstream", "--policy", "size-based", "--replications", "2",
                 "--uncertainty", "2", "--workers", "1")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert_estimate_first(res, "compare tiny: about 8 runs (2 policies x 2 replications + 2 parameter draws each)")


def test_a_run_with_draws_estimates_them_first(tmp_path):
    Path("tiny.yaml").write_text(yaml.safe_dump(TINY))
    res = simapf("run", "tiny.yaml", "--uncertainty", "2", "--workers", "1")
    assert res.exit_code == 0, res.output
    assert_estimate_first(res, "run tiny: about 3 runs (the run, then 2 parameter draws)")


def test_without_progress_there_is_no_estimate(tmp_path):
    Path("tiny.yaml").write_text(yaml.safe_dump(TINY))
    res = simapf("compare", "tiny.yaml", "--policy", "upstream", "--policy", "size-based", "--replications", "2",
                 "--workers", "1", "--no-progress")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "~" not in res.stderr and "pilot" not in res.stderr, res.stderr


# ------------------------------------------------------------------------------ the docs' example lines


def docs_estimate_lines() -> dict[str, str]:
    """The example estimate lines of docs/compare-and-sweep.md, by command."""
    text = (Path(__file__).parents[2] / "docs" / "compare-and-sweep.md").read_text(encoding="utf-8")
    block = text.split("## Estimates and time budgets", 1)[1].split("```\n", 2)[1]
    return {line.split()[1].rstrip(":"): line for line in block.splitlines() if line.startswith("simapf: ")}


def test_the_docs_example_estimates_count_the_shipped_work_as_the_commands_do():
    """Their times depend on the machine; how many runs the shipped files take does not."""
    pytest.importorskip("optuna")
    from simapf.figures import kepfigures
    from simapf.calibrate.command import expected_grids, planned_grids
    from simapf.calibrate.data import cells, load_rows
    from simapf.calibrate.record import SHIPPED, jacobian_path, load_params, record_free_params
    from simapf.calibrate.report import current_values, load_jacobian
    from simapf.search import check_trials, load_optimize_spec
    from simapf.sweeps.spec import load_sweep_spec

    repo = Path(__file__).parents[2]
    lines = docs_estimate_lines()
    sweep = load_sweep_spec(repo / "sweeps" / "policies-size-qps.yaml")
    assert f": about {len(sweep.runs):,} runs, " in lines["sweep"]

    search = load_optimize_spec(repo / "sweeps" / "optimize-relist-storm.yaml")
    per_trial = len(search.spec.seeds) * len(search.cases)
    compared = len(search.compare_with) * per_trial
    trials = check_trials(search, None)
    assert (f": at most {compared + trials * per_trial:,} runs ({compared:,} runs of the compared settings, then "
            f"{trials} trials of {per_trial} runs)") in lines["optimize"]  # fmt: skip

    spec, base = kepfigures.load_spec(repo / "figures" / "docs.yaml")
    stages = [kepfigures.planned_runs(f, base) for f in spec.figures]
    runs = sum(round(sum(r.count for r in s.runs) * s.times) for s in stages)
    assert f": about {runs:,} runs for {len(spec.figures)} figures, " in lines["figures"]

    params, setup, record = load_params()
    free = record_free_params(record)
    rows = load_rows()
    given = load_jacobian(jacobian_path(SHIPPED), free, current_values(free, params, setup), rows) is not None
    grids = planned_grids(len(free), 10, given)
    expected = expected_grids(record, given)
    n_cells = len(cells(rows))
    why = "as a refit from a solution with its Jacobian takes" if given else "as the start's own fit took"
    assert (f": about {round(expected * n_cells):,} runs ({expected:g} grid evaluations, {why}; "
            f"at most {grids * n_cells:,}: {grids} grid evaluations of {n_cells} cells: 10 iterations, finite "
            f"differences over {len(free)} parameters)") in lines["calibrate"]  # fmt: skip
