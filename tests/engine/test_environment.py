"""The environment's own event loop: SimPy's events and simapf's alarms in one order."""

from __future__ import annotations

import simpy.events

from simapf.engine.clock import Phase
from simapf.engine.environment import Environment


def test_alarms_and_events_run_in_scheduling_order_at_one_instant():
    env = Environment()
    seen: list[str] = []
    clock = env.clock
    clock.at(5, seen.append, "alarm 1", Phase.FINISH)
    env.timeout(5).callbacks.append(lambda _e: seen.append("timeout"))
    clock.at(5, seen.append, "alarm 2", Phase.FINISH)
    clock.at(5, seen.append, "urgent", Phase.RELEASE)
    env.run_until(10)
    assert seen == ["urgent", "alarm 1", "timeout", "alarm 2"]
    assert env.now == env.clock.now == 10


def test_the_clock_follows_simpys_run_too():
    env = Environment()
    times: list[int] = []
    env.clock.at(3, lambda _arg: times.append(env.clock.now), None, Phase.FINISH)

    def process():
        yield env.timeout(7)
        times.append(env.clock.now)

    env.process(process())
    env.run()
    assert times == [3, 7] and env.clock.now == env.now == 7


def test_simpys_priorities_are_phases():
    # A SimPy event scheduled with priority p runs in phase p among the alarms of its instant.
    assert (simpy.events.URGENT, simpy.events.NORMAL) == (Phase.RELEASE, Phase.FINISH)


def test_the_heap_holds_one_entry_shape():
    env = Environment()
    env.clock.at(4, print, None, Phase.ARRIVAL)
    env.timeout(2)
    env.process(x for x in ())
    assert {len(entry) for entry in env._queue} == {5}


def test_a_failed_event_nobody_handles_is_raised():
    env = Environment()
    env.event().fail(RuntimeError("lost"))
    try:
        env.run_until(1)
    except RuntimeError as err:
        assert str(err) == "lost"
    else:
        raise AssertionError("the failure was swallowed")
