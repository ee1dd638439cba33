"""Requests of the same kind whose work varies (`request_cpu.work_cv`): the factors, and why it
matters: a cohort of identical jobs started together under processor sharing stays together
without variation and disperses with it."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from simapf.server import ResourceModel, ServerParams, ServingPath
from simapf.server.variation import WorkVariation

from srvhelp import cost


@pytest.mark.parametrize("cv", [0.2, 0.5, 1.0])
def test_factors_have_mean_one_and_the_asked_variation(cv):
    vary = WorkVariation(cv, np.random.default_rng(7))
    x = np.array([vary() for _ in range(40_000)])
    assert x.min() > 0
    assert x.mean() == pytest.approx(1.0, abs=0.02)
    assert x.std() / x.mean() == pytest.approx(cv, rel=0.05)


def test_no_variation_is_exactly_one():
    vary = WorkVariation(0.0)
    assert {vary() for _ in range(10)} == {1.0}


def test_the_same_generator_gives_the_same_factors():
    a = WorkVariation(0.5, np.random.default_rng([1, 2]))
    b = WorkVariation(0.5, np.random.default_rng([1, 2]))
    assert [a() for _ in range(5000)] == [b() for _ in range(5000)]


def _finish_times(cv: float, n: int = 200) -> np.ndarray:
    """n identical cache LISTs started at once on 4 cores: when each handler returns (s)."""
    env = simpy.Environment()
    params = ServerParams(cpu={"cores": 4}, request_cpu={"work_cv": cv})
    model = ResourceModel(env, params, np.random.default_rng(3))
    done: list[int] = []
    c = cost(ServingPath.CACHE, 1_000_000, 1000)
    for _ in range(n):
        model.start(c, done.append)
    env.run(until=60 * 10**9)  # the GC's forced-cycle timer never stops on its own
    assert len(done) == n
    return np.array(done) / 1e9


def test_a_cohort_started_together_finishes_together_without_variation():
    t = _finish_times(0.0)
    # All but the few that paid a GC assist end at the same instant.
    assert np.percentile(t, 90) - np.percentile(t, 10) < 1e-6 * t.max()


def test_a_cohort_disperses_with_variation_and_does_the_same_work():
    fixed = _finish_times(0.0)
    t = _finish_times(0.5)
    # The last one ends near when all ended without variation (same work in all, within its
    # sampling error), but they end one by one, spread over most of that time.
    assert t.max() == pytest.approx(fixed.max(), rel=0.1)
    assert np.percentile(t, 90) - np.percentile(t, 10) > 0.3 * fixed.max()
