"""A comparison as text at the terminal: policies side by side, then differences with CIs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

from simapf.comparison.stats import fmt, label, shows_as_zero, unit

if TYPE_CHECKING:
    import pandas as pd


class Comparison(Protocol):
    """What the text reads of a comparison: a `simapf.comparison.core.Comparison`, which
    formats itself with this module (so this module does not import it)."""

    policies: list[str]
    table: "pd.DataFrame"
    differences: "pd.DataFrame"
    confidence: float
    scenario_name: str
    source: str
    seeds: list[int]
    info: dict[str, Any]

    @property
    def metrics(self) -> list[str]: ...

_METRIC_WIDTH = 40


def _cell_mean(row, kind: str, with_range: bool) -> str:
    text = fmt(row["mean"], kind)
    if row["n"] > 1 and not math.isnan(row["sd"]):
        text += f" ± {fmt(row['sd'], kind)}"
    if with_range and row["n"] > 1:
        text += f" [{fmt(row['min'], kind)}, {fmt(row['max'], kind)}]"
    return text


def _shown_apart_from_zero(r: dict, kind: str) -> bool:
    """A difference is starred when its interval excludes zero as printed, not only in the
    digits the table leaves out: neither end shows as zero (so neither does the mean)."""
    return bool(r["excludes_zero"]) and not (shows_as_zero(r["ci_low"], kind) or shows_as_zero(r["ci_high"], kind))


def format_comparison(c: "Comparison") -> str:
    lines: list[str] = []
    add = lines.append
    n = len(c.seeds)
    add(f"simapf compare: {c.scenario_name} ({c.source}), {n} replication{'s' if n > 1 else ''} per policy, "
        f"common random numbers (seeds {', '.join(str(s) for s in c.seeds[:3])}{', ...' if n > 3 else ''})")  # fmt: skip
    add("  mean ± sd over replications; peak RSS also [min, max]")
    if c.info.get("identical"):
        add(f"  warning: {c.info['identical']}")
    add("")
    by = {(r["metric"], r["policy"]): r for r in c.table.to_dict("records")}
    cells = {}
    for metric in c.metrics:
        kind = unit(metric)
        for p in c.policies:
            cells[metric, p] = _cell_mean(by[metric, p], kind, metric == "peak_rss_bytes")
    widths = [max([len(p)] + [len(cells[m, p]) for m in c.metrics]) for p in c.policies]
    add("  " + "metric".ljust(_METRIC_WIDTH) + "  ".join(p.rjust(w) for p, w in zip(c.policies, widths)))
    for metric in c.metrics:
        add("  " + label(metric)[: _METRIC_WIDTH - 1].ljust(_METRIC_WIDTH)
            + "  ".join(cells[metric, p].rjust(w) for p, w in zip(c.policies, widths)))  # fmt: skip

    if len(c.policies) > 1:
        add("")
        pct = f"{100 * c.confidence:g} %"
        add(f"  difference from {c.policies[0]}: mean of paired differences [{pct} confidence interval]; "
            "* = the interval excludes 0 as shown")  # fmt: skip
        others = c.policies[1:]
        diffs = {(r["metric"], r["policy"]): r for r in c.differences.to_dict("records")}
        dcells = {}
        for metric in c.metrics:
            kind = unit(metric)
            for p in others:
                r = diffs[metric, p]
                text = fmt(r["mean_diff"], kind, signed=True)
                if r["n"] >= 2:
                    text += f" [{fmt(r['ci_low'], kind, signed=True)}, {fmt(r['ci_high'], kind, signed=True)}]"
                    text += "*" if _shown_apart_from_zero(r, kind) else " "
                dcells[metric, p] = text
        widths = [max([len(p)] + [len(dcells[m, p]) for m in c.metrics]) for p in others]
        add("  " + "metric".ljust(_METRIC_WIDTH) + "  ".join(p.rjust(w) for p, w in zip(others, widths)))
        for metric in c.metrics:
            add("  " + label(metric)[: _METRIC_WIDTH - 1].ljust(_METRIC_WIDTH)
                + "  ".join(dcells[metric, p].rjust(w) for p, w in zip(others, widths)))  # fmt: skip
        if n < 2:
            add("  (one replication: no confidence intervals; use --replications 2 or more)")
    if getattr(c, "intervals", None) is not None:
        _across_draws(c, add)
    return "\n".join(lines) + "\n"


def _contrasts(c: "Comparison", contrasts: "pd.DataFrame", add) -> None:
    """Each policy against the baseline: the difference and the ratio with their 90 % intervals."""
    base = c.policies[0]
    add("")
    add(f"  against {base}, draw by draw: difference [90 %] and ratio [90 %] (the model's error shared as its "
        "validation's experiments share it; \u2020 = parameters only)")  # fmt: skip
    by = {(r["metric"], r["policy"]): r for r in contrasts.to_dict("records")}
    others = [p for p in c.policies[1:] if any(k[1] == p for k in by)]
    cells = {}
    metrics = list(dict.fromkeys(contrasts["metric"]))
    for metric in metrics:
        kind = unit(metric)
        for p in others:
            r = by.get((metric, p))
            if r is None:
                cells[metric, p] = "-"
                continue
            dagger = "\u2020" if str(r["model_error"]).startswith("none") else ""
            diff = (f"{fmt(r['difference'], kind, signed=True)} [{fmt(r['difference_lo'], kind, signed=True)}, "
                    f"{fmt(r['difference_hi'], kind, signed=True)}]")  # fmt: skip
            ratio = (f"x{r['ratio']:.3g} [{r['ratio_lo']:.3g}, {r['ratio_hi']:.3g}]"
                     if math.isfinite(r["ratio"]) else "x-")  # fmt: skip
            cells[metric, p] = f"{diff}, {ratio}{dagger}"
    widths = [max([len(p)] + [len(cells[m, p]) for m in metrics]) for p in others]
    add("  " + "metric".ljust(_METRIC_WIDTH) + "  ".join(p.rjust(w) for p, w in zip(others, widths)))
    for metric in metrics:
        add("  " + label(metric)[: _METRIC_WIDTH - 1].ljust(_METRIC_WIDTH)
            + "  ".join(cells[metric, p].rjust(w) for p, w in zip(others, widths)))  # fmt: skip


def _across_draws(c: "Comparison", add) -> None:
    iv, wins = c.intervals, c.wins
    draws = c.info.get("draws")
    add("")
    add(f"  across {draws} parameter draws, each on replication 0's seed: 90 % intervals (parameters and the "
        "model's validated error; \u2020 = parameters only, no validation rows for that figure in this regime)")  # fmt: skip
    by = {(r["metric"], r["policy"]): r for r in iv.to_dict("records")}
    metrics = list(dict.fromkeys(iv["metric"]))
    cells = {}
    for metric in metrics:
        kind = unit(metric)
        for p in c.policies:
            r = by.get((metric, p))
            if r is None:
                cells[metric, p] = "-"
                continue
            dagger = "\u2020" if str(r["model_error"]).startswith("none") else ""
            cells[metric, p] = f"{fmt(r['value'], kind)} [{fmt(r['lo'], kind)}, {fmt(r['hi'], kind)}]{dagger}"
    widths = [max([len(p)] + [len(cells[m, p]) for m in metrics]) for p in c.policies]
    add("  " + "metric".ljust(_METRIC_WIDTH) + "  ".join(p.rjust(w) for p, w in zip(c.policies, widths)))
    for metric in metrics:
        add("  " + label(metric)[: _METRIC_WIDTH - 1].ljust(_METRIC_WIDTH)
            + "  ".join(cells[metric, p].rjust(w) for p, w in zip(c.policies, widths)))  # fmt: skip
    contrasts = getattr(c, "contrasts", None)
    if contrasts is not None and len(contrasts):
        _contrasts(c, contrasts, add)
    add("")
    add("  draw by draw (the same parameters for every policy): which is lower, in how many draws")
    for r in wins.to_dict("records"):
        if not r["draws"]:
            continue
        a, b, n = r["policy"], r["other"], r["draws"]
        text = f"{a} lower in {r['lower']} of {n}, {b} lower in {r['higher']} of {n}"
        if r["equal"]:
            text += f", equal in {r['equal']}"
        add("  " + label(r["metric"])[: _METRIC_WIDTH - 1].ljust(_METRIC_WIDTH) + text)
