"""`simapf figures SPEC.yaml --out DIR`: figures for a KEP, from a spec, with their provenance.

A spec lists figures; each says what to run and what to draw:

    name: relist-storm                       # the spec's name
    figures:
      - name: storm-memory                   # file stem: storm-memory.png/.svg/.pdf
        kind: timeseries                     # memory, CPU, seats... over simulated time
        scenario: ../scenarios/relist-storm.yaml
        set: {run.duration_s: 420}           # as `simapf run --set`
        metrics: [memory, seats]             # one panel each (see PANELS)
      - name: storm-policies
        kind: policies                       # a bar per policy, mean and 95 % interval
        scenario: ../scenarios/relist-storm.yaml
        policies: [upstream, streamed-cache-cap]
        replications: 3
        metrics: [peak_rss_bytes, p99_s/workload-low/list]
      - name: cap-sweep
        kind: sweep                          # a sweep's response, mean and 95 % interval
        sweep: ../sweeps/some-sweep.yaml
        x: apf.estimator.list_params.max_list_seats
        y: [peak_rss_bytes]
      - name: calibration
        kind: calibration                    # the fitted LIST experiment against the model
      - name: model-vs-measured
        kind: validation                     # the published measurements against the model

Every figure is written as PNG, SVG and PDF at a KEP's size (8 x 4.5 inches per panel row, 100
dpi: 800 px wide), in simapf's colour-blind-safe house style (simapf.outputs.style), with units on every
axis and the scenario's events shaded. Its provenance (simapf.provenance: version, commit,
hashes of the resolved scenario, the calibration and the model's source, seeds, replications) goes into each
file's metadata and beside them as `<name>.provenance.json`, with the spec and the figure it
came from, so `simapf figures --check DIR` can tell whether the figures are still current. The
same spec and seeds give byte-identical PNG and SVG files.

Before the first figure, `make` says how many runs the figures take and about how long
(simapf.jobs.estimate). With a time budget (simapf.jobs.budget) it stops once the budget is spent,
inside a figure's runs too (those finished are kept in the result cache, so the next call does
not run them again; with the cache off, between figures): the figures made so far are written
(the directory's other figures are kept, as with `--only`), and the figures left are made by
the same command with `--only` each of them.

The simulations a figure rests on are read from the result cache (simapf.simulation.cache) when it holds
them, so redrawing figures after a change of style runs none again; each figure's log line
says how many of its runs came from the cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simapf.errors import ConfigError
from simapf.files import json_text, read_text, read_yaml
from simapf.messages import describe
from simapf.schema.summary import Summary

KEP_WIDTH_IN = 8.0  # 800 px at 100 dpi: a KEP's figure width
ROW_HEIGHT_IN = 3.0
DPI = 100
FORMATS = ("png", "svg", "pdf")

# Time-series panels: metric, how to read it, the axis label (with its unit).
PANELS: dict[str, tuple[str, str, str]] = {
    "memory": ("process_resident_memory_bytes", "gib", "RSS (GiB)"),
    "heap": ("go_memstats_heap_inuse_bytes", "gib", "Go heap in use (GiB)"),
    "cpu": ("process_cpu_seconds_total", "rate", "CPU (cores)"),
    "seats": ("apiserver_flowcontrol_current_executing_seats", "by_level", "executing seats"),
    "queued": ("apiserver_flowcontrol_current_inqueue_requests", "by_level", "requests in queue"),
    "rejected": ("apiserver_flowcontrol_rejected_requests_total", "rate_by_level", "429s per second"),
    "connections": ("simapf_client_connections", "by_replica", "client connections"),
}
PANEL_NAMES = Literal["memory", "heap", "cpu", "seats", "queued", "rejected", "connections"]


# A figure's name is its files' name (with .provenance.json, under the 255 bytes of a file name);
# a spec's lists (figures, policies, panels, overlays) are at most MAX_FIGURE_ITEMS long, and any
# text at most MAX_TEXT_LENGTH characters.
MAX_FIGURE_NAME_LENGTH = 200
MAX_FIGURE_ITEMS = 100
MAX_TEXT_LENGTH = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", str_max_length=MAX_TEXT_LENGTH)


class Alignment(_Model):
    """Which real instant is which simulated one."""

    measured_at_unix_s: float = Field(..., description="The real instant (Unix seconds), e.g. when the outage began.")
    event: int | None = Field(None, ge=0, description="The scenario event (index in `events`) it corresponds to.")
    at_s: float | None = Field(None, ge=0, description="Or a simulated time in seconds (default 0 without `event`).")


class Overlay(_Model):
    """A real cluster's Prometheus data on one panel of a timeseries figure (simapf.outputs.overlay)."""

    file: str = Field(..., description="A query_range JSON export or an OpenMetrics file, relative to the spec.")
    panel: PANEL_NAMES
    metric: str | None = Field(None, description="Only this metric of the file; null: all of it.")
    align: Alignment
    label: str = "measured"


class TimeseriesFigure(_Model):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_FIGURE_NAME_LENGTH)
    kind: Literal["timeseries"]
    scenario: str | None = Field(None, description="A scenario file (relative to the spec); null: the built-in default.")
    set: dict[str, Any] = Field(default_factory=dict)
    metrics: list[PANEL_NAMES] = Field(
        ["memory", "seats"], min_length=1, max_length=MAX_FIGURE_ITEMS,
        description="Panels, top to bottom. With several apiserver replicas, memory, heap, CPU and connections show each replica.",
    )
    overlay: list[Overlay] = Field(default_factory=list, max_length=MAX_FIGURE_ITEMS, description="Real measurements drawn on the panels.")
    title: str | None = None


class PoliciesFigure(_Model):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_FIGURE_NAME_LENGTH)
    kind: Literal["policies"]
    scenario: str | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    policies: list[str] = Field(..., min_length=2, max_length=MAX_FIGURE_ITEMS)
    replications: int = Field(3, ge=1, le=100)
    metrics: list[str] = Field(["peak_rss_bytes"], min_length=1, max_length=MAX_FIGURE_ITEMS)
    title: str | None = None


class SweepFigure(_Model):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_FIGURE_NAME_LENGTH)
    kind: Literal["sweep"]
    sweep: str = Field(..., description="A sweep file (relative to the spec).")
    x: str = Field(..., description="The factor on the x axis.")
    y: list[str] = Field(..., min_length=1, max_length=MAX_FIGURE_ITEMS, description="Metrics, one panel each.")
    hue: str | None = Field(None, description="A factor drawn as one line per level.")
    title: str | None = None


class CalibrationFigure(_Model):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_FIGURE_NAME_LENGTH)
    kind: Literal["calibration"]
    title: str | None = None


class ValidationFigure(_Model):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=MAX_FIGURE_NAME_LENGTH)
    kind: Literal["validation"]
    title: str | None = None


Figure = Annotated[Union[TimeseriesFigure, PoliciesFigure, SweepFigure, CalibrationFigure, ValidationFigure],
                   Field(discriminator="kind")]


class FigureSpec(_Model):
    name: str
    description: str = ""
    figures: list[Figure] = Field(..., min_length=1, max_length=MAX_FIGURE_ITEMS)


def load_spec(path: str | Path) -> tuple[FigureSpec, Path]:
    path = Path(path)
    data = read_yaml(path)
    try:
        spec = FigureSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe(exc, FigureSpec)}") from None
    names = [f.name for f in spec.figures]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{path}: figures: the name {dupes[0]!r} is used twice")
    return spec, path.resolve().parent


# ------------------------------------------------------------------------------ what a figure rests on


def _scenario(fig: TimeseriesFigure | PoliciesFigure, base: Path):
    from simapf.scenario import default_scenario_path, load_scenario

    path = base / fig.scenario if fig.scenario else default_scenario_path()
    return load_scenario(path, fig.set)


# What every figure rests on, whatever its kind: `--check` finds a figure stale when one is
# missing from its provenance (a figure made before it was recorded) or differs.
RESTS_ON = ("scenario_sha256", "calibration_sha256", "sources_sha256")
CHANGED = {"sources_sha256": "model's source"}  # how a verdict names what changed, where not by its key


def inputs(fig: Figure, base: Path) -> dict[str, Any]:
    """What a figure rests on, hashed without running anything: the resolved scenario (or sweep),
    the calibration, and the model's source (the digest the result cache keys its runs on,
    `simapf.simulation.cache.source_digest`). `--check` compares these with the figure's provenance."""
    from simapf.simulation.cache import source_digest

    return {**_inputs(fig, base), "sources_sha256": source_digest()}


def _inputs(fig: Figure, base: Path) -> dict[str, Any]:
    from simapf.provenance import canonical_sha256

    if isinstance(fig, (TimeseriesFigure, PoliciesFigure)):
        loaded = _scenario(fig, base)
        found = {"scenario_sha256": canonical_sha256(loaded.scenario.model_dump(mode="json")),
                 "calibration_sha256": canonical_sha256(loaded.params.record_dump())}  # fmt: skip
        if isinstance(fig, TimeseriesFigure) and fig.overlay:
            import hashlib

            from simapf.files import MAX_METRICS_BYTES, read_text

            # The measured data a figure shows is one of its inputs: a new export makes it stale.
            found["overlay_sha256"] = canonical_sha256([hashlib.sha256(read_text(base / o.file, MAX_METRICS_BYTES, "a metrics file").encode()).hexdigest()
                                                        for o in fig.overlay])  # fmt: skip
        return found
    if isinstance(fig, SweepFigure):
        from simapf.server import ServerParams
        from simapf.sweeps.spec import load_sweep_spec

        sweep = load_sweep_spec(base / fig.sweep)
        return {"scenario_sha256": canonical_sha256({"base": sweep.base, "factors": sweep.spec.factors,
                                                     "replications": sweep.spec.replications, "seed": sweep.spec.seed}),
                "calibration_sha256": canonical_sha256(ServerParams().record_dump())}  # fmt: skip
    from simapf.server import ServerParams

    if isinstance(fig, CalibrationFigure):
        from simapf.calibrate.data import DEFAULT_DATA
        from simapf.calibrate.record import SHIPPED, read_record

        return {"scenario_sha256": canonical_sha256(DEFAULT_DATA.read_text()),
                "calibration_sha256": canonical_sha256(read_record(SHIPPED))}  # fmt: skip
    from simapf.calibrate.published import TABLE, load_table

    return {"scenario_sha256": canonical_sha256(load_table(TABLE)),
            "calibration_sha256": canonical_sha256(ServerParams().record_dump())}  # fmt: skip


# ------------------------------------------------------------------------------ drawing


def _new_figure(rows: int):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure as MplFigure

    import simapf.outputs.style

    matplotlib.rcParams.update(simapf.outputs.style.RC)
    fig = MplFigure(figsize=(KEP_WIDTH_IN, 1.2 + ROW_HEIGHT_IN * rows), dpi=DPI, layout="constrained")
    return fig, fig.subplots(rows, 1, squeeze=False)[:, 0]


def _time_axis(ax, duration_s: float) -> float:
    """Label the time axis in minutes for long runs, seconds otherwise; returns the divisor."""
    if duration_s > 600:
        ax.set_xlabel("simulated time (min)")
        return 60.0
    ax.set_xlabel("simulated time (s)")
    return 1.0


def _draw_overlay(ax, o: Overlay, base: Path, summary: Summary, how: str, div: float) -> None:
    """Real measurements on a panel: GiB for memory panels, counters as rates for rate panels."""
    from simapf.outputs import overlay

    if o.align.event is not None:
        if o.align.event >= len(summary.events):
            raise ConfigError(f"overlay {o.file}: align.event {o.align.event}: the scenario has "
                              f"{len(summary.events)} event(s)")  # fmt: skip
        at_s = summary.events[o.align.event].at_s
    else:
        at_s = o.align.at_s or 0.0
    measured = overlay.align(overlay.load_measured(base / o.file), o.align.measured_at_unix_s, at_s)
    counter = (o.metric or "").endswith("_total")
    drawn = overlay.plot(ax, measured, o.metric, scale=1 / 2**30 if how == "gib" else 1.0,
                         rate=counter and how in ("rate", "rate_by_level"), label=o.label, time_div=div)  # fmt: skip
    if not drawn:
        raise ConfigError(f"overlay {o.file}: no series{f' named {o.metric!r}' if o.metric else ''} in it")


def draw_timeseries(fig_spec: TimeseriesFigure, base: Path):
    import numpy as np

    import simapf.outputs.style
    from simapf.simulation.runner import run

    loaded = _scenario(fig_spec, base)
    result = run(loaded)
    s = result.typed
    fig, axes = _new_figure(len(fig_spec.metrics))
    div = 1.0
    replicas = len(s.replicas) > 1
    for ax, key in zip(axes, fig_spec.metrics):
        metric, how, label = PANELS[key]
        if replicas and how in ("gib", "rate", "by_replica"):
            div = _time_axis(ax, s.duration_s)
            _per_replica(ax, result, metric, how, div)
            limit = s.memory.memory_limit_bytes
            if how == "gib" and limit:
                ax.axhline(limit / 2**30, color=simapf.outputs.style.COLORS["limit"], ls="--", label="memory limit (each)")
        elif how == "by_replica":
            ax.text(0.5, 0.5, "one replica: every connection goes to it", transform=ax.transAxes, ha="center", color="grey")
        elif how == "gib":
            series = result.metric(metric)
            div = _time_axis(ax, s.duration_s)
            ax.plot(series.index / div, series.to_numpy() / 2**30, color=simapf.outputs.style.COLORS["memory"], label=label)
            limit = s.memory.memory_limit_bytes
            if limit:
                ax.axhline(limit / 2**30, color=simapf.outputs.style.COLORS["limit"], ls="--", label="memory limit")
        elif how == "rate":
            series = result.metric(metric)
            t = series.index.to_numpy()
            div = _time_axis(ax, s.duration_s)
            if len(t) > 1:
                ax.plot(t[1:] / div, np.diff(series.to_numpy()) / np.diff(t), color=simapf.outputs.style.COLORS["cpu"], label=label)
        else:
            wide = result.rate(metric) if how == "rate_by_level" else result.wide(metric)
            busy = wide.max().sort_values(ascending=False)
            busy = list(busy[busy > 0].index[:6])
            div = _time_axis(ax, s.duration_s)
            for level in busy:
                ax.plot(wide.index / div, wide[level].to_numpy(), label=level)
            if not busy:
                ax.text(0.5, 0.5, "none in this run", transform=ax.transAxes, ha="center", color="grey")
        ax.set_ylabel(label)
        for o in fig_spec.overlay:
            if o.panel == key:
                _draw_overlay(ax, o, base, s, how, div)
        for e in s.events:
            ax.axvspan(e.at_s / div, e.end_s / div, color="grey", alpha=0.15, lw=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    for ax in axes[:-1]:
        ax.set_xlabel("")
    fig.suptitle(fig_spec.title or f"{s.scenario_name} (seed {s.seed})")
    return fig, [s.seed], 1


def _per_replica(ax, result, metric: str, how: str, div: float) -> None:
    """A line per apiserver replica; on memory, a cross where each process died."""
    import numpy as np

    wide = result.wide(metric, by="replica")
    for i, replica in enumerate(wide.columns):
        values = wide[replica].dropna()
        t = values.index.to_numpy()
        if how == "rate":
            if len(t) > 1:
                ax.plot(t[1:] / div, np.diff(values.to_numpy()) / np.diff(t), color=f"C{i}", label=f"replica {replica}")
            continue
        scale = 2**30 if how == "gib" else 1.0
        ax.plot(t / div, values.to_numpy() / scale, color=f"C{i}", label=f"replica {replica}")
    if metric == "process_resident_memory_bytes":
        from simapf.outputs.figures import death_points

        for replica, at_s, rss_bytes in death_points(result):
            ax.plot([at_s / div], [rss_bytes / 2**30], "x", color=f"C{replica}", markersize=9, markeredgewidth=2)


def _unit(metric: str) -> tuple[float, str]:
    if metric.endswith("_bytes"):
        return 2**30, "GiB"
    if metric.endswith("_per_s"):
        return 1.0, "per s"
    if metric.startswith(("p50_s/", "p90_s/", "p99_s/")) or metric.endswith("_s"):
        return 1.0, "s"
    if "rate" in metric:
        return 1.0, "fraction"
    if "cores" in metric:
        return 1.0, "cores"
    if "seats" in metric:
        return 1.0, "seats"
    if "per_s" in metric:
        return 1.0, "per s"
    return 1.0, "count"


def _interval(values) -> tuple[float, float]:
    """Mean and the half-width of its 95 % Student interval (0 with one value)."""
    import numpy as np
    from scipy import stats

    v = np.asarray([x for x in values if x == x], dtype=float)
    if len(v) < 2:
        return (float(v.mean()) if len(v) else float("nan")), 0.0
    return float(v.mean()), float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))


def draw_policies(fig_spec: PoliciesFigure, base: Path):
    import simapf.outputs.style
    from simapf.comparison import compare

    loaded = _scenario(fig_spec, base)
    cmp = compare(loaded, fig_spec.policies, replications=fig_spec.replications, workers=1)
    fig, axes = _new_figure(len(fig_spec.metrics))
    runs = cmp.runs
    for ax, metric in zip(axes, fig_spec.metrics):
        if metric not in runs.columns:
            raise ConfigError(f"figure {fig_spec.name}: no metric {metric!r} in these runs; "
                              f"some there are: {', '.join(sorted(c for c in runs.columns if '/' not in c)[:12])}")  # fmt: skip
        scale, unit = _unit(metric)
        for i, (policy, color) in enumerate(zip(cmp.policies, simapf.outputs.style.OKABE_ITO * 4)):
            mean, half = _interval(runs.loc[runs["policy"] == policy, metric] / scale)
            ax.bar(i, mean, yerr=half, color=color, capsize=4, alpha=0.85)
        ax.set_xticks(range(len(cmp.policies)), cmp.policies, rotation=15, ha="right", fontsize=8)
        ax.set_ylabel(f"{metric} ({unit})")
        if metric == "peak_rss_bytes" and cmp.memory_limit_bytes:
            ax.axhline(cmp.memory_limit_bytes / scale, color=simapf.outputs.style.COLORS["limit"], ls="--", label="memory limit")
            ax.legend(fontsize=8)
    fig.suptitle(fig_spec.title or f"{cmp.scenario_name}: mean and 95 % interval of {fig_spec.replications} "
                 "replications per policy, common random numbers")  # fmt: skip
    return fig, cmp.seeds, fig_spec.replications


def draw_sweep(fig_spec: SweepFigure, base: Path):
    import simapf.outputs.style
    from simapf.sweeps import sweep
    from simapf.sweeps.spec import load_sweep_spec

    loaded = load_sweep_spec(base / fig_spec.sweep)
    for factor in [fig_spec.x] + ([fig_spec.hue] if fig_spec.hue else []):
        if factor not in loaded.spec.factors:
            raise ConfigError(f"figure {fig_spec.name}: {factor!r} is not a factor of {fig_spec.sweep}")
    df = sweep(loaded, None, workers=1)
    fig, axes = _new_figure(len(fig_spec.y))
    groups = [(None, df)] if not fig_spec.hue else list(df.groupby(fig_spec.hue, sort=True))
    for ax, metric in zip(axes, fig_spec.y):
        if metric not in df.columns:
            raise ConfigError(f"figure {fig_spec.name}: no metric {metric!r} in the sweep's results")
        scale, unit = _unit(metric)
        for (level, part), color in zip(groups, simapf.outputs.style.OKABE_ITO * 4):
            xs, means, halves = [], [], []
            for x, g in part.groupby(fig_spec.x, sort=True):
                mean, half = _interval(g[metric] / scale)
                xs.append(x), means.append(mean), halves.append(half)
            ax.errorbar(xs, means, yerr=halves, fmt="o-", color=color, capsize=3,
                        label=f"{fig_spec.hue} = {level}" if fig_spec.hue else None)  # fmt: skip
        ax.set_ylabel(f"{metric} ({unit})")
        ax.set_xlabel(fig_spec.x)
        if fig_spec.hue:
            ax.legend(fontsize=8)
    seeds = sorted(int(s) for s in df["seed"].unique()) if "seed" in df.columns else []
    fig.suptitle(fig_spec.title or f"{loaded.spec.name}: mean and 95 % interval of {loaded.spec.replications} replications")
    return fig, seeds, loaded.spec.replications


def draw_calibration(fig_spec: CalibrationFigure, base: Path):
    from simapf.calibrate.data import load_rows
    from simapf.calibrate.grid import Simulator
    from simapf.calibrate.record import load_params
    from simapf.calibrate.report import calibration_figure, evaluate

    params, setup, _record = load_params()
    rows = load_rows()
    with Simulator() as sim:
        results = evaluate(rows, params, setup, sim)
    fig = calibration_figure(rows, results)
    fig.suptitle(fig_spec.title or "simapf against the LIST experiment it was fitted to (kubernetes#132233)")
    return fig, [setup.seed], 1


def draw_validation(fig_spec: ValidationFigure, base: Path):
    import numpy as np

    import simapf.outputs.style
    from simapf.calibrate import published

    table = published.run_table()  # deterministic whatever the workers: every core
    fig, axes = _new_figure(1)
    ax = axes[0]
    ok = table["within"].to_numpy()
    err = table["error"].clip(-1.0, 3.0).to_numpy()
    order = np.argsort(err)
    colors = [simapf.outputs.style.COLORS["model"] if ok[i] else simapf.outputs.style.COLORS["limit"] for i in order]
    ax.barh(range(len(order)), err[order], color=colors)
    ax.axvspan(-0.3, 0.3, color="grey", alpha=0.15, lw=0)
    ax.set_yticks(range(len(order)), table["id"].to_numpy()[order], fontsize=5)
    ax.set_xlabel("predicted / measured − 1 (clipped at +300 %); blue: within the row's tolerance")
    fig.set_size_inches(KEP_WIDTH_IN, max(7.0, 1.0 + 0.1 * len(order)))  # a row's label needs ~0.1 in
    fig.suptitle(fig_spec.title or "simapf against published measurements it was not fitted to")
    return fig, [], 1


# ------------------------------------------------------------------------------ make and check


def save(fig, stem: Path, record: dict[str, Any]) -> list[Path]:
    """PNG, SVG and PDF with `record` in their metadata and beside them."""
    import matplotlib

    from simapf.provenance import figure_metadata

    paths = []
    with matplotlib.rc_context({"svg.hashsalt": "simapf"}):
        for fmt in FORMATS:
            path = stem.with_suffix(f".{fmt}")
            fig.savefig(path, dpi=DPI, metadata=figure_metadata(record, fmt))
            paths.append(path)
    side = stem.with_name(stem.name + ".provenance.json")
    side.write_text(json_text(record, indent=2, sort_keys=True) + "\n")
    return paths + [side]


DRAW = {TimeseriesFigure: draw_timeseries, PoliciesFigure: draw_policies, SweepFigure: draw_sweep,
        CalibrationFigure: draw_calibration, ValidationFigure: draw_validation}  # fmt: skip


def planned_runs(fig: Figure, base: Path) -> Any:
    """The runs a figure rests on, as a `simapf.jobs.estimate.Stage` (for the estimate of its time)."""
    from simapf.jobs.estimate import Runs, Stage
    from simapf.sweeps.backends import cpu_count

    if isinstance(fig, TimeseriesFigure):
        return Stage([Runs(_scenario(fig, base))])
    if isinstance(fig, PoliciesFigure):
        from simapf.comparison.policies import parse_policy
        from simapf.scenario import load_scenario

        loaded = _scenario(fig, base)
        return Stage([Runs(load_scenario(loaded.scenario, parse_policy(p).overrides(), base_dir=loaded.base_dir),
                           fig.replications) for p in fig.policies])  # fmt: skip
    if isinstance(fig, SweepFigure):
        from simapf.sweeps.spec import load_sweep_spec

        sweep = load_sweep_spec(base / fig.sweep)
        return Stage([Runs(c.loaded, sweep.spec.replications) for c in sweep.combinations])
    if isinstance(fig, CalibrationFigure):
        from simapf.calibrate.data import cells, load_rows
        from simapf.calibrate.record import load_params
        from simapf.calibrate.scenario import scenario_for
        from simapf.scenario import load_scenario

        params, setup, _record = load_params()
        return Stage([Runs(load_scenario(scenario_for(c, params, setup))) for c in cells(load_rows())], cpu_count())
    from simapf.calibrate.published import table_runs

    return Stage([Runs(loaded, n) for loaded, n in table_runs()], cpu_count())


def make(spec_path: str | Path, out_dir: str | Path, only: list[str] | None = None, force: bool = False,
         log=lambda m: None, budget: Any = None, announce=None) -> list[Path]:  # fmt: skip
    """Make the spec's figures (or those named in `only`) in `out_dir`; returns the files.

    `announce`: called, before the first figure, with a line that says how many runs the
    figures take and about how long (simapf.jobs.estimate). `budget` (simapf.jobs.budget.Budget): once it
    is spent, stop (inside a figure's runs, those finished kept in the result cache; with the
    cache off, once the figure being made is finished), write the figures made, and raise
    `simapf.jobs.budget.BudgetReached`, whose `resume` options (`--only` each figure left) make the
    rest."""
    from simapf.simulation import cache
    from simapf.jobs.budget import Budget, Spent
    from simapf.jobs.estimate import recorded
    from simapf.files import output_directory
    from simapf.provenance import build_record

    budget = budget or Budget()

    spec, base = load_spec(spec_path)
    wanted = [f for f in spec.figures if not only or f.name in only]
    missing = sorted(set(only or []) - {f.name for f in spec.figures})
    if missing:
        raise ConfigError(f"{spec_path}: no figure named {missing[0]!r}")
    # Every figure's inputs are read before any is drawn: a bad one fails at once, not after
    # the figures before it have run their simulations.
    for i, f in enumerate(spec.figures):
        if f in wanted:
            try:
                inputs(f, base)
            except ConfigError as err:
                raise ConfigError(f"{spec_path}: figures[{i}] ({f.name}): {err}") from None
    out = Path(out_dir)
    written: list[Path] = []
    left: list[Figure] = []
    cut = None  # the figure a budget stopped inside, if it did
    # A budget stops inside a figure only where the runs it finished are kept for the next
    # call (the result cache); without it, between figures.
    inside = budget.applied() if cache.active() is not None else contextlib.nullcontext()
    # Making some of the figures updates them and keeps the others; so does a budget's stop.
    started = time.monotonic()
    with output_directory(out, "figures", force, keep_earlier=lambda: bool(only) or bool(left)) as tmp, inside, \
            recorded() as pace:  # fmt: skip
        if announce is not None:
            _announce(spec, wanted, base, budget, announce, pace)
        for i, f in enumerate(wanted, 1):
            if budget.may_stop():  # every call gets something done: it always gets on
                left = wanted[i - 1 :]
                break
            # Which figure runs now and how long each took: one may take minutes (its
            # simulations), and nothing else is said while it runs.
            log(f"figure {i}/{len(wanted)} {f.name} ({f.kind})...")
            began = time.monotonic()
            runs_before = cache.tally.snapshot()
            try:
                fig, seeds, reps = DRAW[type(f)](f, base)
            except Spent:
                log(f"figure {i}/{len(wanted)} {f.name}: stopped by the budget, {_runs_since(runs_before)}kept in the "
                    "result cache")  # fmt: skip
                left = wanted[i - 1 :]
                cut = f.name
                break
            # The spec is recorded relative to the figures' directory, so a checkout elsewhere
            # (or a clone of the repository) can still check them.
            spec_rel = os.path.relpath(Path(spec_path).resolve(), out.resolve())
            record = {**build_record(seeds, reps), **inputs(f, base),  # the hashes of what it rests on
                      "spec": spec_rel, "figure": f.name}  # fmt: skip
            written += [out / p.name for p in save(fig, tmp / f.name, record)]
            budget.progressed()
            log(f"figure {i}/{len(wanted)} {f.name}: {_runs_since(runs_before)}{_seconds(time.monotonic() - began)} "
                f"({_seconds(time.monotonic() - started)} so far)")  # fmt: skip
    if left:
        resume = [a for f in left for a in ("--only", f.name)]
        kept = str(out) + (f", the runs of {cut} finished so far in the result cache" if cut else "")
        raise budget.reached(f"figures {spec.name}", len(wanted) - len(left), len(wanted), "figures", kept=kept,
                             left_s=_left_s(left, base, pace), resume=resume)  # fmt: skip
    return written


def _left_s(left: list[Figure], base: Path, pace: Any) -> float | None:
    """About how long the figures left take (the runs the cache holds counted as any other)."""
    from simapf.errors import SimapfError
    from simapf.jobs.estimate import estimate

    try:
        return estimate([planned_runs(f, base) for f in left], pace).seconds
    except SimapfError:
        return None


def _announce(spec: FigureSpec, wanted: list[Figure], base: Path, budget: Any, announce, pace: Any) -> None:
    """Say how many runs the figures take and how long. A figure whose runs cannot be planned
    says why when it is drawn, as it did before there were estimates."""
    from simapf.errors import SimapfError
    from simapf.jobs.estimate import estimate

    try:
        stages = [planned_runs(f, base) for f in wanted]
    except SimapfError:
        return
    found = estimate(stages, pace)
    planned = f"about {found.runs:,} runs for {len(wanted)} figure{'s' if len(wanted) != 1 else ''}"
    announce(found.line(f"figures {spec.name}", planned, budget))


def _runs_since(before: tuple[int, int]) -> str:
    """The simulations a figure rested on, and how many of them the result cache held."""
    from simapf.simulation import cache

    reused, ran = (now - then for now, then in zip(cache.tally.snapshot(), before))
    runs = reused + ran
    if not runs:
        return ""
    what = f"{runs} run{'s' if runs > 1 else ''}"
    if reused == runs:
        return f"{what} from the cache, "
    return f"{what} ({reused} from the cache), " if reused else f"{what}, "


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _provenance_record(side: Path) -> dict[str, Any]:
    """A figure's provenance file as `make` writes it: one line naming it otherwise."""
    try:
        record = json.loads(read_text(side))
    except ValueError as err:
        raise ConfigError(f"{side}: not a provenance record simapf wrote ({err})") from None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("spec", "figure")):
        raise ConfigError(f"{side}: not a provenance record simapf wrote (it names no spec and figure)")
    return record


def check(out_dir: str | Path) -> list[tuple[str, str]]:
    """Each figure of `out_dir` with its verdict: `current`, or why it is stale (its spec, its
    figure, its scenario, its calibration, the model's source or the measured data it overlays
    changed)."""
    verdicts = []
    out = Path(out_dir)
    sides = sorted(out.glob("*.provenance.json"))
    if not sides:
        raise ConfigError(f"{out}: no figures with provenance here")
    for side in sides:
        name = side.name.removesuffix(".provenance.json")
        record = _provenance_record(side)
        spec_path = (out / record["spec"]).resolve()
        if not spec_path.is_file():
            verdicts.append((name, f"stale: its spec {spec_path} is gone"))
            continue
        spec, base = load_spec(spec_path)
        fig = next((f for f in spec.figures if f.name == record.get("figure")), None)
        if fig is None:
            verdicts.append((name, f"stale: {spec_path.name} no longer has a figure {record.get('figure')!r}"))
            continue
        now = inputs(fig, base)
        changed = [CHANGED.get(k, k.removesuffix("_sha256")) for k in sorted(set(now) | set(RESTS_ON))
                   if now.get(k) != record.get(k)]  # fmt: skip
        verdicts.append((name, "current" if not changed else f"stale: its {' and '.join(changed)} changed"))
    return verdicts
