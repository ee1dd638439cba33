"""Latencies exact up to a limit, sketched beyond: within the stated error, in memory that does not
grow, and exact for the runs that ask (simapf.workload.latencies)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import simapf
from simapf.scenario.schema.scenario import RunSpec
from simapf.simulation import runner
from simapf.workload.clientgo import RequestLog
from simapf.workload.latencies import EXACT_UP_TO, RELATIVE_ERROR, Latencies, Sketch

QS = [0, 1, 50, 90, 95, 99, 99.9, 100]


def _samples(n: int, seed: int) -> np.ndarray:
    """Latencies of several modes and decades, some of them 0 (an answer within the same ns)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.lognormal(-4, 1.5, n // 2), rng.lognormal(1, 0.3, n - n // 2)])
    x[rng.random(n) < 0.01] = 0.0
    return rng.permutation(x)


def _within(got: float, exact: float, error: float = RELATIVE_ERROR) -> bool:
    return abs(got - exact) <= error * abs(exact) + 1e-300


@pytest.mark.parametrize("n, seed", [(1, 1), (2, 2), (7, 3), (1000, 4), (100_000, 5)])
def test_a_sketch_percentile_is_within_its_error_of_numpys(n, seed):
    x = _samples(n, seed)
    sketch = Sketch()
    sketch.add_all(x.tolist())
    got = sketch.percentiles(QS)
    exact = np.percentile(x, QS)
    bad = [(q, g, e) for q, g, e in zip(QS, got, exact) if not _within(g, e)]
    assert not bad, bad
    assert sketch.n == n and sketch.lo == x.min() and sketch.hi == x.max()
    assert sketch.mean() == pytest.approx(x.mean(), rel=1e-12)


def test_a_coarser_sketch_is_off_by_more_but_still_within_its_own_error():
    # The bound is the sketch's, not luck: a 5 % sketch misses the exact percentiles by more than
    # 0.1 %, and by no more than 5 %.
    x = _samples(50_000, 6)
    coarse = Sketch(0.05)
    coarse.add_all(x.tolist())
    got, exact = coarse.percentiles(QS[1:-1]), np.percentile(x, QS[1:-1])
    assert all(_within(g, e, 0.05) for g, e in zip(got, exact))
    assert any(not _within(g, e) for g, e in zip(got, exact))


def test_latencies_are_exact_up_to_the_limit_then_sketched_in_a_fixed_size():
    x = _samples(20_000, 7)
    exact = Latencies(exact_up_to=None)
    capped = Latencies(exact_up_to=1_000)
    for v in x.tolist():
        exact.append(v)
        capped.append(v)
    assert exact.sketch is None and len(exact.values) == len(x)
    assert capped.sketch is not None and len(capped.values) == 0 and len(capped) == len(x)
    # The sketch is the size it was made: one count per bucket, however many values fell into it.
    assert len(capped.sketch.counts) == len(Sketch().counts) and sum(capped.sketch.counts) < len(x)
    (p50, p90, p99), hi, mean, lo = capped.stats([50, 90, 99])
    (e50, e90, e99), ehi, emean, elo = exact.stats([50, 90, 99])
    assert all(_within(g, e) for g, e in [(p50, e50), (p90, e90), (p99, e99)])
    assert (hi, lo) == (ehi, elo) and mean == pytest.approx(emean, rel=1e-12)
    below = Latencies(exact_up_to=len(x) + 1)
    for v in x.tolist():
        below.append(v)
    assert below.sketch is None and below.stats([50, 90, 99]) == exact.stats([50, 90, 99])


def test_a_sketched_client_log_keeps_outcomes_and_successes_apart():
    x = _samples(5_000, 8)
    codes = np.random.default_rng(9).choice([0, 0, 0, 1, 4], size=len(x))
    log = RequestLog(exact_up_to=100)
    for v, c in zip(x.tolist(), codes.tolist()):
        log.add(v, c)
    assert log.every is not None and log.ok is not None and len(log) == len(x)
    assert log.outcomes == np.bincount(codes, minlength=6).tolist()
    assert log.ok.n == int((codes == 0).sum())
    ok = np.sort(x[codes == 0])
    assert _within(log.ok.order_statistics([len(ok) // 2])[0], ok[len(ok) // 2])


SMALL = {"run.duration_s": 8}


def _figures(result) -> dict:
    s = result.typed
    out = {}
    for row in s.latency:
        out[(row.priority_level, row.verb)] = (row.count, row.p50_s, row.p90_s, row.p99_s, row.max_s, row.mean_s)
    for client in s.clients:
        for verb, v in client.by_verb.items():
            out[(client.client, verb)] = (v.requests, v.p50_s, v.p90_s, v.p99_s, v.max_s, v.mean_s, v.p99_ok_s)
    return out


def test_a_run_past_the_limit_gives_each_latency_within_the_error_and_counts_exactly(monkeypatch):
    scenario = simapf.load_scenario("scenarios/list-experiment.yaml", SMALL)
    exact = _figures(simapf.run(scenario, cache=False))
    monkeypatch.setattr(runner, "EXACT_UP_TO", 500)  # the run's ~14,000 requests are past it
    sketched = _figures(simapf.run(scenario, cache=False))
    asked = _figures(simapf.run(simapf.load_scenario("scenarios/list-experiment.yaml",
                                                     {**SMALL, "run.exact_percentiles": True}), cache=False))  # fmt: skip
    assert sketched.keys() == exact.keys() and len(exact) >= 2
    assert max(v[0] for v in exact.values()) > 500
    for key, (count, *values) in exact.items():
        got_count, *got = sketched[key]
        assert got_count == count
        assert all(math.isinf(g) and math.isinf(e) or _within(g, e) for g, e in zip(got, values)), (key, got, values)
    assert sketched != exact  # past the limit the percentiles are the sketch's...
    assert asked == exact  # ...unless the run asks for exact ones


def test_the_settings_say_what_the_code_does():
    text = RunSpec.model_fields["exact_percentiles"].description
    assert f"{EXACT_UP_TO:,}" in text
    assert re.search(r"within (\S+) %", text).group(1) == f"{RELATIVE_ERROR * 100:g}"


def test_a_latency_beyond_the_buckets_counts_at_their_end_and_stays_the_exact_extreme():
    sketch = Sketch()
    sketch.add_all([1e-12, 0.5, 2e7])
    assert (sketch.lo, sketch.hi) == (1e-12, 2e7)
    assert sketch.counts[0] == 1 and sketch.counts[-1] == 1
    assert sketch.percentiles([0, 100]) == [1e-12, 2e7]  # held within the exact extremes


def test_a_long_runs_memory_estimate_stops_counting_latencies_past_the_sketch():
    from simapf.scenario import work

    def estimate(overrides: dict) -> float:
        return work.estimate(simapf.load_scenario("scenarios/list-experiment.yaml", overrides)).memory_bytes()

    short, long = {"run.duration_s": 60}, {"run.duration_s": 6000}  # ~0.1 M and ~10 M requests
    assert estimate(short) == estimate({**short, "run.exact_percentiles": True})
    assert estimate(long) < estimate({**long, "run.exact_percentiles": True})


def test_the_summary_page_says_what_the_code_does():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "summary.md").read_text()
    said = re.search(r"up to ([\d,]+) requests\. Past that, .*? within (\S+) %", page, re.S)
    assert said and said.group(1) == f"{EXACT_UP_TO:,}" and said.group(2) == f"{RELATIVE_ERROR * 100:g}"
