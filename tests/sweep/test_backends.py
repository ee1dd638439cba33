"""Serial, joblib and a Dask cluster give the same result table for the same sweep."""

import pandas as pd
import pytest

import simapf
from simapf.errors import SimapfError
from simapf.sweeps.backends import Backend, choose, run_tasks


def _table(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_s"])  # the one column that measures the machine, not the model


def test_serial_joblib_and_dask_give_identical_tables(basic_sweep, tmp_path):
    distributed = pytest.importorskip("distributed")
    serial = simapf.sweep(basic_sweep, backend="serial")
    assert len(serial) == 8 and serial["run_id"].is_unique
    # The runs differ from each other (a table of identical rows would compare equal too).
    assert serial["peak_rss_bytes"].nunique() > 4
    assert set(serial["seats_per_list_mean"]) == {1.0, 3.0}

    # Worker processes on both, as on a real cluster: tasks and rows cross process boundaries.
    joblib = simapf.sweep(basic_sweep, tmp_path / "joblib", backend="joblib", workers=2)
    pd.testing.assert_frame_equal(_table(serial), _table(joblib))
    assert joblib.attrs["status"]["backend"].startswith("joblib, 2")

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = simapf.sweep(basic_sweep, tmp_path / "dask", dask=cluster.scheduler_address)
    pd.testing.assert_frame_equal(_table(serial), _table(dask))
    assert dask.attrs["status"]["backend"] == f"dask at {cluster.scheduler_address}"

    # And what is on disk reads back the same, whoever wrote it.
    pd.testing.assert_frame_equal(_table(simapf.load_sweep(tmp_path / "dask")), _table(serial))


def test_worker_count_does_not_change_results(basic_sweep):
    one = simapf.sweep(basic_sweep, backend="joblib", workers=1)
    two = simapf.sweep(basic_sweep, backend="joblib", workers=2)
    pd.testing.assert_frame_equal(_table(one), _table(two))


def test_unreachable_scheduler_is_a_user_error(monkeypatch):
    pytest.importorskip("distributed")
    from simapf.sweeps import backends
    from simapf.sweeps.measure import RunTask

    monkeypatch.setattr(backends, "CONNECT_TIMEOUT", "1s")
    with pytest.raises(SimapfError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        list(run_tasks([RunTask(key={"run_id": "x"}, scenario={})], Backend("dask", None, "tcp://127.0.0.1:9")))


def test_choose_backend():
    assert choose(None, None, None) == Backend("joblib", None, None)
    assert choose(None, 3, "tcp://s:8786") == Backend("dask", 3, "tcp://s:8786")
    assert choose("serial", None, None, "dask", 4, "tcp://s:1") == Backend("serial", 4, None)
    assert choose(None, None, None, "dask", None, "tcp://s:1") == Backend("dask", None, "tcp://s:1")


def test_local_dask_cluster_from_the_sweep_file(tmp_path):
    # backend.kind dask without an address starts (and stops) a local cluster.
    pytest.importorskip("distributed")
    from sweephelp import SMALL, write_sweep

    sweep = {"base": "scenario.yaml", "factors": {"clients.listers.rate_per_s": [4, 8]},
             "backend": {"kind": "dask", "workers": 1}, "set": {"run.duration_s": 10}}  # fmt: skip
    path = write_sweep(tmp_path, sweep, SMALL)
    df = simapf.sweep(path)
    assert df.attrs["status"]["backend"] == "dask, a local cluster of 1 worker(s)"
    pd.testing.assert_frame_equal(_table(df), _table(simapf.sweep(path, backend="serial")))


def test_a_local_cluster_says_nothing_when_another_holds_the_dashboard_port(capfd):
    # Another Dask cluster on this machine has 8787: the local cluster takes a free port, quietly.
    import socket
    import warnings

    pytest.importorskip("distributed")
    from simapf.sweeps.backends import dask_client

    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            other.bind(("", 8787))
        except OSError:
            pass  # already held by another process: the case itself
        else:
            other.listen()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with dask_client(Backend("dask", workers=1)) as client:
                assert client.submit(sum, [1, 2]).result() == 3
    out, err = capfd.readouterr()
    said = out + err + "".join(str(w.message) for w in caught)
    assert "8787" not in said and "already in use" not in said
