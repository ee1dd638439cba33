"""The calibration grid gives the same results in this process, in joblib workers and on Dask."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from simapf.calibrate.data import Row, cells
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.grid import Simulator
from simapf.cli import main
from simapf.server.params import ServerParams
from simapf.sweeps.backends import Backend

SHORT = ExperimentSetup(ramp_s=2, warmup_s=5, window_s=6)
ROWS = [
    Row(0, "etcd", 1e7, 10, 20.0, "overload", 100.0, ((1, 1.0), (10, 1.0), (100, 1.0))),
    Row(1, "cache", 1e6, 100, 300.0, "max", 100.0, ((1, 1.0), (10, 1.0))),
]


def _work() -> list:
    # Two parameter sets in one batch, as a fit's finite differences send them.
    shipped = ServerParams()
    slower_etcd = shipped.model_copy(update={"etcd": shipped.etcd.model_copy(update={"bytes_per_s": shipped.etcd.bytes_per_s / 2})})
    return [(shipped, SHORT, cells(ROWS)), (slower_etcd, SHORT, cells(ROWS))]


def test_serial_joblib_and_dask_give_the_same_cells():
    distributed = pytest.importorskip("distributed")
    serial = Simulator(backend=Backend("serial")).run(_work())
    assert [len(r) for r in serial] == [6, 6]
    # The parameter sets differ where they should: etcd's speed moves the etcd row only.
    assert serial[0][(0, 1)] != serial[1][(0, 1)] and serial[0][(1, 1)] == serial[1][(1, 1)]

    assert Simulator(2).run(_work()) == serial
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Simulator(backend=Backend("dask", None, cluster.scheduler_address)) as sim:
            assert sim.run(_work()) == serial
            assert sim.run(_work()[:1]) == serial[:1]  # the client is reused from run to run
    with Simulator(backend=Backend("dask", 1)) as sim:  # a local cluster of its own
        assert sim.run(_work()[1:]) == serial[1:]


def test_an_unreachable_scheduler_is_one_line_and_writes_nothing(monkeypatch, tmp_path):
    pytest.importorskip("distributed")
    from simapf.sweeps import backends

    monkeypatch.setattr(backends, "CONNECT_TIMEOUT", "1s")
    out = tmp_path / "p.yaml"
    res = CliRunner().invoke(main, ["calibrate", "--dask", "tcp://127.0.0.1:9", "--out", str(out), "--quiet"])
    assert res.exit_code == 2, res.output
    err = res.output.strip()
    assert err.startswith("simapf: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert "\n" not in err and not out.exists()

    res = CliRunner().invoke(main, ["calibrate", "--report", "--backend", "serial", "--dask", "tcp://x:1"])
    assert res.exit_code == 2 and "needs the dask backend" in res.output
