"""The figure of a comparison: six panels, one bar per policy (mean over replications), every
replication as a dot, so the spread is visible and not just summarised.

Peak RSS (with the memory limit), OOM kills, throughput, rejection rate per priority level, p99
latency of the busiest level/verb pairs, and seats per LIST.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class Comparison(Protocol):
    """What the figure reads of a comparison: a `simapf.comparison.core.Comparison`, which
    draws itself with this module (so this module does not import it)."""

    policies: list[str]
    runs: "pd.DataFrame"
    scenario_name: str
    seeds: list[int]
    memory_limit_bytes: float | None

GiB = float(1 << 30)
_MAX_GROUPS = 6


def _bars(ax: "Axes", c: "Comparison", metric: str, scale: float = 1.0, title: str = "", ylabel: str = "") -> None:
    runs = c.runs
    x = np.arange(len(c.policies))
    if metric in runs.columns:
        for i, policy in enumerate(c.policies):
            values = runs.loc[runs["policy"] == policy, metric].astype(float).to_numpy() / scale
            values = values[~np.isnan(values)]
            if values.size:
                ax.bar(i, values.mean(), color=f"C{i % 10}", alpha=0.7)
                ax.plot(np.full(values.size, i), values, "o", color="black", markersize=3)
    ax.set_xticks(x, c.policies, rotation=20, ha="right", fontsize="small")
    bottom, top = ax.get_ylim()
    ax.set_ylim(0, top if top > 0 else 1)  # counts and sizes start at 0; all-zero panels stay readable
    ax.set_title(title)
    ax.set_ylabel(ylabel)


def _grouped(ax: "Axes", c: "Comparison", columns: list[str], names: list[str], title: str, ylabel: str,
             log: bool = False, empty: str = "none in these runs") -> None:  # fmt: skip
    runs = c.runs
    if not columns:
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", va="center")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title)
        return
    width = 0.8 / len(c.policies)
    x = np.arange(len(columns))
    for i, policy in enumerate(c.policies):
        sub = runs[runs["policy"] == policy]
        means = [sub[col].astype(float).mean() if col in sub else np.nan for col in columns]
        ax.bar(x + (i - (len(c.policies) - 1) / 2) * width, means, width, label=policy, color=f"C{i % 10}", alpha=0.8)
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize="small")
    if log:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="x-small")


def comparison_figure(c: "Comparison") -> "Figure":
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 8), layout="constrained")
    axes = fig.subplots(2, 3)
    runs = c.runs

    ax = axes[0][0]
    _bars(ax, c, "peak_rss_bytes", GiB, "Peak RSS (dots: replications)", "GiB")
    if c.memory_limit_bytes:
        ax.axhline(c.memory_limit_bytes / GiB, color="#D55E00", linestyle="--", linewidth=1, label="memory limit")
        ax.legend(fontsize="x-small")
    _bars(axes[0][1], c, "oom_kills", 1.0, "OOM kills", "kills per run")
    _bars(axes[0][2], c, "throughput_ok_per_s", 1.0, "Throughput (successful requests)", "per second")

    levels = [col for col in runs.columns if col.startswith("rejection_rate/") and col.count("/") == 1]
    levels = [col for col in levels if runs[col].fillna(0).max() > 0][:_MAX_GROUPS]
    _grouped(axes[1][0], c, levels, [col.split("/")[1] for col in levels],
             "Rejected by APF, per priority level", "fraction of requests",
             empty="no APF rejections in these runs")  # fmt: skip

    served = [col for col in runs.columns if col.startswith("served/")]
    busiest = sorted(served, key=lambda col: -runs[col].fillna(0).sum())[:_MAX_GROUPS]
    p99 = [f"p99_s/{col.split('/', 1)[1]}" for col in busiest]
    _grouped(axes[1][1], c, p99, [col.split("/", 1)[1] for col in p99],
             "p99 latency, busiest level/verb", "seconds", log=True)  # fmt: skip

    _bars(axes[1][2], c, "seats_per_list_mean", 1.0, "Seats per LIST (mean)", "seats")

    fig.suptitle(f"{c.scenario_name}: {len(c.policies)} LIST policies, {len(c.seeds)} replications each "
                 "on common random numbers")  # fmt: skip
    return fig
