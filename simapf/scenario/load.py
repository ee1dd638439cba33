"""Reading a scenario: YAML → overrides → pydantic → resolved references.

`load_scenario` returns a `Scenario` whose references all hold: the APF configuration loads, the
priority levels it names exist, the resource-model parameters validate and the estimator
policy can be built. Anything wrong is one `ConfigError` line naming the file and field path,
before a run starts or an output directory is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml
from pydantic import ValidationError

from simapf.apf.config import APFObjects, bootstrap_objects, build_effective_config, load_objects, objects_from_data
from simapf.apf.estimators import WorkEstimator
from simapf.apf.estimators.work import MutatingEstimatorConfig
from simapf.errors import ConfigError
from simapf.scenario.schema import Estimator, PriorityLevelOverride, Scenario
from simapf.server.params import ServerParams, describe_validation_error


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario and the directory its relative paths are resolved against."""

    scenario: Scenario
    base_dir: Path
    source: str  # the file it came from, or "<built-in default>"


# -------------------------------------------------------------------------- reading


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(" ".join(f"{path}: invalid YAML{where}: {problem}".split())) from None


def load_scenario(
    source: str | Path | dict | Scenario,
    overrides: Iterable[str] | dict[str, Any] = (),
    base_dir: str | Path | None = None,
) -> LoadedScenario:
    """Load and check a scenario from a file, a dict or a Scenario, with dotted-key overrides.

    `overrides`: "a.b.c=value" strings (value read as YAML) or a {dotted key: value} mapping.
    A path segment that is a number indexes a list; one that names an element (its `name`
    field) selects it: `clients.controllers.count=50`.
    """
    if isinstance(source, Scenario):
        data: Any = source.model_dump(mode="json")
        name = "<scenario>"
        base = Path(base_dir) if base_dir is not None else Path.cwd()
    elif isinstance(source, dict):
        data = source
        name = "<scenario>"
        base = Path(base_dir) if base_dir is not None else Path.cwd()
    else:
        path = Path(source)
        data = read_yaml(path)
        name = str(path)
        base = Path(base_dir) if base_dir is not None else path.parent
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: a scenario must be a mapping, got {type(data).__name__}")
    data = apply_overrides(data, overrides, name)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {describe_scenario_error(exc)}") from None
    loaded = LoadedScenario(scenario, base.resolve(), name)
    try:
        resolve(loaded)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    return loaded


def describe_scenario_error(exc: ValidationError) -> str:
    msg = describe_validation_error(exc)
    # Checks across fields report their own path inside the message.
    return msg.replace("server parameters: Value error, ", "").replace(": Value error, ", ": ")


# -------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected dotted.key=value")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key, parsed


def apply_overrides(data: dict, overrides: Iterable[str] | dict[str, Any], name: str = "<scenario>") -> dict:
    """A deep copy of `data` with each dotted key set."""
    items = overrides.items() if isinstance(overrides, dict) else (parse_override(o) for o in overrides)
    data = _deep_copy(data)
    for key, value in items:
        _set_dotted(data, key, value, name)
    return data


def _deep_copy(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _deep_copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deep_copy(v) for v in x]
    return x


def _set_dotted(data: dict, key: str, value: Any, name: str) -> None:
    parts = key.split(".")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[: depth + 1])
        if isinstance(node, list):
            index = _list_index(node, part)
            if index is None:
                raise ConfigError(f"{name}: --set {key}: no element {part!r} in {'.'.join(parts[:depth]) or 'the list'}")
            if last:
                node[index] = value
                return
            node = node[index]
        elif isinstance(node, dict):
            if last:
                node[part] = value
                return
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
        else:
            raise ConfigError(f"{name}: --set {key}: {where} is not a mapping or list")


def _list_index(items: list, part: str) -> int | None:
    if part.lstrip("-").isdigit():
        i = int(part)
        return i if -len(items) <= i < len(items) else None
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == part:
            return i
    return None


# -------------------------------------------------------------------------- resolving


def resolve(loaded: LoadedScenario) -> None:
    """Check what pydantic cannot: files, priority-level names, the estimator, parameters."""
    sc = loaded.scenario
    objects = apf_objects(sc.apf.config, sc.apf.priority_levels, loaded.base_dir, "apf")
    build_effective_config(objects)
    server_params(loaded)
    work_estimator(sc.apf.estimator, "apf.estimator")
    for i, event in enumerate(sc.events):
        kind = event.kind
        if kind == "policy":
            work_estimator(event.estimator, f"events[{i}].estimator")
        elif kind == "apf_config":
            apf_objects(event.config, event.priority_levels, loaded.base_dir, f"events[{i}]")


def apf_objects(config: str, overrides: dict[str, PriorityLevelOverride], base_dir: Path, where: str) -> APFObjects:
    """The APF objects a scenario names, with its priority-level changes applied."""
    if config == "bootstrap":
        objects = bootstrap_objects()
    else:
        path = Path(config)
        if not path.is_absolute():
            path = base_dir / path
        try:
            objects = load_objects(path)
        except ConfigError as exc:
            raise ConfigError(f"{where}.config: {exc}") from None
    if not overrides:
        return objects
    by_name = {pl.name: pl for pl in objects.priority_levels}
    changed = []
    for name, change in overrides.items():
        pl = by_name.get(name)
        if pl is None:
            known = ", ".join(sorted(by_name))
            raise ConfigError(f"{where}.priority_levels.{name}: no priority level {name!r} (there are: {known})")
        if pl.is_exempt:
            raise ConfigError(f"{where}.priority_levels.{name}: the exempt level cannot be changed here")
        doc = pl.model_dump(by_alias=True, exclude_none=True)
        limited = doc["spec"]["limited"]
        for field, key in (("nominal_concurrency_shares", "nominalConcurrencyShares"),
                           ("lendable_percent", "lendablePercent"),
                           ("borrowing_limit_percent", "borrowingLimitPercent")):  # fmt: skip
            value = getattr(change, field)
            if value is not None:
                limited[key] = value
        queuing_change = {k: v for k, v in (("queues", change.queues), ("handSize", change.hand_size),
                                            ("queueLengthLimit", change.queue_length_limit)) if v is not None}  # fmt: skip
        if queuing_change:
            response = limited["limitResponse"]
            if response.get("type") != "Queue":
                raise ConfigError(f"{where}.priority_levels.{name}: the level rejects instead of queuing; it has no queues to change")
            response["queuing"] = {**response.get("queuing", {}), **queuing_change}
        try:
            new = objects_from_data(doc, source_name=None)
        except ConfigError as exc:
            raise ConfigError(f"{where}.priority_levels.{name}: {exc}") from None
        changed.extend(new.priority_levels)
    return objects.overlay(APFObjects(priority_levels=tuple(changed)))


def server_params(loaded: LoadedScenario) -> ServerParams:
    """Resource-model parameters: the defaults, then params_file, then params, then the
    apiserver fields that name the same things."""
    api = loaded.scenario.apiserver
    data: dict[str, Any] = {}
    if api.params_file:
        path = Path(api.params_file)
        if not path.is_absolute():
            path = loaded.base_dir / path
        file_data = read_yaml(path)
        if file_data is None:
            file_data = {}
        if not isinstance(file_data, dict):
            raise ConfigError(f"apiserver.params_file: {path}: must be a mapping")
        file_data = file_data.get("params", file_data)  # calibration records keep them under `params`
        data = _merge(data, file_data)
    data = _merge(data, api.params)
    gates = loaded.scenario.kubernetes.feature_gates
    explicit = {
        "cpu": {"cores": api.cores, "gomaxprocs": api.gomaxprocs},
        "process": {"memory_limit_bytes": api.memory_limit_bytes},
        "gc": {"gogc": None if api.gogc == "off" else api.gogc, "gomemlimit_bytes": api.gomemlimit_bytes},
        "features": {
            "consistent_list_from_cache": gates.ConsistentListFromCache,
            "list_from_cache_snapshot": gates.ListFromCacheSnapshot,
            "streaming_collection_encoding_to_json": gates.StreamingCollectionEncodingToJSON,
            "streaming_collection_encoding_to_protobuf": gates.StreamingCollectionEncodingToProtobuf,
        },
    }
    if api.restart_s is not None:
        explicit["process"]["restart_s"] = api.restart_s
    cpu = data.get("cpu", {})
    if isinstance(cpu, dict) and "usable_cores" in cpu and cpu["usable_cores"] is not None:
        # A fitted ceiling above the scenario's cores cannot hold: the cores are the ceiling.
        cpu = {**cpu, "usable_cores": min(float(cpu["usable_cores"]), api.cores)}
        data = {**data, "cpu": cpu}
    data = _merge(data, explicit)
    try:
        return ServerParams.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"apiserver.params.{describe_validation_error(exc)}") from None


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def work_estimator(spec: Estimator, where: str) -> WorkEstimator:
    try:
        return WorkEstimator(
            spec.list_policy, list_params=spec.list_params,
            mutating=MutatingEstimatorConfig(enabled=spec.mutating_enabled),
        )  # fmt: skip
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
