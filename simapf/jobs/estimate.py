"""How long long work will take, from one model of a run's cost, and the line that says so.

Every long command (sweep, optimize, figures, calibrate, compare, --uncertainty draws) says what
it is about to do before it does it, on stderr:

    simapf: sweep policies-size-qps: about 216 runs, ~2 min on 2 workers (model: the runs' size at this machine's pace, from 240 runs)

The model, the same for every command, every kind of run and every point of a command's life
(before it starts, when a budget stops it, when it goes on):

- A run's **cost** is what it simulates, counted from its scenario before anything is built
  (`simapf.scenario.work`): the requests its rate-driven clients send, the series samples its
  scrapes take, its client instances (informers listing and relisting) and its start-up, each
  at the seconds per unit of COSTS. COSTS were fitted to the measured runs of the shipped
  specs (docs/benchmarks.md says how far each kind of run was off).
- This machine's **pace** scales it: the seconds its runs took over what their cost said, the
  total of the last MAX_OBSERVED runs (the one place runs execute, `simapf.jobs.pool`, times
  each one). Before any run here it is measured once, by a run of REFERENCE in this process.
  The pace is kept in a small per-user state file, `pace.json` in `$SIMAPF_STATE_DIR`, else
  `$XDG_STATE_HOME/simapf`, else `~/.local/state/simapf`, and a command's runs update it when
  it ends, so a command that goes on after a budget stop estimates what is left at the pace
  its first part took.

Runs then share out over the workers: a stage's time is the larger of its runs' total over the
workers and its longest run, and stages run one after the other.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from simapf.scenario.work import duration

# Seconds per unit of what a run simulates, at pace 1 (the machine they were fitted on).
COSTS = {
    "requests": 40e-6,  # a request sent by a rate-driven client, through APF and the server model
    "samples": 2e-6,  # a series sample taken at a scrape
    "instances": 3.4e-3,  # a client instance: an informer's lists, relists and watch
    "run": 0.02,  # building the run and handing back its result
}
MAX_OBSERVED = 200  # runs whose times the pace is the total of, the most recent
PACE_FILE = "pace.json"

# Measured once on a machine that has no pace yet: a few thousand LISTs and GETs (~0.2 s).
REFERENCE: dict[str, Any] = {
    "name": "pace-reference",
    "run": {"duration_s": 60, "seed": 1},
    "resources": [{"name": "configmaps", "count": 500, "object_size": {"mean_bytes": 2048}}],
    "clients": [
        {"name": "lister", "kind": "open_loop", "identity": {"user": "lister"}, "rate_per_s": 10,
         "request": {"verb": "list", "resource": "configmaps"}},
        {"name": "getter", "kind": "open_loop", "identity": {"user": "getter"}, "rate_per_s": 50,
         "request": {"verb": "get", "resource": "configmaps"}},
    ],
}  # fmt: skip

__all__ = ["Estimate", "Pace", "Runs", "Stage", "cost", "duration", "estimate", "observe", "recorded"]


# ------------------------------------------------------------------------------ the cost of a run


def cost(loaded: Any) -> float:
    """What a run of `loaded` (a LoadedScenario) costs at pace 1, in seconds (see the module's
    docstring)."""
    from simapf.scenario import work

    w = work.estimate(loaded)
    return (COSTS["requests"] * w.requests + COSTS["samples"] * w.samples + COSTS["instances"] * w.instance_count
            + COSTS["run"])  # fmt: skip


@dataclass(frozen=True)
class Runs:
    """`count` runs of one loaded scenario."""

    loaded: Any
    count: int = 1


@dataclass(frozen=True)
class Stage:
    """Runs that go to `workers` together, `times` over (a fit's grid evaluations)."""

    runs: Sequence[Runs]
    workers: int = 1
    times: float = 1.0


# ------------------------------------------------------------------------------ this machine's pace


def state_dir() -> Path:
    """Where simapf keeps what it learns about this machine (the pace of its runs)."""
    if os.environ.get("SIMAPF_STATE_DIR"):
        return Path(os.environ["SIMAPF_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "simapf"


class Pace:
    """This machine's pace: the seconds its last runs took over their cost. `observe` adds a
    run; `save` writes the state file (as it is then: another command may have written it)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_dir() / PACE_FILE
        self.observed = _read(self.path)  # [cost, seconds] of the last runs, oldest first
        self.added: list[list[float]] = []

    @property
    def runs(self) -> int:
        return len(self.observed)

    def factor(self) -> float:
        """Seconds per second of cost here; measured once (REFERENCE) if no run was timed yet."""
        if not self.observed:
            self.observe(*_reference())
        costs = sum(c for c, _s in self.observed)
        return sum(s for _c, s in self.observed) / costs if costs > 0 else 1.0

    def observe(self, cost_s: float, seconds: float) -> None:
        if math.isfinite(cost_s) and math.isfinite(seconds) and cost_s > 0 and seconds >= 0:
            pair = [round(float(cost_s), 6), round(float(seconds), 6)]
            self.observed = (self.observed + [pair])[-MAX_OBSERVED:]
            self.added.append(pair)

    def source(self) -> str:
        """Where the pace comes from, in words."""
        if self.runs == 1 and self.observed == self.added:
            return "a reference run here"
        return f"{self.runs} run{'s' if self.runs != 1 else ''} here"

    def save(self) -> None:
        """Add this command's runs to the file's and write it whole. A file that cannot be
        written only loses them: the pace is a hint, never worth an error."""
        if not self.added:
            return
        from simapf.files import json_text, write_text_atomic

        try:
            observed = (_read(self.path) + self.added)[-MAX_OBSERVED:]
            write_text_atomic(self.path, json_text({"version": 1, "observed": observed}) + "\n")
        except OSError:
            pass
        self.added = []


def _read(path: Path) -> list[list[float]]:
    """The file's [cost, seconds] pairs; none if it is missing or not one simapf wrote (never an
    error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        pairs = [[float(c), float(s)] for c, s in data["observed"]
                 if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (c, s))]  # fmt: skip
        return [p for p in pairs if p[0] > 0 and math.isfinite(p[0]) and p[1] >= 0 and math.isfinite(p[1])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def _reference() -> tuple[float, float]:
    """(cost, seconds) of one run of REFERENCE in this process."""
    from simapf.scenario import load_scenario
    from simapf.simulation.runner import Simulation

    loaded = load_scenario(REFERENCE)
    with _quiet():
        began = time.perf_counter()
        Simulation(loaded).run(progress=False)
    return cost(loaded), time.perf_counter() - began


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)


_recording: list[Pace] = []  # the paces of the `recorded()` blocks open now, innermost last


@contextlib.contextmanager
def recorded() -> Iterator[Pace]:
    """This machine's pace, to estimate with; the runs executed within the block (`observe`)
    are added to it, and saved when the block ends, however it ends."""
    pace = Pace()
    _recording.append(pace)
    try:
        yield pace
    finally:
        _recording.remove(pace)
        pace.save()


def observe(cost_s: float | None, seconds: float) -> None:
    """A run that cost `cost_s` took `seconds` (simapf.jobs.pool says so of every run it
    executes): added to the pace of the innermost `recorded()` block, if one is open."""
    if _recording and cost_s is not None:
        _recording[-1].observe(cost_s, seconds)


# ------------------------------------------------------------------------------ the estimate


@dataclass
class Estimate:
    """Runs in all, their time on `workers` (this machine's pace), and where the pace comes from."""

    runs: int
    seconds: float
    workers: int
    source: str

    def line(self, what: str, planned: str | None = None, budget: Any = None, most: bool = False) -> str:
        """`simapf: WHAT: about N runs, ~T on W workers (source)`, and what the budget covers;
        `most`: the time is an upper bound (at most ~T)."""
        planned = planned or f"about {self.runs:,} run{'s' if self.runs != 1 else ''}"
        text = (f"simapf: {what}: {planned}, {'at most ' if most else ''}~{duration(self.seconds)} on {self.workers} "
                f"worker{'s' if self.workers != 1 else ''} ({self.source})")  # fmt: skip
        if budget is not None and budget.limited:
            left = budget.left()
            if left <= 0:
                text += f"; the budget of {budget.text} is spent already: it stops after its first step"
            elif self.seconds > left:
                text += f"; the budget of {budget.text} covers about {left / self.seconds:.0%} of it"
            else:
                text += f"; within the budget of {budget.text}"
        return text


def estimate(stages: Sequence[Stage], pace: Pace | None = None) -> Estimate:
    """How long `stages` take, one after the other, at this machine's pace."""
    pace = pace if pace is not None else Pace()
    factor = pace.factor()
    costs: dict[int, float] = {}
    total = 0.0
    runs = 0
    for stage in stages:
        count = sum(r.count for r in stage.runs)
        runs += round(count * stage.times)
        each = [(costs.setdefault(id(r.loaded), cost(r.loaded)), r.count) for r in stage.runs if r.count > 0]
        if not each:
            continue
        work = sum(c * n for c, n in each)
        longest = max(c for c, _n in each)
        total += max(work / max(1, min(stage.workers, count)), longest) * stage.times
    workers = max((stage.workers for stage in stages), default=1)
    return Estimate(runs, total * factor, workers, f"model: the runs' size at this machine's pace, from {pace.source()}")
