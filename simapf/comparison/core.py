"""`compare`: one scenario under several LIST policies, on identical random streams, replicated.

    cmp = simapf.compare("scenarios/relist-storm.yaml", ["upstream", "size-based"], replications=5)
    cmp.table          # per policy and metric: n, mean, sd, min, max
    cmp.differences    # per policy vs the first: mean paired difference and its 95 % CI
    cmp.side_by_side() # metric x policy means, as a notebook wants them
    cmp.figure(); cmp.write("out/")

Replication r of every policy uses the same seed (common random numbers): the clients' random
streams depend only on the seed and the client, so every policy meets the same arrivals, object
sizes and jitter, and the differences between policies are the policies'. Replication 0 uses the
scenario's own seed (so it matches `simapf run`); replication r > 0 a seed derived from it and r.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from simapf.comparison.policies import Policy, parse_policy
from simapf.comparison.stats import paired_differences, summarise, table_metrics
from simapf.errors import ConfigError
from simapf.files import output_directory
from simapf.provenance import provenance
from simapf.scenario.load import LoadedScenario, load_scenario
from simapf.sweeps.backends import choose, release_workers, run_tasks
from simapf.sweeps.measure import RunTask, bundle
from simapf.sweeps.plan import derive_seed, run_id
from simapf.sweeps.progress import with_progress

log = logging.getLogger(__name__)


@dataclass
class Comparison:
    policies: list[str]  # labels, baseline first
    runs: pd.DataFrame  # one row per (policy, replication): policy, replication, seed, metrics
    table: pd.DataFrame  # metric, policy, n, mean, sd, min, max
    differences: pd.DataFrame  # metric, policy, baseline, n, mean_diff, ci_low, ci_high, ...
    confidence: float
    scenario_name: str
    source: str
    seeds: list[int]
    memory_limit_bytes: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    # With `uncertainty` draws (simapf.comparison.uncertainty): each policy's intervals, and per
    # pair of policies how often one's figure is lower than the other's, draw by draw.
    intervals: pd.DataFrame | None = None
    wins: pd.DataFrame | None = None
    # Each policy against the baseline: the difference and the ratio, with their intervals.
    contrasts: pd.DataFrame | None = None

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys(self.table["metric"]))

    def side_by_side(self, stat: str = "mean") -> pd.DataFrame:
        """metric x policy table of one statistic (mean, sd, min, max, n), metrics in table order."""
        wide = self.table.pivot(index="metric", columns="policy", values=stat)
        return wide.loc[self.metrics, self.policies]

    def text(self) -> str:
        from simapf.comparison.text import format_comparison

        return format_comparison(self)

    def figure(self):
        from simapf.comparison.figure import comparison_figure

        return comparison_figure(self)

    def write(self, out_dir: str | Path, figure: bool = True, force: bool = False) -> Path:
        """runs.parquet/.csv, table.csv, differences.csv, comparison.txt and the figure
        (comparison.png/.svg) in `out_dir`, written to a temporary directory and moved into place
        (a non-empty directory as for `Result.write`)."""
        out = Path(out_dir)
        with output_directory(out, "compare", force) as tmp:
            self.runs.to_parquet(tmp / "runs.parquet", index=False)
            self.runs.to_csv(tmp / "runs.csv", index=False)
            self.table.to_csv(tmp / "table.csv", index=False)
            self.differences.to_csv(tmp / "differences.csv", index=False)
            (tmp / "comparison.txt").write_text(self.text(), encoding="utf-8")
            for name in ("intervals", "wins", "contrasts"):
                if getattr(self, name) is not None:
                    getattr(self, name).to_csv(tmp / f"{name}.csv", index=False)
            if figure:
                from simapf.outputs.figures import save_figure

                save_figure(self.figure(), tmp / "comparison", self.info.get("provenance"))
        return out


def identical_policies(runs: pd.DataFrame, labels: list[str], metrics: list[str]) -> str:
    """A warning naming the policies that behaved identically in every replication (every metric
    the same run for run), which the scenario does not tell apart; "" when no two did."""
    if len(labels) < 2 or runs.empty:
        return ""
    by = {p: runs[runs["policy"] == p].sort_values("replication")[metrics].reset_index(drop=True) for p in labels}
    groups: list[list[str]] = []
    for p in labels:
        twin = next((g for g in groups if by[g[0]].equals(by[p])), None)
        if twin is None:
            groups.append([p])
        else:
            twin.append(p)
    alike = [g for g in groups if len(g) > 1]
    if not alike:
        return ""
    seats = "seats_per_list_max" if "seats_per_list_max" in runs.columns else None
    parts = []
    for g in alike:
        rows = runs[runs["policy"].isin(g)]
        top = rows[seats].max() if seats and rows[seats].notna().any() else None
        why = (f" (no LIST needed more than {top:g} seat{'s' if top != 1 else ''}, where these policies agree)"
               if top is not None else " (they may give every request of it the same seats)")
        below = (f"the differences of {', '.join(g[1:])} below are all zero" if g[0] == labels[0]
                 else "their differences below are the same")  # fmt: skip
        parts.append(f"the policies {', '.join(g)} behaved identically on this scenario, run for run: it does not "
                     f"tell them apart{why}; {below}")
    return "; ".join(parts)


def replication_seeds(seed: int, replications: int) -> list[int]:
    """Replication 0: the scenario's seed; r > 0: derived from it and r (same for every policy)."""
    return [seed if r == 0 else derive_seed(seed, {"purpose": "compare"}, r) for r in range(replications)]


def compare(
    scenario: str | Path | dict | LoadedScenario,
    policies: Sequence["str | Policy | dict | tuple"],
    replications: int = 3,
    *,
    overrides: Iterable[str] | dict = (),
    confidence: float = 0.95,
    workers: int | None = None,
    backend: str | None = None,
    dask: str | None = None,
    progress: bool = False,
    uncertainty: int = 0,
    announce: Callable[[str], None] | None = None,
) -> Comparison:
    """Run `scenario` under each LIST policy, `replications` times each with common random
    numbers, and compare. The first policy is the baseline of the differences.

    `policies`: "NAME[:key=value,...]" strings, {name, params, label} mappings or Policy objects.
    `workers`/`backend`/`dask` choose where runs execute, as for `sweep` (default: joblib on all
    local cores). `uncertainty` = N > 0: also run every policy under N parameter draws and give
    each policy's intervals and, per pair, how often one wins (`simapf.comparison.uncertainty`).
    `announce`: called, before any run, with a line that says how many runs there are and how
    long they should take (`simapf.jobs.estimate`)."""
    from simapf.jobs.estimate import cost, recorded

    parsed = [parse_policy(p) for p in policies]
    if len(parsed) < 2:
        raise ConfigError("compare needs at least two policies (--policy A --policy B)")
    labels = [p.label for p in parsed]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ConfigError(f"--policy {dupes[0]}: given more than once")
    if replications < 1:
        raise ConfigError(f"--replications: must be at least 1, got {replications}")
    if not 0 < confidence < 1:
        raise ConfigError(f"--confidence: must be between 0 and 1, got {confidence}")

    if isinstance(scenario, LoadedScenario):
        source = scenario.source
        loaded = load_scenario(scenario.scenario, overrides, base_dir=scenario.base_dir) if overrides else scenario
    else:
        loaded = load_scenario(scenario, overrides)
        source = loaded.source
    sc = loaded.scenario
    switches = [f"{e.at_s:g} s" for e in sc.events if e.kind == "policy"]
    if switches:
        log.warning("the scenario switches LIST policy at %s: from then on every compared policy is replaced",
                    ", ".join(switches))  # fmt: skip

    seeds = replication_seeds(sc.run.seed, replications)
    tasks: list[RunTask] = []
    by_policy: dict[str, LoadedScenario] = {}
    for policy in parsed:
        try:
            with_policy = by_policy[policy.label] = load_scenario(sc, policy.overrides(), base_dir=loaded.base_dir)
        except ConfigError as exc:
            raise ConfigError(f"--policy {policy.label}: {str(exc).removeprefix('<scenario>: ')}") from None
        data, files = bundle(with_policy)
        cost_s = cost(with_policy)
        for r, seed in enumerate(seeds):
            key = {"run_id": run_id(seed, {"policy": policy.label}, r), "policy": policy.label,
                   "replication": r, "seed": seed}  # fmt: skip
            tasks.append(RunTask(key=key, scenario={**data, "run": {**data["run"], "seed": seed}}, files=files,
                                 label=f"{policy.label} #{r}", cost=cost_s))  # fmt: skip

    chosen = choose(backend, workers, dask)
    rows = {}
    try:
        with recorded() as pace:
            if announce is not None:
                announce(_estimate_line(sc.name, by_policy, replications, uncertainty, chosen.at_once(), pace))
            for row in with_progress(run_tasks(tasks, chosen), len(tasks), 0, sc.name, progress):
                rows[row["run_id"]] = row
    finally:
        release_workers()
    ordered = [rows[t.key["run_id"]] for t in tasks]
    runs = pd.DataFrame(ordered)
    metrics = table_metrics(runs)
    same = identical_policies(runs, labels, metrics)
    if same:
        log.warning("%s", same)
    intervals = wins = contrasts = None
    if uncertainty:
        intervals, wins, contrasts = _across_draws(by_policy, runs, uncertainty, sc.run.seed, workers, backend, dask, progress,
                                        sc.name)  # fmt: skip
    return Comparison(
        policies=labels, runs=runs, table=summarise(runs, labels, metrics),
        differences=paired_differences(runs, labels, metrics, confidence), confidence=confidence,
        scenario_name=sc.name, source=source, seeds=seeds,
        memory_limit_bytes=sc.apiserver.memory_limit_bytes,
        info={"backend": chosen.describe(), "identical": same, "draws": uncertainty,
              "provenance": provenance(sc.model_dump(mode="json"), loaded.params, seeds, replications)},
        intervals=intervals, wins=wins, contrasts=contrasts,
    )  # fmt: skip


def _estimate_line(name: str, by_policy: dict[str, LoadedScenario], replications: int, draws: int,
                   workers: int, pace: Any = None) -> str:  # fmt: skip
    """The line that says how many runs the comparison takes and how long: each policy's
    replications, then its parameter draws (timed as its own runs)."""
    from simapf.jobs.estimate import Runs, Stage, estimate

    stages = [Stage([Runs(loaded, replications) for loaded in by_policy.values()], workers)]
    if draws:
        stages.append(Stage([Runs(loaded, draws) for loaded in by_policy.values()], workers))
    found = estimate(stages, pace)
    planned = (f"about {found.runs:,} runs ({len(by_policy)} policies x {replications} replication"
               f"{'s' if replications != 1 else ''}{f' + {draws} parameter draws each' if draws else ''})")  # fmt: skip
    return found.line(f"compare {name}", planned)


def _across_draws(by_policy: dict[str, LoadedScenario], runs: pd.DataFrame, n: int, seed: int, workers: int | None,
                  backend: str | None, dask: str | None, progress: bool,
                  name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:  # fmt: skip
    """Every policy under the same `n` parameter draws, on the scenario's seed: intervals, wins
    and contrasts (simapf.comparison.uncertainty)."""
    from simapf.comparison.uncertainty import contrasts_table, intervals_table, wins_table
    from simapf.uncertainty.draws import draw_parameters
    from simapf.uncertainty.figures import kind_of
    from simapf.sweeps.drawn_runs import draw_tasks, run_draw_tasks

    draws = draw_parameters(n, seed)
    tasks = [t for label, loaded in by_policy.items() for t in draw_tasks(loaded, draws, {"policy": label}, f"{label} ")]
    rows = run_draw_tasks(tasks, workers, backend, dask, progress, name)
    labels = list(by_policy)
    drawn = {label: sorted((r for r in rows if r["policy"] == label), key=lambda r: r["draw"]) for label in labels}
    points = {label: runs[(runs["policy"] == label) & (runs["replication"] == 0)].iloc[0].to_dict() for label in labels}
    kinds = {c: k for c in runs.columns if (k := kind_of(c)) is not None}
    metrics = [c for c in runs.columns if c in kinds and not c.startswith("client_")]
    return (intervals_table(points, drawn, metrics, kinds), wins_table(drawn, labels, metrics),
            contrasts_table(points, drawn, metrics, kinds))
