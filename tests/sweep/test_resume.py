"""The result directory: one atomic file per finished run, resumable after anything short of a
lost disk, never a partial file, never a run twice."""

import copy
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import simapf
from simapf.cli import main
from simapf.errors import ConfigError
from simapf.sweeps import store

from sweephelp import BASIC_SWEEP, SMALL, write_sweep


def _run_files(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("run-"))


def _leftovers(out: Path) -> list[str]:
    return [p.name for p in out.iterdir() if p.name.startswith(".tmp-")]


def _table(df):
    return df.drop(columns=["wall_s"])


def test_each_run_is_one_file_and_a_rerun_runs_nothing(basic_sweep, tmp_path):
    out = tmp_path / "out"
    first = simapf.sweep(basic_sweep, out, backend="serial")
    assert _run_files(out) == sorted(f"run-{rid}.parquet" for rid in first["run_id"])
    assert (out / store.MANIFEST).exists() and not _leftovers(out)
    again = simapf.sweep(basic_sweep, out, backend="serial")
    assert again.attrs["status"] == {**again.attrs["status"], "skipped": 8, "ran": 0}
    pd.testing.assert_frame_equal(first, again)  # wall_s too: nothing was run again


def test_resume_redoes_corrupt_and_missing_runs_and_removes_temporary_files(basic_sweep, tmp_path):
    out = tmp_path / "out"
    first = simapf.sweep(basic_sweep, out, backend="serial")
    ids = list(first["run_id"])
    corrupt = out / f"run-{ids[2]}.parquet"
    corrupt.write_bytes(corrupt.read_bytes()[:200])  # a torn file, as a dying disk might leave
    (out / f"run-{ids[5]}.parquet").unlink()
    (out / f".tmp-run-{ids[5]}.parquet.x1y2").write_bytes(b"PAR1 half a file")  # a killed writer's
    resumed = simapf.sweep(basic_sweep, out, backend="serial")
    assert resumed.attrs["status"]["ran"] == 2 and resumed.attrs["status"]["skipped"] == 6
    assert _run_files(out) == sorted(f"run-{rid}.parquet" for rid in ids)
    assert not _leftovers(out)
    pd.testing.assert_frame_equal(_table(first), _table(resumed))


def test_a_failed_write_leaves_no_file(basic_sweep, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    real = pq.write_table
    calls = {"n": 0}

    def dies_on_the_third(table, where, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            where.write(b"PAR1 partial")
            raise OSError(28, "No space left on device")
        return real(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", dies_on_the_third)
    with pytest.raises(OSError):
        simapf.sweep(basic_sweep, out, backend="serial")
    assert len(_run_files(out)) == 2 and not _leftovers(out)
    monkeypatch.setattr(pq, "write_table", real)
    done = simapf.sweep(basic_sweep, out, backend="serial")
    assert done.attrs["status"]["skipped"] == 2 and len(_run_files(out)) == 8


def test_more_replications_reuse_the_finished_runs(basic_sweep, tmp_path):
    out = tmp_path / "out"
    simapf.sweep(basic_sweep, out, backend="serial")
    more = copy.deepcopy(BASIC_SWEEP)
    more["replications"] = 3
    path = write_sweep(basic_sweep.parent, more, name="more.yaml")
    df = simapf.sweep(path, out, backend="serial")
    assert df.attrs["status"]["skipped"] == 8 and df.attrs["status"]["ran"] == 4
    assert list(df["replication"]) == [0, 1, 2] * 4 and len(_run_files(out)) == 12


def test_a_directory_of_another_sweep_is_refused(basic_sweep, tmp_path):
    out = tmp_path / "out"
    simapf.sweep(basic_sweep, out, backend="serial")
    other = copy.deepcopy(BASIC_SWEEP)
    other["seed"] = 8
    path = write_sweep(basic_sweep.parent, other, name="other.yaml")
    result = CliRunner().invoke(main, ["sweep", str(path), "--out", str(out), "--backend", "serial"])
    assert result.exit_code == 2
    assert "holds results of another sweep" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert len(_run_files(out)) == 8


def test_load_sweep(basic_sweep, tmp_path):
    out = tmp_path / "out"
    df = simapf.sweep(basic_sweep, out, backend="serial")
    loaded = simapf.load_sweep(out)
    pd.testing.assert_frame_equal(df, loaded)
    assert loaded.attrs["sweep"]["replications"] == 2
    assert list(loaded.columns[:5]) == ["run_id", "replication", "seed", "apf.estimator", "clients.listers.rate_per_s"]
    # A factor whose levels are mappings is kept as canonical JSON text.
    assert set(loaded["apf.estimator"]) == {'{"list_policy":"upstream"}',
                                            '{"list_params":{"seats":3},"list_policy":"constant"}'}  # fmt: skip
    # The directory is a Parquet dataset other tools read (manifest and lock are skipped).
    assert len(pd.read_parquet(out)) == 8
    with pytest.raises(ConfigError, match="no such sweep directory"):
        simapf.load_sweep(tmp_path / "nowhere")


def test_metrics_keep_only_the_named_columns(tmp_path):
    sweep = dict(BASIC_SWEEP, metrics=["peak_rss_bytes", "p99_s/*"], replications=1)
    path = write_sweep(tmp_path, sweep, SMALL)
    df = simapf.sweep(path, backend="serial")
    metric_cols = [c for c in df.columns if c not in ("run_id", "replication", "seed", "apf.estimator",
                                                      "clients.listers.rate_per_s", "wall_s", "simapf_version")]  # fmt: skip
    assert metric_cols[0] == "peak_rss_bytes"
    assert metric_cols[1:] and all(c.startswith("p99_s/") for c in metric_cols[1:])


@pytest.mark.slow
def test_killed_sweep_resumes_with_exactly_one_result_per_run(tmp_path):
    # Runs of ~0.25 s so the kill lands mid-way; joblib workers, killed with their driver.
    sweep = {"base": "scenario.yaml", "factors": {"clients.listers.rate_per_s": [4, 5, 6, 7], "clients.listers.count": [2, 3, 4]},
             "set": {"run.duration_s": 200}, "seed": 11}  # fmt: skip
    path = write_sweep(tmp_path, sweep, SMALL)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "simapf.cli", "sweep", str(path), "--out", str(out), "--workers", "2",
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if out.is_dir() and len(_run_files(out)) >= 3:
                break
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its worker processes, at once
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    before = _run_files(out)
    assert 3 <= len(before) < 12, "the kill should land mid-way"

    result = CliRunner().invoke(main, ["sweep", str(path), "--out", str(out), "--workers", "2", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert f"12 runs ({len(before)} already done, {12 - len(before)} run now)" in result.stdout
    df = simapf.load_sweep(out)
    assert len(df) == 12 and df["run_id"].is_unique
    assert _run_files(out) == sorted(f"run-{rid}.parquet" for rid in df["run_id"])
    assert not _leftovers(out)
    # The runs finished before the kill are the runs an uninterrupted sweep makes.
    reference = simapf.sweep(path, backend="joblib", workers=2)
    pd.testing.assert_frame_equal(_table(df), _table(reference))


def test_progress_bar_counts_runs_and_starts_from_the_finished_ones(basic_sweep, tmp_path, capsys, monkeypatch):
    import simapf.progress

    monkeypatch.setattr(simapf.progress, "interactive", lambda: True)  # a terminal: tqdm's bar
    out = tmp_path / "out"
    simapf.sweep(basic_sweep, out, backend="serial", progress=True)
    first = capsys.readouterr().err
    assert "8/8" in first and ("runs/s" in first or "s/runs" in first)
    (out / sorted(_run_files(out))[0]).unlink()
    simapf.sweep(basic_sweep, out, backend="serial", progress=True)
    again = capsys.readouterr().err
    assert "7/8" in again and "8/8" in again  # resumed at 7 of 8, then the one run
