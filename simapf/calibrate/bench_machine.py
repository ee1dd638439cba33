"""The bench's machine: its CPU rates, fitted on the bench's own cells.

Memory follows the same mechanisms on every machine; CPU does not. The shipped CPU rates come
from the calibration experiment's 16-core Kind node of 2025; the bench ran on another machine,
where the apiserver, etcd and the load generator share two cores. This module fits that
machine's rates on cells measured there, the model's structure kept: every CPU rate the model
multiplies by a count (per request, per object or byte encoded, per byte or object decoded from
etcd, per byte indented) enters a cell's CPU per LIST linearly, so each rate's share of a
cell is what `compute_plan` gives with that rate alone at 1 and the others at 0. The fit is
non-negative least squares of each cell's measured CPU per LIST, relative (every cell weighs the
same whatever its size):

* the apiserver's CPU outside the GC: (mean cores − the GC's mean cores) × the load's duration
  / the LISTs served, against the request-rate terms and the process's idle cores;
* the load generator's CPU per LIST against a cost per response and per byte read (the model's
  `client.colocated_core_s_per_request` and `_per_byte`: a client on the apiserver's cores);
* the GC's: the model's mark rate scaled so that its GC CPU per cycle over the cells is the
  measured one (the median of the cells' ratios).

The informer cells (few LISTs, mostly watches) are left to check the fit, not to make it. The
result is a parameter file (`calibration/bench/machine.yaml`) that the bench cells' scenario
names (`apiserver.params_file`), with the fit's figures beside it; `--check` runs the fit
leaving out each cell group in turn and prints each group's error, fitted without it.

    python -m simapf.calibrate.bench_machine [--cells calibration/bench/repeat/cells.csv] [--check]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import nnls

from simapf.calibrate.bench_cells import BASE, BENCH, Cell, cells
from simapf.files import write_text_atomic
from simapf.schema.summary import Summary

ROOT = Path(__file__).resolve().parents[2]
MACHINE = BENCH / "machine.yaml"
HEADER = """\
# The bench's machine and deployment, written by `python -m simapf.calibrate.bench_machine`: its
# CPU rates fitted on its own cells (`fit.table`), and what its idle apiserver holds, measured
# (`idle`). A scenario takes them with `apiserver.params_file`; every other parameter is the
# shipped calibration's. Memory mechanisms are the same on every machine; these are not.
"""
FIT_CELLS = BENCH / "repeat" / "cells.csv"
# The request rates fitted per machine: (section, field). Every one multiplies a count.
RATES = (
    ("request_cpu", "request_core_s"),
    ("request_cpu", "json_encode_core_s_per_object"),
    ("request_cpu", "json_encode_core_s_per_byte"),
    ("request_cpu", "protobuf_encode_core_s_per_byte"),
    ("request_cpu", "json_indent_core_s_per_byte"),
    ("request_cpu", "decode_core_s_per_object"),
    ("request_cpu", "decode_core_s_per_byte"),
)
CLIENT_RATES = (("client", "colocated_core_s_per_request"), ("client", "colocated_core_s_per_byte"))


@dataclass(frozen=True)
class Measured:
    """One cell's medians over its replications."""

    cell: Cell
    duration_s: float
    lists: float
    cores: float
    gc_cores: float | None
    client_cores: float | None
    gc_cycles: float
    list_mean_s: float | None = None
    etcd_core_s: float | None = None  # etcd's CPU over the load


def measured(table: Path) -> list[Measured]:
    """The LIST cells of a bench table, with their CPU figures (informers left out)."""
    with open(table, newline="") as handle:
        rows = list(csv.DictReader(handle))
    by_name = {c.name: c for c in cells()}
    out = []
    for name in dict.fromkeys(r["cell"] for r in rows):
        cell = by_name.get(name)
        if cell is None or name.startswith("informers"):
            continue
        reps = [r for r in rows if r["cell"] == name]

        def median(column: str) -> float | None:
            values = [float(r[column]) for r in reps if r.get(column) not in (None, "", "None")]
            return statistics.median(values) if values else None

        lists = median("lists_ok")
        if not lists:
            continue
        out.append(Measured(cell, _duration(), lists, median("mean_cores") or 0.0, median("gc_mean_cores"),
                            median("client_mean_cores"), median("gc_cycles") or 0.0, median("list_mean_s"),
                            median("etcd_busy_core_s")))  # fmt: skip
    return out


def _duration() -> float:
    return float(yaml.safe_load(BASE.read_text())["run"]["duration_s"])


def _objects_and_bytes(cell: Cell) -> tuple[int, float]:
    """The objects a cell's LIST returns and their bytes (as stored, and as sent)."""
    o = cell.overrides
    n = int(o["resources.configmaps.count"])
    return n, n * float(o["resources.configmaps.object_size.mean_bytes"])


def _list_cost(cell: Cell, params: Any) -> Any:
    """The RequestCost of the cell's LISTs, as the model plans it."""
    from simapf.apf.types import ListOptions
    from simapf.server.paths import Encoding, ResponseShape, plan_request

    o = cell.overrides
    n, response = _objects_and_bytes(cell)
    encoding = Encoding.PROTOBUF if o["clients.lister.request.encoding"] == "protobuf" else Encoding.JSON
    shape = ResponseShape(response, n, encoding, decoded_multiplier=1.0)  # ConfigMaps: their data, as stored
    opts = ListOptions(pretty=bool(o["clients.lister.request.options.pretty"]))
    cost = plan_request("list", opts, shape, watch_cache_enabled=bool(o["resources.configmaps.watch_cache"]),
                        gates=params.features)  # fmt: skip
    assert cost is not None
    return cost


def _cpu(params: Any, cost: Any) -> float:
    from simapf.server.costs import compute_plan

    plan = compute_plan(params, cost)
    return plan.cpu_core_s + plan.decode_core_s


def features(cell: Cell, params: Any) -> np.ndarray:
    """Each rate's core-seconds per LIST of the cell at rate 1 (the others 0), then the rest."""
    cost = _list_cost(cell, params)

    def with_rates(values: dict[tuple[str, str], float]) -> Any:
        update = {}
        for section in {s for s, _f in RATES}:
            fields = {f: values.get((s, f), 0.0) for s, f in RATES if s == section}
            update[section] = getattr(params, section).model_copy(update=fields)
        return params.model_copy(update=update)

    rest = _cpu(with_rates({}), cost)
    return np.array([_cpu(with_rates({rate: 1.0}), cost) - rest for rate in RATES] + [rest])


@dataclass(frozen=True)
class Fit:
    rates: dict[str, float]  # "section.field" -> value
    baseline_cores: float
    client: dict[str, float]
    mark_rate_scale: float
    cells: int
    etcd: dict[str, float] | None = None  # "etcd.field" -> value


def fit_etcd(rows: list[Measured]) -> dict[str, float] | None:
    """etcd's range rates on the machine (`simapf.server.etcd.range_work`: a cost per range, per
    byte and per key, each the inverse of a rate), from the cells that read etcd: its CPU per
    LIST against 1, the range's bytes and its keys, relative, non-negative. None: no such cells."""
    a, b = [], []
    for m in rows:
        if m.cell.overrides["resources.configmaps.watch_cache"] or not m.etcd_core_s:
            continue
        n, stored = _objects_and_bytes(m.cell)
        y = m.etcd_core_s / m.lists
        a.append(np.array([1.0, stored, n]) / y)
        b.append(1.0)
    if len(a) < 3:
        return None
    per_range, per_byte, per_key = nnls(np.array(a), np.array(b))[0]
    out = {"etcd.bytes_per_s": float(1.0 / per_byte) if per_byte > 0 else 1e12,
           "etcd.requests_per_s": float(1.0 / per_range) if per_range > 0 else 1e9}  # fmt: skip
    if per_key > 0:
        out["etcd.objects_per_s"] = float(1.0 / per_key)
    return out


def fit(rows: list[Measured], params: Any, with_gc: bool = True) -> Fit:
    """The machine's rates from its cells (see the module's docstring)."""
    a, b, ca, cb = [], [], [], []
    for m in rows:
        f = features(m.cell, params)
        # Relative: each row divided by its measured CPU per LIST (outside the GC).
        per_list = (m.cores - (m.gc_cores or 0.0)) * m.duration_s / m.lists
        a.append(np.append(f[:-1], m.duration_s / m.lists) / per_list)
        b.append((per_list - f[-1]) / per_list)
        if m.client_cores is not None:
            c_scale = m.client_cores * m.duration_s / m.lists
            ca.append(np.array([1.0, _objects_and_bytes(m.cell)[1]]) / c_scale)
            cb.append(1.0)
    theta, _ = nnls(np.array(a), np.array(b))
    client: dict[str, float] = {}
    if ca:
        c_theta, _ = nnls(np.array(ca), np.array(cb))
        client = {f"{s}.{f}": float(v) for (s, f), v in zip(CLIENT_RATES, c_theta)}
    rates = {f"{s}.{f}": float(v) for (s, f), v in zip(RATES, theta[:-1])}
    etcd = fit_etcd(rows)
    first = Fit(rates, float(theta[-1]), client, 1.0, len(rows), etcd)
    scale = mark_rate_scale(rows, machine_params(first)) if with_gc else 1.0
    return Fit(rates, float(theta[-1]), client, scale, len(rows), etcd)


def mark_rate_scale(rows: list[Measured], machine: dict[str, Any]) -> float:
    """How much faster the machine's GC marks than the model's mark rate says: the median over
    the cells of the model's GC CPU per cycle over the measured one (each cell run on `machine`)."""
    ratios = []
    for m in rows:
        if not m.gc_cores or not m.gc_cycles:
            continue
        cpu = predicted(m.cell, machine).cpu
        if cpu.gc_cycles and cpu.gc_mean_cores is not None:
            model = cpu.gc_mean_cores / cpu.gc_cycles
            ratios.append(model / (m.gc_cores / m.gc_cycles))
    return statistics.median(ratios) if ratios else 1.0


def machine_params(result: Fit, params: Any | None = None) -> dict[str, Any]:
    """The parameter file's content: the fitted rates by section (the mark rate as `params`'s,
    scaled)."""
    out: dict[str, dict[str, Any]] = {"process": {"baseline_cores": result.baseline_cores}}
    if params is not None and result.mark_rate_scale != 1.0:
        out["gc"] = {"mark_rate_bytes_per_core_s": params.gc.mark_rate_bytes_per_core_s * result.mark_rate_scale}
    for key, value in {**result.rates, **result.client, **(result.etcd or {})}.items():
        section, field = key.split(".")
        out.setdefault(section, {})[field] = value
    return out


# The cells whose first scrape gives the idle apiserver's live heap: the smallest inventory.
IDLE_CELLS = ("cache-1MB-10obj-json-c1", "etcd-1MB-10obj-json-c1")


def measure_idle(replications: int = 2, say=print) -> dict[str, Any]:
    """The bench apiserver's live heap when the load starts (its inventory created, the
    apiserver settled, nothing in flight): the last GC's marked heap at the first scrape, per
    replication of IDLE_CELLS, and their median. What `process.live_heap_bytes` describes for
    this deployment (a fresh cluster with one small resource), measured, not fitted."""
    from simapf.bench import measure
    from simapf.scenario import load_scenario

    by_name = {c.name: c for c in cells()}
    seen = []
    for name in IDLE_CELLS:
        m = measure(load_scenario(BASE, by_name[name].overrides), replications)
        for r in m.results:
            bench = r.typed.bench
            heap = bench.base_heap_live_bytes if bench is not None else None
            if heap is not None:
                seen.append(heap)
                say(f"{name}: live heap at the load's start {heap / 1e6:.1f} MB")
    return {"cells": list(IDLE_CELLS), "replications": replications, "live_heap_bytes": seen,
            "median_bytes": statistics.median(seen)}  # fmt: skip


def overrides(machine: dict[str, Any]) -> dict[str, Any]:
    """A parameter file's content as a cell's `--set` overrides."""
    return {f"apiserver.params.{section}.{field}": value for section, fields in machine.items()
            for field, value in fields.items()}  # fmt: skip


def predicted(cell: Cell, machine: dict[str, Any]) -> Summary:
    """The model's summary of `cell` on the machine `machine` describes."""
    from simapf.sweeps.drawn_runs import run
    from simapf.scenario import load_scenario

    return run(load_scenario(BASE, {**cell.overrides, **overrides(machine)})).typed


def check(rows: list[Measured], against: list[Measured], params: Any,
          say=lambda _line: None) -> list[tuple[Measured, Summary]]:  # fmt: skip
    """Each cell group of `against` predicted on the machine fitted from `rows` without that
    group: (the cell as measured, the model's summary of it)."""
    out = []
    for group in dict.fromkeys(m.cell.group for m in against):
        machine = machine_without(group, rows, params)
        for m in (m for m in against if m.cell.group == group):
            summary = predicted(m.cell, machine)
            out.append((m, summary))
            cores = summary.cpu.mean_cores
            say(f"{m.cell.name:42s} measured {m.cores:5.2f}  predicted {cores:5.2f}  {cores / m.cores - 1:+.0%}")
    errors = [abs(s.cpu.mean_cores / m.cores - 1) for m, s in out if m.cores]
    say(f"median |error| {statistics.median(errors):.0%} over {len(errors)} cells")
    return out


def machine_without(group: str, rows: list[Measured], params: Any) -> dict[str, Any]:
    """The machine's parameters fitted on `rows` but those of cell group `group`, with the idle
    heap measured."""
    machine = machine_params(fit([m for m in rows if m.cell.group != group], params), params)
    heap = idle_heap()
    if heap is not None:
        machine["process"]["live_heap_bytes"] = heap
    return machine


def idle_heap() -> float | None:
    """The idle apiserver's live heap as the shipped machine file records it (None: not measured)."""
    if not MACHINE.exists():
        return None
    idle = (yaml.safe_load(MACHINE.read_text()) or {}).get("idle")
    return idle["median_bytes"] if idle else None


def _shown(path: Path) -> str:
    """A path as the record names it: from the checkout's root when it is inside it."""
    path = path.resolve()
    return path.relative_to(ROOT.resolve()).as_posix() if path.is_relative_to(ROOT.resolve()) else str(path)


def main(argv: list[str] | None = None) -> int:
    from simapf.server.params import ServerParams

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=Path, default=FIT_CELLS)
    parser.add_argument("--out", type=Path, default=MACHINE)
    parser.add_argument("--idle", action="store_true", help="Measure the idle apiserver's live heap again (the bench).")
    parser.add_argument("--check", type=Path, nargs="?", const=BENCH / "cells.csv",
                        help="Predict each cell group of this table fitted without it.")
    args = parser.parse_args(argv)
    rows = measured(args.cells)
    if args.check:
        check(rows, measured(args.check), ServerParams(), say=print)
        return 0
    params = ServerParams()
    result = fit(rows, params)
    machine = machine_params(result, params)
    if args.idle:
        idle = measure_idle(say=lambda line: print(line, file=sys.stderr))
        machine["process"]["live_heap_bytes"] = idle["median_bytes"]
    else:  # the last measurement stands
        old = yaml.safe_load(args.out.read_text()) if args.out.exists() else {}
        idle = old.get("idle")
        if idle:
            machine["process"]["live_heap_bytes"] = idle["median_bytes"]
    record = {
        "params": machine,
        "fit": {"cells": result.cells, "table": _shown(args.cells),
                "mark_rate_scale": result.mark_rate_scale},
        "idle": idle,
    }  # fmt: skip
    write_text_atomic(args.out, HEADER + yaml.safe_dump(record, sort_keys=False))
    print(yaml.safe_dump(machine, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
