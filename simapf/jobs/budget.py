"""A time budget for long work (`--budget 10m`): stop at the next resumable point once it is spent.

One mechanism for every long command. A `Budget` is a deadline, counted from when the command
started. The command applies it to its work (`with budget.applied():`), and the one place runs
are executed (`simapf.jobs.pool`) checks it: once it is spent, no run is started; the runs under
way may finish within its grace (`grace_s`: half of what it may be overrun by, `overrun_s`), and
are abandoned after it. Each run that finished was handed to its caller as it came (written to a
sweep's directory, kept in the result cache), so stopping inside a long unit of work (a figure
of 330 runs, a fit's grid evaluation, a sweep) loses none of them. The executor then raises
`Spent`; the command turns it into `BudgetReached`, which says what was done, what is left,
where the finished part is kept; the command line adds the command that continues it and ends
with exit status `BUDGET_EXIT`.

The exit status is neither 0 (the work is not finished: `simapf sweep ... && next-step` must
not go on to the next step) nor 2 (nothing was wrong with the input), so a script can tell a
budget stop from both, and loop until the work is done:

    until simapf sweep big.yaml --budget 30m; do [ $? -eq 3 ] || exit 1; done

Every call gets something done (`progressed`: a run finished, or a unit such as a figure), so
that a budget shorter than a run still gets the work on. A unit that cannot be taken up where it
stopped (a search's batch of trials, which every trial asked for must be told of) runs `held()`:
the budget stops before it or after it, never inside.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Callable, Iterator, Sequence

from simapf.errors import ConfigError

BUDGET_EXIT = 3  # the work stopped at a resumable point because its budget was spent
MAX_BUDGET_S = 366 * 86400.0  # a year: longer is a typo (a missing unit is refused anyway)
OVERRUN_FRACTION = 0.10  # a budget B stops the work by max(10 % of B, 30 s) past B
OVERRUN_MIN_S = 30.0


def budget_problem(text: str) -> str | None:
    """What is wrong with `text` as a budget, in words that follow it; None if nothing is."""
    from simapf.scenario.schema.base import parse_duration

    raw = str(text).strip()
    seconds = parse_duration(raw)
    if seconds is None:
        if raw.replace(".", "", 1).isdigit():
            return f"give a unit, e.g. {raw}s or {raw}m (a Go duration: 90s, 10m, 1h30m)"
        return "not a duration; write it as Go does: 90s, 10m, 1h30m"
    if not seconds > 0:
        return "must be more than 0"
    if not math.isfinite(seconds) or seconds > MAX_BUDGET_S:
        return "more than a year; give a shorter budget, or none"
    return None


def parse_budget(text: str, option: str = "budget") -> float:
    """Seconds of a budget written as a Go duration ("10m", "1h30m", "90s"), or a ConfigError
    that names `option`."""
    from simapf.scenario.schema.base import parse_duration

    problem = budget_problem(text)
    if problem is not None:
        raise ConfigError(f"{option} {str(text)!r}: {problem}")
    return float(parse_duration(str(text).strip()))  # type: ignore[arg-type]


class Budget:
    """A deadline `seconds` after `started` (a `time.monotonic()` reading; default: now); no
    deadline at all when `seconds` is None. `text` is how the user wrote it."""

    def __init__(self, seconds: float | None = None, text: str | None = None, started: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.seconds = seconds
        self.text = text or (f"{seconds:g}s" if seconds is not None else "none")
        self.clock = clock
        self.started = clock() if started is None else started
        self.done_any = False  # see `progressed`

    @classmethod
    def parse(cls, text: str | None, started: float | None = None) -> "Budget":
        return cls(parse_budget(text), text, started) if text else cls(None, started=started)

    @property
    def limited(self) -> bool:
        return self.seconds is not None

    def elapsed(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        """Seconds left (infinite without a budget; negative once spent)."""
        return math.inf if self.seconds is None else self.seconds - self.elapsed()

    def spent(self) -> bool:
        return self.left() <= 0

    @property
    def overrun_s(self) -> float:
        """How far past its end the work may go: OVERRUN_FRACTION of it, OVERRUN_MIN_S at least."""
        return math.inf if self.seconds is None else max(OVERRUN_FRACTION * self.seconds, OVERRUN_MIN_S)

    @property
    def grace_s(self) -> float:
        """How long after its end the runs under way may go on to finish: half the overrun, the
        other half for what the command does after them (writing what is done)."""
        return self.overrun_s / 2

    def progressed(self) -> None:
        """Something was done under the budget (a run finished, a figure was made)."""
        self.done_any = True

    def may_stop(self) -> bool:
        """Whether the work should stop now: the budget is spent and something was done."""
        return self.done_any and self.spent()

    @contextlib.contextmanager
    def applied(self) -> Iterator["Budget"]:
        """Within the block, the runs executed (simapf.jobs.pool) stop once this budget is spent."""
        _applied.append(self)
        try:
            yield self
        finally:
            _applied.remove(self)

    def reached(self, what: str, done: int, total: int, unit: str, kept: str | None = None,
                left_s: float | None = None, resume: Sequence[str] = ()) -> "BudgetReached":  # fmt: skip
        """The exception to raise when it is spent with `done` of `total` `unit` finished."""
        return BudgetReached(what, self, done, total, unit, kept, left_s, tuple(resume))


class BudgetReached(Exception):
    """The budget was spent before the work was done; the work stopped at a resumable point.

    `done` of `total` `unit` are finished and kept in `kept`; `left_s` estimates the rest;
    `resume` are the options that continue it (added to the command line that ran it, in
    place of the same options there)."""

    def __init__(self, what: str, budget: Budget, done: int, total: int, unit: str, kept: str | None,
                 left_s: float | None, resume: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.what = what
        self.budget = budget
        self.done = done
        self.total = total
        self.unit = unit
        self.kept = kept
        self.left_s = left_s
        self.resume = resume
        self.elapsed_s = budget.elapsed()
        super().__init__(self.summary())

    def summary(self) -> str:
        """One line: the budget, what was done and where it is, what is left."""
        from simapf.scenario.work import duration

        left = self.total - self.done
        text = (f"{self.what}: budget of {self.budget.text} spent ({duration(self.elapsed_s)}): {self.done} of "
                f"{self.total} {self.unit} done")  # fmt: skip
        if self.kept:
            text += f", kept in {self.kept}"
        text += f"; {left} left"
        if self.left_s is not None and math.isfinite(self.left_s):
            text += f" (~{duration(self.left_s)})"
        return text


def continue_command(args: Sequence[str], resume: Sequence[str] = ()) -> list[str]:
    """The command line `args` (without the program's name) without its --budget, with the
    options of `resume` in place of the same options in `args`: what continues the work."""
    replaced = {a for a in resume if a.startswith("--")}
    out: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name == "--budget" or name in replaced:
            # "--budget 10m" or "--budget=10m"; an option of `resume` likewise (all take a value)
            skip = "=" not in arg and i + 1 < len(args)
            continue
        out.append(arg)
    return out + list(resume)


class Spent(Exception):
    """The budget applied to the runs (`Budget.applied`) was spent: no more were started, and
    those that finished were handed to the caller before this was raised."""

    def __init__(self, budget: Budget) -> None:
        super().__init__(f"the budget of {budget.text} is spent")
        self.budget = budget


_applied: list[Budget] = []  # the budgets applied now, innermost last
_held = 0  # depth of `held()` blocks


def current() -> Budget | None:
    """The budget the runs executed now stop for, if any (none within `held()`)."""
    return None if _held else next((b for b in reversed(_applied) if b.limited), None)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Within the block, runs do not stop for a budget: a unit that must finish whole."""
    global _held
    _held += 1
    try:
        yield
    finally:
        _held -= 1
