"""`simapf apf-report`: the limits every priority level gets from a configuration.

For each level: NominalCL, LendableCL, MinCL, MaxCL, the CurrentCL it settles at when no
level has any demand, and the per-level max seats (empty where upstream has none: exempt and
Reject levels).
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from pathlib import Path

from simapf.engine.clock import EventLoop
from simapf.apf.config import bootstrap_objects, load_objects
from simapf.apf.objects import APFObjects
from simapf.files import json_text
from simapf.apf.controller import APFController

COLUMNS = ("priority_level", "nominal_cl", "lendable_cl", "min_cl", "max_cl", "idle_current_cl",
           "max_seats")  # fmt: skip


@dataclass(frozen=True)
class LevelRow:
    priority_level: str
    nominal_cl: int
    lendable_cl: int
    min_cl: int
    max_cl: int
    idle_current_cl: int
    max_seats: int | None


class _Ignore:
    def dispatched(self, req) -> None: ...
    def rejected(self, req, reason) -> None: ...
    def released(self, req) -> None: ...


def level_rows(server_concurrency: int, objects: APFObjects | None = None) -> list[LevelRow]:
    """One row per priority level, by name. The idle CurrentCL is what the borrowing adjuster
    gives when no level has demanded any seats (it stays there while that holds)."""
    controller = APFController(
        objects if objects is not None else bootstrap_objects(), EventLoop(), _Ignore(),
        server_concurrency=server_concurrency,
    )  # fmt: skip
    rows = []
    for name in sorted(controller.levels):
        level = controller.levels[name]
        lim = level.limits
        rows.append(LevelRow(name, lim.nominal_cl, lim.lendable_cl, lim.min_cl, lim.max_cl,
                             level.current_cl, lim.max_seats or None))  # fmt: skip
    return rows


def render(rows: list[LevelRow], fmt: str) -> str:
    if fmt == "json":
        return json_text([asdict(r) for r in rows], indent=2) + "\n"
    cells = [[("" if v is None else str(v)) for v in asdict(r).values()] for r in rows]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(cells)
        return out.getvalue()
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(COLUMNS)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(COLUMNS, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for c in cells:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))))
    return "\n".join(lines) + "\n"


def report(server_concurrency: int, config: str | Path | None, fmt: str) -> str:
    objects = load_objects(config) if config is not None else None
    return render(level_rows(server_concurrency, objects), fmt)
