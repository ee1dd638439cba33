"""The measured data: rows of the LIST memory experiment, and the cells a fit compares.

A row is one (source, response size, object count, QPS) with its CPU and up to three peak
memories, one per seat setting (`calibration/list-memory-experiments.csv`, provenance in
`calibration/README.md`). A cell is a row at one seat setting; an empty memory cell means the
experiment saw most requests rejected there, so the model should too.

KB and MB in the source are taken as decimal (1 MB = 1e6 bytes): the source does not say, and
the CSV already holds bytes.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from simapf.errors import ConfigError
from simapf.files import read_text

SEATS = (1, 10, 100)
SOURCES = ("etcd", "cache")
LOADS = ("max", "overload")
DEFAULT_DATA = Path(__file__).resolve().parents[1] / "calibration" / "list-memory-experiments.csv"
_COLUMNS = ("source", "response_bytes", "object_count", "qps", "load", "cpu_percent") + tuple(
    f"mem_mb_seats_{s}" for s in SEATS
)


@dataclass(frozen=True)
class Row:
    """One measured row. `mem_mb` maps seats to peak memory in MB (None = empty cell)."""

    index: int
    source: str
    response_bytes: float
    object_count: int
    qps: float
    load: str
    cpu_percent: float
    mem_mb: tuple[tuple[int, float | None], ...]

    @property
    def group(self) -> tuple[str, float, int]:
        """(source, size, count): the max and overload rows of one experiment."""
        return (self.source, self.response_bytes, self.object_count)

    @property
    def label(self) -> str:
        return f"{self.source} {_size(self.response_bytes)} x{self.object_count} @{self.qps:g}/s"

    def memory(self, seats: int) -> float | None:
        return dict(self.mem_mb)[seats]


@dataclass(frozen=True)
class Cell:
    """A row at one seat setting: what one simulation run reproduces."""

    row: Row
    seats: int

    @property
    def measured_mb(self) -> float | None:
        return self.row.memory(self.seats)

    @property
    def key(self) -> tuple[int, int]:
        return (self.row.index, self.seats)


def _size(nbytes: float) -> str:
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def load_rows(path: str | Path | None = None) -> list[Row]:
    """Read and check the measured CSV; bad input raises a one-line `ConfigError`."""
    path = Path(path) if path is not None else DEFAULT_DATA
    text = read_text(path)
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}")
    rows = []
    for i, rec in enumerate(reader):
        where = f"{path}: row {i + 2}"
        width = len(reader.fieldnames or [])
        if None in rec or any(v is None for v in rec.values()):
            # DictReader fills a short row with None and files a long row's extras under None.
            got = width - sum(v is None for v in rec.values()) + len(rec.get(None) or [])
            raise ConfigError(f"{where}: {got} fields, the header has {width}")
        source = rec["source"].strip()
        if source not in SOURCES:
            raise ConfigError(f"{where}: source must be etcd or cache, got {source!r}")
        load = rec["load"].strip()
        if load not in LOADS:
            raise ConfigError(f"{where}: load must be max or overload, got {load!r}")
        mem = []
        for s in SEATS:
            raw = rec[f"mem_mb_seats_{s}"].strip()
            mem.append((s, _number(raw, where, f"mem_mb_seats_{s}") if raw else None))
        rows.append(
            Row(
                index=len(rows),
                source=source,
                response_bytes=_number(rec["response_bytes"], where, "response_bytes"),
                object_count=int(_number(rec["object_count"], where, "object_count")),
                qps=_number(rec["qps"], where, "qps"),
                load=load,
                cpu_percent=_number(rec["cpu_percent"], where, "cpu_percent"),
                mem_mb=tuple(mem),
            )
        )
    if not rows:
        raise ConfigError(f"{path}: no data rows")
    return rows


def _number(raw: str, where: str, column: str) -> float:
    try:
        x = float(raw)
    except ValueError:
        raise ConfigError(f"{where}: {column} must be a number, got {raw.strip()!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise ConfigError(f"{where}: {column} must be positive, got {raw.strip()!r}")
    return x


def cells(rows: list[Row]) -> list[Cell]:
    """Every row at every seat setting, measured or empty."""
    return [Cell(r, s) for r in rows for s in SEATS]
