"""The model's error where it was checked: residuals by kind of figure and regime, as bands.

Every row of the validation table (published measurements the fit never saw) and every cell of
the calibration (predicted with its own group of rows left out of the fit) leaves a residual:
ln(predicted / measured) for sizes and times, predicted − measured for shares. Each residual
belongs to a *kind* of figure (memory, CPU, rejected share, latency) and to the *regime* of the
run that predicted it: the serving path that carried most LIST bytes, the size class of those
LISTs and whether the apiserver was overloaded (rejected at least OVERLOADED of its requests).

A band for a new prediction is split-conformal: of the n residuals of its kind and regime, the
⌊(n+1)α/2⌋-th smallest and the ⌈(n+1)(1−α/2)⌉-th; the measurement then lies within the
prediction moved by them with probability at least 1−α, if the new run's error is drawn like
those. A regime with too few residuals for that (fewer than 19 for 90 %) is widened one step at
a time (first over overload, then over size), never over the serving path or the kind; where
even that leaves too few, there is no band, and the answer says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from simapf.errors import ConfigError
from simapf.schema.summary import Summary, typed

POOL = Path(__file__).resolve().parents[1] / "calibration" / "model-error.json"
LEVEL = 0.9
OVERLOADED = 0.05  # a run that rejected at least this share of its requests is overloaded
SIZE_CLASSES = ((1e6, "under 1 MB"), (1e7, "1 to 10 MB"), (math.inf, "10 MB and more"))
# How each kind's residual is taken: "log" = ln(predicted / measured), "abs" = predicted − measured.
KINDS = {"memory": "log", "cpu": "log", "rejected": "abs", "latency": "log"}


@dataclass(frozen=True)
class Regime:
    """Where a run stands: the serving path of most of its LIST bytes (none: no LIST), the size
    class of those LISTs, and whether it was overloaded."""

    path: str
    size: str
    overloaded: bool

    def describe(self) -> str:
        load = "overloaded" if self.overloaded else "not overloaded"
        return f"{self.path} path, LISTs {self.size}, {load}"


def size_class(mean_list_bytes: float) -> str:
    return next(name for bound, name in SIZE_CLASSES if mean_list_bytes < bound)


def regime(lists_by_path: dict[str, tuple[float, float]], rejected_share: float) -> Regime:
    """A run's regime from what its LISTs served by path, (requests, bytes), and its 429 share."""
    served = {p: v for p, v in lists_by_path.items() if v[1] > 0}
    if served:
        path = max(served, key=lambda p: served[p][1])
        mean = served[path][1] / max(1.0, served[path][0])
    else:
        path, mean = "none", 0.0
    return Regime(path, size_class(mean), rejected_share >= OVERLOADED)


def regime_of(summary: Summary | Mapping[str, Any]) -> Regime:
    """A run's regime from its summary (`lists.by_path`, `requests.rejected_share`)."""
    s = typed(summary)
    by_path = s.lists.by_path if s.lists else {}
    return regime({p: (v.requests, v.bytes) for p, v in by_path.items()}, s.requests.rejected_share)


def regime_of_row(row: dict[str, Any]) -> Regime:
    """A run's regime from its sweep row (`list_requests/<path>`, `list_bytes/<path>`, `rejected_share`)."""
    paths = {k.split("/", 1)[1] for k in row if k.startswith("list_bytes/")}
    return regime({p: (row.get(f"list_requests/{p}", 0), row[f"list_bytes/{p}"]) for p in paths}, row["rejected_share"])


@dataclass(frozen=True)
class Residual:
    """One checked prediction: which row, from which source, of which kind, in which regime."""

    id: str
    source: str
    kind: str
    path: str
    size: str
    overloaded: bool
    predicted: float
    measured: float

    @property
    def residual(self) -> float:
        if KINDS[self.kind] == "abs":
            return self.predicted - self.measured
        return math.log(self.predicted / self.measured)


def residual_ok(kind: str, predicted: float, measured: float) -> bool:
    """Whether a prediction and its measurement make a residual of `kind`."""
    if not (math.isfinite(predicted) and math.isfinite(measured)):
        return False
    return KINDS[kind] == "abs" or (predicted > 0 and measured > 0)


@dataclass(frozen=True)
class Band:
    """How far a measurement may be from a prediction of this kind and regime: it lies within
    [shift(prediction, lo), shift(prediction, hi)] with probability `level`; from `rows`
    residuals of `sources` sources in `regime` (perhaps wider than the run's own)."""

    kind: str
    lo: float  # the residual quantiles; the measurement's bounds take them the other way round
    hi: float
    level: float
    rows: int
    sources: int
    regime: str
    residuals: tuple[float, ...] = field(default=(), repr=False)
    # Each residual's (source, row id), in the same order: which residuals share an experiment
    # (`simapf.uncertainty.contrast`).
    members: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def bounds(self, predicted: float) -> tuple[float, float]:
        """The interval for the measurement, given a prediction."""
        lo, hi = self.measured(np.array([predicted]), np.array([self.hi, self.lo]))
        return float(lo), float(hi)

    def measured(self, predicted: np.ndarray, residuals: np.ndarray | None = None) -> np.ndarray:
        """What each prediction implies for the measurement under each residual (all pairs)."""
        r = np.asarray(self.residuals if residuals is None else residuals, dtype=float)
        p = np.asarray(predicted, dtype=float)[:, None]
        if KINDS[self.kind] == "abs":
            return np.clip(p - r[None, :], 0.0, 1.0).ravel()
        return (p * np.exp(-r[None, :])).ravel()

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["residuals"], d["members"]
        d["residual"] = "ln(predicted/measured)" if KINDS[self.kind] == "log" else "predicted - measured"
        return d


@dataclass(frozen=True)
class NoBand:
    """Why a figure has no model-error band."""

    kind: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "none": self.reason}


def conformal(residuals: Iterable[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The split-conformal quantiles of `residuals` for a two-sided `level` interval; None when
    there are too few for it (the order statistic would fall beyond the sample)."""
    r = np.sort(np.asarray(list(residuals), dtype=float))
    n = len(r)
    alpha = round(1.0 - level, 12)  # 1 - 0.9 is 0.0999...: (n + 1) α / 2 must be whole when it should
    k_lo = math.floor((n + 1) * alpha / 2)
    k_hi = math.ceil((n + 1) * (1 - alpha / 2))
    if n == 0 or k_lo < 1 or k_hi > n:
        return None
    return float(r[k_lo - 1]), float(r[k_hi - 1])


def fewest_rows(level: float = LEVEL) -> int:
    """The fewest residuals that give a finite band at `level`."""
    return next(n for n in range(1, 10_000) if conformal(range(n), level) is not None)


BENCH_SOURCE = "bench/"  # a bench cell group's residuals: source "bench/<group>", one experiment each


def experiment_of(source: str) -> str:
    """The experiment a source's rows come from: one harness, one set-up, one bias. A published
    source is named `<publication>-<what it measured>`, and the rows of one publication (an
    issue, a PR, a KEP, a post) share its harness, however many tables they came in; each of the
    bench's cell groups is an experiment of its own."""
    return source if source.startswith(BENCH_SOURCE) else source.split("-", 1)[0]


def band(pool: list[Residual], kind: str, regime: Regime, level: float = LEVEL,
         leave_out: str | None = None) -> Band | NoBand:  # fmt: skip
    """The band for a prediction of `kind` in `regime`, from `pool` without the rows of
    experiment `leave_out` (`experiment_of`)."""
    if kind not in KINDS:
        return NoBand(kind, f"no validation rows measure a {kind} figure")
    same = [r for r in pool if r.kind == kind and (leave_out is None or experiment_of(r.source) != leave_out)]
    if not same:
        return NoBand(kind, f"no validation rows for {kind}")
    on_path = [r for r in same if r.path == regime.path]
    if not on_path:
        return NoBand(kind, f"no validation rows for {kind} on the {regime.path} path")
    load = "overloaded" if regime.overloaded else "not overloaded"
    steps = (
        (lambda r: r.size == regime.size and r.overloaded == regime.overloaded, f"{regime.path} path, LISTs {regime.size}, {load}"),
        (lambda r: r.size == regime.size, f"{regime.path} path, LISTs {regime.size}, any load"),
        (lambda r: r.overloaded == regime.overloaded, f"{regime.path} path, any size, {load}"),
        (lambda r: True, f"{regime.path} path, any size, any load"),
    )  # fmt: skip
    for keep, where in steps:
        rows = [r for r in on_path if keep(r)]
        residuals = tuple(r.residual for r in rows)
        q = conformal(residuals, level)
        if q is not None:
            return Band(kind, q[0], q[1], level, len(rows), len({r.source for r in rows}), where, residuals,
                        tuple((r.source, r.id) for r in rows))
    return NoBand(kind, f"{len(on_path)} validation rows for {kind} on the {regime.path} path, fewer than the "
                        f"{fewest_rows(level)} a {level:.0%} band needs")  # fmt: skip


def load_pool(path: str | Path = POOL) -> list[Residual]:
    """The shipped residuals (written by `simapf calibrate --report`)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: the model's residuals, needed for model-error bands: {exc}") from None
    return [Residual(**row) for row in data["residuals"]]


def load_checked_inputs(path: str | Path = POOL) -> dict[str, Any]:
    """The ranges of inputs the checked runs spanned (`simapf.uncertainty.coverage`)."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))["inputs"]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: the model's checked inputs: {exc}") from None


def write_pool(residuals: list[Residual], inputs: dict[str, Any], path: str | Path = POOL) -> None:
    """Write the residuals and the checked inputs' ranges (what `load_pool` and
    `load_checked_inputs` read)."""
    from simapf.files import json_text, write_text_atomic

    rows = [asdict(r) for r in sorted(residuals, key=lambda r: (r.kind, r.source, r.id))]
    doc = {"level": LEVEL, "inputs": inputs, "residuals": rows}
    write_text_atomic(Path(path), json_text(doc, indent=1) + "\n")
