"""Progress when stderr is not a terminal: log lines at an interval, not silence, not a bar."""

from __future__ import annotations

import io

import simapf.progress
from simapf.progress import LogLines, progress_bar


def test_log_lines_say_how_far_and_how_long_is_left():
    clock = iter([0.0, 10.0, 40.0, 45.0, 80.0, 90.0])
    out = io.StringIO()
    bar = LogLines(total=200, desc="sweep s", unit="runs", interval_s=30.0, stream=out,
                   clock=lambda: next(clock))  # started at 0
    bar.update(10)  # t=10: too soon for a line
    bar.update(30)  # t=40: 40 runs in 40 s, 160 left at 1 a second
    bar.update(10)  # t=45: too soon again
    bar.set_postfix(cost="0.12")
    bar.update(150)  # t=80: all 200
    bar.close()  # t=90
    lines = out.getvalue().splitlines()
    assert lines == [
        "simapf: sweep s: 40/200 runs (20 %), 40 s, about 3 min left",  # 160 s at 1 a second
        "simapf: sweep s: 200/200 runs (100 %), 80 s [cost=0.12]",
        "simapf: sweep s: 200/200 runs (100 %), 90 s [cost=0.12] (done)",
    ]


def test_a_task_shorter_than_the_interval_writes_nothing():
    out = io.StringIO()
    bar = LogLines(total=5, desc="run", unit="sim s", stream=out)
    bar.update(5)
    bar.close()
    assert out.getvalue() == ""


def test_a_sweep_under_ci_logs_its_progress(tmp_path, monkeypatch, capsys):
    from simapf.sweeps import sweep

    monkeypatch.setattr(simapf.progress, "LOG_INTERVAL_S", 0.0)  # every update is due
    spec = {"name": "logged", "base": {"name": "t", "run": {"duration_s": 5},
                                       "resources": [{"name": "configmaps", "count": 10, "object_size": {"mean_bytes": 1024}}]},
            "factors": {"run.duration_s": [5, 6]}}  # fmt: skip
    import ipykernel  # noqa: F401  (imported by other tests; it does not make this a notebook)

    assert not simapf.progress.interactive()  # pytest captures stderr: no terminal here
    sweep(spec, backend="serial", progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("simapf: logged: 1/2 runs (50 %), 0 s")
    assert err[-1].startswith("simapf: logged: 2/2 runs (100 %)") and err[-1].endswith("(done)")
    assert progress_bar(3, "x", "runs", enabled=False).__class__.__name__ == "_Off"


def _logged(work) -> list[str]:
    """The lines a LogLines of 10 runs writes, every update due, around `work(bar)` (an
    interruption in it included)."""
    out = io.StringIO()
    bar = LogLines(total=10, desc="sweep s", unit="runs", interval_s=0.0, stream=out, clock=lambda: 0.0)
    try:
        try:
            work(bar)
        finally:
            bar.close()
    except KeyboardInterrupt:
        pass
    return out.getvalue().splitlines()


def test_work_cut_short_ends_in_interrupted_not_done():
    def interrupted(bar):
        bar.update(3)
        raise KeyboardInterrupt

    assert _logged(interrupted)[-1] == "simapf: sweep s: 3/10 runs (30 %), 0 s (interrupted)"
    # Closed early without an error (the caller stopped asking): not done either.
    assert _logged(lambda bar: bar.update(4))[-1].endswith("4/10 runs (40 %), 0 s (interrupted)")
    assert _logged(lambda bar: bar.update(10))[-1].endswith("10/10 runs (100 %), 0 s (done)")


def test_a_run_that_raises_closes_its_bar(monkeypatch):
    import simapf
    from simapf.simulation import runner

    closed = []

    class Bar:
        n = 0

        def update(self, n):
            self.n += n

        def close(self):
            closed.append(self.n)

    monkeypatch.setattr(runner, "_progress_bar", lambda total, name: Bar())

    def boom(self):
        raise RuntimeError("the user's policy failed")

    loaded = simapf.load_scenario("scenarios/list-experiment.yaml", {"run.duration_s": 2})
    sim = runner.Simulation(loaded)
    monkeypatch.setattr(type(sim.recorder), "mark", boom)
    monkeypatch.setattr(type(sim.recorder), "scrape", boom)
    try:
        sim.run(progress=True)
    except RuntimeError:
        pass
    assert closed == [0]
