"""The bench data set beside the model: docs/validation.md's section on the real bench.

For every cell of `calibration/bench/cells.csv` (simapf.calibrate.bench_cells) the model runs
the cell's scenario, and the section shows, cell by cell, the measured median and range over
the replications and the model's point for peak RSS, peak Go heap, mean CPU and LIST latency,
with the model's error; then the medians of those errors and of the run-to-run spread. The
section is written to `calibration/bench/report.md` and into docs/validation.md between its
markers; `python -m simapf.calibrate.report` keeps it when it writes the whole page.

    python -m simapf.calibrate.bench_report
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simapf.calibrate.bench_cells import BASE, BENCH, cells, list_figures
from simapf.calibrate.bench_machine import MACHINE

ROOT = Path(__file__).resolve().parents[2]
REPORT = BENCH / "report.md"
REPEAT = BENCH / "repeat" / "cells.csv"
VALIDATION = ROOT / "docs" / "validation.md"
BEGIN = "<!-- bench report: begin (python -m simapf.calibrate.bench_report) -->"
END = "<!-- bench report: end -->"
# Each figure compared: (title, cells.csv column, the model's figure, how it is shown).
FIGURES = (
    ("peak RSS", "peak_rss_bytes", "peak_rss_bytes", "MB"),
    ("peak Go heap", "peak_heap_inuse_bytes", "scraped_peak_heap_inuse_bytes", "MB"),
    ("mean CPU", "mean_cores", "mean_cores", "cores"),
    ("LIST latency, mean", "list_mean_s", "list_mean_s", "s"),
)


@dataclass(frozen=True)
class Compared:
    cell: str
    title: str
    measured: float
    low: float
    high: float
    predicted: float | None

    @property
    def error(self) -> float | None:
        return None if self.predicted is None or not self.measured else self.predicted / self.measured - 1


def measured_cells(table: Path = BENCH / "cells.csv") -> dict[str, dict[str, list[float]]]:
    """cell -> column -> the replications' values."""
    out: dict[str, dict[str, list[float]]] = {}
    with open(table, newline="") as handle:
        for row in csv.DictReader(handle):
            values = out.setdefault(row["cell"], {})
            for column, text in row.items():
                if column not in ("cell", "group", "replication") and text not in ("", "None"):
                    values.setdefault(column, []).append(float(text))
    return out


def predicted(cell_names: list[str]) -> dict[str, dict[str, float]]:
    """The model's figures for each cell: the cell's scenario run once (its seed), on the bench's
    machine (its CPU rates and idle heap: `calibration/bench/machine.yaml`)."""
    from simapf.sweeps.drawn_runs import run
    from simapf.scenario import load_scenario
    from simapf.uncertainty.figures import figure_values

    by_name = {c.name: c for c in cells()}
    out = {}
    for name in cell_names:
        summary = run(load_scenario(BASE, {**by_name[name].overrides, "apiserver.params_file": MACHINE.name})).typed
        values: dict[str, Any] = figure_values(summary)
        values["scraped_peak_heap_inuse_bytes"] = summary.memory.scraped_peak_heap_inuse_bytes
        lists = list_figures(summary)  # as bench_cells.figures reads a measurement
        if lists is not None:
            values["list_mean_s"] = lists.mean_s
        out[name] = values
    return out


def compare(measured: dict[str, dict[str, list[float]]], model: dict[str, dict[str, float]]) -> list[Compared]:
    rows = []
    for cell, columns in measured.items():
        for title, column, figure, _unit in FIGURES:
            values = columns.get(column)
            if not values:
                continue
            rows.append(Compared(cell, title, statistics.median(values), min(values), max(values), model.get(cell, {}).get(figure)))
    return rows


def _show(x: float | None, unit: str) -> str:
    if x is None:
        return "–"
    if unit == "MB":
        return f"{x / 1e6:,.0f}"
    if unit == "cores":
        return f"{x:.2f}"
    return f"{x:.3g}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.0f} %"


def section(rows: list[Compared], measured: dict[str, dict[str, list[float]]]) -> str:
    reps = sorted({len(v.get("peak_rss_bytes", [])) for v in measured.values()})
    lines = [
        BEGIN,
        "## The real bench: measured against predicted, cell by cell",
        "",
        f"{len(measured)} cells of `calibration/bench/cells.csv` ({'-'.join(map(str, reps))} replications each, each from "
        "a fresh etcd and kube-apiserver 1.37.2 built from upstream's modules; set-up and provenance in "
        "`calibration/bench/README.md`), measured with `simapf measure` and predicted by `simapf run` of the "
        "same scenario (`calibration/bench/base.yaml` with the cell's settings, `simapf.calibrate.bench_cells`) "
        "on the bench's machine: its CPU rates, fitted on a second measurement of the grid on another day "
        "(`calibration/bench/repeat/`), not on these cells, and its idle apiserver's live heap, measured "
        "(`calibration/bench/machine.yaml`, `simapf.calibrate.bench_machine`). "
        "Measured: the median over the replications, [lowest, highest]. Error: predicted / measured median − 1. "
        "Peak RSS is the true peak over the load (the kernel's VmHWM; the model's true peak); the Go heap's "
        "peak is the highest /metrics scrape on both sides; CPU is the apiserver's mean over the load; LIST "
        "latency is the client's mean, on loopback.",
        "",
        "| cell | " + " | ".join(f"{t} measured | predicted | error" for t, _c, _f, _u in FIGURES) + " |",
        "|---|" + "---:|---:|---:|" * len(FIGURES),
    ]
    by_cell: dict[str, dict[str, Compared]] = {}
    for r in rows:
        by_cell.setdefault(r.cell, {})[r.title] = r
    for cell, got in by_cell.items():
        cols = []
        for title, _c, _f, unit in FIGURES:
            r = got.get(title)
            if r is None:
                cols += ["–", "–", "–"]
                continue
            cols += [f"{_show(r.measured, unit)} [{_show(r.low, unit)}, {_show(r.high, unit)}]",
                     _show(r.predicted, unit), _pct(r.error)]  # fmt: skip
        lines.append(f"| {cell} | " + " | ".join(cols) + " |")
    lines += ["", "| figure | cells | median \\|error\\| | cells beyond 1.5x | median run-to-run max/min |", "|---|---:|---:|---:|---:|"]
    for title, column, _f, _u in FIGURES:
        errs = [r.error for r in rows if r.title == title and r.error is not None]
        spreads = [max(v[column]) / min(v[column]) for v in measured.values() if v.get(column) and min(v[column]) > 0]
        beyond = sum(1 for e in errs if e > 0.5 or e < -1 / 3)
        lines.append(f"| {title} | {len(errs)} | {statistics.median(abs(e) for e in errs):.0%} | {beyond} | "
                     f"{statistics.median(spreads):.2f} |" if errs else f"| {title} | 0 | – | – | – |")  # fmt: skip
    lines += out_of_sample(measured)
    lines += ["", END]
    return "\n".join(lines) + "\n"


def out_of_sample(first: dict[str, dict[str, list[float]]], repeat: Path = REPEAT) -> list[str]:
    """The grid measured a second time (`repeat/`), where the machine's CPU rates come from:
    each cell group predicted on rates fitted without it, and how far the two measurements of
    each cell are apart."""
    from simapf.calibrate import bench_machine
    from simapf.server.params import ServerParams

    rows = bench_machine.measured(repeat)
    checked = bench_machine.check(rows, rows, ServerParams())
    lines = [
        "",
        "### CPU and latency on the bench's machine, each cell group fitted without it",
        "",
        "The same grid measured again on another day, once per cell, with the load generator's CPU and the GC's "
        "(`calibration/bench/repeat/`): the machine's CPU rates are fitted on these cells, so here each cell group "
        "is predicted on rates fitted on the other groups (`python -m simapf.calibrate.bench_machine --check "
        "calibration/bench/repeat/cells.csv`). Second/first: this measurement over the first table's median.",
        "",
        "| cell | mean CPU measured | predicted | error | LIST latency measured | predicted | error "
        "| second/first: peak RSS | CPU | latency |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    cpu_errors, latency_errors = [], []
    ratios: dict[str, list[float]] = {"peak_rss_bytes": [], "mean_cores": [], "list_mean_s": []}
    again = measured_cells(repeat)
    for m, summary in checked:
        cores = summary.cpu.mean_cores
        lists = list_figures(summary)
        latency = lists.mean_s if lists else None
        cpu_err = cores / m.cores - 1 if m.cores else None
        lat_err = latency / m.list_mean_s - 1 if latency is not None and m.list_mean_s else None
        if cpu_err is not None:
            cpu_errors.append(cpu_err)
        if lat_err is not None:
            latency_errors.append(lat_err)
        shown = []
        for column, unit in (("peak_rss_bytes", "x"), ("mean_cores", "x"), ("list_mean_s", "x")):
            a, b = first.get(m.cell.name, {}).get(column), again.get(m.cell.name, {}).get(column)
            if a and b and statistics.median(a) > 0:
                ratios[column].append(statistics.median(b) / statistics.median(a))
                shown.append(f"{ratios[column][-1]:.2f}")
            else:
                shown.append("–")
        lines.append(f"| {m.cell.name} | {m.cores:.2f} | {cores:.2f} | {_pct(cpu_err)} | {_show(m.list_mean_s, 's')} | "
                     f"{_show(latency, 's')} | {_pct(lat_err)} | " + " | ".join(shown) + " |")  # fmt: skip
    lines += ["", "| figure | cells | median \\|error\\| | cells beyond 1.5x | median \\|second/first − 1\\| |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for title, errs, column in (("mean CPU", cpu_errors, "mean_cores"), ("LIST latency, mean", latency_errors, "list_mean_s")):
        beyond = sum(1 for e in errs if e > 0.5 or e < -1 / 3)
        apart = statistics.median(abs(r - 1) for r in ratios[column]) if ratios[column] else None
        lines.append(f"| {title} | {len(errs)} | {statistics.median(abs(e) for e in errs):.0%} | {beyond} | "
                     f"{f'{apart:.0%}' if apart is not None else '–'} |")  # fmt: skip
    rss = ratios["peak_rss_bytes"]
    lines.append(f"| peak RSS | – | – | – | {statistics.median(abs(r - 1) for r in rss):.0%} |" if rss else "")
    return lines


def splice(page: str, block: str) -> str:
    """`page` with its bench section replaced by `block` (added before the fitted parameters if absent)."""
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        return head + block.rstrip("\n") + tail
    anchor = "## Fitted parameters"
    if anchor in page:
        head, tail = page.split(anchor, 1)
        return head + block + "\n" + anchor + tail
    return page.rstrip("\n") + "\n\n" + block


def generate(table: Path = BENCH / "cells.csv", report: Path = REPORT, page: Path = VALIDATION) -> str:
    measured = measured_cells(table)
    block = section(compare(measured, predicted(list(measured))), measured)
    report.write_text(block)
    if page.exists():
        page.write_text(splice(page.read_text(), block))
    return block


def main(argv: list[str] | None = None) -> int:
    generate()
    print(f"wrote {REPORT.relative_to(ROOT)} and its section of {VALIDATION.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

