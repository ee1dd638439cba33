"""How long long work will take, measured before it starts, and the line that says so.

Every long command (sweep, optimize, figures, calibrate, compare, --uncertainty draws) says what
it is about to do before it does it, on stderr:

    simapf: sweep policies-size-qps: about 216 runs, ~2 min on 2 workers (pilot: the first simulated seconds of each of 108 scenarios, 3 s)

A run's time is measured, not guessed from the scenario's size:

- Timings: every run a sweep, search or comparison finishes is timed, and the time is kept under
  its scenario (seed left out: it hardly changes the cost) in a small per-user state file,
  `timings.json` in `$SIMAPF_STATE_DIR`, else `$XDG_STATE_HOME/simapf`, else
  `~/.local/state/simapf` (the last MAX_TIMINGS scenarios). A scenario that ran before, here,
  with this version of simapf, is estimated by the median of its last runs.
- Pilot: any other is built and run for its first few simulated seconds in this process: the
  start-up (informers' first lists, connections opening: PILOT_START_S, or until its clients'
  `ramp_up_s` is over), then PILOT_MEASURE_S more. Its run takes the build and those seconds,
  plus the rest of the run at the pace of the last PILOT_MEASURE_S. Pilots take about
  PILOT_WALL_S in all; the scenarios left over take the piloted ones' time in proportion to
  their static size (`simapf.scenario.work`).

A pilot sees the first seconds of a run only: a run whose load grows later (a ramp, a relist
storm, a cluster that grows) takes longer than its pilot says, until its own timing replaces the
pilot. Runs are then spread over the workers: the estimate is the larger of the runs' total over
the workers and the longest run.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import math
import os
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from simapf.scenario.work import duration

PILOT_START_S = 2.0  # simulated seconds a pilot runs before it measures the pace
PILOT_MEASURE_S = 2.0  # simulated seconds over which it measures it
PILOT_WALL_S = 5.0  # pilots stop being started after this long (the first always runs)
MAX_TIMINGS = 5000  # scenarios the state file remembers, the most recently run
TIMINGS_KEPT = 5  # runs of each whose time it keeps
TIMINGS_FILE = "timings.json"

__all__ = ["Estimate", "Runs", "Stage", "Timings", "duration", "estimate", "key_of", "key_of_task", "recorded"]


# ------------------------------------------------------------------------------ the state file


def state_dir() -> Path:
    """Where simapf keeps what it learns about this machine (the timings of runs)."""
    if os.environ.get("SIMAPF_STATE_DIR"):
        return Path(os.environ["SIMAPF_STATE_DIR"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "simapf"


@functools.lru_cache(maxsize=1)
def _flavour() -> str:
    """What makes a run's time differ besides its scenario: simapf's version, compiled or not."""
    from simapf import compiled_core
    from simapf.version import __version__

    return f"{__version__}/{compiled_core.compiled()}"


def cost_key(data: dict[str, Any], files: Sequence[tuple[str, bytes]] = ()) -> str:
    """The key of a run's time: its scenario as data (and the contents of the files it names),
    without its seed."""
    run = {k: v for k, v in (data.get("run") or {}).items() if k != "seed"}
    shown = {"scenario": {**data, "run": run}, "files": [[n, hashlib.sha256(c).hexdigest()] for n, c in files],
             "simapf": _flavour()}  # fmt: skip
    text = json.dumps(shown, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def key_of(loaded: Any) -> str:
    """The timing key of a run of a loaded scenario, as its sweep or search task would have it."""
    from simapf.sweeps.measure import bundle

    return cost_key(*bundle(loaded))


def key_of_task(task: Any) -> str:
    """The timing key of a `RunTask`."""
    return cost_key(task.scenario, task.files)


class Timings:
    """The state file's timings, and the ones this command adds (written by `save`).

    It also learns how far this machine's runs take longer than their pilots said (`factor`):
    pilots run alone in the command's process, runs side by side on the workers, with their
    loading and summing up, beside whatever else the machine does. Each scenario piloted and
    then run gives a ratio; the median of a command's ratios is kept per number of workers, and
    pilots are scaled by it."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_dir() / TIMINGS_FILE
        self.entries, self.factors = _read_timings(self.path)
        self.added: dict[str, list[float]] = {}
        self.piloted: dict[str, float] = {}  # key -> what its pilot said, unscaled
        self.workers = 1  # of the runs that follow the pilots
        self.ratios: list[float] = []  # a run's time over its pilot's

    def get(self, key: str) -> float | None:
        """The median of the last runs' seconds, if any ran."""
        times = self.added.get(key) or (self.entries.get(key) or {}).get("s")
        return float(statistics.median(times)) if times else None

    def put(self, key: str, seconds: float) -> None:
        if math.isfinite(seconds) and seconds >= 0:
            earlier = self.added.get(key) or list((self.entries.get(key) or {}).get("s") or [])
            self.added[key] = (earlier + [round(float(seconds), 4)])[-TIMINGS_KEPT:]
            if self.piloted.get(key):
                self.ratios.append(seconds / self.piloted[key])

    def factor(self, workers: int) -> float:
        """How many times its pilot's time a run on `workers` workers took here (1: not known)."""
        return float(self.factors.get(str(workers), 1.0))

    def save(self) -> None:
        """Add this command's timings to the file (as it is now: another command may have written
        it meanwhile), keep the most recent MAX_TIMINGS, and write it whole. A file that cannot
        be written only loses the timings: they are a hint, never worth an error."""
        if not self.added:
            return
        from simapf.files import json_text, write_text_atomic

        now = time.time()
        try:
            entries, factors = _read_timings(self.path)
            entries.update({k: {"s": v, "at": now} for k, v in self.added.items()})
            if self.ratios:
                factors[str(self.workers)] = round(float(statistics.median(self.ratios)), 3)
            newest = sorted(entries.items(), key=lambda kv: -float(kv[1].get("at", 0)))[:MAX_TIMINGS]
            write_text_atomic(self.path, json_text({"version": 1, "pilot_factors": factors,
                                                    "timings": dict(newest)}) + "\n")  # fmt: skip
        except OSError:
            pass
        self.entries, self.factors = _read_timings(self.path)
        self.added, self.ratios = {}, []


def _read_timings(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """The file's timings and pilot factors; none if it is missing or not one simapf wrote (it
    is never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = {k: v for k, v in data["timings"].items()
                   if isinstance(v, dict) and isinstance(v.get("s"), list) and v["s"]
                   and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v["s"])}  # fmt: skip
        factors = {k: float(v) for k, v in (data.get("pilot_factors") or {}).items()
                   if isinstance(v, (int, float)) and 0 < v < 1000}  # fmt: skip
        return entries, factors
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, {}


@contextlib.contextmanager
def recorded() -> Iterator[Timings]:
    """Timings to add runs to (`put`), saved when the block ends, however it ends."""
    timings = Timings()
    try:
        yield timings
    finally:
        timings.save()


# ------------------------------------------------------------------------------ the pilot


@dataclass(frozen=True)
class Runs:
    """`count` runs of one loaded scenario (`lean`: observed as an experiment's dashboard would,
    as a calibration's cells are)."""

    loaded: Any
    count: int = 1
    lean: bool = False


@dataclass(frozen=True)
class Stage:
    """Runs that go to `workers` together, `times` over (a fit's grid evaluations). `seconds`:
    the stage's measured time once, if known (the last fit's grid), instead of its runs';
    `measured`: what measured it, in words."""

    runs: Sequence[Runs]
    workers: int = 1
    times: float = 1.0
    seconds: float | None = None
    measured: str = "the last run's timing"


def pilot(loaded: Any, lean: bool = False) -> float:
    """Seconds one run of `loaded` will take, from its first simulated seconds (see the module's
    docstring). Raises whatever building or running the scenario raises."""
    from simapf.simulation.runner import Simulation, _ns

    sc = loaded.scenario
    total = float(sc.run.duration_s)
    ramps = [float(getattr(c, "ramp_up_s", 0.0) or 0.0) for c in sc.clients]
    start = min(max([PILOT_START_S, *ramps]), total / 2)
    end = min(start + PILOT_MEASURE_S, total)
    # Quiet: what the run warns about, it says again when it runs for real.
    with _quiet():
        t0 = time.perf_counter()
        sim = Simulation(loaded, lean=lean)
        sim.start()
        sim.env.run_until(_ns(start))
        t1 = time.perf_counter()
        sim.env.run_until(_ns(end))
        t2 = time.perf_counter()
    pace = (t2 - t1) / (end - start) if end > start else 0.0
    return (t2 - t0) + pace * (total - end)


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


def _static_seconds(loaded: Any) -> float:
    """The scenario's size as `simapf.scenario.work` counts it: to share out the piloted
    scenarios' time among those left over, never as a time of its own."""
    from simapf.scenario import work

    return max(work.estimate(loaded).seconds(), 1e-6)


def _spread(n: int) -> list[int]:
    """0..n-1 in an order that covers the range early: ends first, then ever finer between."""
    if n <= 2:
        return list(range(n))
    golden = (math.sqrt(5) - 1) / 2
    middle = sorted(range(1, n - 1), key=lambda i: ((i - 1) * golden) % 1.0)
    return [n - 1, 0, *middle]


# ------------------------------------------------------------------------------ the estimate


@dataclass
class Estimate:
    """Runs in all, their time on `workers`, and where the time comes from (`source`); `seconds`
    is None when nothing could be timed (every pilot failed: the runs will say why)."""

    runs: int
    seconds: float | None
    workers: int
    source: str

    def line(self, what: str, planned: str | None = None, budget: Any = None, most: bool = False) -> str:
        """`simapf: WHAT: about N runs, ~T on W workers (source)`, and what the budget covers;
        `most`: the time is an upper bound (at most ~T)."""
        planned = planned or f"about {self.runs:,} run{'s' if self.runs != 1 else ''}"
        if self.seconds is None:
            return f"simapf: {what}: {planned} ({self.source})"
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


def estimate(stages: Sequence[Stage], timings: Timings | None = None, pilot_wall_s: float = PILOT_WALL_S) -> Estimate:
    """How long `stages` will take, one after the other (see the module's docstring)."""
    timings = timings if timings is not None else Timings()
    scenarios: dict[str, Runs] = {}
    for stage in stages:
        if stage.seconds is None:
            for r in stage.runs:
                scenarios.setdefault(_key(r), r)
    seconds: dict[str, float] = {}
    recorded_n = 0
    for key in scenarios:
        known = timings.get(key)
        if known is not None:
            seconds[key] = known
            recorded_n += 1
    workers = max((stage.workers for stage in stages), default=1)
    timings.workers = workers
    piloted, failed, pilot_s = _pilot_some(scenarios, seconds, pilot_wall_s)
    factor = timings.factor(workers)
    for key, raw in piloted.items():
        timings.piloted[key] = raw
        seconds[key] = raw * factor
    piloted_n = len(piloted)
    measured = dict(seconds)
    scaled_n = 0
    if measured:
        ratio = statistics.median(v / _static_seconds(scenarios[k].loaded) for k, v in measured.items())
        for key, r in scenarios.items():
            if key not in seconds and key not in failed:
                seconds[key] = ratio * _static_seconds(r.loaded)
                scaled_n += 1
    total = 0.0
    runs = 0
    timed = True
    for stage in stages:
        count = sum(r.count for r in stage.runs)
        runs += round(count * stage.times)
        if stage.seconds is not None:
            total += stage.seconds * stage.times
            continue
        each = [(seconds.get(_key(r)), r.count) for r in stage.runs]
        if any(s is None for s, _n in each):
            timed = False
            continue
        work = sum(s * n for s, n in each)  # type: ignore[operator]
        longest = max((s for s, _n in each), default=0.0)  # type: ignore[type-var]
        total += max(work / max(1, min(stage.workers, count)), longest) * stage.times  # type: ignore[operator]
    source = _source(len(scenarios), recorded_n, piloted_n, scaled_n, len(failed), pilot_s, stages,
                     factor if piloted_n else 1.0)  # fmt: skip
    return Estimate(runs, total if timed else None, workers, source)


def _key(r: Runs) -> str:
    return key_of(r.loaded) + ("/lean" if r.lean else "")


def _pilot_some(scenarios: dict[str, Runs], known: dict[str, float], wall_s: float,
                ) -> tuple[dict[str, float], set[str], float]:  # fmt: skip
    """Pilot the scenarios not `known`, spread over their sizes, until `wall_s` is spent (the
    first always runs). Returns what each pilot said, which failed (their runs will fail too,
    and say why) and the time the pilots took."""
    todo = sorted((k for k in scenarios if k not in known), key=lambda k: _static_seconds(scenarios[k].loaded))
    began = time.perf_counter()
    piloted: dict[str, float] = {}
    failed: set[str] = set()
    for i in _spread(len(todo)):
        if (piloted or failed) and time.perf_counter() - began >= wall_s:
            break
        key = todo[i]
        try:
            piloted[key] = pilot(scenarios[key].loaded, scenarios[key].lean)
        except Exception:  # noqa: BLE001 - the real run meets the same problem and reports it
            failed.add(key)
    return piloted, failed, time.perf_counter() - began


def _source(n: int, recorded_n: int, piloted_n: int, scaled_n: int, failed_n: int, pilot_s: float,
            stages: Sequence[Stage], factor: float) -> str:  # fmt: skip
    """Where the estimate's times come from, in words."""
    parts = list(dict.fromkeys(s.measured for s in stages if s.seconds is not None))
    what = "scenario" if n == 1 else "scenarios"
    if recorded_n:
        parts.append("last runs' timings" + (f" for {recorded_n} of {n} {what}" if recorded_n < n else ""))
    if piloted_n:
        of = ("it" if n == 1 else f"each of {n} {what}") if piloted_n == n else f"{piloted_n} of {n} {what}"
        scaled = f", x{factor:.2g} as runs here took against their pilots" if factor != 1.0 else ""
        parts.append(f"pilot: the first simulated seconds of {of}, {duration(pilot_s)}{scaled}")
    if scaled_n:
        parts.append(f"{scaled_n} more in proportion to their size")
    if failed_n:
        parts.append(f"{failed_n} not timed: {'its' if failed_n == 1 else 'their'} pilot failed")
    if not parts:
        return "nothing to time"
    return "; ".join(parts)
