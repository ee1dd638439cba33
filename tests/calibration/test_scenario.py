"""A measured cell written as a scenario runs through `simapf.run` as the calibration's own
reconstruction does: the same apiserver CPU and, read the same way, the same peak memory."""

from __future__ import annotations

import numpy as np
import pytest

import simapf
from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup, run_cell
from simapf.calibrate.scenario import scenario_for
from simapf.calibrate.list_stream import scraped_peak
from simapf.server.params import ServerParams

WORK_DRAWS = 4
CELLS = {c.row.label + f" {c.seats} seats": c for c in cells(load_rows())}


def _window(series, setup: ExperimentSetup, qps: float):
    return series[series.index >= setup.warmup_for(qps)]


@pytest.mark.parametrize(
    ("label", "ramp_s"),
    [
        # etcd, overloaded: a backlog of ranges that keeps every LIST sent. Compared without the
        # ramp, because the scenario's ramp (a staircase of 20 paced instances) is not the
        # reconstruction's line and this row's peak shows it: 4264 MB against 4765-5287 in four
        # draws with the ramp (2026-11-21 record; 4281 against 4649-5133 in eight with the one
        # before), 5515 against 5538-5932 without.
        ("etcd 10 MB x10000 @20/s 1 seats", 0.0),
        ("etcd 10 MB x10000 @20/s 10 seats", None),
        ("cache 10 MB x1000 @105/s 1 seats", None),  # cache, saturated at APF's limit
        ("cache 10 MB x1000 @105/s 10 seats", None),
    ],
)
def test_the_scenario_of_a_cell_reproduces_the_reconstruction(label, ramp_s):
    # Saturated rows with varying work are chaotic: another draw of the work factors, or the same
    # draws handed out in another order (the scenario's ramp is a staircase), moves CPU by up to
    # ~7 % and the peak by up to ~15 %. So the scenario must fall among a few draws of the
    # reconstruction, with the tolerances this test had when work did not vary.
    cell, setup = CELLS[label], ExperimentSetup()
    if ramp_s is not None:
        setup = setup.model_copy(update={"ramp_s": ramp_s})
    result = simapf.run(simapf.load_scenario(scenario_for(cell, setup=setup)))
    draws = [run_cell(cell, ServerParams(), setup, work_rng=np.random.default_rng(k)) for k in range(WORK_DRAWS)]
    cpu = _window(result.wide("process_cpu_seconds_total").iloc[:, 0], setup, cell.row.qps)
    cores = (cpu.iloc[-1] - cpu.iloc[0]) / (cpu.index[-1] - cpu.index[0])
    _among(cores * 100, [d.cpu_percent for d in draws], rel=0.03)
    # The run samples every second and the reconstruction every half second: the dashboard's
    # peak agrees within 10 % of the draws' range.
    rss = _window(result.wide("process_resident_memory_bytes").iloc[:, 0], setup, cell.row.qps).tolist()
    _among(scraped_peak(rss, 1.0, setup.scrape_every_s) / 1e6, [d.mem_mb for d in draws], rel=0.10)


def _among(value: float, draws: list[float], rel: float) -> None:
    assert min(draws) * (1 - rel) <= value <= max(draws) * (1 + rel), (value, sorted(draws))


def test_the_scenario_says_what_the_experiment_did():
    cell = CELLS["cache 1 MB x100 @720/s 10 seats"]
    sc = simapf.load_scenario(scenario_for(cell)).scenario
    lister = sc.clients[0]
    assert sc.apiserver.max_requests_inflight + sc.apiserver.max_mutating_requests_inflight == 800
    assert sc.apiserver.cores == 16
    assert sc.apf.estimator.list_policy == "constant" and sc.apf.estimator.list_params == {"seats": 10}
    assert lister.request.options.resource_version == "0"  # from the watch cache
    assert lister.rate_per_s * sc.events[0].to_count == pytest.approx(720)
    assert sc.resources[0].count == 100 and sc.resources[0].object_size.mean_bytes == pytest.approx(10_000)
    assert sc.kubernetes.feature_gates.ConsistentListFromCache is False
    etcd = simapf.load_scenario(scenario_for(CELLS["etcd 1 MB x10 @345/s 1 seats"])).scenario
    assert etcd.clients[0].request.options.resource_version is None  # a consistent read: etcd
