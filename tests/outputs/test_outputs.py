"""Output directories never lose a user's data: a non-empty directory that is not simapf's own
output of the same kind is refused (exit 2) unless --force, and then nothing of the user's is
removed; output appears whole or not at all, signals included; a failed sweep leaves no
directory it made; a narrowed sweep's results are its own runs; no worker outlives a sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from simapf.cli import main
from simapf.files import OUTPUT_MARKER, output_directory
from simapf.simulation.result import Result
from simapf.outputs.rundir import write_run

SCENARIO = """\
name: tiny
run: {duration_s: 5, seed: 1}
resources:
  - {name: configmaps, count: 50, object_size: {mean_bytes: 4Ki}}
clients:
  - name: readers
    kind: open_loop
    identity: {user: alice}
    rate_per_s: 5
    request: {verb: list, resource: configmaps}
"""

RUN_FILES = {"summary.json", "series.parquet", "series.csv", "latency.csv", "client_latency.csv", "priority_levels.csv", "histograms.parquet",
             "overview.png", "overview.svg", "overview.provenance.json", OUTPUT_MARKER}  # fmt: skip


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def _cli(args: list[str]):
    return CliRunner().invoke(main, args)


def _names(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


def _one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("simapf: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _tiny_result(**extra) -> Result:
    series = pd.DataFrame({"time_s": [0.0, 1.0], "metric": ["m", "m"], "value": [1.0, 2.0]})
    table = pd.DataFrame({"priority_level": ["a"], "requests": [1]})
    return Result(summary={"duration_s": 1.0}, series=series, latency=table, levels=table, **extra)


def test_run_refuses_a_directory_of_the_users_own(scenario, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    result = _cli(["run", str(scenario), "--out", str(out), "--no-progress"])
    _one_line_error(result, f"--out {out}", "not empty", "--force")
    assert _names(out) == {"thesis.tex"}
    assert (out / "thesis.tex").read_text() == "years of work"
    assert _names(tmp_path) == {"tiny.yaml", "mine"}


def test_force_adds_simapfs_files_and_keeps_the_users(scenario, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = _cli(["run", str(scenario), "--out", str(out), "--no-progress", "--force"])
    assert result.exit_code == 0, result.output
    assert _names(out) == RUN_FILES | {"notes.txt"}
    assert (out / "notes.txt").read_text() == "keep me"


def test_rerun_into_its_own_output_replaces_only_simapfs_files(tmp_path):
    out = tmp_path / "run"
    write_run(_tiny_result(requests=pd.DataFrame({"id": [1]})), out, figure=False)
    assert "requests.parquet" in _names(out)
    (out / "my-analysis.ipynb").write_text("{}")  # the user's, added after the first run
    write_run(_tiny_result(), out, figure=False)
    # simapf's file the new run does not write is gone (it described the old run); the user's stays
    assert "requests.parquet" not in _names(out)
    assert (out / "my-analysis.ipynb").read_text() == "{}"
    assert not [n for n in _names(out) if n.startswith(".simapf-staging")]


def test_output_of_another_kind_is_refused(scenario, tmp_path):
    out = tmp_path / "out"
    write_run(_tiny_result(), out, figure=False)
    result = _cli(["compare", str(scenario), "--policy", "upstream", "--replications", "1", "--out", str(out),
                   "--no-progress", "--workers", "1"])  # fmt: skip
    _one_line_error(result, "simapf run output")
    assert "summary.json" in _names(out) and "runs.csv" not in _names(out)


def test_out_dot_leaves_nothing_behind(scenario, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for _ in range(2):  # a new (empty) directory, then its own earlier output
        result = _cli(["run", str(scenario), "--out", ".", "--no-progress"])
        assert result.exit_code == 0, result.output
        assert _names(work) == RUN_FILES
        assert _names(tmp_path) == {"tiny.yaml", "work"}


def test_a_failed_write_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    import simapf.outputs.figures

    out = tmp_path / "mine"
    out.mkdir()
    (out / "data.csv").write_text("a,b\n")

    def boom(*_a, **_k):
        raise RuntimeError("figure failed")

    monkeypatch.setattr(simapf.outputs.figures, "overview_figure", boom)
    with pytest.raises(RuntimeError):
        write_run(_tiny_result(), out, force=True)
    assert _names(out) == {"data.csv"}


def test_output_directory_is_refused_before_the_work(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "x").write_text("")
    with pytest.raises(Exception, match="not empty"):
        with output_directory(out, "run"):
            pytest.fail("the block ran")  # pragma: no cover


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_while_writing_leaves_no_temporary_entry(scenario, tmp_path):
    # The figure hangs, so the process is surely inside the write when the signal arrives.
    script = (
        "import sys, time, simapf.outputs.figures\n"
        "simapf.outputs.figures.save_figure = lambda *a, **k: time.sleep(60)\n"
        "from simapf.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", script, "run", str(scenario), "--out", "out", "--no-progress"],
                            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 60
    while not [p for p in work.iterdir() if p.name.startswith(".simapf-staging")]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert b"Traceback" not in err
    assert list(work.iterdir()) == []


# ------------------------------------------------------------------ sweeps


def _sweep_file(tmp_path: Path, rates: list[float]) -> Path:
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).parents[1] / "sweep"))
    from sweephelp import SMALL, write_sweep

    sweep = {"base": "scenario.yaml", "factors": {"clients.listers.rate_per_s": rates},
             "set": {"run.duration_s": 5}, "replications": 1, "seed": 7}  # fmt: skip
    return write_sweep(tmp_path / "in", sweep, SMALL)


def test_sweep_refuses_a_directory_that_holds_no_sweep(tmp_path):
    spec = _sweep_file(tmp_path, [4])
    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    result = _cli(["sweep", str(spec), "--out", str(out), "--no-progress", "--backend", "serial"])
    _one_line_error(result, "not empty", "--force")
    assert _names(out) == {"keep.txt"}
    result = _cli(["sweep", str(spec), "--out", str(out), "--no-progress", "--backend", "serial", "--force"])
    assert result.exit_code == 0, result.output
    assert "keep.txt" in _names(out) and any(n.startswith("run-") for n in _names(out))


def test_failed_dask_sweep_leaves_no_directory(tmp_path, monkeypatch):
    import simapf.sweeps.backends as backends

    monkeypatch.setattr(backends, "CONNECT_TIMEOUT", "1s")
    spec = _sweep_file(tmp_path, [4])
    out = tmp_path / "results" / "s"
    result = _cli(["sweep", str(spec), "--out", str(out), "--no-progress", "--dask", "tcp://127.0.0.1:9"])
    _one_line_error(result, "Dask scheduler")
    assert not (tmp_path / "results").exists()


def test_narrowed_sweep_reads_back_only_its_runs(tmp_path):
    from simapf.sweeps import load_sweep, sweep

    out = tmp_path / "s"
    wide = sweep(_sweep_file(tmp_path, [4, 8]), out, backend="serial")
    narrow = sweep(_sweep_file(tmp_path, [4]), out, backend="serial")
    assert len(wide) == 2 and len(narrow) == 1
    assert len([n for n in _names(out) if n.startswith("run-")]) == 2  # nothing deleted
    back = load_sweep(out)
    assert list(back["run_id"]) == list(narrow["run_id"])


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads children from /proc")
def test_no_worker_process_outlives_a_sweep(tmp_path):
    # loky keeps its workers for reuse, for minutes after the last task, unless told to stop
    from simapf.sweeps import sweep

    sweep(_sweep_file(tmp_path, [4, 8]), tmp_path / "s", backend="joblib", workers=2)
    me = os.getpid()
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_text()
            except OSError:
                continue
            # The resource trackers (one per process, ending with it) are not workers.
            if int(stat.rsplit(")", 1)[1].split()[1]) == me and "resource_tracker" not in cmdline:
                children.append(cmdline.replace("\0", " "))
    assert children == []
