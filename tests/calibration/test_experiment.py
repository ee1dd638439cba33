"""Reconstructing a measured cell: the run is set up as the experiment was, and read as it was."""

from __future__ import annotations

import numpy as np
import pytest

import simapf
from simapf.calibrate import experiment, scenario
from simapf.calibrate.data import Cell, Row
from simapf.calibrate.experiment import ExperimentSetup, cell_seed, run_params
from simapf.calibrate.scenario import run_cell, scenario_for
from simapf.simulation.observe import Reading, Readings
from simapf.server.costs import compute_plan
from simapf.server.params import ServerParams
from simapf.server.paths import RequestCost, ResponseShape, ServingPath


def row(source="etcd", size=1e6, count=100, qps=50.0, mem=(500.0, 400.0, None)) -> Row:
    return Row(index=3, source=source, response_bytes=size, object_count=count, qps=qps, load="max",
               cpu_percent=100.0, mem_mb=tuple(zip((1, 10, 100), mem)))  # fmt: skip


def test_a_cell_runs_as_the_experiment_did(monkeypatch):
    seen = {}

    def fake(loaded):
        seen["loaded"] = loaded
        window = [Reading(40.0, 6e8, 4e8, 100.0, 1.0, 1000, 0, 1000, 3), Reading(55.0, 7e8, 5e8, 137.5, 2.5, 1006, 2, 1008, 5)]
        return Readings(scrape_interval_s=15.0, scrapes=window, requests_total=1010, ok_total=1008, rejected_total=2,
                        failed_total=0, due_total=1008, oom_kills=0)  # fmt: skip

    monkeypatch.setattr(scenario, "run_lean", fake)
    setup = ExperimentSetup(cores=16, server_concurrency=800)
    cell = Cell(row("cache", 1e7, 10, 80.0), 10)
    out = run_cell(cell, ServerParams(cpu={"cores": 4}), setup)
    loaded = seen["loaded"]
    sc = loaded.scenario
    assert sc.apiserver.server_concurrency == 800
    assert loaded.params.cpu.cores == 16  # the experiment's node, whatever the params said
    assert loaded.params.client == setup.client  # the co-located load generator
    assert sc.resources[0].count == 10 and sc.resources[0].watch_cache  # the watch cache holds it
    assert sc.kubernetes.feature_gates.StreamingCollectionEncodingToJSON is setup.streaming_encoding
    lister = sc.clients[0]
    assert lister.rate_per_s == 80.0 and lister.ramp_up_s == setup.ramp_s
    assert lister.arrivals == ("constant" if setup.arrivals == "paced" else "poisson")
    assert lister.max_in_flight == (None if setup.client_max_in_flight is None else int(setup.client_max_in_flight))
    assert lister.request.options.resource_version == "0"  # from the cache
    assert sc.apf.estimator.list_policy == "constant" and sc.apf.estimator.list_params == {"seats": 10}
    assert sc.run.steady_from_s == setup.warmup_s and sc.run.duration_s == setup.warmup_s + setup.window_for(80.0)
    assert sc.run.scrape_interval_s == setup.trace_every_s
    assert sc.run.seed == cell_seed(setup, cell)  # common random numbers per cell
    assert cell_seed(setup, cell, draw=1) != cell_seed(setup, cell)
    # Read as the dashboard: the highest 15-s scrape, the mean CPU over the window, and of the 8
    # requests due in it 6 served, 2 answered 429.
    assert out.mem_mb == pytest.approx(700.0) and out.cpu_percent == pytest.approx(250.0)
    assert out.rejected_fraction == pytest.approx(0.25) and out.rejected_429_fraction == pytest.approx(0.25)
    assert out.client_cores == pytest.approx(0.1) and out.peak_pending == 5
    run_cell(Cell(row("cache", 1e5, 10, 6000.0), 1), ServerParams(), setup)  # a fast row: a shorter warm-up
    sc = seen["loaded"].scenario
    assert sc.run.steady_from_s == setup.warmup_for(6000.0) < setup.warmup_s
    assert sc.run.duration_s == setup.warmup_for(6000.0) + setup.window_for(6000.0)


def test_the_lists_land_in_global_default_with_constant_seats():
    cell = Cell(row("cache", 1e6, 100, 20.0), 100)
    setup = ExperimentSetup(warmup_s=2, window_s=2, warmup_requests=None, window_requests=None, ramp_s=0)
    sc = scenario_for(cell, setup=setup)
    sc["run"]["request_records"] = True
    requests = simapf.run(sc).requests
    assert set(requests["priority_level"]) == {"global-default"}
    # The level's own cap at 800 is 10 seats; the experiment's patch bypassed it.
    assert set(requests["seats"]) == {100}


def test_fast_rows_are_watched_for_a_bounded_number_of_requests():
    s = ExperimentSetup(window_s=30, window_requests=60_000)
    assert s.window_for(15) == 30
    assert s.window_for(6000) == pytest.approx(10)
    assert s.window_for(100_000) == experiment.MIN_WINDOW_S
    assert ExperimentSetup(window_requests=None).window_for(1e6) == ExperimentSetup().window_s


def test_fast_rows_warm_up_for_a_bounded_number_of_requests():
    s = ExperimentSetup(warmup_s=30, warmup_requests=27_000, ramp_s=9.6)
    assert s.warmup_for(80) == 30
    assert s.warmup_for(1350) == pytest.approx(20)
    assert s.warmup_for(8400) == experiment.MIN_WARMUP_S
    # Never before the ramp is over and the queues have settled behind it.
    assert ExperimentSetup(warmup_requests=27_000, ramp_s=20).warmup_for(8400) == pytest.approx(20 + experiment.SETTLE_S)
    assert ExperimentSetup(warmup_requests=None).warmup_for(1e6) == ExperimentSetup().warmup_s


def test_too_many_seats_for_the_rate_rejects_most_requests():
    # 100 seats each: at most 4 LISTs at once in global-default (about 490 seats after borrowing);
    # 1 MB LISTs take milliseconds of CPU each, so 2000/s cannot pass.
    p = run_params(ServerParams(), ExperimentSetup())
    one = compute_plan(p, RequestCost(ServingPath.CACHE, ResponseShape(1e6, 100))).cpu_core_s
    assert 4 / one < 1000  # the premise: four at a time serve well under half of 2000/s
    setup = ExperimentSetup(warmup_s=12, window_s=4, warmup_requests=None, window_requests=None, ramp_s=6)
    res = run_cell(Cell(row("cache", 1e6, 100, 2000.0), 100), ServerParams(), setup)
    assert res.requests > 2000
    assert res.rejected_fraction > 0.5
    setup = setup.model_copy(update={"window_s": 6})
    light = run_cell(Cell(row("cache", 1e6, 100, 20.0), 1), ServerParams(), setup)
    assert light.rejected_fraction < 0.02
