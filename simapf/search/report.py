"""What a search found: the best settings, every trial, the settings compared with, the Pareto
front of memory against the objective, as tables, text, YAML and a figure.

Files written to the result directory (each atomically, replaced when the search is resumed):

    best.yaml      the best feasible settings, as `set:` a scenario, sweep or search can use
    trials.csv     one row per trial: state, feasible, objective, worst peak RSS, settings
    compare.csv    the settings compared with (by default every shipped LIST policy)
    optimize.txt   the report `simapf optimize` prints
    pareto.png/.svg  worst-case peak RSS against the objective, every trial and compared setting
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simapf.files import write_text_atomic
from simapf.search.scores import Evaluation, largest, objective_value, rank, violations
from simapf.search.spec import LoadedOptimization

GiB = float(1 << 30)
# The one line of the report that depends on the machine and on what an earlier call already ran.
RAN_PREFIX = "ran "


@dataclass
class OptimizeResult:
    name: str
    source: str
    metric: str  # the objective's metric
    minimize: bool
    aggregate: str  # how the runs' values make the objective, in words
    constraints: list[str]  # in words
    memory_bound_bytes: float | None  # a constraint's max on peak_rss_bytes, if any
    trials: pd.DataFrame  # one row per trial
    compare: pd.DataFrame  # one row per compared setting
    best: dict[str, Any] | None  # trial, objective, peak_rss_bytes, settings; None: no feasible trial
    runs_per_trial: int
    runs_ran: int  # runs this call ran (the rest came from the directory)
    backend: str
    wall_s: float
    out: Path | None
    waiting: int = 0  # trials an interruption cut short, asked again and waiting for a larger --trials
    no_best: str = ""  # with no best: why not

    @classmethod
    def build(cls, loaded: LoadedOptimization, study, compared: dict[str, Evaluation], runs_ran: int,
              out: Path | None, backend: str, wall_s: float) -> "OptimizeResult":  # fmt: skip
        """From the Optuna study and the compared settings' evaluations."""
        s = loaded.spec
        metric = s.objective.metric
        rows, settings, waiting = [], {}, 0
        for t in study.get_trials(deepcopy=False):
            state = {"COMPLETE": "complete", "PRUNED": "stopped early", "FAIL": "failed"}.get(t.state.name)
            if state is None or (state == "failed" and "error" not in t.user_attrs):
                # Cut short by an interrupted search (failed without an error of its own), or
                # asked again and not yet run: no verdict, and not a trial of the report.
                waiting += t.state.name == "WAITING"
                continue
            if state == "stopped early":
                value = t.intermediate_values[max(t.intermediate_values)] if t.intermediate_values else math.nan
            else:
                value = t.value if t.value is not None else math.nan
            settings[t.number] = {k: _plain(t.params[k]) for k in s.parameters if k in t.params}
            rows.append({
                # Feasible: every run done and every constraint kept in each.
                "trial": t.number, "state": state,
                "feasible": state == "complete" and bool(t.user_attrs.get("feasible", False)),
                "objective": value, "peak_rss_bytes": _nan(t.user_attrs.get("worst:peak_rss_bytes")),
                "runs": len(t.user_attrs.get("runs", [])), "pareto": False,
                **{f"worst:{c.metric}": _nan(t.user_attrs.get(f"worst:{c.metric}")) for c in s.constraints},
                **{k: t.params.get(k) for k in s.parameters},
                "note": t.user_attrs.get("stopped") or t.user_attrs.get("error") or "",
            })  # fmt: skip
        trials = _with_parameter_types(pd.DataFrame(rows), s.parameters)
        if len(trials):
            trials["pareto"] = _pareto(trials, s.objective.direction)
        compare_rows = []
        for label, e in compared.items():
            v = violations(loaded, e)
            broken = [f"{c.metric} {_fmt(c.metric, c.decisive(e.values.get(c.metric, [])))}"
                      for c, x in zip(s.constraints, v) if x > 0]  # fmt: skip
            compare_rows.append({
                "setting": label, "feasible": not broken, "broken": broken,
                "objective": objective_value(loaded, e.values.get(metric, [])),
                "peak_rss_bytes": largest(e.values.get("peak_rss_bytes", [])),
                **{f"worst:{c.metric}": c.decisive(e.values.get(c.metric, [])) for c in s.constraints},
                "settings": e.settings,
            })  # fmt: skip
        compare = pd.DataFrame(compare_rows)
        best, no_best = None, "no trial kept every constraint in every run: widen the ranges or run more trials"
        feasible = [r for _, r in trials.iterrows() if r["feasible"]] if len(trials) else []
        if feasible:
            r = min(feasible, key=lambda r: (_rank(loaded, r), r["trial"]))  # a full tie: the earliest trial
            if math.isfinite(r["objective"]):
                best = {"trial": int(r["trial"]), "objective": float(r["objective"]),
                        "peak_rss_bytes": float(r["peak_rss_bytes"]), "settings": settings[int(r["trial"])]}  # fmt: skip
            else:
                # The best of the feasible trials has no finite objective, so none has: they tie,
                # and memory alone would decide a "best" the objective cannot tell from the rest.
                value = "missing" if math.isnan(r["objective"]) else _fmt(metric, r["objective"])
                no_best = (f"no best: {metric} is {value} in every feasible trial, so none is better than "
                           f"another; choose an objective these runs give a value")  # fmt: skip
        agg = s.objective.aggregate
        agg_words = f"{agg}-quantile" if isinstance(agg, float) else {"worst": "worst case"}.get(agg, agg)
        constraints = [_constraint_words(c) for c in s.constraints]
        bounds = [c.max for c in s.constraints if c.metric == "peak_rss_bytes" and c.max is not None]
        return cls(loaded.name, loaded.source, metric, s.objective.direction == "minimize", agg_words, constraints,
                   min(bounds) if bounds else None, trials, compare, best, len(s.seeds) * len(loaded.cases), runs_ran,
                   backend, wall_s, out, waiting, "" if best is not None else no_best)  # fmt: skip

    @property
    def objective(self) -> str:
        return f"{'minimize' if self.minimize else 'maximize'} {self.metric}, {self.aggregate} over the runs"

    def summary_text(self) -> str:
        return format_result(self)


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _plain(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    return x


def _rank(loaded: LoadedOptimization, row: pd.Series) -> tuple[float, ...]:
    decisive = [row[f"worst:{c.metric}"] for c in loaded.spec.constraints]
    return rank(loaded, row["objective"], row["peak_rss_bytes"], decisive)


def _pareto(trials: pd.DataFrame, direction: str) -> list[bool]:
    """Feasible trials that no other feasible trial beats on both peak RSS and the objective:
    the settings to choose from (the best among them). A value a run did not report is worst."""
    sign = 1.0 if direction == "minimize" else -1.0

    def worst_if_missing(x: float) -> float:
        return math.inf if x != x else x

    pts = [(i, worst_if_missing(r["peak_rss_bytes"]), worst_if_missing(sign * r["objective"]))
           for i, r in trials.iterrows() if r["feasible"]]  # fmt: skip
    front = set()
    for i, m, o in pts:
        if not any((m2 <= m and o2 <= o) and (m2 < m or o2 < o) for _, m2, o2 in pts):
            front.add(i)
    return [i in front for i in trials.index]


def _with_parameter_types(trials: pd.DataFrame, parameters: dict) -> pd.DataFrame:
    """Integer parameters as integers, though a failed trial leaves its cell empty (which would
    make a plain column float, and `140.0` is no seat count)."""
    for key, p in parameters.items():
        whole = p.type == "int" if p.choices is None else all(_is_int(c) or c is None for c in p.choices)
        if key in trials and whole:
            trials[key] = trials[key].astype("Int64")
    return trials


def _constraint_words(c) -> str:
    parts = []
    if c.min is not None:
        parts.append(f"{_fmt(c.metric, c.min)} <=")
    parts.append(c.metric)
    if c.max is not None:
        parts.append(f"<= {_fmt(c.metric, c.max)}")
    return " ".join(parts) + " in every run"


def _fmt(metric: str, x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    base = metric.split("/", 1)[0]
    if base.endswith("_bytes"):
        return f"{x / GiB:.2f} GiB"
    if base.endswith("_s"):
        return f"{x * 1000:.0f} ms" if abs(x) < 1 else f"{x:.2f} s"
    if base.endswith("rate"):
        return f"{100 * x:.2f} %"
    return f"{x:g}"


def format_result(r: OptimizeResult) -> str:
    t = r.trials
    counts = t["state"].value_counts().to_dict() if len(t) else {}
    metric = r.metric
    states = ", ".join(f"{counts.get(state, 0)} {state}" for state in ("complete", "stopped early", "failed"))
    lines = [
        f"simapf optimize: {r.name} ({r.source})",
        f"  {len(t)} trials ({states}), {r.runs_per_trial} run{'s' if r.runs_per_trial > 1 else ''} each at most",
        *([f"  {r.waiting} more cut short by an interruption wait to run again: a larger --trials runs them"]
          if r.waiting else []),
        f"  {RAN_PREFIX}{r.runs_ran} runs this time, on {r.backend}, in {r.wall_s:.0f} s",
        f"  objective: {r.objective}",
        *(f"  constraint: {c}" for c in r.constraints),
        "",
    ]  # fmt: skip
    if r.best is None:
        lines.append(f"  {r.no_best}")
    else:
        b = r.best
        lines.append(f"  best: trial {b['trial']}: {metric} {_fmt(metric, b['objective'])}, worst peak RSS "
                     f"{_fmt('peak_rss_bytes', b['peak_rss_bytes'])}, every constraint kept in every run")  # fmt: skip
        for k, v in b["settings"].items():
            lines.append(f"    --set {k}={v}")
    if len(r.compare):
        lines += ["", "  compared with (the same scenarios and seeds):",
                  f"    {'setting':<24} {'objective':>12} {'peak RSS':>12}  constraints"]  # fmt: skip
        for _, c in r.compare.iterrows():
            kept = "kept" if c["feasible"] else "broken: " + ", ".join(c["broken"])
            beaten = ""
            if r.best is not None and c["feasible"]:
                wins = r.best["objective"] < c["objective"] if r.minimize else r.best["objective"] > c["objective"]
                beaten = "  (the best is better)" if wins else "  (not beaten)"
            lines.append(f"    {c['setting']:<24} {_fmt(metric, c['objective']):>12} "
                         f"{_fmt('peak_rss_bytes', c['peak_rss_bytes']):>12}  {kept}{beaten}")  # fmt: skip
    front = t[t["pareto"]] if len(t) else t
    if len(front):
        lines += ["", "  Pareto front of the feasible trials (worst peak RSS against the objective):"]
        for _, p in front.sort_values(["peak_rss_bytes", "trial"]).iterrows():
            mark = "  (the best)" if r.best is not None and int(p["trial"]) == r.best["trial"] else ""
            lines.append(f"    trial {int(p['trial']):>4}: {_fmt('peak_rss_bytes', p['peak_rss_bytes']):>10}  "
                         f"{_fmt(metric, p['objective']):>10}{mark}")  # fmt: skip
    if r.out is not None:
        best = "best.yaml, " if r.best is not None else ""
        lines += ["", f"  wrote {r.out}: {best}trials.csv, compare.csv, optimize.txt, pareto.png/.svg; runs/ holds every run"]
    return "\n".join(lines) + "\n"


def write_report(r: OptimizeResult, out: Path) -> None:
    import yaml

    from simapf.outputs.figures import save_figure

    if r.best is not None:
        doc = {
            "name": r.name, "objective": r.objective, "value": r.best["objective"], "trial": r.best["trial"],
            "worst_peak_rss_bytes": r.best["peak_rss_bytes"], "set": r.best["settings"],
        }  # fmt: skip
        text = f"# simapf optimize {r.source}: the best settings found (every constraint kept in every run)\n"
        write_text_atomic(out / "best.yaml", text + yaml.safe_dump(doc, sort_keys=False))
    else:
        (out / "best.yaml").unlink(missing_ok=True)  # an earlier call's, which these trials no longer support
    write_text_atomic(out / "trials.csv", r.trials.to_csv(index=False))
    compare = r.compare.copy()
    if len(compare):
        compare["settings"] = [repr(x) for x in compare["settings"]]
    write_text_atomic(out / "compare.csv", compare.to_csv(index=False))
    write_text_atomic(out / "optimize.txt", format_result(r))
    fig = pareto_figure(r)
    import tempfile

    with tempfile.TemporaryDirectory(dir=out, prefix=".figure-") as tmp:
        save_figure(fig, Path(tmp) / "pareto")
        for suffix in (".png", ".svg"):
            (Path(tmp) / f"pareto{suffix}").replace(out / f"pareto{suffix}")


def pareto_figure(r: OptimizeResult):
    """Worst-case peak RSS (x) against the objective (y): trials by state and feasibility, the
    Pareto front, the best, the settings compared with, and a memory bound if one is set."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    import simapf.outputs.style

    metric = r.metric
    unit = "s" if metric.split("/", 1)[0].endswith("_s") else ""
    t = r.trials
    known = t[t["peak_rss_bytes"].notna()] if len(t) else t
    values = [v for v in [*known.get("objective", []), *r.compare["objective"]] if math.isfinite(v)] if len(r.compare) else \
        [v for v in known.get("objective", []) if math.isfinite(v)]
    # An infinite objective (a p99 never reached because too many requests failed) is drawn on
    # a row of its own above the others.
    top = max(values) if values else 1.0
    inf_row = top * 1.12 if top > 0 else 1.0

    def y_of(v: float) -> float:
        return inf_row if math.isinf(v) else v

    with matplotlib.rc_context(simapf.outputs.style.RC):
        fig = Figure(layout="constrained")
        ax = fig.subplots()
        if len(known):
            drawable = known[known["objective"].notna()]
            groups = [
                ("feasible trials", drawable[drawable["feasible"]], "o", "C0", 1.0),
                ("trials breaking a constraint",
                 drawable[(drawable["state"] == "complete") & ~drawable["feasible"]], "x", "C3", 0.8),
                ("stopped early (worst so far)", drawable[drawable["state"] == "stopped early"], ".", "0.6", 0.8),
            ]  # fmt: skip
            for label, g, marker, color, alpha in groups:
                if len(g):
                    ax.scatter(g["peak_rss_bytes"] / GiB, [y_of(v) for v in g["objective"]], marker=marker,
                               color=color, alpha=alpha, label=label, s=30)  # fmt: skip
            front = drawable[drawable["pareto"] & drawable["objective"].map(math.isfinite)].sort_values("peak_rss_bytes")
            if len(front):
                ax.step(front["peak_rss_bytes"] / GiB, front["objective"], where="post", color="C0",
                        linewidth=1, alpha=0.7, label="Pareto front")  # fmt: skip
        # Compared settings at one point (policies that behave alike here) share a marker and a label.
        points: dict[tuple[float, float, bool], list[str]] = {}
        for _, c in r.compare.iterrows():
            if not math.isnan(c["objective"]) and math.isfinite(c["peak_rss_bytes"]):
                key = (round(c["peak_rss_bytes"] / GiB, 2), y_of(c["objective"]), bool(c["feasible"]))
                points.setdefault(key, []).append(c["setting"])
        shown = set()
        for i, ((x, y, ok), names) in enumerate(sorted(points.items())):
            label = "compared, constraints kept" if ok else "compared, a constraint broken"
            ax.scatter([x], [y], marker="s", s=45, zorder=3, facecolor="C1" if ok else "none",
                       edgecolor="C1" if ok else "C3", linewidth=1.5, label=None if label in shown else label)  # fmt: skip
            shown.add(label)
            ax.annotate(", ".join(names), (x, y), fontsize="x-small", xytext=(-6, -12 if i % 2 else 6),
                        textcoords="offset points", ha="right")  # fmt: skip
        if any(math.isinf(v) for v in [*known.get("objective", []), *r.compare.get("objective", [])]):
            ax.axhline(inf_row, color="0.5", linewidth=0.6, linestyle=":")
            ax.annotate("∞: never reached (too many requests failed)", (0.0, inf_row), xycoords=("axes fraction", "data"),
                        xytext=(4, 3), textcoords="offset points", fontsize="x-small", color="0.3")  # fmt: skip
        if r.best is not None:
            ax.scatter([r.best["peak_rss_bytes"] / GiB], [r.best["objective"]], marker="*", s=220,
                       color="C2", edgecolor="black", zorder=4, label=f"best (trial {r.best['trial']})")  # fmt: skip
        if r.memory_bound_bytes is not None:
            ax.axvline(r.memory_bound_bytes / GiB, color=simapf.outputs.style.COLORS["limit"], linestyle="--", linewidth=1,
                       label="memory bound")  # fmt: skip
        ax.set_ylim(bottom=0)
        ax.set_xlabel("peak RSS, worst run (GiB)")
        ax.set_ylabel(f"{metric}, {r.aggregate} over the runs" + (f" ({unit})" if unit else ""))
        ax.set_title(f"{r.name}: {len(r.trials)} trials")
        ax.legend(fontsize="small", loc="best")
    return fig
