"""The sweep file: a base scenario, the factors to vary, replications, seed, backend.

    name: policies-size-qps
    base: ../scenarios/list-load.yaml      # a scenario file (relative to this file) or a mapping
    set: {run.duration_s: 60}              # changes to the base for every run
    factors:                               # dotted keys as in `simapf run --set`
      apf.estimator.list_policy: [upstream, size-based]
      clients.listers.rate_per_s: {range: [10, 50, 10]}     # 10, 20, 30, 40 (stop excluded)
      resources.widgets.object_size.mean_bytes: {values: [10Ki, 100Ki]}
    replications: 3
    uncertainty: 20                        # optional: parameter draws per combination (intervals)
    seed: 1
    common_random_numbers: [apf.estimator.list_policy]   # optional: same streams across these
    metrics: [peak_rss_bytes, "p99_s/*"]                   # optional: columns to keep
    backend: {kind: joblib, workers: null}                 # joblib | dask | serial; address for dask
    out: results/policies-size-qps                         # optional, relative to this file

Everything is checked before the first run: the file, the base, every factor level and every
combination of levels, so a typo costs a second and one line naming the field, not an hour.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from simapf.errors import ConfigError
from simapf.quantities import Integer
from simapf.scenario.work import duration
from simapf.scenario.schema.base import MAX_TEXT_LENGTH
from simapf.scenario.load import LoadedScenario, apply_overrides, describe_scenario_error, load_scenario, read_yaml
from simapf.sweeps.measure import known_metric
from simapf.sweeps.plan import PlannedRun, canonical_json, plan_runs, range_values
from simapf.uncertainty import MAX_DRAWS


log = logging.getLogger(__name__)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BackendSpec(_Model):
    kind: Literal["joblib", "dask", "serial"] = Field(
        "joblib", description="joblib: local processes (loky); dask: a Dask cluster; serial: in this process."
    )
    workers: Integer | None = Field(
        None, ge=1, description="joblib: processes (null = all cores); dask without an address: workers of a local cluster."
    )
    address: str | None = Field(
        None, description="dask: the scheduler's address, e.g. tcp://dask-scheduler:8786; null = start a local cluster."
    )

    @field_validator("address")
    @classmethod
    def _address_needs_dask(cls, v: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("kind")
        if v is not None and kind != "dask":
            raise ValueError(f"a scheduler address needs kind: dask (kind is {kind})")
        return v


# A sweep is checked whole before it runs (every combination's scenario is loaded), and its
# table is one row per run: 100,000 runs is already days of simulation on one machine.
MAX_SWEEP_RUNS = 100_000
# A sweep's or search's name names its default result directory, under the 255 bytes of a file
# name; its lists (factors, metrics, parameters, scenarios...) are each at most MAX_SPEC_ITEMS long.
MAX_SPEC_NAME_LENGTH = 200
MAX_SPEC_ITEMS = 1000


class SweepSpec(_Model):
    name: str | None = Field(
        None, min_length=1, max_length=MAX_SPEC_NAME_LENGTH,
        description="A short name (at most 200 characters: it names the result directory); default: the file's name.",
    )
    description: str = Field("", max_length=MAX_TEXT_LENGTH, description="What the sweep shows.")
    base: str | dict[str, Any] = Field(..., description="The base scenario: a path relative to the sweep file, or a mapping.")
    overrides: dict[str, Any] = Field(default_factory=dict, alias="set", description="Dotted-key changes to the base for every run.")
    factors: dict[str, Any] = Field(
        default_factory=dict, max_length=MAX_SPEC_ITEMS,
        description="Dotted key -> [values] | {values: [...]} | {range: [start, stop, step]}.",
    )
    replications: Integer = Field(1, ge=1, le=MAX_SWEEP_RUNS, description="Runs per combination of factor levels, each with its own seed.")
    uncertainty: Integer = Field(0, ge=0, le=MAX_DRAWS, description="Parameter draws per combination, on replication 0's seed: "
                                 "every headline figure's 90 % interval; 0 = none (the CLI's --uncertainty wins).")  # fmt: skip
    seed: Integer = Field(1, ge=0, description="The sweep seed every run's seed is derived from.")
    common_random_numbers: list[str] = Field(
        default_factory=list, max_length=MAX_SPEC_ITEMS,
        description="Factors left out of the seed: runs differing only in them share random streams.",
    )
    metrics: list[str] | None = Field(
        None, max_length=MAX_SPEC_ITEMS, description="Metric columns to keep (names or patterns like 'p99_s/*'); null = all."
    )
    backend: BackendSpec = Field(BackendSpec(), description="Where runs execute.")
    out: str | None = Field(None, description="Result directory, relative to the sweep file (the CLI's --out wins).")

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            if not v:
                raise ValueError("name at least one metric, or leave metrics out for all")
            for name in v:
                if not known_metric(name):
                    raise ValueError(f"unknown metric {name!r} (see docs/compare-and-sweep.md for the columns)")
        return v


@dataclass(frozen=True)
class Combination:
    """One combination of factor levels, its scenario loaded and checked."""

    factors: dict[str, Any]
    loaded: LoadedScenario


@dataclass(frozen=True)
class LoadedSweep:
    spec: SweepSpec
    name: str
    source: str  # the sweep file, or "<sweep>"
    base_dir: Path  # the sweep file's directory: `out` and a `base` path resolve against it
    base: dict[str, Any]  # the base scenario as data, `set` applied
    factors: dict[str, list[Any]]  # levels in order
    combinations: list[Combination]  # in the order of `runs`
    runs: list[PlannedRun]

    def combination(self, run: PlannedRun) -> Combination:
        return self.combinations[run.index // self.spec.replications]

    def definition_key(self) -> str:
        """What must match for a result directory to be resumed: base, seed, factor keys, CRN,
        metrics. Adding levels or replications keeps the key, so earlier runs are reused."""
        from simapf.sweeps.plan import digest

        return digest({
            "base": self.base, "seed": self.spec.seed, "factors": list(self.factors),
            "common_random_numbers": sorted(self.spec.common_random_numbers), "metrics": self.spec.metrics,
        }).hex()[:16]  # fmt: skip


def load_sweep_spec(source: str | Path | dict | SweepSpec, base_dir: str | Path | None = None,
                    uncertainty: int | None = None) -> LoadedSweep:  # fmt: skip
    """Read and check a sweep file (or mapping); every scenario it makes is validated.
    `uncertainty` (not None) replaces the file's, checked as if the file said it."""
    if isinstance(source, SweepSpec):
        source = source.model_dump(by_alias=True)
    data, name, here, default_name = read_spec_source(source, base_dir, "sweep", "a sweep file")
    if uncertainty is not None:
        data = {**data, "uncertainty": uncertainty}
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {describe_scenario_error(exc)}") from None
    here = here.resolve()

    def fail(msg: str) -> ConfigError:
        return ConfigError(f"{name}: {msg}")

    # The base scenario, then `set`.
    base, scenario_dir = read_base_scenario(spec.base, here, fail, "base")
    check_loads(lambda: load_scenario(base, base_dir=scenario_dir), fail, "base")
    try:
        canonical_json(base)  # it is hashed into the sweep's identity and kept in its manifest
    except (TypeError, ValueError) as exc:
        raise fail(f"base: not plain data (strings, numbers, booleans, lists, mappings): {exc}") from None
    base = check_loads(lambda: apply_overrides(base, spec.overrides, "set"), fail, "set")
    started = time.perf_counter()
    check_loads(lambda: load_scenario(base, base_dir=scenario_dir), fail, "set")
    one_check_s = time.perf_counter() - started

    factors = {key: _levels(key, value, spec, fail) for key, value in spec.factors.items()}
    for i, key in enumerate(spec.common_random_numbers):
        if key not in factors:
            raise fail(f"common_random_numbers[{i}]: {key!r} is not a factor")
    n_runs = spec.replications + spec.uncertainty  # a combination's runs: its replications and its draws
    for levels in factors.values():
        n_runs *= len(levels)
    if n_runs > MAX_SWEEP_RUNS:
        draws = f" and {spec.uncertainty} parameter draws (uncertainty)" if spec.uncertainty else ""
        raise fail(f"factors: {n_runs:,} runs (levels multiplied, times {spec.replications} replications{draws}), "
                   f"more than {MAX_SWEEP_RUNS:,}; split the sweep or drop levels")  # fmt: skip
    n_combinations = n_runs // (spec.replications + spec.uncertainty)
    announce_checks(name, sum(len(levels) for levels in factors.values()) + n_combinations, one_check_s)

    # Each level on its own first, so the message can name the level at fault.
    for key, levels in factors.items():
        for i, level in enumerate(levels):
            check_loads(lambda: load_scenario(base, {key: level}, base_dir=scenario_dir), fail,
                        f"factors.{key}[{i}] ({canonical_json(level)})")  # fmt: skip
    runs = plan_runs(factors, spec.replications, spec.seed, spec.common_random_numbers)
    combinations = []
    for run in runs[:: spec.replications]:
        where = "factors: the combination " + ", ".join(f"{k}={canonical_json(v)}" for k, v in run.factors.items())
        loaded = check_loads(lambda: load_scenario(base, run.factors, base_dir=scenario_dir), fail, where)
        combinations.append(Combination(run.factors, loaded))
    return LoadedSweep(spec, spec.name or default_name, name, here, base, factors, combinations, runs)


# Checking the scenarios of a file before its first run is announced when it takes longer than this.
NOTICE_CHECK_S = 10.0


def announce_checks(name: str, n: int, seconds_each: float) -> None:
    """Say, before it starts, that checking `n` scenarios (`seconds_each`) will take a while."""
    if n * seconds_each > NOTICE_CHECK_S:
        log.warning("%s: checking %s scenarios before the first run, ~%s", name, f"{n:,}", duration(n * seconds_each))


def read_spec_source(source: str | Path | dict, base_dir: str | Path | None, kind: str,
                     what: str) -> tuple[Any, str, Path, str]:  # fmt: skip
    """A sweep or search file's data (or the mapping given), the name its errors use, the
    directory its paths resolve against, and its default name (`kind` for a mapping)."""
    if isinstance(source, dict):
        data, name, here, default_name = source, f"<{kind}>", Path(base_dir or Path.cwd()), kind
    else:
        path = Path(source)
        data = read_yaml(path)
        name, here, default_name = str(path), Path(base_dir) if base_dir else path.parent, path.stem
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: {what} must be a mapping, got {type(data).__name__}")
    return data, name, here, default_name


def read_base_scenario(base: str | dict[str, Any], here: Path, fail, where: str) -> tuple[dict[str, Any], Path]:
    """A base scenario written as a file (relative to `here`) or a mapping, and the directory
    its own paths resolve against."""
    if not isinstance(base, str):
        return base, here
    path = Path(base) if Path(base).is_absolute() else here / base
    try:
        data = read_yaml(path)
    except ConfigError as exc:
        raise fail(f"{where}: {exc}") from None
    if not isinstance(data, dict):
        raise fail(f"{where}: {path}: a scenario must be a mapping")
    return data, path.parent


def check_loads(fn, fail, where: str):
    """`fn()`, its ConfigError said again as `fail(where: ...)` without the scenario's own prefix."""
    try:
        return fn()
    except ConfigError as exc:
        msg = str(exc)
        for prefix in ("<scenario>: ", "set: "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        raise fail(f"{where}: {msg}") from None


def _levels(key: str, value: Any, spec: SweepSpec, fail) -> list[Any]:
    where = f"factors.{key}"
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise fail(f"{where}: a factor is a dotted key like clients.listers.rate_per_s")
    if key == "run.seed":
        raise fail(f"{where}: run seeds are derived from the sweep's seed; use replications and seed")
    if key in spec.overrides:
        raise fail(f"{where}: also fixed in set; a key is either fixed or a factor")
    if isinstance(value, list):
        levels, where_values = value, where
    elif isinstance(value, dict) and set(value) == {"values"}:
        levels, where_values = value["values"], f"{where}.values"
        if not isinstance(levels, list):
            raise fail(f"{where_values}: expected a list")
    elif isinstance(value, dict) and set(value) == {"range"}:
        r = value["range"]
        if (not isinstance(r, list) or len(r) != 3
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in r)):  # fmt: skip
            raise fail(f"{where}.range: expected [start, stop, step] (numbers; stop excluded)")
        try:
            levels = range_values(*r, limit=MAX_SWEEP_RUNS)
        except ValueError as exc:
            raise fail(f"{where}.range: {exc}") from None
        where_values = f"{where}.range"
    else:
        raise fail(f"{where}: expected a list of values, {{values: [...]}} or {{range: [start, stop, step]}}")
    if not levels:
        raise fail(f"{where_values}: no values")
    seen: dict[str, int] = {}
    for i, level in enumerate(levels):
        try:
            text = canonical_json(level)
        except (TypeError, ValueError):
            raise fail(f"{where_values}[{i}]: {level!r} is not a plain value (string, number, bool, null, list, mapping)") from None
        if text in seen:
            raise fail(f"{where_values}[{i}]: {text} repeats [{seen[text]}]")
        seen[text] = i
    return list(levels)
