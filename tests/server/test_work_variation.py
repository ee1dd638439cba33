"""Requests of the same kind whose work varies (`request_cpu.work_cv`): the factors, that they
belong to the request rather than to when it starts, and why variation matters: a cohort of
identical jobs started together under processor sharing stays together without variation and
disperses with it."""

from __future__ import annotations

import numpy as np
import pytest

from simapf.engine.environment import Environment
from simapf.server import ResourceModel, ServerParams, ServingPath
from simapf.server.runtime import SimulatedAPIServer
from simapf.server.variation import BLOCK, KEPT_BLOCKS, STAGES, WorkVariation

from srvhelp import LIST_USER, cost


@pytest.mark.parametrize("cv", [0.2, 0.5, 1.0])
def test_factors_have_mean_one_and_the_asked_variation(cv):
    vary = WorkVariation(cv, np.random.default_rng(7))
    x = np.array([vary.factors(k) for k in range(20_000)])
    assert x.shape == (20_000, STAGES)
    assert x.min() > 0
    assert x.mean(axis=0) == pytest.approx([1.0] * STAGES, abs=0.03)
    assert x.std(axis=0) / x.mean(axis=0) == pytest.approx([cv] * STAGES, rel=0.05)
    # The stages of one request are drawn independently of each other.
    assert abs(np.corrcoef(x[:, 0], x[:, 1])[0, 1]) < 0.05


def test_no_variation_is_exactly_one():
    vary = WorkVariation(0.0)
    assert {vary.factors(k) for k in range(10)} == {(1.0,) * STAGES}


def test_the_same_generator_gives_the_same_factors_and_another_does_not():
    a = WorkVariation(0.5, np.random.default_rng([1, 2]))
    b = WorkVariation(0.5, np.random.default_rng([1, 2]))
    c = WorkVariation(0.5, np.random.default_rng([1, 3]))
    assert [a.factors(k) for k in range(5000)] == [b.factors(k) for k in range(5000)]
    assert [a.factors(k) for k in range(50)] != [c.factors(k) for k in range(50)]


def test_a_request_keeps_its_factors_whatever_order_they_are_asked_in():
    keys = list(range(0, (KEPT_BLOCKS + 3) * BLOCK, 97))
    in_order = WorkVariation(0.5, np.random.default_rng(11))
    first = {k: in_order.factors(k) for k in keys}
    shuffled = WorkVariation(0.5, np.random.default_rng(11))
    order = np.random.default_rng(0).permutation(keys)
    assert {int(k): shuffled.factors(int(k)) for k in order} == first
    # A request far behind the blocks kept gets, drawn again, what it got the first time.
    assert 0 not in in_order._blocks
    assert in_order.factors(0) == first[0]


def _duration_of(key: int, before: int) -> float:
    """Seconds a cache LIST numbered `key` takes alone, after `before` others have run."""
    env = Environment()
    model = ResourceModel(env.clock, ServerParams(cpu={"cores": 4}, request_cpu={"work_cv": 0.5}), np.random.default_rng(3))
    c = cost(ServingPath.CACHE, 1_000_000, 1000)
    done: list[int] = []
    for k in range(before):
        model.start(c, done.append, key=1000 + k)
    env.run(until=10**9)
    assert len(done) == before
    start = env.now
    model.start(c, done.append, key=key)
    env.run(until=start + 10**9)
    return (done[-1] - start) / 1e9


def test_a_request_numbered_by_the_caller_does_the_same_work_whenever_it_starts():
    alone = _duration_of(7, before=0)
    assert _duration_of(7, before=25) == pytest.approx(alone, rel=1e-9)
    assert _duration_of(8, before=0) != pytest.approx(alone, rel=1e-3)


def test_the_apiserver_numbers_requests_by_arrival():
    env = Environment()
    server = SimulatedAPIServer(env.clock, server_concurrency=800, params=ServerParams(request_cpu={"work_cv": 0.5}))
    keys: list[int | None] = []
    start = server.model.start
    server.model.start = lambda c, done, key=None, link=None: keys.append(key) or start(c, done, key, link)
    big = cost(ServingPath.CACHE, 1_000_000, 1000)
    for _ in range(5):
        server.submit(LIST_USER, big)
    env.run(until=10**9)
    assert keys == sorted(keys) and len(set(keys)) == 5 and None not in keys


def _finish_times(cv: float, n: int = 200) -> np.ndarray:
    """n identical cache LISTs started at once on 4 cores: when each handler returns (s)."""
    env = Environment()
    params = ServerParams(cpu={"cores": 4}, request_cpu={"work_cv": cv})
    model = ResourceModel(env.clock, params, np.random.default_rng(3))
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
