"""Fitting the resource model to the measured cells with `scipy.optimize.least_squares`.

The free parameters are a named subset of `ServerParams` (and of the experiment's set-up),
each searched on a log scale between bounds: x_i = ln(value_i / start_i), so x = 0 is the
start and a step of 0.05 is a 5 % change whatever the unit. Residuals, all dimensionless:

- every measured memory cell: ln(predicted / measured), so over- and under-prediction by the
  same factor weigh the same;
- every row's CPU (at 1 seat): ln(predicted / measured);
- every empty cell: how far the predicted rejected fraction falls short of 0.6 (0 when it is
  above), since the experiment saw most requests rejected there;
- every `max` row at 1 seat: the share of requests not served beyond 5 % (0 below), since the
  experiment chose that QPS as the highest the apiserver sustained with 1 seat;
- every measured memory cell again: with the `worst` loss, how far its relative error goes
  beyond 40 % (0 within), weighted by WORST_WEIGHT; 0 with the other losses.

The simulation is deterministic for given parameters (common random numbers per cell), but a
peak over a window is not smooth in the parameters, so the Jacobian is taken by forward
differences with a 5 % step, not an infinitesimal one. It is computed here, not by scipy, so
that the runs of one Jacobian go to the workers as one batch, and a step re-runs only the cells
it can change: those of the serving paths the parameter acts on (etcd's throughput: the etcd
rows), of compressed responses for a gzip parameter, and not an empty cell that rejects far
more than the residual asks (`can_change`).

Many parameters reach a cell through one figure of its LISTs' plan only (`FreeParam.through`):
every CPU-per-request parameter through the request's CPU work, etcd's throughput through a
range's etcd work, the client's CPU through the work of reading a response. For such a group,
one step is simulated per cell (the one that changes that figure most there) and the others'
columns follow by the chain rule: d r / d x_j = (d r / d figure) (d figure / d x_j), the second
factor from the plan alone, which costs no simulation (`chain_rule`).

Any change of a parameter moves when events happen, so the cost has a noise floor (NOISE_FLOOR):
a fit stops when the Jacobian's linear model predicts the next trial step to gain less than it,
and the record keeps finite differences taken within one DIFF_STEP of its solution (updated
along the fit's steps) rather than paying for a fresh set that would differ from them by as
much as two sets a little apart differ from each other (calibration/validation-notes.md).

A time budget (simapf.jobs.budget) stops a fit between grid evaluations once it has done an
iteration; applied to its runs (`Budget.applied`, which the command does where the result cache
keeps the cells), it stops inside a grid evaluation too (a Jacobian's finite differences are
one batch of them), the cells finished kept. The fit then ends at the best point so far, as it
does at the noise floor, with `FitResult.stopped` saying so: no fresh finite differences are
taken for it, the last Jacobian (updated along the steps) goes with it. Stopped before its
first iteration, it has no better point than its start: `Spent` goes to the caller, and the
same fit started again finds the cells done in the result cache.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np
from scipy.optimize import least_squares

from simapf.jobs.budget import Budget, Spent
from simapf.calibrate.data import Cell, Row, cells as all_cells
from simapf.calibrate.experiment import CellResult, ExperimentSetup, cell_path, cell_plan, run_params
from simapf.calibrate.grid import Simulator
from simapf.calibrate.metrics import CPU_SEATS, Summary, summarise
from simapf.errors import ConfigError
from simapf.server.costs import RequestPlan, compressed
from simapf.server.params import ServerParams

EMPTY_TARGET = 0.6  # empty cells: aim for this rejected fraction (the criterion is > 0.5)
# An empty cell rejecting at least EMPTY_TARGET + this has a residual of 0 that a step of
# DIFF_STEP leaves at 0: a step that scales the apiserver's capacity by 5 % moves the rejected
# fraction f by about 0.05 (1 - f), at most 0.02 at f >= 0.6, a fifth of this margin.
CLAMPED_MARGIN = 0.1
SUSTAINED = 0.05  # max rows at 1 seat: at most this share not served
DIFF_STEP = 0.05
# The cost's noise floor: nudging the shipped record's parameters by 0.01 % (|x| = 1e-4), far too
# little to matter, moved its cost by +0.007 to +0.030 (eight nudges; calibration/
# validation-notes.md). A trial step that the linear model says gains less than this cannot be
# told from noise, so the fit stops there instead of simulating it.
NOISE_FLOOR = 0.01
# The default loss is robust: a cell off by more than ~20 % (|ln ratio| > 0.2) costs linearly,
# not quadratically, so a few cells the model's shape cannot reach do not drag the rest away
# (the criteria are a median and a worst case, not a mean square). `linear` (plain least
# squares) weighs the worst cells fully. `worst` is `linear` plus the criterion's worst case as
# a soft bound: least squares alone will trade one cell far off for a little less error in
# many (the shipped record's neighbourhood has such points). A record says which it was fitted
# with (`fit.loss`).
LOSSES = ("soft_l1", "linear", "worst")
LOSS = "soft_l1"
F_SCALE = 0.2
WORST = 0.4  # the worst case the calibration asks for: no memory cell off by more than 40 %
# With `worst`, a cell 10 points beyond WORST adds 0.125 to the cost (the shipped fit's is
# ~0.9), one just beyond next to nothing: a bound finite differences can see.
WORST_WEIGHT = 5.0
BOTH = ("etcd", "cache")
REFRESH_EVERY = 6  # iterations between two sets of finite differences (Broyden updates between)


def scipy_loss(loss: str) -> str:
    """scipy's name for one of LOSSES (`worst` is plain least squares with more residuals)."""
    return "linear" if loss == "worst" else loss


def worst_weight(loss: str) -> float:
    """The weight of the beyond-the-worst-case residuals under `loss`."""
    return WORST_WEIGHT if loss == "worst" else 0.0


@dataclass(frozen=True)
class FreeParam:
    """A fitted parameter: dotted key into {server params..., experiment: {...}}, bounds in its
    own unit, the serving paths whose cells it can change, whether it acts only on responses
    the apiserver compresses (gzip accepted, at least the compression threshold), and the one
    field of a request's plan (`RequestPlan`) through which alone it acts on a cell whose
    process was never killed (a restart's watch-cache refill uses the CPU and etcd parameters
    too), if there is one."""

    key: str
    lo: float
    hi: float
    paths: tuple[str, ...] = BOTH
    why: str = ""
    gzip_only: bool = False
    through: str | None = None


CPU_WORK = "cpu_core_s"
ETCD_WORK = "etcd_work"
CLIENT_WORK = "write_core_s"


# What the calibration fits, and why each is free: the shipped record's set (the streamed,
# varied reconstruction). Everything else keeps its sourced value (Go runtime constants, KEP
# figures) or its documented hypothesis.
FREE_PARAMS: tuple[FreeParam, ...] = (
    # CPU per request (list-memory.md §6.2), by path
    FreeParam("request_cpu.request_core_s", 1e-5, 5e-3, why="fixed CPU per request: the 100 KB rows", through=CPU_WORK),
    FreeParam(
        "request_cpu.json_encode_core_s_per_byte", 3e-10, 5e-8, why="JSON encoding per response byte", through=CPU_WORK
    ),
    FreeParam("request_cpu.json_encode_core_s_per_object", 1e-7, 5e-5, why="JSON encoding per object", through=CPU_WORK),
    FreeParam(
        "request_cpu.compress_core_s_per_byte", 3e-10, 5e-8, why="gzip per response byte (>= 128 KiB)", gzip_only=True,
        through=CPU_WORK,
    ),  # fmt: skip
    FreeParam(
        "request_cpu.decode_core_s_per_byte", 1e-10, 5e-8, ("etcd",), "etcd path: decode per stored byte", through=CPU_WORK
    ),
    FreeParam(
        "request_cpu.decode_core_s_per_object", 1e-7, 1e-4, ("etcd",), "etcd path: decode per object", through=CPU_WORK
    ),
    FreeParam("gc.mark_rate_bytes_per_core_s", 1e8, 2e10, why="GC CPU per byte of live heap"),
    FreeParam("cpu.usable_fraction", 0.4, 1.0, why="usable-core ceiling"),
    # etcd
    FreeParam("etcd.bytes_per_s", 2e7, 5e9, ("etcd",), "etcd throughput per byte", through=ETCD_WORK),
    FreeParam("etcd.requests_per_s", 500.0, 1e5, ("etcd",), "etcd throughput per range", through=ETCD_WORK),
    FreeParam("etcd.objects_per_s", 1e5, 1e8, ("etcd",), "etcd throughput per key", through=ETCD_WORK),
    FreeParam("etcd.wait_live_fraction", 0.02, 3.0, ("etcd",), "receive buffers held while etcd serves"),
    # memory
    FreeParam("process.live_heap_bytes", 3e7, 6e8, why="baseline live heap"),
    FreeParam(
        "request_memory.request_held_bytes", 2048.0, 131072.0,
        why="memory of a request from arrival to end: the overloaded rows queue thousands in APF",
    ),  # fmt: skip
    FreeParam("request_memory.streaming_item_buffer_multiplier", 0.1, 8.0, why="live bytes of the streaming encoder per item byte"),
    FreeParam("request_memory.streaming_alloc_multiplier", 0.1, 8.0, why="allocation of the streaming encoder per response byte"),
    FreeParam("request_cpu.work_cv", 0.05, 2.0, why="how much identical requests' work varies"),
    FreeParam("request_memory.etcd_decoded_multiplier", 0.05, 8.0, ("etcd",), "etcd path: decoded bytes per stored byte"),
    FreeParam("request_memory.decoded_bytes_per_object", 100.0, 2e4, ("etcd",), "etcd path: decoded bytes per object beside its data"),
    FreeParam("request_memory.struct_copy_bytes_per_object", 50.0, 2e4, ("cache",), "cache path: bytes per object copied"),
    FreeParam("request_memory.compressor_bytes", 1e4, 1e7, why="gzip writer state per compressed response", gzip_only=True),
    # the experiment's set-up
    FreeParam(
        "experiment.client.colocated_core_s_per_byte", 1e-10, 3e-8,
        why="the load generator's CPU per response byte on the same node", through=CLIENT_WORK,
    ),  # fmt: skip
    FreeParam(
        "experiment.client.colocated_gzip_core_s_per_byte", 1e-10, 5e-8,
        why="the load generator's CPU to decompress a gzip response, per byte", gzip_only=True,
        through=CLIENT_WORK,
    ),  # fmt: skip
    FreeParam("experiment.client.response_latency_s", 1e-4, 0.5, why="delivery time per response (holds seats)"),
    FreeParam(
        "experiment.ramp_s", 1.0, 30.0,
        why="the load generator's ramp to full QPS (not reported): it sets how a saturated row's backlog builds",
    ),  # fmt: skip
)

# Free on request (`--free`) only: the first two act on reconstructions the shipped one does
# not use (a response encoded whole; a load generator with a cap on its outstanding requests),
# so in the shipped set their columns of the Jacobian would be zero; the data cannot tell the
# scavenger's rate (a peak of RSS under load; its column's norm was 0.003 against 1.3-42 for
# the others at the 2026-11-21 record), so it keeps the value it was fitted to then.
EXTRA_FREE_PARAMS: tuple[FreeParam, ...] = (
    FreeParam("request_memory.encode_buffer_multiplier", 0.05, 4.0, why="live response buffer per byte (encoded whole)"),
    FreeParam("experiment.client_max_in_flight", 20.0, 5000.0, why="the load generator's outstanding requests"),
    FreeParam("gc.scavenge_rate_bytes_per_s", 1e7, 1e10, why="how fast RSS follows a shrinking heap"),
)


def free_params_by_key(keys: list[str]) -> tuple[FreeParam, ...]:
    known = {fp.key: fp for fp in FREE_PARAMS + EXTRA_FREE_PARAMS}
    missing = [k for k in keys if k not in known]
    if missing:
        raise ConfigError(f"calibrate: unknown free parameter(s) {', '.join(missing)}; known: {', '.join(known)}")
    return tuple(known[k] for k in keys)


# ------------------------------------------------------------------------------- parameters


def _get(data: dict, key: str) -> Any:
    for part in key.split("."):
        data = data[part]
    return data


def _set(data: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for part in parts[:-1]:
        data = data.setdefault(part, {})
    data[parts[-1]] = value


def start_values(free: tuple[FreeParam, ...], params: ServerParams, setup: ExperimentSetup) -> np.ndarray:
    """Each free parameter's value in (params, setup), within its bounds; null starts at the
    bound that means "off" (the upper one for the `*_bytes`/`*_per_s` thresholds here)."""
    data = {**params.model_dump(), "experiment": setup.model_dump()}
    out = []
    for fp in free:
        v = _get(data, fp.key)
        v = fp.hi if v is None else float(v)
        out.append(min(max(v, fp.lo), fp.hi))
    return np.array(out)


def apply(
    free: tuple[FreeParam, ...], values: np.ndarray, params: ServerParams, setup: ExperimentSetup
) -> tuple[ServerParams, ExperimentSetup]:
    """(params, setup) with the free parameters set to `values`."""
    data = params.model_dump()
    exp = setup.model_dump()
    for fp, v in zip(free, values):
        v = float(v)
        if fp.key.startswith("experiment."):
            _set(exp, fp.key[len("experiment.") :], v)
        else:
            _set(data, fp.key, v)
    return ServerParams.model_validate(data), ExperimentSetup.model_validate(exp)


# ------------------------------------------------------------------------------- problem


def _sustained(c: Cell) -> bool:
    return c.seats == CPU_SEATS and c.row.load == "max"


def residual_cells(cells: list[Cell]) -> list[tuple[int, int]]:
    """The cell (row index, seats) of each residual, in `residuals`' order."""
    return (
        [c.key for c in cells]
        + [c.key for c in cells if c.seats == CPU_SEATS]
        + [c.key for c in cells if _sustained(c)]
        + [c.key for c in cells if c.measured_mb is not None]
    )


def residual_rows(cells: list[Cell]) -> list[int]:
    """The row index of each residual, in `residuals`' order."""
    return [row for row, _seats in residual_cells(cells)]


def residuals(results: dict[tuple[int, int], CellResult], cells: list[Cell], worst_weight: float = 0.0) -> np.ndarray:
    """The residual vector over `cells` (fixed order: memory or empty per cell, then CPU per row,
    then not-served per sustainable row, then each memory cell's error beyond WORST times
    `worst_weight`)."""
    out = []
    for c in cells:
        res = results[c.key]
        m = c.measured_mb
        if m is None:
            out.append(max(0.0, EMPTY_TARGET - res.rejected_fraction))
        else:
            out.append(math.log(max(res.mem_mb, 1e-3) / m))
    for c in cells:
        if c.seats == CPU_SEATS:
            res = results[c.key]
            out.append(math.log(max(res.cpu_percent, 1e-3) / c.row.cpu_percent))
    for c in cells:
        if _sustained(c):
            out.append(max(0.0, results[c.key].rejected_fraction - SUSTAINED))
    for c in cells:
        if (m := c.measured_mb) is not None:
            error = abs(max(results[c.key].mem_mb, 1e-3) / m - 1.0)
            out.append(worst_weight * max(0.0, error - WORST))
    return np.array(out)


def can_change(fp: FreeParam, cell: Cell, result: CellResult, params: ServerParams, setup: ExperimentSetup) -> bool:
    """Whether a step of DIFF_STEP in `fp` can change the residuals of `cell`, whose result with
    (`params`, `setup`) is `result`: not if the parameter acts on another serving path, or only
    on compressed responses and this one is not compressed, nor if the cell is an empty one
    whose rejected fraction is clamped (CLAMPED_MARGIN)."""
    if cell.row.source not in fp.paths:
        return False
    if fp.gzip_only and not compressed(run_params(params, setup), cell_path(cell), cell.row.response_bytes):
        return False
    return not (cell.measured_mb is None and result.rejected_fraction >= EMPTY_TARGET + CLAMPED_MARGIN)


def _plan_change(before: RequestPlan, after: RequestPlan, field: str) -> float | None:
    """How much `field` of a plan changed, if no other field did."""
    if any(getattr(before, f.name) != getattr(after, f.name) for f in fields(before) if f.name != field):
        return None
    return getattr(after, field) - getattr(before, field)


@dataclass(frozen=True)
class GivenJacobian:
    """Finite differences taken before a fit (the record's it starts from): they save the first
    ones. `residuals`: those they were taken with, if known (then, if the start still gives
    exactly these, they are the start's Jacobian for the record too); `at`: the parameter values
    where they were taken, if not at the start (a record's Jacobian may have been updated along
    its fit's last steps)."""

    jacobian: np.ndarray
    residuals: np.ndarray | None = None
    at: np.ndarray | None = None


class JacobianHistory:
    """The fit's Jacobian and where it came from: finite differences at the start (unless
    given) and every `refresh_every` iterations, Broyden's rank-one update in between, from the
    step just taken, so that an iteration costs one grid instead of one per parameter."""

    def __init__(self, n: int, v0: np.ndarray, given: GivenJacobian | None, refresh_every: int | None) -> None:
        self.J = given.jacobian if given is not None else None
        self.x: np.ndarray | None = np.zeros(n) if given is not None else None  # the point J is for
        self.r: np.ndarray | None = None  # the residuals there, once known
        self.refresh_every = refresh_every
        self.updates = 0  # Broyden updates since the last finite differences
        # Finite differences known at a point, with the residuals they were taken with there: the
        # ones taken here, and a given Jacobian whose residuals are given.
        self.fd_at: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        # Where the finite differences behind J were taken: the last ones here, or a given one's
        # (in log-scaled values), if it was taken on these residuals.
        self.fd_x: np.ndarray | None = None
        self.given_fd_x: np.ndarray | None = None
        if given is not None and given.residuals is not None:
            self.fd_at[np.zeros(n).tobytes()] = (given.jacobian, given.residuals)
            at = np.ones(n) if given.at is None else np.asarray(given.at, dtype=float) / v0
            self.given_fd_x = np.log(at)

    def due(self) -> bool:
        """Whether the next Jacobian must be finite differences."""
        return self.J is None or (self.refresh_every is not None and self.updates >= self.refresh_every)

    def taken(self, J: np.ndarray, x: np.ndarray, r: np.ndarray) -> None:
        """Finite differences `J` were taken at `x`, whose residuals are `r`."""
        self.fd_at[np.asarray(x, dtype=float).tobytes()] = (J, r)
        self.fd_x = np.asarray(x, dtype=float).copy()

    def refreshed(self, J: np.ndarray, x: np.ndarray, r: np.ndarray) -> None:
        """The Jacobian is now finite differences `J` at `x` (residuals `r`)."""
        self.updates = 0
        self.J, self.x, self.r = J, x.copy(), r

    def broyden(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        """J moved to `x` (residuals `r`) by Broyden's rank-one update along the step from its
        point, which makes it reproduce the residuals' change over that step."""
        assert self.J is not None and self.x is not None and self.r is not None
        dx = x - self.x
        n2 = float(dx @ dx)
        J = self.J + np.outer(r - self.r - self.J @ dx, dx) / n2 if n2 > 0 else self.J
        self.J, self.x, self.r = J, x.copy(), r
        return J


class Problem:
    """The residuals of a set of rows as a function of the log-scaled free parameters."""

    def __init__(
        self,
        rows: list[Row],
        params: ServerParams,
        setup: ExperimentSetup,
        free: tuple[FreeParam, ...],
        simulator: Simulator,
        progress: Callable[[int], None] | None = None,
        given: GivenJacobian | None = None,
        refresh_every: int | None = REFRESH_EVERY,
        loss: str = LOSS,
        chain_rule: bool = True,
        budget: Budget | None = None,
    ) -> None:
        if not free:
            raise ConfigError("calibrate: no free parameters to fit")
        if not rows:
            raise ConfigError("calibrate: no rows to fit")
        self.rows = rows
        self.cells = all_cells(rows)
        self.params = params
        self.setup = setup
        self.free = free
        self.sim = simulator
        self.progress = progress
        self.worst_weight = worst_weight(loss)
        self.chain_rule = chain_rule
        self.v0 = start_values(free, params, setup)
        lo = np.log(np.array([fp.lo for fp in free]) / self.v0)
        hi = np.log(np.array([fp.hi for fp in free]) / self.v0)
        self.lo = np.minimum(lo, -1e-9)
        self.hi = np.maximum(hi, 1e-9)
        self.evaluations = 0.0  # grid-equivalents
        self.budget = budget or Budget()
        self.may_stop = False  # set once the fit has done an iteration: the budget may stop it then
        self._cache: dict[bytes, tuple[np.ndarray, dict]] = {}
        self.history = JacobianHistory(len(free), self.v0, given, refresh_every)

    def natural(self, x: np.ndarray) -> np.ndarray:
        """The parameter values at `x`, within their bounds despite rounding in exp(log)."""
        return np.clip(self.v0 * np.exp(x), [fp.lo for fp in self.free], [fp.hi for fp in self.free])

    def at(self, x: np.ndarray) -> tuple[ServerParams, ExperimentSetup]:
        return apply(self.free, self.natural(x), self.params, self.setup)

    def values(self, x: np.ndarray) -> dict[str, float]:
        return {fp.key: float(v) for fp, v in zip(self.free, self.natural(x))}

    def simulate(self, xs: list[np.ndarray], subsets: list[list[Cell]]) -> list[dict]:
        work = [(*self.at(x), sub) for x, sub in zip(xs, subsets)]
        n = sum(len(w[2]) for w in work)
        if n and self.may_stop and self.budget.spent():
            raise Spent(self.budget)
        self.evaluations += n / len(self.cells)
        return self.sim.run(work, progress=self.progress) if n else [{} for _ in work]

    def evaluate(self, x: np.ndarray) -> tuple[np.ndarray, dict]:
        key = np.asarray(x, dtype=float).tobytes()
        if key not in self._cache:
            results = self.simulate([x], [self.cells])[0]
            self._cache[key] = (residuals(results, self.cells, self.worst_weight), results)
        return self._cache[key]

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """The Jacobian at `x`: finite differences, or a Broyden update of the last one."""
        h = self.history
        if h.due():
            J = self.finite_differences(x)
            h.refreshed(J, x, self.evaluate(x)[0])
            return J
        h.updates += 1
        return self.updated_jacobian(x)

    def updated_jacobian(self, x: np.ndarray) -> np.ndarray:
        """The last Jacobian moved to `x` by Broyden's rank-one update along the step from its
        point; no simulation but `x`'s own residuals (and, once, those of a given Jacobian's
        point)."""
        h = self.history
        if h.J is None or h.x is None:
            raise ValueError("no Jacobian to update")
        r = self.evaluate(x)[0]
        if h.r is None:
            h.r = self.evaluate(h.x)[0]  # a given starting Jacobian belongs to x = 0
        return h.broyden(x, r)

    def finite_differences(self, x: np.ndarray) -> np.ndarray:
        """d residual / d x_j by a forward step of DIFF_STEP (backward at the upper bound); with
        `chain_rule`, a parameter's cells that another's step covers through the same plan
        figure (`FreeParam.through`) take their column from that step (`_derived`)."""
        r0, base = self.evaluate(x)
        here = self.at(x)
        steps = [DIFF_STEP if x[j] + DIFF_STEP <= self.hi[j] else -DIFF_STEP for j in range(len(self.free))]
        xs = [x.copy() for _ in steps]
        for j, h in enumerate(steps):
            xs[j][j] += h
        subsets = [[c for c in self.cells if can_change(fp, c, base[c.key], *here)] for fp in self.free]
        derived = self._derived(here, xs, subsets, base) if self.chain_rule else {}
        subsets = [[c for c in sub if (j, c.key) not in derived] for j, sub in enumerate(subsets)]
        runs = self.simulate(xs, subsets)
        J = np.zeros((len(r0), len(self.free)))
        for j, (h, run) in enumerate(zip(steps, runs)):
            merged = {**base, **run}  # cells a step cannot change keep the base result
            J[:, j] = (residuals(merged, self.cells, self.worst_weight) - r0) / h
        rows_of: dict[tuple[int, int], list[int]] = {}
        for i, key in enumerate(residual_cells(self.cells)):
            rows_of.setdefault(key, []).append(i)
        for (j, key), (k, ratio) in derived.items():
            rows = rows_of[key]
            J[rows, j] = J[rows, k] * steps[k] * ratio / steps[j]
        self.history.taken(J, x, r0)
        return J

    def _derived(
        self, here: tuple[ServerParams, ExperimentSetup], xs: list[np.ndarray], subsets: list[list[Cell]], base: dict
    ) -> dict[tuple[int, tuple[int, int]], tuple[int, float]]:
        """(parameter j, cell) -> (parameter k, ratio): in that cell j's step changes the plan
        only in the figure j acts through, by `ratio` times what k's step changes it by, and
        k's step is simulated there. k is the parameter acting through that figure whose step
        changes it most in the cell, so that ratio <= 1: the peak in a window is not smooth in
        the parameters, and a small step's noise scaled up would swamp the others' columns.
        Not for a cell whose process was killed (the refill after a restart uses these
        parameters too)."""
        plan0 = {c.key: cell_plan(c, *here) for c in self.cells}
        changes: dict[tuple[str, tuple[int, int]], list[tuple[int, float]]] = {}
        for j, fp in enumerate(self.free):
            if fp.through is None:
                continue
            stepped = self.at(xs[j])
            for c in subsets[j]:
                if base[c.key].oom_kills:
                    continue
                change = _plan_change(plan0[c.key], cell_plan(c, *stepped), fp.through)
                if change:  # not None (other figures changed too) nor 0 (no figure changed)
                    changes.setdefault((fp.through, c.key), []).append((j, change))
        out = {}
        for (_figure, key), by in changes.items():
            k, k_change = max(by, key=lambda jc: abs(jc[1]))
            for j, change in by:
                if j != k:
                    out[(j, key)] = (k, change / k_change)
        return out

    def predicted_gain(self, x: np.ndarray, cost: Callable[[np.ndarray], float]) -> float | None:
        """How much `cost` of the residuals falls from the last Jacobian's point to `x` by that
        Jacobian's linear model; None before any Jacobian, or at its point."""
        h = self.history
        if h.J is None or h.x is None or np.array_equal(x, h.x):
            return None
        r = self.evaluate(h.x)[0]
        return cost(r) - cost(r + h.J @ (np.asarray(x) - h.x))

    def fd_x(self) -> np.ndarray | None:
        """Where the finite differences behind the Jacobian were taken: the last ones taken
        here, or the given Jacobian's if the start gives the residuals it was taken with (the
        same data and model); None if it was taken on others."""
        h = self.history
        if h.fd_x is not None:
            return h.fd_x
        if h.given_fd_x is not None and self.finite_differences_known_at(np.zeros(len(self.free))) is not None:
            return h.given_fd_x
        return None

    def near_finite_differences(self, x: np.ndarray) -> bool:
        """Whether no parameter at `x` is further than DIFF_STEP from where the finite
        differences behind the Jacobian were taken."""
        at = self.fd_x()
        return at is not None and float(np.max(np.abs(np.asarray(x) - at))) <= DIFF_STEP

    def finite_differences_known_at(self, x: np.ndarray) -> np.ndarray | None:
        """Finite differences already taken at `x` (here, or given for the start), if `x` still
        gives the residuals they were taken with (the same cells, data, model and values): the
        simulation is deterministic in the parameters, so taking them again would give these."""
        known = self.history.fd_at.get(np.asarray(x, dtype=float).tobytes())
        if known is not None and np.array_equal(self.evaluate(x)[0], known[1]):
            return known[0]
        return None


class _AtNoiseFloor(Exception):
    """The next trial step is predicted to gain less than the cost's noise floor."""


@dataclass
class FitResult:
    params: ServerParams
    setup: ExperimentSetup
    free: tuple[FreeParam, ...]
    values: dict[str, float]
    start: dict[str, float]
    summary: Summary
    results: dict[tuple[int, int], CellResult]
    evaluations: float  # grid-equivalents simulated
    cost: float
    message: str
    jacobian: np.ndarray | None  # d residual / d ln(parameter) at the solution (None: a budget stopped it first)
    residuals: np.ndarray
    residual_rows: list[int]
    iterations: int = 0
    wall_s: float = 0.0
    loss: str = LOSS
    jacobian_at: dict[str, float] | None = None  # where its finite differences were taken, if not here
    stopped: str | None = None  # why the fit stopped before it was done (a budget), if it did

    def jacobian_origin(self) -> str:
        """Where the Jacobian kept with the record comes from, in words."""
        if self.jacobian_at is None:
            return "finite differences at the solution"
        moved = max(abs(math.log(self.values[k] / v)) for k, v in self.jacobian_at.items())
        return (
            f"finite differences taken where no parameter was more than {moved:.1%} (in log) from the "
            "solution, updated along the fit's steps (Broyden)"
        )

    def fit_section(self) -> dict[str, Any]:
        """The `fit` part of a calibration record."""
        bound = f"; memory cells beyond {WORST:.0%} off penalised x{WORST_WEIGHT:g}" if self.loss == "worst" else ""
        return {
            "method": (
                f"scipy.optimize.least_squares (trf, loss {self.loss}, f_scale {F_SCALE}, log-scaled parameters, "
                f"forward differences of {DIFF_STEP:.0%}, Broyden updates between them{bound})"
            ),
            "loss": self.loss,
            "free_parameters": {
                fp.key: {"start": self.start[fp.key], "fitted": self.values[fp.key], "bounds": [fp.lo, fp.hi]}
                for fp in self.free
            },
            "iterations": self.iterations,
            "jacobian": self.jacobian_origin(),
            "grid_evaluations": self.evaluations,
            "wall_s": round(self.wall_s, 1),
            "cost": self.cost,
            "message": self.message,
        }


def fit(
    rows: list[Row],
    params: ServerParams,
    setup: ExperimentSetup,
    free: tuple[FreeParam, ...] = FREE_PARAMS,
    *,
    exclude: Callable[[Row], bool] | None = None,
    max_iterations: int = 12,
    n_jobs: int | None = None,
    simulator: Simulator | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    given: GivenJacobian | None = None,
    final_jacobian: bool = True,
    loss: str = LOSS,
    noise_floor: float = NOISE_FLOOR,
    budget: Budget | None = None,
) -> FitResult:
    """Fit `free` to the cells of `rows` (except rows `exclude` picks), starting at `params`.

    `given`: finite differences taken before (e.g. the ones stored with the shipped fit) save
    the first ones; if no step is accepted and the start's residuals are exactly those they were
    taken with (the same cells, data, model and values), they are the solution's too and are
    not taken again (`GivenJacobian`).
    `final_jacobian`: a Jacobian for the record (leave-one-group-out uses it): fresh finite
    differences at the solution if it is further than DIFF_STEP in some parameter from where the
    last ones were taken; otherwise those, updated along the steps (Broyden), since a fresh
    set within one step of them differs from them as much as two such sets differ from each
    other (calibration/validation-notes.md). Without it: the last Jacobian, whatever it is.
    `noise_floor`: the fit stops when the next trial step is predicted to gain less cost than
    this (0: never).
    `loss`: one of `LOSSES` (`worst`: scipy's linear, with the worst-case residuals).
    `budget`: stop between grid evaluations once it is spent (the module's docstring); the
    result's `stopped` says so, and its Jacobian is the last one (None if none was taken)."""
    from simapf.progress import progress_bar
    from simapf.progress import write as progress_write

    fit_rows = [r for r in rows if not (exclude and exclude(r))]
    if not fit_rows:
        raise ConfigError("calibrate: every row is excluded; nothing to fit")
    if loss not in LOSSES:
        raise ConfigError(f"calibrate: unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    t0 = time.perf_counter()
    bar = progress_bar(None, "calibrate", "runs", progress)
    prob = Problem(fit_rows, params, setup, free, simulator or Simulator(n_jobs), bar.update if progress else None,
                   given=given, loss=loss, budget=budget)  # fmt: skip
    say = log or progress_write
    best: dict[str, Any] = {"cost": math.inf}

    def robust_cost(r: np.ndarray) -> float:
        # scipy's cost for the loss: 0.5 f^2 sum rho((r / f)^2)
        z = (r / F_SCALE) ** 2
        rho = 2.0 * (np.sqrt(1.0 + z) - 1.0) if scipy_loss(loss) == "soft_l1" else z
        return float(0.5 * F_SCALE**2 * np.sum(rho))

    def fun(x: np.ndarray) -> np.ndarray:
        gain = prob.predicted_gain(x, robust_cost)
        if gain is not None and gain < noise_floor:
            raise _AtNoiseFloor(
                f"the next trial step is predicted to gain {gain:.4f}, less than the cost's noise floor ({noise_floor:g})"
            )
        r, results = prob.evaluate(x)
        cost = robust_cost(r)
        if cost < best["cost"]:
            best.update(cost=cost, x=x.copy())
            s = summarise(fit_rows, results)
            bar.set_postfix(cost=f"{cost:.3f}", mem=f"{s.memory_median:.0%}/{s.memory_max:.0%}", cpu=f"{s.cpu_median:.0%}")
        return r

    iterations = [0]
    stopped: str | None = None

    def callback(intermediate_result=None) -> None:
        iterations[0] += 1
        prob.may_stop = True
        say(f"calibrate: iteration {iterations[0]}, cost {best['cost']:.4f}")

    try:
        sol = least_squares(
            fun, np.zeros(len(free)), jac=prob.jacobian, bounds=(prob.lo, prob.hi), method="trf",
            x_scale=1.0, max_nfev=max_iterations, ftol=1e-6, xtol=1e-8, gtol=1e-8, callback=callback,
            loss=scipy_loss(loss), f_scale=F_SCALE,
        )  # fmt: skip
        message = str(sol.message)
    except _AtNoiseFloor as stop:
        message = str(stop)
        say(f"calibrate: stopped: {message}")
    except Spent as spent:
        if not iterations[0]:
            bar.close()
            raise  # no better point than the start: the caller says so
        stopped = message = _stopped(spent.budget, iterations[0])
        say(f"calibrate: {message}")
    prob.may_stop = False  # what follows finishes the fit (or writes where its budget stopped it)
    # scipy accepts a step only if it lowers the cost, so the best point is its last one
    x = best["x"]
    r, results = prob.evaluate(x)
    J = None
    if not stopped:
        try:
            if final_jacobian and (known := prob.finite_differences_known_at(x)) is not None:
                say("calibrate: no step was accepted; the Jacobian at the start is the record's")
                J = known
            elif final_jacobian and not prob.near_finite_differences(x):
                say("calibrate: finite differences at the solution, for the record")
                J = prob.finite_differences(x)
            else:
                J = prob.updated_jacobian(x)
        except Spent as spent:  # inside the finite differences at the solution
            stopped = message = _stopped(spent.budget, iterations[0])
            say(f"calibrate: {message}")
    if stopped:
        J = _last_jacobian(prob, x)
    fd_x = prob.fd_x()
    jacobian_at = None if fd_x is None or np.array_equal(fd_x, x) else prob.values(fd_x)
    bar.close()
    p_fit, s_fit = prob.at(x)
    return FitResult(
        params=p_fit, setup=s_fit, free=free, values=prob.values(x), start=prob.values(np.zeros(len(free))),
        summary=summarise(fit_rows, results), results=results, evaluations=round(prob.evaluations, 1),
        cost=best["cost"], message=message, jacobian=np.asarray(J) if J is not None else None, residuals=r,
        residual_rows=residual_rows(prob.cells), iterations=iterations[0], wall_s=time.perf_counter() - t0,
        loss=loss, jacobian_at=jacobian_at, stopped=stopped,
    )  # fmt: skip


def _stopped(budget: Budget, iterations: int) -> str:
    return f"stopped by its budget of {budget.text} after {iterations} iteration{'s' if iterations != 1 else ''}, before it was done"


def _last_jacobian(prob: Problem, x: np.ndarray) -> np.ndarray | None:
    """The last Jacobian moved to `x` (every point that needs was evaluated: no simulation), or
    None if the fit stopped before it had one."""
    return prob.updated_jacobian(x) if prob.history.J is not None else None
