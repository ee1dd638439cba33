"""Reconstructing a measured cell: the run is set up as the experiment was, and read as it was."""

from __future__ import annotations

import numpy as np
import pytest

from simapf.calibrate import experiment
from simapf.calibrate.data import Cell, Row
from simapf.calibrate.experiment import ExperimentSetup, run_cell, run_params
from simapf.calibrate.list_stream import LIST_USER, ListStreamResult, _invert_ramp, run_list_stream
from simapf.environment import Environment
from simapf.server.params import ServerParams
from simapf.server.costs import compute_plan
from simapf.server.paths import RequestCost, ResponseShape, ServingPath
from simapf.server.runtime import SimulatedAPIServer


def row(source="etcd", size=1e6, count=100, qps=50.0, mem=(500.0, 400.0, None)) -> Row:
    return Row(index=3, source=source, response_bytes=size, object_count=count, qps=qps, load="max",
               cpu_percent=100.0, mem_mb=tuple(zip((1, 10, 100), mem)))  # fmt: skip


def test_a_cell_runs_as_the_experiment_did(monkeypatch):
    seen = {}

    def fake(path, response_bytes, object_count, qps, seats, **kw):
        seen.update(path=path, response_bytes=response_bytes, object_count=object_count, qps=qps, seats=seats, **kw)
        return ListStreamResult(requests=10, ok=10, rejected=0, failed=0, peak_rss_bytes=7e8, peak_heap_bytes=5e8,
                                mean_cpu_cores=2.5, oom_kills=0, wall_events=0, window_requests=8, window_rejected=2, window_ok=6,
                                scraped_peak_rss_bytes=7e8)  # fmt: skip

    monkeypatch.setattr(experiment, "run_list_stream", fake)
    setup = ExperimentSetup(cores=16, server_concurrency=800)
    out = run_cell(Cell(row("cache", 1e7, 10, 80.0), 10), ServerParams(cpu={"cores": 4}), setup)
    assert seen["path"] is ServingPath.CACHE
    assert (seen["response_bytes"], seen["object_count"], seen["qps"], seen["seats"]) == (1e7, 10, 80.0, 10)
    assert seen["server_concurrency"] == 800
    assert seen["params"].cpu.cores == 16  # the experiment's node, whatever the params said
    assert seen["params"].client == setup.client  # the co-located load generator
    assert seen["cache_resource"] is True
    assert seen["streaming"] is setup.streaming_encoding
    assert seen["poisson"] is (setup.arrivals == "poisson")
    assert seen["max_in_flight"] == (None if setup.client_max_in_flight is None else int(setup.client_max_in_flight))
    assert seen["warmup_s"] == setup.warmup_s and seen["duration_s"] == setup.warmup_s + setup.window_for(80.0)
    assert seen["seed"] == [setup.seed, 3, 10]  # common random numbers per cell
    assert out.mem_mb == pytest.approx(700.0) and out.cpu_percent == pytest.approx(250.0)
    assert out.rejected_fraction == pytest.approx(0.25)
    run_cell(Cell(row("cache", 1e5, 10, 6000.0), 1), ServerParams(), setup)  # a fast row: a shorter warm-up
    assert seen["warmup_s"] == setup.warmup_for(6000.0) < setup.warmup_s
    assert seen["duration_s"] == setup.warmup_for(6000.0) + setup.window_for(6000.0)


def test_the_lists_land_in_global_default_with_constant_seats():
    env = Environment()
    from simapf.apf.estimators import WorkEstimator

    server = SimulatedAPIServer(env, server_concurrency=800, estimator=WorkEstimator("constant", list_params={"seats": 100}))
    level = server.apf.classify(LIST_USER).priority_level
    assert level == "global-default"
    assert server.apf.levels[level].limits.max_seats == 10  # the level's own cap at 800 ...
    est = server.apf.estimate(LIST_USER, server.apf.classify(LIST_USER))
    assert est.max_seats == 100  # ... which the experiment's patch bypassed


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


def test_ramp_then_steady_rate():
    qps, ramp = 100.0, 10.0
    times = _invert_ramp(np.arange(1, 5001, dtype=float), qps, ramp)
    assert np.all(np.diff(times) > 0)
    # Half of the full rate's arrivals during the ramp, then exactly qps.
    assert np.searchsorted(times, ramp) == pytest.approx(qps * ramp / 2, abs=1)
    late = times[times > ramp]
    assert np.diff(late)[:100] == pytest.approx(1 / qps)
    assert np.array_equal(_invert_ramp(np.arange(1.0, 4.0), 2.0, 0.0), [0.5, 1.0, 1.5])


def test_too_many_seats_for_the_rate_rejects_most_requests():
    # 100 seats each: at most 4 LISTs at once in global-default (about 490 seats after borrowing);
    # 1 MB LISTs take milliseconds of CPU each, so 2000/s cannot pass.
    p = run_params(ServerParams(), ExperimentSetup())
    one = compute_plan(p, RequestCost(ServingPath.CACHE, ResponseShape(1e6, 100))).cpu_core_s
    assert 4 / one < 1000  # the premise: four at a time serve well under half of 2000/s
    res = run_list_stream(ServingPath.CACHE, 1e6, 100, qps=2000, seats=100, duration_s=16, warmup_s=12,
                          params=p, cache_resource=True, ramp_s=6)  # fmt: skip
    assert res.window_requests > 2000
    assert res.rejected_fraction > 0.5
    light = run_list_stream(ServingPath.CACHE, 1e6, 100, qps=20, seats=1, duration_s=18, warmup_s=12,
                            params=p, cache_resource=True, ramp_s=6)  # fmt: skip
    assert light.rejected_fraction < 0.02 and light.window_ok == pytest.approx(light.window_requests, abs=2)
