"""Open-loop clients deliver their rate whatever the responses; closed-loop users send, wait
for the response, think, and send again."""

import math

import numpy as np
import pytest
from scipy import stats
from wlhelp import closed_loop, get_request, open_loop, outage, scenario, simulate

# ------------------------------------------------------------------------- open loop


def _first_attempts(result, client):
    df = result.requests
    return df[(df["client"] == client) & (df["attempt"] == 0)]


def test_constant_arrivals_are_evenly_spaced_at_the_rate():
    rate, duration = 4.0, 10.1
    sim, result = simulate(scenario(open_loop(rate_per_s=rate, arrivals="constant", count=3), duration_s=duration))
    df = _first_attempts(result, "open")
    for user, g in df.groupby("user"):
        times = np.sort(g["received_s"].to_numpy())
        # The first after one gap, then one every 1/rate: floor(duration x rate) in the run.
        assert len(times) == math.floor(duration * rate)
        assert np.allclose(np.diff(times), 1 / rate, atol=1e-9)
        assert times[0] == pytest.approx(1 / rate, abs=1e-9)
    assert df["user"].nunique() == 3


def test_a_ramp_raises_the_rate_linearly_then_holds_it():
    # k6's ramping-arrival-rate: over the ramp the rate rises from 0, so half the full rate's
    # arrivals come in it, ever closer together; then exactly one every 1/rate.
    rate, ramp, duration = 100.0, 10.0, 20.0
    _, result = simulate(scenario(open_loop(rate_per_s=rate, arrivals="constant", ramp_up_s=ramp), duration_s=duration))
    times = np.sort(_first_attempts(result, "open")["received_s"].to_numpy())
    assert np.searchsorted(times, ramp) == pytest.approx(rate * ramp / 2, abs=1)
    gaps = np.diff(times[times <= ramp])
    assert np.all(np.diff(gaps) < 0)  # the rate keeps rising
    assert np.allclose(np.diff(times[times > ramp]), 1 / rate, atol=1e-8)
    assert len(times) == pytest.approx(rate * (duration - ramp / 2), abs=1)
    # Poisson arrivals at the ramping rate: as many, in expectation, in each part.
    _, result = simulate(scenario(open_loop(rate_per_s=rate, ramp_up_s=ramp, count=4), duration_s=duration))
    times = _first_attempts(result, "open")["received_s"].to_numpy()
    in_ramp, mean = np.sum(times <= ramp), 4 * rate * ramp / 2
    assert abs(in_ramp - mean) <= 4 * math.sqrt(mean)
    assert np.sum(times <= ramp / 2) < in_ramp / 3  # a quarter of the ramp's arrivals in its first half


def test_poisson_counts_are_within_four_standard_deviations():
    rate, duration, count = 20.0, 30.0, 8
    sim, result = simulate(scenario(open_loop(rate_per_s=rate, count=count), duration_s=duration))
    df = _first_attempts(result, "open")
    mean = rate * duration  # Poisson: variance = mean
    per_user = df.groupby("user").size()
    assert len(per_user) == count
    for n in per_user:
        assert abs(n - mean) <= 4 * math.sqrt(mean)
    total_mean = mean * count
    assert abs(per_user.sum() - total_mean) <= 4 * math.sqrt(total_mean)
    # Instances are independent streams, not one stream copied.
    assert per_user.nunique() > 1


def test_poisson_gaps_are_exponential():
    rate = 50.0
    sim, result = simulate(scenario(open_loop(rate_per_s=rate, count=2), duration_s=40.0))
    df = _first_attempts(result, "open")
    gaps = np.concatenate([np.diff(np.sort(g["received_s"].to_numpy())) for _, g in df.groupby("user")])
    n = len(gaps)
    # Kolmogorov-Smirnov against Exp(rate): the 0.1 % critical value is 1.95 / sqrt(n).
    d = stats.kstest(gaps, "expon", args=(0, 1 / rate)).statistic
    assert d < 1.95 / math.sqrt(n)
    # And not merely "some spread": the coefficient of variation of exponential gaps is 1.
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=4 / math.sqrt(n))


def test_open_loop_keeps_its_rate_while_every_request_fails(probe_run):
    # During an outage every attempt is refused at once; an open-loop client does not slow down.
    rate = 10.0
    sc = scenario(open_loop(rate_per_s=rate, arrivals="constant"), duration_s=30.0, events=[outage(10.0, 10.0)])
    sim, result, probe = probe_run(sc)
    during = [a for a in probe.attempts if 10.0 < a.sent_s < 20.0]
    assert len(during) >= rate * 10 - 1
    assert all(a.outcome == "unavailable" for a in during)
    after = [a for a in probe.attempts if 20.0 < a.sent_s < 30.0]
    assert len(after) >= rate * 10 - 1 and all(a.outcome == "ok" for a in after)


def test_start_offsets_and_spread():
    client = open_loop(rate_per_s=5.0, arrivals="constant", count=20, start={"at_s": 5.0, "spread_s": 4.0})
    sim, result = simulate(scenario(client, duration_s=12.0))
    df = _first_attempts(result, "open")
    first = df.groupby("user")["received_s"].min()
    assert len(first) == 20
    # Each instance starts uniformly in [5, 9) and sends its first request one gap (0.2 s) later.
    assert first.min() >= 5.2 - 1e-9 and first.max() < 9.2
    assert first.max() - first.min() > 2.0  # spread out, not all at once


# ------------------------------------------------------------------------- closed loop


def test_closed_loop_user_sends_think_time_after_each_response():
    think = 0.5
    sim, result = simulate(scenario(closed_loop(count=3, think_s=think), duration_s=20.0))
    df = _first_attempts(result, "users")
    assert df["user"].nunique() == 3
    for user, g in df.groupby("user"):
        g = g.sort_values("received_s")
        received = g["received_s"].to_numpy()
        done = g["done_s"].to_numpy()
        assert received[0] == 0.0  # a virtual user starts at once
        # Each request is sent exactly `think` after the previous response arrived.
        assert np.allclose(received[1:] - done[:-1], think, atol=1e-9)
        # So the rate per user is 1 / (think + latency).
        latency = float(np.mean(done - received))
        assert latency > 0
        expected = 20.0 / (think + latency)
        assert abs(len(g) - expected) <= 1.0


def test_closed_loop_waits_for_every_page_of_a_paged_list():
    think = 1.0
    request = {"verb": "list", "resource": "configmaps", "options": {"limit": 30}}
    sim, result = simulate(scenario(closed_loop(think_s=think, request=request), duration_s=10.0))
    df = _first_attempts(result, "users").sort_values("received_s")
    received, done = df["received_s"].to_numpy(), df["done_s"].to_numpy()
    gaps = received[1:] - done[:-1]
    # 100 objects in pages of 30: four pages back to back, then the think time.
    assert len(df) >= 8
    pattern = np.isclose(gaps, think, atol=1e-9)
    assert list(pattern[:7]) == [False, False, False, True, False, False, False]


def test_exponential_think_time_has_the_requested_mean():
    think = 0.2
    sim, result = simulate(scenario(closed_loop(count=4, think_s=think, think="exponential"), duration_s=60.0))
    df = _first_attempts(result, "users")
    pauses = []
    for _, g in df.groupby("user"):
        g = g.sort_values("received_s")
        pauses.append(g["received_s"].to_numpy()[1:] - g["done_s"].to_numpy()[:-1])
    pauses = np.concatenate(pauses)
    n = len(pauses)
    assert pauses.min() >= 0
    assert np.mean(pauses) == pytest.approx(think, abs=4 * think / math.sqrt(n))  # sd of the mean: think / sqrt(n)


def test_uniform_think_time_stays_in_zero_to_twice_the_mean():
    think = 0.2
    sim, result = simulate(scenario(closed_loop(count=2, think_s=think, think="uniform"), duration_s=30.0))
    df = _first_attempts(result, "users")
    pauses = np.concatenate([
        g.sort_values("received_s")["received_s"].to_numpy()[1:] - g.sort_values("received_s")["done_s"].to_numpy()[:-1]
        for _, g in df.groupby("user")
    ])  # fmt: skip
    assert pauses.min() >= 0 and pauses.max() < 2 * think
    n = len(pauses)
    assert np.mean(pauses) == pytest.approx(think, abs=4 * (2 * think / math.sqrt(12)) / math.sqrt(n))


@pytest.mark.parametrize("count, iterations", [(4, 10), (5, 3), (1, 7)])
def test_shared_iterations_are_exactly_respected(count, iterations):
    client = closed_loop(count=count, think_s=0.1, iterations=iterations)
    sim, result = simulate(scenario(client, duration_s=30.0))
    df = _first_attempts(result, "users")
    assert len(df) == iterations
    # Users share the iterations: nobody sends more than its share rounded up, at t = 0
    # min(count, iterations) users start at once.
    per_user = df.groupby("user").size()
    assert per_user.max() <= math.ceil(iterations / min(count, iterations))
    assert (df["received_s"] == 0.0).sum() == min(count, iterations)
    assert sim.groups["users"].stats.attempts == iterations


def test_a_failed_request_uses_up_its_iteration(probe_run):
    # As k6's shared iterations: an iteration is spent whatever its outcome.
    client = closed_loop(count=1, think_s=0.1, iterations=2, request=get_request(), start={"at_s": 1.0})
    sc = scenario(client, duration_s=20.0, events=[outage(0.0, 5.0)])
    sim, result, probe = probe_run(sc)
    # During the outage the requests fail at once (refused, no retry) and count as iterations.
    assert len(probe.attempts) == 2
    assert all(a.outcome == "unavailable" for a in probe.attempts)


def test_ramp_adds_and_removes_instances_linearly():
    ramp_up = {"kind": "ramp", "at_s": 2.0, "client": "open", "to_count": 5, "over_s": 4.0}
    ramp_down = {"kind": "ramp", "at_s": 10.0, "client": "open", "to_count": 0}
    sc = scenario(open_loop(rate_per_s=10.0, arrivals="constant"), duration_s=14.0, events=[ramp_up, ramp_down])
    sim, result = simulate(sc)
    instances = result.metric("simapf_client_instances", client="open")
    # One instance more at 3, 4, 5 and 6 s (4 steps over 4 s), all gone at 10 s. (The scrape
    # at t sees what happened before t.)
    assert [instances[t] for t in (3.0, 4.0, 5.0, 6.0, 7.0, 10.0, 11.0)] == [1, 2, 3, 4, 5, 5, 0]
    df = _first_attempts(result, "open")
    assert df["user"].nunique() == 5
    assert df["received_s"].max() < 10.0  # stopped instances send nothing more
    between = df[(df["received_s"] >= 7.0) & (df["received_s"] < 9.0)]
    assert len(between) == 5 * 10 * 2  # five instances at 10/s for 2 s


# ------------------------------------------------------------------------- a capped load generator

_BIG = {"name": "configmaps", "count": 2000, "namespaces": 1, "object_size": {"mean_bytes": 10_000, "distribution": "constant"}}
_WHOLE_LIST = {"verb": "list", "resource": "configmaps", "namespace": None, "options": {"limit": 0}}


def _most_outstanding(df) -> int:
    # Requests outstanding after each send; a response returning at the instant of a send frees
    # its slot first (that is when a held request goes).
    events = sorted([(t, 1) for t in df["received_s"]] + [(t, -1) for t in df["done_s"]])
    return int(max(np.cumsum([d for _, d in events])))


@pytest.mark.parametrize("cap", [1, 3, 8])
def test_max_in_flight_caps_the_requests_outstanding_and_holds_the_rest_in_order(cap):
    client = open_loop(rate_per_s=100.0, arrivals="constant", count=2, request=_WHOLE_LIST, retry={"max_retries": 0})
    _, free = simulate(scenario(client, duration_s=4.0, resources=[_BIG]))
    _, capped = simulate(scenario({**client, "max_in_flight": cap}, duration_s=4.0, resources=[_BIG]))
    uncapped, held = _first_attempts(free, "open"), _first_attempts(capped, "open")
    # The load is heavier than the cap allows: without it more are outstanding at once.
    assert _most_outstanding(uncapped) > cap
    assert _most_outstanding(held) == cap
    # A held request goes as soon as a response frees a slot: every send after the first `cap`
    # is at the moment some response returned (or when it fell due, if a slot was free).
    done = set(held["done_s"])
    due = np.arange(1, len(held) + 1) / 200.0  # both instances, every 10 ms, in turn
    sent = np.sort(held["received_s"].to_numpy())
    assert all(s in done or np.isclose(s, due, atol=1e-9).any() for s in sent[cap:])
    # Fewer are sent than fell due, none before it fell due, and the backlog is kept, not dropped.
    assert len(held) < len(uncapped)
    assert np.all(sent >= due[: len(sent)] - 1e-9)
