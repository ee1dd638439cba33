"""The environment's own event loop: SimPy's events and simapf's alarms in one order."""

from __future__ import annotations

import simpy.events

from simapf.environment import NORMAL_PRIORITY, Environment


def test_alarms_and_events_run_in_scheduling_order_at_one_instant():
    env = Environment()
    seen: list[str] = []
    env.clock.alarm(5, seen.append, "alarm 1")
    env.timeout(5).callbacks.append(lambda _e: seen.append("timeout"))
    env.clock.alarm(5, seen.append, "alarm 2")
    env.clock.alarm(5, seen.append, "urgent", priority=simpy.events.URGENT)
    env.run_until(10)
    assert seen == ["urgent", "alarm 1", "timeout", "alarm 2"]
    assert env.now == env.clock.now == 10


def test_the_clock_follows_simpys_run_too():
    env = Environment()
    times: list[int] = []
    env.clock.alarm(3, lambda _arg: times.append(env.clock.now), None)

    def process():
        yield env.timeout(7)
        times.append(env.clock.now)

    env.process(process())
    env.run()
    assert times == [3, 7] and env.clock.now == env.now == 7


def test_an_alarm_has_simpys_normal_priority():
    assert NORMAL_PRIORITY == simpy.events.NORMAL
