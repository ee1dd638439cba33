"""A time budget for long work (`--budget 10m`): stop at the next resumable point once it is spent.

One mechanism for every long command. A `Budget` is a deadline, counted from when the command
started; the work checks it between its units (a sweep's or a search's runs, a search's batches
of trials, figures, a fit's grid evaluations) and never inside one: a unit already started
finishes and is kept whole. When the budget is spent before the work is done, the work raises
`BudgetReached`, which says what was done, what is left, where the finished part is kept; the
command line adds the command that continues it and ends with exit status `BUDGET_EXIT`.

The exit status is neither 0 (the work is not finished: `simapf sweep ... && next-step` must
not go on to the next step) nor 2 (nothing was wrong with the input), so a script can tell a
budget stop from both, and loop until the work is done:

    until simapf sweep big.yaml --budget 30m; do [ $? -eq 3 ] || exit 1; done

Every call does one unit at least (a round of runs, a batch of trials, a figure, a grid
evaluation), so that a budget shorter than a unit still gets the work on.

Runs handed to the workers together start together, so `run_within` hands a sweep's runs out in
rounds: at first one per worker, then as many as the runs' own timings say fit in half of what
is left of the budget. Without a budget every run is handed out at once, as always.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from simapf.errors import ConfigError

BUDGET_EXIT = 3  # the work stopped at a resumable point because its budget was spent
MAX_BUDGET_S = 366 * 86400.0  # a year: longer is a typo (a missing unit is refused anyway)

T = TypeVar("T")


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
        from simapf.jobs.estimate import duration

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


def run_within(budget: Budget, tasks: Sequence[T], run: Callable[[list[T]], Iterable[Any]], workers: int,
               seconds_of: Callable[[Any], float | None] = lambda row: None) -> Iterator[Any]:  # fmt: skip
    """What `run` yields for `tasks`, handed to it in rounds while the budget lasts: every task
    at once without a budget; with one, `workers` at first, then as many as the runs' own
    timings (`seconds_of` a result; None: not known) say fit in half of what is left. A round
    once handed out finishes, and the first always runs (a budget shorter than a run still gets
    the work on). Stops, with tasks left, when the budget is spent between rounds: `len(tasks)`
    minus what was yielded says how many."""
    if not budget.limited:
        yield from run(list(tasks))
        return
    workers = max(1, workers)
    timed: list[float] = []
    i = 0
    while i < len(tasks) and (i == 0 or not budget.spent()):
        size = workers
        if timed:
            per_run = sum(timed) / len(timed)
            size = max(workers, int(budget.left() / 2 * workers / max(per_run, 1e-3)))
        for result in run(list(tasks[i : i + size])):
            seconds = seconds_of(result)
            if seconds is not None:
                timed.append(float(seconds))
            yield result
        i += size
