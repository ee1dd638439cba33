"""The optimisation file: the scenarios and seeds a setting must hold in, what to search, what
to minimise, the constraints, and the settings to compare with.

    name: optimize-relist-storm
    scenarios:                                     # every trial runs each of these...
      streamed: ../scenarios/relist-storm.yaml
      whole: {base: ../scenarios/relist-storm.yaml,
              set: {kubernetes.feature_gates.StreamingCollectionEncodingToJSON: false}}
    seeds: [1, 2]                                  # ...with each of these run seeds
    parameters:                                    # dotted keys as in `simapf run --set`
      apf.estimator.list_policy: {choices: [size-based, streamed-cache-cap]}
      apf.estimator.list_params.bytes_per_seat: {low: 100000, high: 20000000, log: true, type: int}
    objective: {metric: "p99_s/workload-low/list", direction: minimize, aggregate: worst}
    constraints:                                   # must hold in every run
      - {metric: oom_kills, max: 0}
      - {metric: peak_rss_bytes, max: 6Gi}
    compare_with: {upstream: {apf.estimator.list_policy: upstream}}   # default: every shipped policy
    trials: 40
    batch: 2                                       # trials sampled together (results do not depend on workers)
    seed: 1                                        # the sampler's

Everything is checked before the first run: each scenario with `set`, each parameter at its
bounds and every choice, and each setting compared with, so a typo costs a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from simapf.errors import ConfigError
from simapf.scenario.load import LoadedScenario, apply_overrides, load_scenario
from simapf.messages import describe
from simapf.quantities import Integer, Number
from simapf.server.params import parse_bytes
from simapf.sweeps.measure import known_metric
from simapf.sweeps.plan import canonical_json
from simapf.scenario.schema.base import MAX_TEXT_LENGTH
from simapf.sweeps.spec import (
    MAX_SPEC_ITEMS, MAX_SPEC_NAME_LENGTH, MAX_SWEEP_RUNS, BackendSpec, announce_checks, check_loads, read_base_scenario,
    read_spec_source,
)  # fmt: skip

# Trials x scenarios x seeds is the number of runs; a study of more than this is days of runs.
MAX_TRIALS = 10_000
# A parameter's choices: each is checked against every scenario before the first run.
MAX_CHOICES = 1000
# Scenario loads checked before the first run: every choice and range end in every scenario.
MAX_CHECKS = 10_000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ScenarioRef(_Model):
    base: str | dict[str, Any] = Field(..., description="A scenario file (relative to this file) or a mapping.")
    overrides: dict[str, Any] = Field(default_factory=dict, alias="set", description="Dotted-key changes to it.")


class Parameter(_Model):
    """A range (low, high; int or float; log-uniform if log) or a list of choices."""

    low: Number | None = Field(None, description="Smallest value (with high).")
    high: Number | None = Field(None, description="Largest value (with low).")
    type: Literal["float", "int"] = Field("float", description="float or int.")
    log: bool = Field(False, description="Search the range on a log scale (low > 0).")
    choices: list[Any] | None = Field(
        None, max_length=MAX_CHOICES, description="The values to choose among (instead of a range; at most 1,000)."
    )

    @model_validator(mode="after")
    def _range_or_choices(self) -> "Parameter":
        if self.choices is not None:
            if self.low is not None or self.high is not None or self.log:
                raise ValueError("give either choices or a range (low, high, log), not both")
            if not self.choices:
                raise ValueError("choices: name at least one value")
            for c in self.choices:
                if not (c is None or isinstance(c, (str, int, float, bool))):
                    raise ValueError(f"choices: {c!r} is not a plain value (string, number, boolean or null)")
            texts = [canonical_json(c) for c in self.choices]
            if len(set(texts)) != len(texts):
                raise ValueError("choices: a value repeats")
            return self
        if self.low is None or self.high is None:
            raise ValueError("give a range (low and high) or choices")
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high}), both finite")
        if self.log and self.low <= 0:
            raise ValueError(f"log needs low > 0 (low is {self.low})")
        if self.type == "int" and (self.low != int(self.low) or self.high != int(self.high)):
            raise ValueError("type int needs whole numbers for low and high")
        return self

    def ends(self) -> list[Any]:
        """The values checked before the first run: every choice, or both ends of the range."""
        if self.choices is not None:
            return list(self.choices)
        if self.type == "int":
            return [int(self.low), int(self.high)]
        return [self.low, self.high]


def _one_metric(name: str) -> str:
    if any(ch in name for ch in "*?[") or not known_metric(name):
        raise ValueError(f"unknown metric {name!r} (one column, see docs/compare-and-sweep.md)")
    return name


class Objective(_Model):
    metric: str = Field(..., description="A run's metric column (as in a sweep's table), e.g. p99_s/workload-low/list.")
    direction: Literal["minimize", "maximize"] = Field("minimize", description="minimize or maximize.")
    aggregate: Literal["worst", "mean", "median"] | Number = Field(
        "worst",
        description="Over a trial's runs: worst (robust: the largest when minimising), mean, median, "
                    "or a number q in (0, 1): the q-quantile towards the worse side.",
    )  # fmt: skip

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        return _one_metric(v)

    @field_validator("aggregate")
    @classmethod
    def _quantile(cls, v: Any) -> Any:
        if isinstance(v, float) and not 0.0 < v < 1.0:
            raise ValueError(f"a quantile must be in (0, 1), got {v}")
        return v


class Constraint(_Model):
    """A bound the metric must keep in every run of a trial (its worst case)."""

    metric: str = Field(..., description="A run's metric column.")
    max: Number | None = Field(None, description="Largest value allowed (bytes may be written 6Gi).")
    min: Number | None = Field(None, description="Smallest value allowed.")

    @field_validator("max", "min", mode="before")
    @classmethod
    def _quantity(cls, v: Any) -> Any:
        return parse_bytes(v)

    @field_validator("metric")
    @classmethod
    def _known(cls, v: str) -> str:
        return _one_metric(v)

    @model_validator(mode="after")
    def _a_bound(self) -> "Constraint":
        if self.max is None and self.min is None:
            raise ValueError("give max, min or both")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is above max ({self.max})")
        return self

    def decisive(self, values: list[float]) -> float:
        """The run value nearest to breaking the bound, or furthest past it (NaN if a run lacks it)."""
        if not values or any(v != v for v in values):
            return math.nan
        return max(values, key=lambda v: self.violation([v]))

    def violation(self, values: list[float]) -> float:
        """How far the worst run is beyond the bound, relative to the bound's size: <= 0 when every
        run keeps it (then minus the room the worst run leaves, which guides the sampler)."""
        excess = [_excess(v, self.max) for v in values] if self.max is not None else []
        if self.min is not None:
            excess += [_excess(-v, -self.min) for v in values]
        return max(excess)


def _excess(value: float, bound: float) -> float:
    if value != value:  # NaN: the run has no such value; it cannot be shown to hold
        return math.inf
    return (value - bound) / max(abs(bound), 1.0)


class OptimizeSpec(_Model):
    name: str | None = Field(
        None, min_length=1, max_length=MAX_SPEC_NAME_LENGTH,
        description="A short name (at most 200 characters: it names the result directory); default: the file's name.",
    )
    description: str = Field("", max_length=MAX_TEXT_LENGTH, description="What the search is for.")
    scenarios: dict[str, str | ScenarioRef] = Field(
        ..., min_length=1, max_length=MAX_SPEC_ITEMS,
        description="Name -> a scenario file, or {base, set}; a setting must hold in all of them.",
    )
    seeds: list[Integer] = Field(
        [1], min_length=1, max_length=MAX_SPEC_ITEMS, description="Run seeds: each scenario runs once per seed."
    )
    overrides: dict[str, Any] = Field(default_factory=dict, alias="set", description="Dotted-key changes to every scenario.")
    parameters: dict[str, Parameter] = Field(
        ..., min_length=1, max_length=MAX_SPEC_ITEMS, description="Dotted key -> the range or choices searched."
    )
    objective: Objective
    constraints: list[Constraint] = Field(default_factory=list, max_length=MAX_SPEC_ITEMS, description="Bounds every run must keep.")
    compare_with: dict[str, dict[str, Any]] | None = Field(
        None, max_length=MAX_SPEC_ITEMS,
        description="Name -> dotted-key settings to run as well, for comparison; null = every shipped LIST policy.",
    )
    trials: Integer = Field(50, ge=1, le=MAX_TRIALS, description="Trials in all (a resumed search adds what is missing).")
    batch: Integer = Field(2, ge=1, le=256, description="Trials sampled at once and run together.")
    startup_trials: Integer = Field(10, ge=0, description="Random trials before the sampler (TPE) models the results.")
    seed: Integer = Field(1, ge=0, description="The sampler's seed.")
    backend: BackendSpec = Field(BackendSpec(), description="Where runs execute.")
    out: str | None = Field(None, description="Result directory, relative to this file (the CLI's --out wins).")

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("a seed repeats")
        if any(s < 0 for s in v):
            raise ValueError("seeds are non-negative")
        return v


@dataclass(frozen=True)
class ScenarioCase:
    """One scenario of the search: its data (the file's, with its and the spec's `set`)."""

    name: str
    data: dict[str, Any]
    base_dir: Path  # what its relative paths resolve against


@dataclass(frozen=True)
class LoadedOptimization:
    spec: OptimizeSpec
    name: str
    source: str
    base_dir: Path
    cases: list[ScenarioCase]
    compare_with: dict[str, dict[str, Any]]

    def load(self, case: ScenarioCase, settings: dict[str, Any], seed: int) -> LoadedScenario:
        """The scenario of one run: the case with `settings` and the run seed."""
        return load_scenario(case.data, {**settings, "run.seed": seed}, base_dir=case.base_dir)

    def ends(self) -> list[dict[str, Any]]:
        """The settings of a trial at every parameter's low end (or first choice), then at every
        one's high end (or last): what a trial's runs are like, a case being whole only with
        its parameters set (a policy's required one, say)."""
        return [{k: p.ends()[i] for k, p in self.spec.parameters.items()} for i in (0, -1)]

    def trial_scenarios(self) -> list[LoadedScenario]:
        """Each case as a trial at the parameters' ends runs it, on the first seed."""
        return [self.load(c, settings, self.spec.seeds[0]) for c in self.cases for settings in self.ends()]

    def definition_key(self) -> str:
        """What must match for a result directory to be resumed."""
        from simapf.sweeps.plan import digest

        s = self.spec
        return digest({
            "cases": [[c.name, c.data] for c in self.cases], "seeds": s.seeds,
            "parameters": {k: p.model_dump() for k, p in s.parameters.items()},
            "objective": s.objective.model_dump(), "constraints": [c.model_dump() for c in s.constraints],
            "batch": s.batch, "startup_trials": s.startup_trials, "seed": s.seed,
        }).hex()[:16]  # fmt: skip


def default_compare_with() -> dict[str, dict[str, Any]]:
    """Every shipped LIST policy that runs without parameters."""
    from simapf.apf.estimators.registry import list_policy_names

    return {p: {"apf.estimator.list_policy": p} for p in list_policy_names() if p != "constant"}


def _check_size(spec: OptimizeSpec, fail) -> None:
    """Refuse a search whose runs, or whose checks before the first run, are beyond reach."""
    runs = spec.trials * len(spec.scenarios) * len(spec.seeds)
    if runs > MAX_SWEEP_RUNS:
        raise fail(f"trials: {spec.trials:,} trials x {len(spec.scenarios)} scenarios x {len(spec.seeds)} seeds is "
                   f"{runs:,} runs, more than {MAX_SWEEP_RUNS:,}; fewer trials, scenarios or seeds")  # fmt: skip
    checks = _checks(spec)
    if checks > MAX_CHECKS:
        raise fail(f"parameters: {checks:,} scenarios to check before the first run (every choice and range end, and "
                   f"every compare_with setting, in each of {len(spec.scenarios)} scenarios), more than {MAX_CHECKS:,}; "
                   "fewer choices or scenarios")  # fmt: skip


def _checks(spec: OptimizeSpec) -> int:
    compared = len(spec.compare_with) if spec.compare_with is not None else len(default_compare_with())
    return len(spec.scenarios) * (2 + sum(len(p.ends()) - 1 for p in spec.parameters.values()) + compared)


def load_optimize_spec(source: str | Path | dict, base_dir: str | Path | None = None) -> LoadedOptimization:
    """Read and check an optimisation file (or mapping)."""
    data, name, here, default_name = read_spec_source(source, base_dir, "optimize", "an optimisation file")
    try:
        spec = OptimizeSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {describe(exc, OptimizeSpec)}") from None
    here = here.resolve()

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"{name}: {msg}")

    fixed = set(spec.overrides)
    for key in spec.parameters:
        if not key or any(not p for p in key.split(".")):
            raise fail(f"parameters.{key}: a parameter is a dotted key like apf.estimator.list_params.bytes_per_seat")
        if key == "run.seed":
            raise fail("parameters.run.seed: run seeds are the file's seeds")
        if key in fixed:
            raise fail(f"parameters.{key}: also fixed in set; a key is either fixed or searched")

    _check_size(spec, fail)
    first = {key: p.ends()[0] for key, p in spec.parameters.items()}
    cases = []
    for case_name, ref in spec.scenarios.items():
        where = f"scenarios.{case_name}"
        ref = ScenarioRef(base=ref) if isinstance(ref, str) else ref
        for key in ref.overrides:
            if key in spec.parameters:
                raise fail(f"{where}.set.{key}: also a parameter; a key is either fixed or searched")
        base, scenario_dir = read_base_scenario(ref.base, here, fail, where)
        merged = check_loads(lambda: apply_overrides(base, {**ref.overrides, **spec.overrides}, "set"), fail, where)
        case = ScenarioCase(case_name, merged, scenario_dir)
        started = time.perf_counter()
        try:
            load_scenario(case.data, base_dir=case.base_dir)
            if not cases:
                announce_checks(name, _checks(spec), time.perf_counter() - started)
        except ConfigError as alone:
            # Either the scenario is wrong, or it is whole only with the parameters (a policy's
            # required one, say): the same error with them says which.
            try:
                load_scenario(case.data, first, base_dir=case.base_dir)
            except ConfigError as with_first:
                if str(with_first) == str(alone):
                    check_loads(lambda: load_scenario(case.data, base_dir=case.base_dir), fail, where)
        cases.append(case)

    # Every parameter at its low end (or first choice), then each at its other ends.
    if len(first) == 1:
        ((key, value),) = first.items()
        lows = f"parameters.{key} = {canonical_json(value)}"
    else:
        lows = "parameters at their low ends or first choices (" + ", ".join(
            f"{k}={canonical_json(v)}" for k, v in first.items()) + ")"
    for case in cases:
        check_loads(lambda: load_scenario(case.data, first, base_dir=case.base_dir), fail, f"{lows} in scenarios.{case.name}")
    for key, param in spec.parameters.items():
        for value in param.ends()[1:]:
            for case in cases:
                check_loads(lambda: load_scenario(case.data, {**first, key: value}, base_dir=case.base_dir), fail,
                            f"parameters.{key} = {canonical_json(value)} in scenarios.{case.name}")  # fmt: skip
    compare_with = spec.compare_with if spec.compare_with is not None else default_compare_with()
    for label, settings in compare_with.items():
        for case in cases:
            check_loads(lambda: load_scenario(case.data, settings, base_dir=case.base_dir), fail,
                        f"compare_with.{label} in scenarios.{case.name}")  # fmt: skip
    return LoadedOptimization(spec, spec.name or default_name, name, here, cases, dict(compare_with))

