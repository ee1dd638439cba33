"""Statistics of a comparison: each policy's mean and spread over replications, and each
policy's difference from the first with a paired t confidence interval.

Replication r of every policy ran on the same random streams (common random numbers), so the
differences are paired: d_r = x_policy,r - x_baseline,r. Pairing removes the variation the
policies share (arrivals, sizes, jitter), which is most of it, and the interval on the mean
difference is far narrower than one from two independent samples.
"""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

# The metrics a comparison shows, in order; per-level ones follow the pattern's position.
TABLE_ORDER = (
    "peak_rss_bytes", "peak_heap_inuse_bytes", "oom_kills", "mean_cores", "peak_cores",
    "requests_total", "throughput_ok_per_s", "rejection_rate", "rejection_rate/*", "p50_s/*", "p99_s/*",
    "lists_dispatched", "seats_per_list_mean", "seats_per_list_max",
)  # fmt: skip


def table_metrics(runs: pd.DataFrame) -> list[str]:
    """The metric columns worth a row in the table, in TABLE_ORDER."""
    out: list[str] = []
    for entry in TABLE_ORDER:
        if not entry.endswith("/*"):
            if entry in runs.columns:
                out.append(entry)
            continue
        prefix = entry[:-1]
        cols = sorted(c for c in runs.columns if c.startswith(prefix))
        if prefix == "rejection_rate/":
            # A level's rate always; a reason's only where some run had such a rejection.
            cols = [c for c in cols if c.count("/") == 1 or runs[c].fillna(0).abs().sum() > 0]
            cols.sort(key=lambda c: (c.split("/")[1], c.count("/"), c))
        out.extend(cols)
    return out


def summarise(runs: pd.DataFrame, policies: list[str], metrics: list[str]) -> pd.DataFrame:
    """Long table: metric, policy, n, mean, sd, min, max (over replications; NaN runs skipped)."""
    rows = []
    for metric in metrics:
        for policy in policies:
            x = runs.loc[runs["policy"] == policy, metric].astype(float).dropna().to_numpy()
            rows.append({
                "metric": metric, "policy": policy, "n": int(x.size),
                "mean": float(x.mean()) if x.size else math.nan,
                "sd": float(x.std(ddof=1)) if x.size > 1 else math.nan,
                "min": float(x.min()) if x.size else math.nan,
                "max": float(x.max()) if x.size else math.nan,
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "policy", "n", "mean", "sd", "min", "max"])


def paired_differences(runs: pd.DataFrame, policies: list[str], metrics: list[str],
                       confidence: float = 0.95) -> pd.DataFrame:  # fmt: skip
    """Per policy after the first, per metric: the mean paired difference from the first policy
    and its `confidence` interval (Student t, n - 1 degrees of freedom; NaN with n < 2)."""
    base_name = policies[0]
    base = runs[runs["policy"] == base_name].set_index("replication")
    rows = []
    for policy in policies[1:]:
        other = runs[runs["policy"] == policy].set_index("replication")
        for metric in metrics:
            both = pd.concat([other[metric].astype(float), base[metric].astype(float)], axis=1, join="inner").dropna()
            d = (both.iloc[:, 0] - both.iloc[:, 1]).to_numpy()
            n = int(d.size)
            mean = float(d.mean()) if n else math.nan
            lo = hi = math.nan
            if n >= 2:
                sd = float(d.std(ddof=1))
                half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
                lo, hi = mean - half, mean + half
            base_mean = float(both.iloc[:, 1].mean()) if n else math.nan
            rows.append({
                "metric": metric, "policy": policy, "baseline": base_name, "n": n,
                "mean_diff": mean, "ci_low": lo, "ci_high": hi,
                "relative_diff": mean / base_mean if n and base_mean else math.nan,
                "excludes_zero": bool(n >= 2 and (lo > 0 or hi < 0)),
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "policy", "baseline", "n", "mean_diff", "ci_low", "ci_high",
                                       "relative_diff", "excludes_zero"])  # fmt: skip


# ------------------------------------------------------------------------------ labels, units

_SCALAR_LABELS = {
    "peak_rss_bytes": "peak RSS",
    "peak_heap_inuse_bytes": "peak Go heap",
    "oom_kills": "OOM kills",
    "mean_cores": "mean CPU",
    "peak_cores": "peak CPU",
    "requests_total": "requests",
    "throughput_ok_per_s": "throughput (ok)",
    "rejection_rate": "rejected by APF",
    "lists_dispatched": "LISTs dispatched",
    "seats_per_list_mean": "seats per LIST, mean",
    "seats_per_list_max": "seats per LIST, max",
    "scraped_peak_rss_bytes": "peak RSS, scraped",
    "rejected_share": "rejected share",
}
_PATTERN_LABELS = {"rejection_rate": "rejected", "mean_s": "mean", "p50_s": "p50", "p90_s": "p90", "p99_s": "p99"}


def label(metric: str) -> str:
    if metric in _SCALAR_LABELS:
        return _SCALAR_LABELS[metric]
    head, _, rest = metric.partition("/")
    return f"{_PATTERN_LABELS.get(head, head)} {rest}" if rest else metric


def unit(metric: str) -> str:
    """bytes, s, ratio, cores, per_s or count: how to print a metric's values."""
    head = metric.split("/", 1)[0]
    if head.endswith("_bytes"):
        return "bytes"
    if head.endswith("_s") and not head.endswith("per_s"):
        return "s"
    if head.startswith("rejection_rate"):
        return "ratio"
    if head.endswith("_cores"):
        return "cores"
    if head.endswith("per_s"):
        return "per_s"
    return "count"


def fmt(value: float, kind: str, signed: bool = False) -> str:
    """`value` as the comparison prints it; a value too small to show at that precision prints
    as an unsigned zero (never `-0.0 ms`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = _magnitude(abs(value), kind)
    if shows_as_zero(value, kind):
        return text
    return ("-" if value < 0 else "+" if signed else "") + text


def shows_as_zero(value: float, kind: str) -> bool:
    """Whether `value` prints as zero at the precision `fmt` shows it with."""
    if value is None or not math.isfinite(value):
        return False
    return not any(ch in "123456789" for ch in _magnitude(abs(value), kind))


def _magnitude(value: float, kind: str) -> str:
    """A non-negative value in its unit, unsigned."""
    if kind == "bytes":
        return f"{value / 1e6:,.0f} MB"
    if kind == "s":
        return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"
    if kind == "ratio":
        return f"{100 * value:.2f} %"
    if kind == "cores":
        return f"{value:.2f}"
    if kind == "per_s":
        return f"{value:,.1f}/s"
    if abs(value - round(value)) < 1e-9:
        return f"{value:,.0f}"
    return f"{value:,.1f}"
