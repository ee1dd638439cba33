"""Regression of the shipped parameters against the measured experiment.

The whole grid (every row at 1, 10 and 100 seats) is simulated once per test session with the
defaults of `ServerParams` and `ExperimentSetup` (which are the calibration record's values; see
test_data_and_record.py). Tolerances are the calibration's acceptance criteria, not what the
model happens to reach: memory within 40 % in every measured cell and 15 % at the median, CPU
within 15 % at the median. Cells the shipped model is known to miss are listed in
`KNOWN_MISSES` with the reason, as strict xfails: fixing one makes its test fail until it is
taken off the list. docs/validation.md shows every cell.
"""

from __future__ import annotations

import pytest

from simapf.calibrate.data import SEATS, cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.grid import run_grid
from simapf.calibrate.metrics import EMPTY_CELL_REJECTION, summarise
from simapf.server.params import ServerParams

MEMORY_CELL_TOLERANCE = 0.40
CPU_ROW_TOLERANCE = 0.30  # no per-row target was set; twice the median's
ROWS = load_rows()

# (row label, seats) -> why the shipped model misses it; see docs/validation.md.
_LINEAR_ETCD = (
    "the data's etcd serves ~260 MB/s of 1 MB ranges but piles up 10 MB ranges at 200 MB/s; a linear etcd "
    "(one server at 257 MB/s, fitted) serves 200 MB/s of 10 MB ranges without a backlog. The per-byte penalty "
    "that reached these cells was dropped: nothing in etcd's or the apiserver's code makes a range cost more "
    "per byte as it grows (calibration/validation-notes.md)"
)
_ETCD_EDGE = (
    "at its max QPS with 1 seat, etcd (257 MB/s, fitted) is at the edge of its capacity for 1 MB ranges: a "
    "backlog of outstanding ranges builds that the data does not show (the knife edge of earlier records)"
)
KNOWN_MISSES: dict[tuple[str, int], str] = {
    ("etcd 10 MB x1000 @20/s", 1): _LINEAR_ETCD,
    ("etcd 10 MB x1000 @20/s", 10): _LINEAR_ETCD,
    ("etcd 10 MB x100 @20/s", 1): _LINEAR_ETCD,
    ("etcd 10 MB x100 @20/s", 10): _LINEAR_ETCD,
    ("etcd 10 MB x10 @20/s", 1): _LINEAR_ETCD,
    ("etcd 10 MB x10 @20/s", 10): _LINEAR_ETCD,
}
KNOWN_CPU_MISSES: dict[str, str] = {}
_SATURATED = (
    "the model reaches the data's 1-seat memory for this cache row only by saturating at its max "
    "QPS (node CPU shared with the load generator), so it does not serve the whole max QPS"
)
KNOWN_SATURATED: dict[str, str] = {
    "cache 1 MB x1000 @480/s": _SATURATED,
    "cache 10 MB x1000 @80/s": _SATURATED,
    "cache 10 MB x10 @80/s": _SATURATED,
    "etcd 1 MB x1000 @200/s": _ETCD_EDGE,
}


@pytest.fixture(scope="module")
def grid():
    return run_grid(cells(ROWS), ServerParams(), ExperimentSetup())


def _cell_params():
    out = []
    for r in ROWS:
        for s in SEATS:
            if r.memory(s) is None:
                continue
            reason = KNOWN_MISSES.get((r.label, s))
            marks = [pytest.mark.slow]
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            out.append(pytest.param(r, s, marks=marks, id=f"{r.label}-{s}seats".replace(" ", "_")))
    return out


@pytest.mark.parametrize("row, seats", _cell_params())
def test_peak_memory_of_each_cell(grid, row, seats):
    predicted = grid[(row.index, seats)].mem_mb
    assert predicted == pytest.approx(row.memory(seats), rel=MEMORY_CELL_TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "row",
    [pytest.param(r, id=r.label.replace(" ", "_"),
                  marks=[pytest.mark.xfail(strict=True, reason=KNOWN_CPU_MISSES[r.label])]
                  if r.label in KNOWN_CPU_MISSES else []) for r in ROWS],
)  # fmt: skip
def test_cpu_of_each_row(grid, row):
    assert grid[(row.index, 1)].cpu_percent == pytest.approx(row.cpu_percent, rel=CPU_ROW_TOLERANCE)


@pytest.mark.slow
def test_summary_meets_the_acceptance_criteria(grid):
    s = summarise(ROWS, grid)
    assert s.memory_median <= 0.15
    assert s.cpu_median <= 0.15
    assert s.empty_passing == s.empty_cells == 18


@pytest.mark.slow
def test_the_data_does_not_support_a_longer_run(grid):
    # How long the experiment ran is not reported; the reconstruction's warm-up and window are a
    # choice, which the validation scenarios of the same harness inherit. A model on which a run
    # twice as long fits the data better is one on which that choice must be revisited.
    from simapf.calibrate.report import LONGER_RUN

    longer = run_grid(cells(ROWS), ServerParams(), ExperimentSetup().run_longer(LONGER_RUN))
    assert summarise(ROWS, grid).memory_median < summarise(ROWS, longer).memory_median


@pytest.mark.slow
def test_under_overload_more_seats_move_memory_the_way_the_data_does(grid):
    # More seats per LIST shrink the backlog executing (less memory), except where the backlog
    # moves into APF's queues instead and the requests waiting there hold their memory: the
    # data's etcd 100 KB overload row has 22 % more at 10 seats than at 1. Where the data moves
    # by more than 10 %, the model must move the same way; elsewhere it must not move up by
    # more than that.
    for r in ROWS:
        if r.load != "overload":
            continue
        for a, b in zip(SEATS, SEATS[1:]):
            if (r.label, a) in KNOWN_MISSES or (r.label, b) in KNOWN_MISSES:
                continue  # the model misses the backlog there altogether
            measured_a, measured_b = r.memory(a), r.memory(b)
            model_a, model_b = grid[(r.index, a)].mem_mb, grid[(r.index, b)].mem_mb
            if measured_a is None or measured_b is None:
                continue
            if measured_b > 1.1 * measured_a:
                assert model_b > model_a, (r.label, a, b)
            elif measured_b < measured_a / 1.1:
                assert model_b < model_a, (r.label, a, b)
            else:
                assert model_b <= 1.1 * model_a, (r.label, a, b)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=_LINEAR_ETCD)
def test_etcd_served_memory_grows_with_response_size(grid):
    # Under overload, where the rows are comparable (each at 4/3 of its sustainable QPS); at
    # `max` the 10 MB rows run at 15/s against 200-260/s for 1 MB, and the data's 10 MB figures
    # are lower there.
    for load in ("overload",):
        for seats in (1, 10):
            by_size: dict[float, list[float]] = {}
            for r in ROWS:
                if r.source == "etcd" and r.load == load:
                    by_size.setdefault(r.response_bytes, []).append(grid[(r.index, seats)].mem_mb)
            sizes = sorted(by_size)
            for small, big in zip(sizes, sizes[1:]):
                assert min(by_size[big]) > max(by_size[small]), (load, seats, small, big)


@pytest.mark.slow
def test_the_cells_the_data_leaves_empty_show_most_requests_rejected(grid):
    for r in ROWS:
        for s in SEATS:
            if r.memory(s) is None:
                assert grid[(r.index, s)].rejected_fraction > EMPTY_CELL_REJECTION, (r.label, s)


@pytest.mark.slow
@pytest.mark.parametrize(
    "row",
    [pytest.param(r, id=r.label.replace(" ", "_"),
                  marks=[pytest.mark.xfail(strict=True, reason=KNOWN_SATURATED[r.label])]
                  if r.label in KNOWN_SATURATED else [])
     for r in ROWS if r.load == "max"],
)  # fmt: skip
def test_at_the_sustainable_qps_one_seat_serves_nearly_everything(grid, row):
    # The data's `max` QPS is by definition what the apiserver sustained with 1 seat.
    assert grid[(row.index, 1)].rejected_fraction <= 0.05
