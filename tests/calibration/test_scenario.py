"""A measured cell is a scenario: the calibration runs it observed lean, a user with every series,
and the two read the same figures, because observing a run does not change it."""

from __future__ import annotations

import pytest

import simapf
from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.scenario import run_cell, scenario_for
from simapf.simulation.observe import scraped_peak
from simapf.server.params import ServerParams

CELLS = {c.row.label + f" {c.seats} seats": c for c in cells(load_rows())}


@pytest.mark.parametrize("label", [
    "etcd 10 MB x10000 @20/s 1 seats",  # etcd, overloaded: a backlog of ranges
    "cache 10 MB x1000 @105/s 10 seats",  # cache, saturated at APF's limit
])  # fmt: skip
def test_a_full_run_of_a_cells_scenario_reads_what_the_calibration_reads(label):
    cell, setup = CELLS[label], ExperimentSetup()
    lean = run_cell(cell, ServerParams(), setup)
    result = simapf.run(simapf.load_scenario(scenario_for(cell, ServerParams(), setup)))
    steady = result.summary["memory"]["steady_state_from_s"]
    rss = result.metric("process_resident_memory_bytes")
    assert scraped_peak(rss[rss.index >= steady].tolist(), setup.trace_every_s, setup.scrape_every_s) / 1e6 == lean.mem_mb
    cpu = result.metric("process_cpu_seconds_total")
    cpu = cpu[cpu.index >= steady]
    assert (cpu.iloc[-1] - cpu.iloc[0]) / (cpu.index[-1] - cpu.index[0]) * 100 == pytest.approx(lean.cpu_percent, rel=1e-12)


def test_the_scenario_says_what_the_experiment_did():
    cell = CELLS["cache 1 MB x100 @720/s 10 seats"]
    setup = ExperimentSetup()
    sc = simapf.load_scenario(scenario_for(cell)).scenario
    lister = sc.clients[0]
    assert sc.apiserver.max_requests_inflight + sc.apiserver.max_mutating_requests_inflight == 800
    assert sc.apiserver.cores == 16
    assert sc.apf.estimator.list_policy == "constant" and sc.apf.estimator.list_params == {"seats": 10}
    assert lister.request.options.resource_version == "0"  # from the watch cache
    assert lister.rate_per_s == pytest.approx(720) and lister.ramp_up_s == setup.ramp_s
    assert sc.resources[0].count == 100 and sc.resources[0].object_size.mean_bytes == pytest.approx(10_000)
    assert sc.kubernetes.feature_gates.ConsistentListFromCache is False
    assert sc.run.steady_from_s == setup.warmup_for(720)  # the dashboard is read after the warm-up
    etcd = simapf.load_scenario(scenario_for(CELLS["etcd 1 MB x10 @345/s 1 seats"])).scenario
    assert etcd.clients[0].request.options.resource_version is None  # a consistent read: etcd
