"""The fitting machinery: it recovers parameters that made the data, and LOGO's linear refit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simapf.calibrate.data import Cell, Row, cells
from simapf.calibrate.experiment import ExperimentSetup, cell_plan
from simapf.calibrate.scenario import run_cell
from simapf.calibrate.fit import (
    CLAMPED_MARGIN, CPU_WORK, ETCD_WORK, FREE_PARAMS, WORST_WEIGHT, GivenJacobian, Problem, apply, fit,
    free_params_by_key, residuals,
    start_values,
)
from simapf.calibrate.grid import Simulator, run_grid
from simapf.calibrate.logo import _linear_step, groups
from simapf.errors import ConfigError
from simapf.server.params import ServerParams

# A short reconstruction: the fit's logic does not depend on the window's length.
QUICK = ExperimentSetup(ramp_s=2, warmup_s=5, window_s=6)


def synthetic_rows(params: ServerParams) -> list[Row]:
    """Cheap rows (10 MB from etcd at 15-20/s, two object counts) whose 'measurements' are the
    model's own output with `params`. Fits to them ask for the truth, so they have no noise
    floor (`noise_floor=0`): the grid's (0.01 of cost) would stop them where the twelve cells'
    whole cost is less, with the heap 2.5 % off."""
    template = [
        Row(i, "etcd", 1e7, count, qps, load, 100.0, ((1, 1.0), (10, 1.0), (100, 1.0)))
        for i, (count, qps, load) in enumerate([(10, 15.0, "max"), (10, 20.0, "overload"),
                                                (1000, 15.0, "max"), (1000, 20.0, "overload")])  # fmt: skip
    ]
    results = run_grid(cells(template), params, QUICK, n_jobs=1)
    rows = []
    for r in template:
        mem = tuple((s, results[(r.index, s)].mem_mb) for s in (1, 10, 100))
        rows.append(Row(r.index, r.source, r.response_bytes, r.object_count, r.qps, r.load,
                        results[(r.index, 1)].cpu_percent, mem))  # fmt: skip
    return rows


@pytest.mark.slow
def test_fit_recovers_the_parameters_that_made_the_data():
    # The machinery on a smooth problem: etcd serving ranges in turn and every request's work
    # the same (the shipped model is the next test). JSON encoding per byte, not decoding, is the CPU
    # parameter: with the shipped values decoding is ~15 % of these rows' CPU and too weakly
    # identified for an 8 % check (the fit stops at +18 % for 2 % of CPU error). etcd's throughput
    # is the one this test was written on (the record shipped until late 2026-11-21), not the
    # shipped record's: these rows are smooth in the two parameters for some etcd values only.
    # With the current record's (10 MB ranges at 1.04x etcd's capacity at 20/s) the fit stops 16 %
    # off on encoding, and with 8e8 B/s 18 % off, at a jump in the residuals 5 % above the truth.
    truth = ServerParams().model_copy(update={
        "etcd": ServerParams().etcd.model_copy(update={
            "discipline": "fifo", "bytes_per_s": 341142936.2251185, "objects_per_s": 1344789.6987686085,
        }),
        "request_cpu": ServerParams().request_cpu.model_copy(update={"work_cv": 0.0}),
    })  # fmt: skip
    rows = synthetic_rows(truth)
    free = free_params_by_key(["process.live_heap_bytes", "request_cpu.json_encode_core_s_per_byte"])
    true_values = start_values(free, truth, QUICK)
    start, _ = apply(free, true_values * np.array([1.6, 0.6]), truth, QUICK)
    res = fit(rows, start, QUICK, free, max_iterations=15, n_jobs=1, progress=False, log=lambda _m: None,
              final_jacobian=False, noise_floor=0.0)  # fmt: skip
    got = np.array([res.values[fp.key] for fp in free])
    assert got == pytest.approx(true_values, rel=0.08)
    assert res.summary.memory_median < 0.03 and res.summary.cpu_median < 0.03


@pytest.mark.slow
@pytest.mark.parametrize("off", [(1.6, 0.6), (0.7, 1.4)])
def test_fit_recovers_the_live_heap_from_the_shipped_model(off):
    # Processor sharing and varying work make the overloaded 10 MB rows chaotic: another draw of
    # the work moves their peak by ~15 %. Each request's work is tied to its arrival number
    # (simapf/server/variation.py), so a nudged parameter no longer deals every request other
    # work, and the fit finds the live heap again; when work was drawn as stages began it stopped
    # 13 % and 27 % off, at memory medians of 6 % and 12 %. The CPU parameter stays weakly
    # identified through these rows' chaotic CPU (it stops 26 % and 11 % off), so it is not checked.
    truth = ServerParams()
    rows = synthetic_rows(truth)
    free = free_params_by_key(["process.live_heap_bytes", "request_cpu.json_encode_core_s_per_byte"])
    true_values = start_values(free, truth, QUICK)
    start, _ = apply(free, true_values * np.array(off), truth, QUICK)
    res = fit(rows, start, QUICK, free, max_iterations=15, n_jobs=1, progress=False, log=lambda _m: None,
              final_jacobian=False, noise_floor=0.0)  # fmt: skip
    assert res.values["process.live_heap_bytes"] == pytest.approx(true_values[0], rel=0.02)
    assert res.summary.memory_median < 0.02


def test_residuals_are_log_ratios_and_empty_cell_shortfalls():
    r = Row(0, "cache", 1e6, 100, 10.0, "max", 200.0, ((1, 500.0), (10, 400.0), (100, None)))

    class Res:
        def __init__(self, mem, cpu, rej):
            self.mem_mb, self.cpu_percent, self.rejected_fraction = mem, cpu, rej

    results = {(0, 1): Res(1000.0, 100.0, 0.0), (0, 10): Res(400.0, 90.0, 0.0), (0, 100): Res(300.0, 10.0, 0.8)}
    out = residuals(results, cells([r]))
    # memory at 1, 10 seats; the empty cell; CPU; the max row's share not served at 1 seat;
    # memory at 1, 10 seats beyond 40 % off, which only the `worst` loss weighs
    assert out == pytest.approx([np.log(2.0), 0.0, 0.0, np.log(0.5), 0.0, 0.0, 0.0])
    out = residuals(results, cells([r]), worst_weight=WORST_WEIGHT)
    assert out[5:] == pytest.approx([WORST_WEIGHT * 0.6, 0.0])  # twice the measurement: 60 points beyond
    results[(0, 100)] = Res(300.0, 10.0, 0.2)
    assert residuals(results, cells([r]))[2] == pytest.approx(0.4)  # 0.6 wanted, 0.2 rejected
    results[(0, 1)] = Res(1000.0, 100.0, 0.3)
    assert residuals(results, cells([r]))[4] == pytest.approx(0.25)  # 5 % allowed
    results[(0, 1)] = Res(290.0, 100.0, 0.0)  # 42 % under
    assert residuals(results, cells([r]), worst_weight=1.0)[5] == pytest.approx(0.02)
    results[(0, 1)] = Res(310.0, 100.0, 0.0)  # 38 % under: within
    assert residuals(results, cells([r]), worst_weight=1.0)[5] == 0.0


def test_path_specific_parameters_rerun_only_their_cells():
    rows = [Row(0, "etcd", 1e7, 10, 15.0, "max", 100.0, ((1, 500.0), (10, 500.0), (100, 500.0))),
            Row(1, "cache", 1e7, 10, 15.0, "max", 100.0, ((1, 500.0), (10, 500.0), (100, None)))]  # fmt: skip
    free = free_params_by_key(["etcd.bytes_per_s", "process.live_heap_bytes"])
    prob = Problem(rows, ServerParams(), QUICK, free, Simulator(1))
    J = prob.finite_differences(np.zeros(2))
    # 6 base cells, then 3 (etcd only) + 6 (both paths) perturbed ones.
    assert prob.evaluations == pytest.approx((6 + 3 + 6) / 6)
    cache_rows = [i for i, c in enumerate(prob.cells) if c.row.source == "cache"]
    assert np.all(J[cache_rows, 0] == 0.0)
    assert np.any(J[:, 1] != 0.0)


class _ReplayingSimulator:
    """A stand-in for the grid: each cell's result is a fixed one; it records which cells each
    parameter set ran."""

    def __init__(self, rejected: dict[tuple[int, int], float]) -> None:
        self.rejected = rejected
        self.ran: list[set[tuple[int, int]]] = []

    def run(self, work, progress=None):
        from simapf.calibrate.experiment import CellResult

        self.ran += [{c.key for c in cells_} for _p, _s, cells_ in work]
        return [{c.key: CellResult(c.row.index, c.seats, 500.0, 100.0, self.rejected.get(c.key, 0.0), 0.0, 0, 0, 0.0, 0)
                 for c in cells_} for _p, _s, cells_ in work]  # fmt: skip


def test_finite_differences_skip_uncompressed_responses_and_clamped_empty_cells():
    # 100 KB is below the 128 KiB compression threshold, 1 MB above; both rows leave 100 seats empty.
    rows = [Row(0, "cache", 1e5, 10, 15.0, "max", 100.0, ((1, 500.0), (10, 500.0), (100, None))),
            Row(1, "cache", 1e6, 10, 15.0, "max", 100.0, ((1, 500.0), (10, 500.0), (100, None)))]  # fmt: skip
    free = free_params_by_key(["request_memory.compressor_bytes", "process.live_heap_bytes"])
    assert free[0].gzip_only and not free[1].gzip_only
    # Row 0's empty cell rejects far more than asked for (0.6); row 1's only just.
    sim = _ReplayingSimulator({(0, 100): 0.6 + CLAMPED_MARGIN, (1, 100): 0.6 + CLAMPED_MARGIN - 0.01})
    Problem(rows, ServerParams(), QUICK, free, sim).finite_differences(np.zeros(2))
    base, gzip_step, heap_step = sim.ran
    assert len(base) == 6
    assert gzip_step == {(1, 1), (1, 10), (1, 100)}
    assert heap_step == base - {(0, 100)}
    # A client that does not accept gzip gets no compressed response.
    no_gzip = QUICK.model_copy(update={"client": QUICK.client.model_copy(update={"accept_gzip": False})})
    sim.ran = []
    Problem(rows, ServerParams(), no_gzip, free, sim).finite_differences(np.zeros(2))
    assert sim.ran[1] == set()


class _PlanSimulator:
    """A stand-in for the grid whose cells answer smoothly to their LISTs' plan (CPU and etcd
    work) and to the live heap; it records which cells each parameter set ran."""

    def __init__(self, killed: set[tuple[int, int]] = frozenset()) -> None:
        self.killed = killed
        self.ran: list[set[tuple[int, int]]] = []

    def run(self, work, progress=None):
        from simapf.calibrate.experiment import CellResult

        self.ran += [{c.key for c in cells_} for _p, _s, cells_ in work]
        out = []
        for p, s, cells_ in work:
            res = {}
            for c in cells_:
                plan = cell_plan(c, p, s)
                mem = p.process.live_heap_bytes / 1e6 + 3e3 * plan.cpu_core_s + 50.0 * plan.etcd_work
                res[c.key] = CellResult(c.row.index, c.seats, mem, 100.0 + 8e3 * plan.cpu_core_s, 0.0, 0.0,
                                        int(c.key in self.killed), 0, 0.0, 0)  # fmt: skip
            out.append(res)
        return out


def test_parameters_acting_through_one_plan_figure_share_its_step():
    # The CPU parameters reach a cell only through its LISTs' CPU work: per cell, one of them
    # (the one changing it most) is run, and the others' columns follow by the chain rule.
    rows = [Row(0, "etcd", 1e7, 1000, 15.0, "max", 100.0, ((1, 500.0), (10, 500.0), (100, 500.0))),
            Row(1, "cache", 1e6, 100, 15.0, "max", 100.0, ((1, 500.0), (10, 500.0), (100, 500.0)))]  # fmt: skip
    free = free_params_by_key(["request_cpu.request_core_s", "request_cpu.json_encode_core_s_per_byte",
                               "request_cpu.json_encode_core_s_per_object", "request_cpu.decode_core_s_per_object",
                               "etcd.bytes_per_s", "etcd.objects_per_s", "process.live_heap_bytes"])  # fmt: skip
    assert [fp.through for fp in free] == [CPU_WORK] * 4 + [ETCD_WORK] * 2 + [None]
    direct_sim, chain_sim = _PlanSimulator(), _PlanSimulator()
    direct = Problem(rows, ServerParams(), QUICK, free, direct_sim, chain_rule=False).finite_differences(np.zeros(7))
    chained = Problem(rows, ServerParams(), QUICK, free, chain_sim).finite_differences(np.zeros(7))
    all_cells = direct_sim.ran[0]
    etcd_cells = {k for k in all_cells if k[0] == 0}
    assert direct_sim.ran[1:] == [all_cells] * 3 + [etcd_cells] * 3 + [all_cells]
    _base, *runs = chain_sim.ran
    # Each cell once for the CPU group and once for etcd's; the heap (through no figure) everywhere.
    assert sorted(k for r in runs[:4] for k in r) == sorted(all_cells)
    assert sorted(k for r in runs[4:6] for k in r) == sorted(etcd_cells)
    assert runs[6] == all_cells
    # The one run changes the figure most (a small step's noise, scaled up, would swamp the
    # others): never the fixed CPU per request, a sliver of a 1 or 10 MB LIST's.
    assert runs[0] == set()
    # On a smooth problem the chain rule gives the same derivatives (up to the steps' curvature).
    assert np.any(direct[:, :6] != 0.0)
    np.testing.assert_allclose(chained, direct, rtol=0.02, atol=1e-9)
    # A cell whose process was killed runs every parameter's step: a restart's refill uses them too.
    killed_sim = _PlanSimulator(killed={(0, 1)})
    Problem(rows, ServerParams(), QUICK, free, killed_sim).finite_differences(np.zeros(7))
    assert all((0, 1) in r for r in killed_sim.ran[1:])


def _same_change(figure: str, change: float, params: ServerParams, setup: ExperimentSetup):
    """(params, setup) with `figure` of every LIST's plan moved by `change` through a knob of
    its own: a fixed CPU per request, a fixed etcd time per range, a fixed client CPU per response."""
    if figure == CPU_WORK:
        cpu = params.request_cpu.model_copy(update={"request_core_s": params.request_cpu.request_core_s + change})
        return params.model_copy(update={"request_cpu": cpu}), setup
    if figure == ETCD_WORK:
        per_range = 1.0 / params.etcd.requests_per_s + change / params.etcd.concurrency
        etcd = params.etcd.model_copy(update={"requests_per_s": 1.0 / per_range})
        return params.model_copy(update={"etcd": etcd}), setup
    fixed = setup.client.colocated_core_s_per_request + change
    client = setup.client.model_copy(update={"colocated_core_s_per_request": fixed})
    return params, setup.model_copy(update={"client": client})


def _figures(plan) -> tuple:
    """A plan's numbers (its error text compared apart)."""
    return tuple(x for x in dataclasses.astuple(plan) if not isinstance(x, str))


@pytest.mark.parametrize("fp", [fp for fp in FREE_PARAMS if fp.through], ids=lambda fp: fp.key)
def test_a_parameter_acts_on_a_cell_only_through_its_plan_figure(fp):
    # What the chain rule in the finite differences rests on: the same change of the figure made
    # by another knob gives the same cell, so nothing else in the simulation reads the parameter.
    # 10 MB LISTs at a rate that overloads the path (etcd's capacity for them is ~25/s), so that a
    # step of a small share of the work (etcd's 41 us per range of a 40 ms range) shows in the cell.
    etcd = fp.paths == ("etcd",)
    cell = Cell(Row(0, "etcd" if etcd else "cache", 1e7, 100, 30.0 if etcd else 20.0, "overload", 100.0,
                    ((1, 500.0), (10, 500.0), (100, 500.0))), 1)  # fmt: skip
    params, setup = ServerParams(), QUICK
    before = cell_plan(cell, params, setup)
    # A step that adds work (a rate such as etcd's bytes per second steps down), so that the
    # other knob, which can only add to its figure and stay valid, can make the same change.
    for factor in (1.05, 1 / 1.05):
        stepped = apply((fp,), start_values((fp,), params, setup) * factor, params, setup)
        after = cell_plan(cell, *stepped)
        change = getattr(after, fp.through) - getattr(before, fp.through)
        if change > 0.0:
            break
    assert change > 0.0
    same = _same_change(fp.through, change, params, setup)
    assert _figures(cell_plan(cell, *same)) == pytest.approx(_figures(after), rel=1e-12)
    base, a, b = (run_cell(cell, *ps) for ps in ((params, setup), stepped, same))
    base, a, b = ((r.mem_mb, r.cpu_percent, r.rejected_fraction, r.client_cores) for r in (base, a, b))
    assert a != pytest.approx(base, rel=1e-5)  # the cell sees the step
    assert a == pytest.approx(b, rel=1e-6)


def test_unknown_free_parameter_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown free parameter"):
        free_params_by_key(["gc.gogcc"])
    assert {fp.key for fp in FREE_PARAMS} >= {"cpu.usable_fraction", "etcd.bytes_per_s", "process.live_heap_bytes"}
    for fp in FREE_PARAMS:
        assert 0 < fp.lo < fp.hi and fp.why, fp.key


def test_linear_refit_equals_least_squares_without_the_group_on_a_linear_problem():
    rng = np.random.default_rng(7)
    J = rng.normal(size=(40, 3))
    x_true = np.array([0.3, -0.2, 0.1])
    # Data: exact for rows 0-29, rows 30-39 pulled away (the group to leave out).
    target = J @ x_true
    target[30:] += 0.8
    resid = lambda x: J @ x - target  # noqa: E731
    x_full = np.linalg.lstsq(J, target, rcond=None)[0]
    keep = np.r_[np.ones(30, bool), np.zeros(10, bool)]
    lo, hi = np.full(3, -5.0), np.full(3, 5.0)
    assert not np.allclose(x_full, x_true, atol=0.02)  # the group pulled the full fit away
    undamped = _linear_step(J, resid(x_full), keep, lo, hi, damping=1e-9)
    assert x_full + undamped == pytest.approx(x_true, abs=1e-6)
    # The shipped damping goes the same way, less far.
    dx = _linear_step(J, resid(x_full), keep, lo, hi)
    assert np.linalg.norm(x_full + dx - x_true) < np.linalg.norm(x_full - x_true)
    assert np.dot(dx, undamped) > 0


def test_groups_are_experiments():
    rows = [Row(i, s, b, n, q, l, 1.0, ((1, 1.0), (10, 1.0), (100, 1.0)))
            for i, (s, b, n, q, l) in enumerate([("etcd", 1e5, 10, 1, "max"), ("etcd", 1e5, 10, 2, "overload"),
                                                 ("cache", 1e5, 10, 1, "max")])]  # fmt: skip
    assert groups(rows) == [("etcd", 1e5, 10), ("cache", 1e5, 10)]


class _LogLinearSimulator:
    """A stand-in for the grid: memory is the baseline heap (MB) times a per-row factor, CPU
    the fixed CPU per request times QPS; it counts the cells it is asked to run, and the
    batches of several parameter sets (sets of finite differences)."""

    def __init__(self) -> None:
        self.cells_run = 0
        self.batches = 0

    def run(self, work, progress=None):
        from simapf.calibrate.experiment import CellResult

        self.batches += len(work) > 1
        out = []
        for params, _setup, cells_ in work:
            self.cells_run += len(cells_)
            heap_mb = params.process.live_heap_bytes / 1e6
            out.append({
                c.key: CellResult(c.row.index, c.seats, heap_mb * (1.0 + 0.1 * c.row.index),
                                  params.request_cpu.request_core_s * c.row.qps * 100.0, 0.0, 0.0, 0, 0, 0.0, 0)
                for c in cells_
            })  # fmt: skip
        return out


def test_refit_logo_starts_from_the_full_fits_jacobian():
    from simapf.calibrate.logo import leave_one_group_out

    free = free_params_by_key(["process.live_heap_bytes", "request_cpu.request_core_s"])
    truth = ServerParams()
    rows = _biased_rows(truth.process.live_heap_bytes / 1e6, truth.request_cpu.request_core_s)
    sim = _LogLinearSimulator()
    prob = Problem(rows, truth, QUICK, free, sim)
    r0, _ = prob.evaluate(np.zeros(2))
    J = prob.finite_differences(np.zeros(2))

    def logo(jacobian):
        sim.cells_run = 0
        preds = leave_one_group_out(rows, truth, QUICK, free, jacobian=jacobian, residuals=r0, mode="refit",
                                    simulator=sim)  # fmt: skip
        return preds, sim.cells_run

    with_j, cost_with = logo(J)
    without_j, cost_without = logo(None)
    # Given the Jacobian, no refit takes finite differences of its own: two parameters' worth
    # of cells per group fewer.
    assert cost_without - cost_with == 3 * 2 * 2 * 3
    # Refitted without the biased group, the heap is the truth again, and the biased group is
    # then predicted 1/1.5 of its measurement; the other groups are predicted exactly.
    for preds in (with_j, without_j):
        errors = {p.group[1]: p.memory_errors for p in preds}
        assert errors[1e7] == pytest.approx([1 / 1.5 - 1] * 3, abs=0.01)
        assert max(abs(e) for e in errors[1e5] + errors[1e6]) > 0.05  # fitted with the biased group in


def _biased_rows(heap_mb: float, core_s: float) -> list[Row]:
    """Three groups the log-linear stand-in reproduces with the default parameters, except that
    the last one measured 1.5 times the memory."""
    rows = []
    for i, (size, qps) in enumerate([(1e5, 100.0), (1e6, 50.0), (1e7, 10.0)]):
        mem = heap_mb * (1.0 + 0.1 * i) * (1.5 if i == 2 else 1.0)
        rows.append(Row(i, "etcd", size, 10, qps, "max", core_s * qps * 100.0, ((1, mem), (10, mem), (100, mem))))
    return rows


def test_the_loss_is_a_choice_the_record_keeps():
    truth = ServerParams()
    rows = _biased_rows(truth.process.live_heap_bytes / 1e6, truth.request_cpu.request_core_s)
    free = free_params_by_key(["process.live_heap_bytes"])

    def fitted_heap(loss):
        res = fit(rows, truth, QUICK, free, max_iterations=20, simulator=_LogLinearSimulator(), progress=False,
                  log=lambda _m: None, final_jacobian=False, loss=loss, noise_floor=0.0)  # fmt: skip
        assert res.fit_section()["loss"] == loss
        return res.values["process.live_heap_bytes"] / truth.process.live_heap_bytes

    # Plain least squares on log ratios: the heap moves by the geometric mean of the biases,
    # 1.5^(1/3); the robust loss lets the biased group pull less.
    linear = fitted_heap("linear")
    assert linear == pytest.approx(1.5 ** (1 / 3), rel=0.01)
    assert 1.0 < fitted_heap("soft_l1") < linear - 0.02
    with pytest.raises(ConfigError, match="unknown loss 'huber'"):
        fitted_heap("huber")


def test_a_record_names_its_loss_or_gets_the_default():
    from simapf.calibrate.fit import LOSS
    from simapf.calibrate.record import record_loss

    assert record_loss({"fit": {"loss": "linear"}}) == "linear"
    assert record_loss({}) == LOSS
    with pytest.raises(ConfigError, match=r"fit\.loss: unknown loss 'l2'"):
        record_loss({"fit": {"loss": "l2"}})


def _rows_measured_at(heap_factor: float) -> list[Row]:
    """Three rows the log-linear stand-in reproduces with `heap_factor` times the default
    baseline heap and the default fixed CPU per request."""
    truth = ServerParams()
    heap_mb, core_s = truth.process.live_heap_bytes / 1e6 * heap_factor, truth.request_cpu.request_core_s
    return [Row(i, "etcd", 1e6, 10, 50.0, "max", core_s * 50.0 * 100.0,
                tuple((s, heap_mb * (1 + 0.1 * i)) for s in (1, 10, 100))) for i in range(3)]  # fmt: skip


def test_a_refit_that_accepts_no_step_keeps_its_given_jacobian():
    # Rows the start reproduces exactly: least squares accepts no step. The finite differences
    # at the solution are then those given for the start, and are not taken again.
    free = free_params_by_key(["process.live_heap_bytes", "request_cpu.request_core_s"])
    truth = ServerParams()
    rows = _rows_measured_at(1.0)
    prob = Problem(rows, truth, QUICK, free, _LogLinearSimulator())
    J0, r0 = prob.finite_differences(np.zeros(2)), prob.evaluate(np.zeros(2))[0]
    quiet = dict(max_iterations=5, progress=False, log=lambda _m: None)

    def refit(**given):
        sim = _LogLinearSimulator()
        return fit(rows, truth, QUICK, free, simulator=sim, **given, **quiet), sim.cells_run

    res, cells_run = refit(given=GivenJacobian(J0, r0))
    assert res.values == {fp.key: pytest.approx(v) for fp, v in zip(free, start_values(free, truth, QUICK))}
    assert np.array_equal(res.jacobian, J0)
    assert cells_run == 9  # the start, once
    # Without the Jacobian, or with one taken on other residuals (other data, another model),
    # the finite differences are taken again.
    for given in ({}, {"given": GivenJacobian(J0, r0 + 0.01)}):
        res, cells_run = refit(**given)
        assert np.allclose(res.jacobian, J0) and cells_run > 9
    # Without one, they are taken at the start, which is the solution, and only there: the start
    # and one grid per parameter (before, a second set at the solution made it 45).
    res, cells_run = refit()
    assert np.array_equal(res.jacobian, J0) and cells_run == 9 + 2 * 9


def test_the_fit_stops_where_a_step_would_gain_less_than_the_noise_floor():
    # The stand-in is log-linear: the first step (most of the way to the data, as scipy's bounded
    # steps go) is predicted to gain almost all of the start's cost (nine memory cells ln 1.2
    # off), the next one far less.
    free = free_params_by_key(["process.live_heap_bytes"])
    rows = _rows_measured_at(1.2)
    start_cost = 0.5 * 9 * np.log(1.2) ** 2
    heap = ServerParams().process.live_heap_bytes

    def run(floor):
        sim = _LogLinearSimulator()
        res = fit(rows, ServerParams(), QUICK, free, max_iterations=6, simulator=sim, progress=False,
                  log=lambda _m: None, final_jacobian=False, noise_floor=floor, loss="linear")  # fmt: skip
        return res, sim.cells_run

    res, cells_run = run(0.9 * start_cost)
    assert res.values["process.live_heap_bytes"] > 1.1 * heap
    assert cells_run == 9 + 9 + 9 and "noise floor" in res.message  # the start, its finite differences, one step
    res, cells_run = run(1.1 * start_cost)
    assert res.values["process.live_heap_bytes"] == heap
    assert cells_run == 9 + 9 and "noise floor" in res.message  # no step is simulated
    res, cells_run = run(0.0)
    assert res.values["process.live_heap_bytes"] == pytest.approx(1.2 * heap, rel=1e-3) and cells_run > 27


@pytest.mark.parametrize("heap_factor, fresh", [(1.03, False), (0.97, False), (1.3, True), (0.7, True)])
def test_the_record_takes_fresh_finite_differences_only_a_step_away(heap_factor, fresh):
    # Within DIFF_STEP of where the finite differences were taken, the record keeps them,
    # updated along the fit's steps (Broyden); further, it takes them again at the solution.
    # On the log-linear stand-in both are the exact Jacobian.
    free = free_params_by_key(["process.live_heap_bytes", "request_cpu.request_core_s"])
    rows = _rows_measured_at(heap_factor)
    sim = _LogLinearSimulator()
    res = fit(rows, ServerParams(), QUICK, free, max_iterations=8, simulator=sim, progress=False,
              log=lambda _m: None, noise_floor=0.0, loss="linear")  # fmt: skip
    heap = ServerParams().process.live_heap_bytes
    assert res.values["process.live_heap_bytes"] == pytest.approx(heap_factor * heap, rel=1e-3)
    exact = Problem(rows, ServerParams(), QUICK, free, _LogLinearSimulator()).finite_differences(np.zeros(2))
    assert np.allclose(res.jacobian, exact)
    if fresh:
        assert sim.batches == 2 and res.jacobian_at is None
        assert res.fit_section()["jacobian"] == "finite differences at the solution"
    else:
        assert sim.batches == 1 and res.jacobian_at == res.start
        moved = f"{abs(np.log(heap_factor)):.1%}"
        assert "Broyden" in res.fit_section()["jacobian"] and moved in res.fit_section()["jacobian"]


def test_a_given_jacobian_counts_from_where_its_finite_differences_were_taken():
    # A record's Jacobian may be finite differences taken a little away and updated to the
    # record. A refit measures its step from where they were taken, so that refits in a row do
    # not carry them further than DIFF_STEP.
    free = free_params_by_key(["process.live_heap_bytes", "request_cpu.request_core_s"])
    truth = ServerParams()
    v0 = start_values(free, truth, QUICK)
    start, _ = apply(free, v0 * [1.02, 1.0], truth, QUICK)
    away = v0 * [1.02 * 1.04, 1.0]  # 4 % above the start in the heap

    def refit(heap_factor, taken_at):
        rows = _rows_measured_at(heap_factor)
        prob = Problem(rows, start, QUICK, free, _LogLinearSimulator())
        J0, r0 = prob.finite_differences(np.zeros(2)), prob.evaluate(np.zeros(2))[0]
        sim = _LogLinearSimulator()
        res = fit(rows, start, QUICK, free, max_iterations=8, simulator=sim, progress=False, log=lambda _m: None,
                  noise_floor=0.0, loss="linear", given=GivenJacobian(J0, r0, taken_at))  # fmt: skip
        return res, sim

    # No step: the given Jacobian is the record's, and so is where it was taken.
    res, sim = refit(1.02, away)
    assert sim.cells_run == 9 and res.jacobian_at == pytest.approx(dict(zip(res.values, away)))
    # A 2 % step down: 6 % from where they were taken, so they are taken again at the solution.
    res, sim = refit(1.0, away)
    assert sim.batches == 1 and res.jacobian_at is None
    # The same step from finite differences taken at the start keeps them.
    res, sim = refit(1.0, None)
    assert sim.batches == 0 and res.jacobian_at == res.start
