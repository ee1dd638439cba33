"""One way to be called back later: `Clock.at(when_ns, fn, arg, phase)` (simapf.engine.clock).

Only the engine module (simapf/engine/environment.py) drives SimPy: it reads SimPy's private fields and
turns its events into the heap's one entry shape. Everywhere else a component holds a clock and
asks it for callbacks, so there is one order of events and one place to change it.
"""

from __future__ import annotations

import re
from pathlib import Path

from simapf.engine.clock import Clock, EventLoop, Phase
from simapf.engine.environment import Environment

PACKAGE = Path(__file__).resolve().parents[2] / "simapf"
ENGINE = PACKAGE / "engine" / "environment.py"

# Other ways to schedule, and reads of SimPy's private fields (another object's: a component's
# own `self._queue` is its own).
FORBIDDEN = {
    "a SimPy event's callbacks": re.compile(r"\.callbacks\.append\("),
    "a SimPy process": re.compile(r"\b(env|environment)\.process\(|\bsimpy\.Process\b"),
    "a SimPy timeout": re.compile(r"\.timeout\(\s*[^)]"),
    "a second timer API": re.compile(r"\bTimers\b|\.after\(|\.alarm\("),
    "an injected or second scheduling call": re.compile(r"\bcall_at\b|\bScheduler\b"),
    "SimPy's private fields": re.compile(r"(?<!self)\._(now|value|queue|eid)\b"),
    "APF's old clock module": re.compile(r"simapf\.apf\.clock\b|from simapf\.apf import clock"),
}


def offences(source: str) -> list[str]:
    found = []
    for number, line in enumerate(source.splitlines(), start=1):
        code = line.split("#", 1)[0]
        for what, pattern in FORBIDDEN.items():
            if pattern.search(code):
                found.append(f"{number}: {what}: {line.strip()}")
    return found


def test_the_checker_finds_each_spelling():
    assert offences("env.timeout(5).callbacks.append(cb)")
    assert offences("env.process(loop())")
    assert offences("self.ctx.timers.after(d, fn)")
    assert offences("admission.call_at(delay, fn)")
    assert offences("t = env._now")
    assert offences("epoch = event._value")
    assert not offences("self._queue.append(x)")  # a component's own queue
    assert not offences("clock.at(clock.now + d, fn, arg, Phase.FINISH)")


def test_one_scheduling_api_outside_the_engine():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == ENGINE:
            continue
        bad = offences(path.read_text(encoding="utf-8"))
        if bad:
            found[str(path.relative_to(PACKAGE))] = bad
    assert found == {}


def test_only_the_engine_imports_simpy():
    importers = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py"))
                 if re.search(r"^\s*(import simpy|from simpy\b)", p.read_text(encoding="utf-8"), re.M)]  # fmt: skip
    assert importers == ["engine/environment.py"]


def test_the_clock_module_is_the_ground_floor():
    source = (PACKAGE / "engine" / "clock.py").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(from|import) simapf", source, re.M)


def test_every_phase_is_documented_where_it_is_defined():
    source = (PACKAGE / "engine" / "clock.py").read_text(encoding="utf-8")
    for phase in Phase:
        assert re.search(rf"^    {phase.name} = {phase.value}\n    \"\"\"\S", source, re.M), phase.name


def test_the_module_constants_are_the_phases():
    from simapf.engine import clock

    assert [clock.RELEASE, clock.FINISH, clock.TIMEOUT, clock.ARRIVAL, clock.OTHER] == list(Phase)
    assert all(type(getattr(clock, p.name)) is Phase for p in Phase)


def _order(clock: Clock, run) -> list[str]:
    seen: list[str] = []
    when = clock.now + 5
    for name, phase in [("arrival", Phase.ARRIVAL), ("finish 1", Phase.FINISH), ("release", Phase.RELEASE),
                        ("finish 2", Phase.FINISH), ("other", Phase.OTHER), ("timeout", Phase.TIMEOUT)]:  # fmt: skip
        clock.at(when, seen.append, name, phase)
    clock.at(when - 1, seen.append, "earlier", Phase.OTHER)
    run(when + 1)
    return seen


def test_the_runs_clock_and_the_replays_loop_keep_one_order():
    env = Environment()
    loop = EventLoop()
    expected = ["earlier", "release", "finish 1", "finish 2", "timeout", "arrival", "other"]
    assert _order(env.clock, env.run_until) == expected
    assert _order(loop, loop.advance_to) == expected
    assert env.clock.now == loop.now == 6


def test_both_heaps_hold_one_entry_shape():
    env = Environment()
    loop = EventLoop()
    for clock in (env.clock, loop):
        clock.at(3, print, None, Phase.ARRIVAL)
    env.timeout(2)  # a SimPy event (tests still make them) takes the same shape
    shapes = {(len(e), type(e[0]), type(e[2]), callable(e[3])) for e in [*env._queue, *loop.heap]}
    assert shapes == {(5, int, int, True)}
