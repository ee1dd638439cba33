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
  each one), for as many runs at once as a stage runs (runs side by side share the machine's
  cores, caches and memory bandwidth, and each takes longer than alone). Before any run here
  at that many at once, it is measured once, by that many runs of REFERENCE at once. The pace
  is kept in a small per-user state file, `pace.json` in `$SIMAPF_STATE_DIR`, else
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

# Measured once on a machine that has no pace yet: a few thousand LISTs and GETs (~0.2 s a run).
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
REFERENCE_TIMINGS = 3  # timed runs of REFERENCE, the fastest kept (see _reference_run)

__all__ = ["Estimate", "Pace", "Runs", "Stage", "cost", "duration", "estimate", "recorded"]


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
    """This machine's pace, by how many runs go at once: the seconds its last runs took over
    their cost. `observe` adds a run; `save` writes the state file (as it is then: another
    command may have written it)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_dir() / PACE_FILE
        self.observed = _read(self.path)  # runs at once -> [cost, seconds] of the last runs, oldest first
        self.added: dict[str, list[list[float]]] = {}
        self.measured: set[str] = set()  # the numbers of runs at once measured by REFERENCE now

    def runs(self, at_once: int = 1) -> int:
        return len(self.observed.get(str(at_once), []))

    def factor(self, at_once: int = 1) -> float:
        """Seconds per second of cost with `at_once` runs at once; measured once (REFERENCE) if
        no such run was timed here yet."""
        if not self.observed.get(str(at_once)):
            for pair in _reference(at_once):
                self.observe(*pair, at_once=at_once)
            self.measured.add(str(at_once))
        pairs = self.observed[str(at_once)]
        costs = sum(c for c, _s in pairs)
        return sum(s for _c, s in pairs) / costs if costs > 0 else 1.0

    def observe(self, cost_s: float, seconds: float, at_once: int = 1) -> None:
        if math.isfinite(cost_s) and math.isfinite(seconds) and cost_s > 0 and seconds >= 0:
            key, pair = str(max(1, int(at_once))), [round(float(cost_s), 6), round(float(seconds), 6)]
            self.observed[key] = (self.observed.get(key, []) + [pair])[-MAX_OBSERVED:]
            self.added.setdefault(key, []).append(pair)

    def source(self, at_once: int = 1) -> str:
        """Where the pace of `at_once` runs at once comes from, in words."""
        n = self.runs(at_once)
        if str(at_once) in self.measured and n == at_once:
            return f"{'a reference run' if n == 1 else f'{n} reference runs at once'} here"
        return f"{n} run{'s' if n != 1 else ''} here"

    def save(self) -> None:
        """Add this command's runs to the file's and write it whole. A file that cannot be
        written only loses them: the pace is a hint, never worth an error."""
        if not self.added:
            return
        from simapf.files import json_text, write_text_atomic

        try:
            observed = _read(self.path)
            for key, pairs in self.added.items():
                observed[key] = (observed.get(key, []) + pairs)[-MAX_OBSERVED:]
            write_text_atomic(self.path, json_text({"version": 1, "observed": dict(sorted(observed.items()))}) + "\n")
        except OSError:
            pass
        self.added = {}


def _read(path: Path) -> dict[str, list[list[float]]]:
    """The file's [cost, seconds] pairs by runs at once; none if it is missing or not one simapf
    wrote (never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        out = {}
        for key, pairs in data["observed"].items():
            if not str(key).isdigit() or int(key) < 1:
                continue
            got = [[float(c), float(s)] for c, s in pairs
                   if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (c, s))]  # fmt: skip
            got = [p for p in got if p[0] > 0 and math.isfinite(p[0]) and p[1] >= 0 and math.isfinite(p[1])]
            if got:
                out[str(int(key))] = got[-MAX_OBSERVED:]
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _reference(at_once: int) -> list[tuple[float, float]]:
    """(cost, seconds) of `at_once` runs of REFERENCE at once: in this process for one, else on
    as many local workers (simapf.jobs.pool), which the command's runs then reuse. Never
    stopped by a budget: it is how the budget's work is estimated."""
    from simapf.jobs import budget
    from simapf.jobs.pool import run_each

    if at_once <= 1:
        return [_reference_run()]
    with budget.held():
        return [pair for _i, pair in run_each(_reference_run, [None] * at_once, at_once)]


def _reference_run(_item: Any = None) -> tuple[float, float]:
    """(cost, seconds) of REFERENCE, where it runs, after a short one: a process's first run
    also imports and warms up what the model uses, which its later runs do not pay. The
    fastest of REFERENCE_TIMINGS: one timing of so short a run moves by half with what else
    the machine does at that moment, and the pace it sets would scale a whole command."""
    from simapf.scenario import load_scenario
    from simapf.simulation.runner import Simulation

    loaded = load_scenario(REFERENCE)
    took = []
    with _quiet():
        Simulation(load_scenario({**REFERENCE, "run": {"duration_s": 5, "seed": 1}})).run(progress=False)
        for _ in range(REFERENCE_TIMINGS):
            began = time.perf_counter()
            Simulation(loaded).run(progress=False)
            took.append(time.perf_counter() - began)
    return cost(loaded), min(took)


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


@contextlib.contextmanager
def recorded() -> Iterator[Pace]:
    """This machine's pace, to estimate with; the runs executed within the block (simapf.jobs.pool
    times each) are added to it, and saved when the block ends, however it ends."""
    from simapf.jobs import pool

    pace = Pace()
    try:
        with pool.timed_into(pace.observe):
            yield pace
    finally:
        pace.save()


def recording() -> bool:
    """Whether the runs executed now teach the pace (a `recorded()` block is open): the costs
    they would be observed with need not be counted otherwise."""
    from simapf.jobs import pool

    return pool.timed()


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
    costs: dict[int, float] = {}
    total = 0.0
    runs = 0
    sources: dict[int, str] = {}
    for stage in stages:
        count = sum(r.count for r in stage.runs)
        runs += round(count * stage.times)
        each = [(costs.setdefault(id(r.loaded), cost(r.loaded)), r.count) for r in stage.runs if r.count > 0]
        if not each:
            continue
        at_once = max(1, min(stage.workers, count))
        work = sum(c * n for c, n in each)
        longest = max(c for c, _n in each)
        total += max(work / at_once, longest) * stage.times * pace.factor(at_once)
        sources[at_once] = pace.source(at_once)
    workers = max((stage.workers for stage in stages), default=1)
    return Estimate(runs, total, workers, f"model: the runs' size at this machine's pace, {_from(sources)}")


def _from(sources: dict[int, str]) -> str:
    """Where the paces of so many runs at once come from, in words."""
    if len(sources) == 1:
        return f"from {next(iter(sources.values()))}"
    return " and ".join(f"{'1 at a time' if n == 1 else f'{n} at once'} from {text.replace(' at once', '')}"
                        for n, text in sorted(sources.items()))  # fmt: skip
