"""Leave-one-group-out: how well the fitted model predicts an experiment it was not fitted to.

A group is one experiment: (source, response size, object count), i.e. its `max` and its
`overload` row at every seat setting. For each group the parameters are refitted without it,
and its cells are then simulated with the refitted parameters and compared with the data.

Two ways to refit:

- `linear` (default): one damped Gauss-Newton step from the full fit, with the full fit's
  Jacobian restricted to the other groups' residuals, less the same step over all residuals.
  At an exact optimum of the full fit the latter is zero and what moves the parameters is
  exactly the left-out group's pull; the step removes it as far as the model is locally linear.
  Only the left-out cells are simulated, so all groups cost about one grid.
- `refit`: `least_squares` again without the group, a few iterations from the full fit
  (starting from the full fit's Jacobian when one is given): what the linear step
  approximates, at a few grids per group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from simapf.calibrate.data import Row, cells as all_cells
from simapf.calibrate.experiment import CellResult, ExperimentSetup
from simapf.calibrate.fit import (
    F_SCALE, LOSS, FreeParam, GivenJacobian, Problem, fit, residual_rows, start_values,
)
from simapf.calibrate.grid import Simulator
from simapf.calibrate.metrics import CPU_SEATS
from simapf.server.params import ServerParams

DAMPING = 0.3  # Levenberg-Marquardt damping of the linear step, relative to diag(JᵀJ): poorly
# determined directions (parameters the left-out group alone pins) move little, not to the clip
MAX_STEP = 1.0  # at most a factor e per parameter in one step


@dataclass(frozen=True)
class GroupPrediction:
    group: tuple[str, float, int]
    label: str
    memory: list[tuple[Row, int, float, float]]  # (row, seats, measured MB, predicted MB)
    cpu: list[tuple[Row, float, float]]  # (row, measured %, predicted %)
    empty: list[tuple[Row, int, float]]  # (row, seats, predicted rejected fraction)
    shift: dict[str, float]  # refitted / fitted value, per free parameter

    @property
    def memory_errors(self) -> list[float]:
        return [p / m - 1.0 for _r, _s, m, p in self.memory]

    @property
    def cpu_errors(self) -> list[float]:
        return [p / m - 1.0 for _r, m, p in self.cpu]


def groups(rows: list[Row]) -> list[tuple[str, float, int]]:
    seen: list[tuple[str, float, int]] = []
    for r in rows:
        if r.group not in seen:
            seen.append(r.group)
    return seen


def _group_label(rows: list[Row]) -> str:
    r = rows[0]
    return r.label.rsplit(" @", 1)[0]


def _linear_step(J: np.ndarray, r: np.ndarray, keep: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 f_scale: float | None = None, damping: float = DAMPING) -> np.ndarray:  # fmt: skip
    """One damped Gauss-Newton step on the kept residuals; with `f_scale`, weighted as the fit's
    soft_l1 loss weighs them (scipy's scaling by sqrt(rho'))."""
    Jk = J[keep]
    rk = r[keep]
    if f_scale is not None:
        w = (1.0 + (rk / f_scale) ** 2) ** -0.25
        Jk = Jk * w[:, None]
        rk = rk * w
    A = Jk.T @ Jk
    A = A + damping * np.diag(np.diag(A)) + 1e-9 * np.eye(len(A))
    dx = -np.linalg.solve(A, Jk.T @ rk)
    return np.clip(np.clip(dx, -MAX_STEP, MAX_STEP), lo, hi)


def leave_one_group_out(
    rows: list[Row],
    params: ServerParams,
    setup: ExperimentSetup,
    free: tuple[FreeParam, ...],
    *,
    jacobian: np.ndarray | None = None,
    residuals: np.ndarray | None = None,
    mode: str = "linear",
    refit_iterations: int = 3,
    simulator: Simulator | None = None,
    progress: Callable[[int], None] | None = None,
    loss: str = LOSS,
) -> list[GroupPrediction]:
    """Predict every group from parameters fitted without it (see the module docstring).

    `params`/`setup` are the full fit; `jacobian`/`residuals` its Jacobian (d residual / d ln
    parameter) and residuals over all rows, in `simapf.calibrate.fit.residuals` order; they are
    computed when not given. `loss`: the one the full fit used (its record's `fit.loss`), so
    that the refits weigh the cells as it did."""
    sim = simulator or Simulator()
    prob = Problem(rows, params, setup, free, sim, progress, loss=loss)
    x0 = np.zeros(len(free))
    if mode == "linear" and (jacobian is None or residuals is None):
        residuals, _ = prob.evaluate(x0)
        jacobian = prob.jacobian(x0)
    rrows = np.array(residual_rows(prob.cells))
    out = []
    refitted: list[tuple[tuple[str, float, int], ServerParams, ExperimentSetup, dict[str, float]]] = []
    v0 = start_values(free, params, setup)
    f_scale = F_SCALE if loss == "soft_l1" else None
    everything = np.ones(len(rrows), dtype=bool)
    # The full fit stopped after a few noisy iterations, not at an exact optimum: the same step
    # on all residuals would still move it. Removing that step leaves the left-out group's own
    # pull (at an exact optimum it is zero and nothing changes).
    dx_all = _linear_step(jacobian, residuals, everything, prob.lo, prob.hi, f_scale) if mode == "linear" else None
    for g in groups(rows):
        members = {r.index for r in rows if r.group == g}
        keep = ~np.isin(rrows, list(members))
        if mode == "linear":
            dx = _linear_step(jacobian, residuals, keep, prob.lo, prob.hi, f_scale) - dx_all
            dx = np.clip(dx, np.maximum(prob.lo, -MAX_STEP), np.minimum(prob.hi, MAX_STEP))
            p_g, s_g = prob.at(dx)
            shift = {fp.key: float(np.exp(d)) for fp, d in zip(free, dx)}
        else:
            # The full fit's Jacobian, restricted to the kept residuals (the same order as the
            # refit's own), saves each refit its first finite differences: a grid per parameter.
            res = fit(rows, params, setup, free, exclude=lambda r, g=g: r.group == g,
                      max_iterations=refit_iterations, simulator=sim, progress=False, log=lambda _m: None,
                      given=None if jacobian is None else GivenJacobian(jacobian[keep]), final_jacobian=False,
                      loss=loss)  # fmt: skip
            p_g, s_g = res.params, res.setup
            shift = {k: res.values[k] / v for k, v in zip(res.values, v0)}
        refitted.append((g, p_g, s_g, shift))
    # Simulate every left-out group with its own refitted parameters, in one batch.
    work = []
    for g, p_g, s_g, _shift in refitted:
        work.append((p_g, s_g, [c for c in all_cells(rows) if c.row.group == g]))
    runs = sim.run(work, progress=progress)
    for (g, _p, _s, shift), results in zip(refitted, runs):
        out.append(_prediction(g, [r for r in rows if r.group == g], results, shift))
    return out


def _prediction(
    g: tuple[str, float, int], rows: list[Row], results: dict[tuple[int, int], CellResult], shift: dict[str, float]
) -> GroupPrediction:
    memory, cpu, empty = [], [], []
    for r in rows:
        for (ri, seats), res in sorted(results.items()):
            if ri != r.index:
                continue
            m = r.memory(seats)
            if m is None:
                empty.append((r, seats, res.rejected_fraction))
            else:
                memory.append((r, seats, m, res.mem_mb))
            if seats == CPU_SEATS:
                cpu.append((r, r.cpu_percent, res.cpu_percent))
    return GroupPrediction(g, _group_label(rows), memory, cpu, empty, shift)


def logo_summary(preds: list[GroupPrediction]) -> dict[str, float]:
    mem = np.abs([e for p in preds for e in p.memory_errors])
    cpu = np.abs([e for p in preds for e in p.cpu_errors])
    return {
        "logo_memory_median": float(np.median(mem)) if len(mem) else float("nan"),
        "logo_memory_max": float(np.max(mem)) if len(mem) else float("nan"),
        "logo_cpu_median": float(np.median(cpu)) if len(cpu) else float("nan"),
        "logo_groups": len(preds),
    }
