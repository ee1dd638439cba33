"""The overview figure of a run: memory, CPU, seats and queues per level, rejections.

Four panels over simulated time, events marked as vertical lines, so a reader sees at a glance
whether memory stayed under the limit, where CPU went and which priority levels paid for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from simapf.files import json_text
from simapf.schema.summary import Interval, validate

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


class Result(Protocol):
    """What the figures read of a run: a `simapf.simulation.result.Result`, which draws them when it is
    written (so this module does not import it)."""

    summary: dict[str, Any]
    series: "pd.DataFrame"

    def metric(self, name: str, **labels: str) -> "pd.Series": ...
    def wide(self, name: str, by: str = ...) -> "pd.DataFrame": ...
    def rate(self, name: str, by: str = ...) -> "pd.DataFrame": ...

GiB = float(1 << 30)


def _busy_levels(result: "Result", metric: str, limit: int = 8) -> list[str]:
    df = result.series[result.series["metric"] == metric]
    if df.empty:
        return []
    totals = df.groupby("priority_level")["value"].max()
    totals = totals[totals > 0].sort_values(ascending=False)
    return list(totals.index[:limit])


def _replica_memory(ax, result: "Result") -> None:
    """Each replica's RSS and Go heap, and each death at the RSS it ended (a cross)."""
    rss = result.wide("process_resident_memory_bytes", by="replica")
    heap = result.wide("go_memstats_heap_inuse_bytes", by="replica")
    for i, replica in enumerate(rss.columns):
        color = f"C{i % 10}"
        ax.plot(rss.index, rss[replica] / GiB, color=color, label=f"replica {replica}")
        ax.plot(heap.index, heap[replica] / GiB, color=color, linestyle=":", alpha=0.8)
    for replica, at_s, rss_bytes in death_points(result):
        ax.plot([at_s], [rss_bytes / GiB], "x", color=f"C{replica % 10}", markersize=9, markeredgewidth=2)


def death_points(result: "Result") -> list[tuple[int, float, float]]:
    """(replica, time, RSS) of each process death: the RSS an OOM kill ended, else the replica's
    RSS series at that time."""
    rss = result.wide("process_resident_memory_bytes", by="replica")
    points = []
    for d in validate(result.summary).deaths:
        if d.rss_bytes is not None:
            at = float(d.rss_bytes)
        else:
            col = rss[str(d.replica)].dropna()
            at = float(np.interp(d.at_s, col.index, col.to_numpy()))
        points.append((d.replica, d.at_s, at))
    return points


def overview_figure(result: "Result") -> "Figure":
    """The four panels, in the house style (simapf.outputs.style: colour-blind-safe colours)."""
    import matplotlib

    import simapf.outputs.style

    with matplotlib.rc_context({**simapf.outputs.style.RC, "figure.figsize": (11, 10)}):
        return _overview(result)


def _interval_band(ax, interval: Interval | None, scale: float, what: str) -> None:
    """A run with --uncertainty: the figure's interval as a shaded band across the panel."""
    if interval is None or interval.lo is None or interval.hi is None:
        return
    only = ", parameters only" if interval.parameters_only else ""
    ax.axhspan(interval.lo * scale, interval.hi * scale, color="#999999", alpha=0.2, linewidth=0,
               label=f"{what}: {interval.level:.0%} interval{only}")  # fmt: skip


def _overview(result: "Result") -> "Figure":
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 10), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    summary = validate(result.summary)

    replicas = len(summary.replicas) > 1
    ax = axes[0]
    limit = summary.memory.memory_limit_bytes
    if replicas:
        _replica_memory(ax, result)
    else:
        rss = result.metric("process_resident_memory_bytes")
        heap = result.metric("go_memstats_heap_inuse_bytes")
        ax.plot(rss.index, rss.values / GiB, label="RSS (process_resident_memory_bytes)")
        ax.plot(heap.index, heap.values / GiB, label="Go heap in use", alpha=0.8)
        # OOM kills happen between scrapes: marked at the scrape after each, at the RSS it reached.
        kills = result.rate("simapf_oom_kills_total").sum(axis=1)
        if (kills > 0).any():
            reached = summary.memory.rss_at_oom_kill_bytes or limit or 0.0
            at = kills.index[kills > 0]
            ax.plot(at, [reached / GiB] * len(at), "x", color="#D55E00", markersize=8, label="OOM kill")
    if limit:
        ax.axhline(limit / GiB, color="#D55E00", linestyle="--", linewidth=1, label="memory limit")
    _interval_band(ax, summary.memory.interval("peak_rss_bytes"), 1 / GiB, "peak RSS")
    ax.set_ylabel("GiB")
    ax.set_title("Memory per replica (RSS solid, Go heap dotted)" if replicas else "Memory")
    ax.legend(loc="upper left", fontsize="small", ncol=2 if replicas else 1)

    ax = axes[1]
    if replicas:
        cpu_by = result.wide("process_cpu_seconds_total", by="replica")
        for i, replica in enumerate(cpu_by.columns):
            cpu = cpu_by[replica].dropna()
            t = cpu.index.to_numpy()
            if len(t) > 1:
                ax.plot(t[1:], np.diff(cpu.values) / np.diff(t), color=f"C{i % 10}", label=f"replica {replica}")
    else:
        cpu = result.metric("process_cpu_seconds_total")
        # The GC's compulsory part, as Go's runtime counts it: dedicated workers and assists
        # (its idle mark workers only take Ps nothing else wanted).
        gc = result.metric("go_cpu_classes_gc_total_cpu_seconds_total").reindex(cpu.index).fillna(0)
        gc = gc - result.metric("go_cpu_classes_gc_mark_idle_cpu_seconds_total").reindex(cpu.index).fillna(0)
        t = cpu.index.to_numpy()
        if len(t) > 1:
            dt = np.diff(t)
            ax.plot(t[1:], np.diff(cpu.values) / dt, label="process CPU")
            ax.plot(t[1:], np.diff(gc.values) / dt, label="GC (dedicated + assists)", alpha=0.8)
    ax.axhline(summary.cpu.cores, color="grey", linestyle=":", linewidth=1, label="cores")
    _interval_band(ax, summary.cpu.interval("mean_cores"), 1.0, "mean CPU")
    ax.set_ylabel("cores")
    ax.set_title("CPU per replica" if replicas else "CPU")
    ax.legend(loc="upper left", fontsize="small")

    ax = axes[2]
    if replicas:
        ax.text(0.99, 0.95, "summed over the replicas", transform=ax.transAxes, ha="right", va="top", fontsize="small")
    seats = result.wide("apiserver_flowcontrol_current_executing_seats")
    queued = result.wide("apiserver_flowcontrol_current_inqueue_requests")
    for i, level in enumerate(_busy_levels(result, "apiserver_flowcontrol_current_executing_seats")):
        color = f"C{i % 10}"
        ax.plot(seats.index, seats[level], color=color, label=f"{level} seats")
        if level in queued and queued[level].max() > 0:
            ax.plot(queued.index, queued[level], color=color, linestyle="--", label=f"{level} queued")
    ax.set_ylabel("seats / requests")
    ax.set_title("Executing seats (solid) and queued requests (dashed) per priority level")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize="small", ncol=2)

    ax = axes[3]
    rate = result.rate("apiserver_flowcontrol_rejected_requests_total")
    for i, level in enumerate(rate.columns):
        ax.plot(rate.index, rate[level], label=level, color=f"C{i % 10}")
    # 429s that APF did not send: a watch cache refilling after a restart turns LISTs away.
    codes = result.rate("apiserver_request_total", by="code")
    if "429" in codes.columns:
        others = (codes["429"] - rate.sum(axis=1).reindex(codes.index, fill_value=0.0)).clip(lower=0.0)
        if (others > 1e-9).any():
            ax.plot(others.index, others, label="watch cache not ready", color="black", ls=":")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize="small")
    ax.set_ylabel("per second")
    ax.set_title("Rejected requests (429): per priority level, and by a watch cache not ready")
    ax.set_xlabel("time (s)" if summary.measured else "simulated time (s)")

    # The process down (an OOM kill, a restart): shaded red on every panel (with replicas: all of them).
    up = result.metric("up")
    if len(up) and (up < 0.5).any():
        t_up = up.index.to_numpy()
        down = (up.to_numpy() < 0.5).astype(int)
        edges = np.flatnonzero(np.diff(np.concatenate(([0], down, [0]))))
        for start, stop in zip(edges[::2], edges[1::2]):
            for a in axes:
                a.axvspan(t_up[start], t_up[min(stop, len(t_up) - 1)], color="#D55E00", alpha=0.12, lw=0)
        axes[0].annotate("down", (t_up[edges[0]], 0.02), xycoords=("data", "axes fraction"), fontsize="small")
    for e in summary.events:
        for a in axes:
            a.axvline(e.at_s, color="black", alpha=0.4, linewidth=1)
            if e.end_s > e.at_s:
                a.axvspan(e.at_s, e.end_s, color="black", alpha=0.06)
        axes[0].annotate(e.kind, (e.at_s, 1.0), xycoords=("data", "axes fraction"),
                         fontsize="small", va="top", rotation=90)  # fmt: skip
    if summary.measured and summary.bench is not None:
        fig.suptitle(f"{summary.scenario_name} (measured on kube-apiserver {summary.bench.versions['kube-apiserver']}, "
                     f"simapf {summary.simapf_version})")  # fmt: skip
    else:
        fig.suptitle(f"{summary.scenario_name} (seed {summary.seed}, simapf {summary.simapf_version})")
    return fig


def save_figure(fig: "Figure", stem: str | Path, provenance: dict | None = None) -> None:
    """Write `stem`.png and `stem`.svg, and with a provenance record (simapf.provenance) put it
    in both files' metadata (a PNG text chunk, the SVG's dc:description) and beside them as
    `stem`.provenance.json. Nothing in them changes from one save to the next: the same figure
    and record give the same bytes."""
    import matplotlib

    from simapf.provenance import figure_metadata

    stem = Path(stem)
    record = provenance or {}
    with matplotlib.rc_context({"svg.hashsalt": "simapf"}):  # stable ids in the SVG
        fig.savefig(stem.with_suffix(".png"), dpi=110, metadata=figure_metadata(record, "png") if record else None)
        fig.savefig(stem.with_suffix(".svg"), metadata=figure_metadata(record, "svg") if record else {"Date": None})
    if record:
        stem.with_name(stem.name + ".provenance.json").write_text(json_text(record, indent=2, sort_keys=True) + "\n")
