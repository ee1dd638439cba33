"""Reading a scenario: YAML → overrides → pydantic → resolved references.

`load_scenario` returns a `LoadedScenario`, resolved once: the APF objects the run starts with
and those of every `apf_config` event (files read and priority-level changes applied), the
resource-model parameters, and the gates APF reads. A run is built from these and reads no file
and resolves nothing again. Anything wrong is one `ConfigError` line naming the file and field
path, before a run starts or an output directory is made.

The one thing left for the run to do is importing a user's LIST policy module, which runs the
user's code: `LoadedScenario.estimators` does it, when a run starts, never while a scenario is
only validated.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml
from pydantic import ValidationError

from simapf.apf.config import bootstrap_objects, build_effective_config, load_objects, objects_from_data
from simapf.apf.controller import FeatureGates
from simapf.apf.objects import APFObjects, PriorityLevelConfiguration
from simapf.apf.validation import validate_priority_level
from simapf.apf.estimators import WorkEstimator, resolve_list_policy_class
from simapf.apf.estimators.work import MutatingEstimatorConfig
from simapf.errors import ConfigError
from simapf.files import check_text, check_yaml_size, parse_yaml_value, read_yaml
from simapf.messages import describe, first_problem
from simapf.scenario.schema import Estimator, PriorityLevelOverride, Scenario
from simapf.scenario import work
from simapf.scenario.schema.server import RANGE_STREAM_RELEASE
from simapf.server.cache_index import INITIAL_EVENTS_BY_KEY_RELEASE, SCOPE_PARTITION_RELEASE
from simapf.server.params import CpuParams, ServerParams, parse_bytes


EstimatorFactory = Callable[[], WorkEstimator]


@dataclass(frozen=True)
class Estimators:
    """A scenario's work estimators, as factories: every replica builds its own (a policy may
    keep state)."""

    start: EstimatorFactory  # apf.estimator
    events: Mapping[int, EstimatorFactory]  # each policy event's, by its index in `events`


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario, resolved once; the directory its relative paths were read against."""

    scenario: Scenario
    base_dir: Path
    source: str  # the file it came from, or "<built-in default>"
    params: ServerParams  # the resource model's parameters
    apf: APFObjects  # the APF objects the run starts with
    event_apf: Mapping[int, APFObjects]  # each apf_config event's objects, by its index in `events`
    gates: FeatureGates  # the feature gates APF reads

    def estimators(self) -> Estimators:
        """The scenario's work estimators. A user's policy module is imported here, when a run
        starts: every one of them, so that a broken one fails before any time is simulated."""
        factories = {}
        for i, (spec, where) in estimator_specs(self.scenario).items():
            if ":" in spec.list_policy:
                try:
                    work_estimator(spec, where)
                except ConfigError as err:
                    raise ConfigError(f"{self.source}: {err}") from err
            factories[i] = partial(work_estimator, spec, where)
        start = factories.pop(-1)
        return Estimators(start, factories)


# -------------------------------------------------------------------------- reading


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
        check_yaml_size(data, name)
        check_text(data, name)
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
    data, applied = _apply_overrides(data, overrides, name)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {_blame(describe_scenario_error(exc), applied)}") from None
    base = base.resolve()
    try:
        return resolve(scenario, base, name)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {_blame(str(exc), applied)}") from None


def _blame(message: str, applied: list[tuple[str, str]]) -> str:
    """Say which --set put a bad value there: the file does not show it."""
    for path, shown in reversed(applied):
        if message.startswith(path) and message[len(path) : len(path) + 1] in (":", ".", "[", " "):
            return f"{message} (from --set {shown})"
    return message


def describe_scenario_error(exc: ValidationError) -> str:
    """One line naming the field path as the user wrote it (see `simapf.messages`)."""
    return describe(exc, Scenario)


# -------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE, e.g. run.duration_s=120")
    if any(not part.strip() for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: empty part in the key {key!r}")
    parsed = parse_yaml_value(value, f"--set {key}")
    check_text({key: parsed}, "--set")
    return key, parsed


def apply_overrides(data: dict, overrides: Iterable[str] | dict[str, Any], name: str = "<scenario>") -> dict:
    """A deep copy of `data` with each dotted key set."""
    return _apply_overrides(data, overrides, name)[0]


def _apply_overrides(
    data: dict, overrides: Iterable[str] | dict[str, Any], name: str
) -> tuple[dict, list[tuple[str, str]]]:
    """`apply_overrides`, also returning each override's field path as error messages write it
    (clients[0].count for clients.controllers.count) and the override as the user wrote it."""
    if isinstance(overrides, dict):
        items = [(k, v, f"{k}={_as_yaml(v)}") for k, v in overrides.items()]
    else:
        items = [(*parse_override(o), o) for o in overrides]
    data = _deep_copy(data)
    applied = []
    for key, value, shown in items:
        applied.append((_set_dotted(data, key, value, name), shown))
    return data, applied


def _as_yaml(value: Any) -> str:
    """A value as --set would take it (true, not Python's True)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _deep_copy(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _deep_copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deep_copy(v) for v in x]
    return x


def _set_dotted(data: dict, key: str, value: Any, name: str) -> str:
    """Set `key` in `data`; return its path as error messages write it."""
    parts = key.split(".")
    node: Any = data
    path = ""
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(node, list):
            index = _list_index(node, part)
            if index is None:
                names = [str(x["name"]) for x in node if isinstance(x, dict) and "name" in x]
                known = f" (there are: {', '.join(names)})" if names else f" (it has {len(node)})"
                raise ConfigError(f"{name}: --set {key}: no element {part!r} in {path or 'the list'}{known}")
            path += f"[{index % len(node)}]"
            if last:
                node[index] = value
                return path
            node = node[index]
        elif isinstance(node, dict):
            path += f".{part}" if path else part
            if last:
                node[part] = value
                return path
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
        else:
            raise ConfigError(f"{name}: --set {key}: {path} is {_kind(node)}, not a mapping or list")
    return path


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(type(value), type(value).__name__)


def _list_index(items: list, part: str) -> int | None:
    if part.lstrip("-").isdigit():
        i = int(part)
        return i if -len(items) <= i < len(items) else None
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == part:
            return i
    return None


# -------------------------------------------------------------------------- resolving


def resolve(sc: Scenario, base_dir: Path, source: str) -> LoadedScenario:
    """What pydantic cannot check, resolved once: files, priority-level names, the estimators,
    parameters."""
    objects = apf_objects(sc.apf.config, sc.apf.priority_levels, base_dir, "apf")
    build_effective_config(objects)
    params = _server_params(sc, base_dir)
    check_estimator(sc.apf.estimator, "apf.estimator")
    event_apf = {}
    for i, event in enumerate(sc.events):
        kind = event.kind
        if kind == "policy":
            check_estimator(event.estimator, f"events[{i}].estimator")
        elif kind == "apf_config":
            event_apf[i] = apf_objects(event.config, event.priority_levels, base_dir, f"events[{i}]")
    loaded = LoadedScenario(sc, base_dir, source, params, objects, event_apf, apf_gates(sc))
    work.check(loaded)
    return loaded


def apf_gates(sc: Scenario) -> FeatureGates:
    """The scenario's feature gates that change what APF charges."""
    gates = sc.kubernetes.feature_gates
    return FeatureGates(
        size_based_list_cost_estimate=gates.SizeBasedListCostEstimate,
        watch_list=gates.WatchList,
        etcd_supports_progress_notify=gates.ConsistentListFromCache,
    )


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
        _check_override(doc, change, f"{where}.priority_levels.{name}")
        try:
            new = objects_from_data(doc, source_name=None)
        except ConfigError as exc:
            raise ConfigError(f"{where}.priority_levels.{name}: {exc}") from None
        changed.extend(new.priority_levels)
    return objects.overlay(APFObjects(priority_levels=tuple(changed)))


# The apiserver's field paths of a priority level and the override fields that set them.
_OVERRIDE_FIELDS = {
    "spec.limited.nominalConcurrencyShares": "nominal_concurrency_shares",
    "spec.limited.lendablePercent": "lendable_percent",
    "spec.limited.borrowingLimitPercent": "borrowing_limit_percent",
    "spec.limited.limitResponse.queuing.queues": "queues",
    "spec.limited.limitResponse.queuing.handSize": "hand_size",
    "spec.limited.limitResponse.queuing.queueLengthLimit": "queue_length_limit",
}


def _check_override(doc: dict, change: PriorityLevelOverride, where: str) -> None:
    """The apiserver's rules for the changed level, reported against the override's fields
    (hand_size, not spec.limited.limitResponse.queuing.handSize)."""
    try:
        pl = PriorityLevelConfiguration.model_validate(doc)
    except ValidationError:
        return  # objects_from_data reports it
    problems = validate_priority_level(pl)
    if not problems:
        return
    path, message = problems[0]
    field = _OVERRIDE_FIELDS.get(path)
    if field is not None and getattr(change, field) is None:
        # The rule is broken by a value the level already had, against one the user changed
        # (queues: 2 for a level whose hand size is 6): name the changed one.
        touched = [f for f in ("queues", "hand_size") if getattr(change, f) is not None]
        if field in ("queues", "hand_size") and touched:
            message = f"{field} {message}" if "deck size" not in message else message
            field = touched[0]
    shown = f"{where}.{field}" if field is not None else f"{where}: {path}"
    raise ConfigError(f"{shown}: {message}")


def _server_params(sc: Scenario, base_dir: Path) -> ServerParams:
    """Resource-model parameters: the defaults, then params_file, then params, then the
    apiserver fields that name the same things."""
    api = sc.apiserver
    data: dict[str, Any] = {}
    file_data: dict[str, Any] = {}
    file_path: Path | None = None
    if api.params_file:
        file_path = Path(api.params_file)
        if not file_path.is_absolute():
            file_path = base_dir / file_path
        try:
            raw = read_yaml(file_path)
        except ConfigError as exc:
            raise ConfigError(f"apiserver.params_file: {exc}") from None
        if isinstance(raw, dict) and isinstance(raw.get("params"), dict):
            raw = raw["params"]  # calibration records keep them under `params`
        if not isinstance(raw, dict):
            raise ConfigError(f"apiserver.params_file: {file_path}: expected a mapping of parameters, got {type(raw).__name__}")
        file_data = raw
        data = _merge(data, file_data)
    data = _merge(data, api.params)
    gates = sc.kubernetes.feature_gates
    explicit: dict[str, dict[str, Any]] = {
        "cpu": {}, "process": {}, "gc": {}, "etcd": {},
        "features": {
            "consistent_list_from_cache": gates.ConsistentListFromCache,
            "list_from_cache_snapshot": gates.ListFromCacheSnapshot,
            "streaming_collection_encoding_to_json": gates.StreamingCollectionEncodingToJSON,
            "streaming_collection_encoding_to_protobuf": gates.StreamingCollectionEncodingToProtobuf,
            "etcd_range_stream": (gates.EtcdRangeStream if gates.EtcdRangeStream is not None
                                  else not sc.version_before(*RANGE_STREAM_RELEASE)),
        },
    }  # fmt: skip
    etcd = sc.etcd
    for owner, where, field, section, key, value in (
        (api, "apiserver", "cores", "cpu", "cores", api.cores),
        (api, "apiserver", "gomaxprocs", "cpu", "gomaxprocs", api.gomaxprocs),
        (api, "apiserver", "memory_limit_bytes", "process", "memory_limit_bytes", api.memory_limit_bytes),
        (api, "apiserver", "gogc", "gc", "gogc", None if api.gogc == "off" else api.gogc),
        (api, "apiserver", "gomemlimit_bytes", "gc", "gomemlimit_bytes", api.gomemlimit_bytes),
        (api, "apiserver", "restart_s", "process", "restart_s", api.restart_s),
        (etcd, "etcd", "cores", "etcd", "concurrency", etcd.cores),
        (etcd, "etcd", "members", "etcd", "members", etcd.members),
        (etcd, "etcd", "member_round_trip_s", "etcd", "member_round_trip_s", etcd.member_round_trip_s),
        (etcd, "etcd", "embedded", "etcd", "embedded", etcd.embedded),
    ):  # fmt: skip
        in_params = isinstance(api.params.get(section), dict) and key in api.params[section]
        if field == "restart_s" and value is None:
            continue  # null: the resource model's (or the parameter file's) restart time
        if field in owner.model_fields_set:
            # Two values for one thing in one scenario: say so rather than pick one silently.
            if in_params and not _same_value(key, api.params[section][key], value):
                raise ConfigError(
                    f"apiserver.params.{section}.{key}: {api.params[section][key]!r} contradicts "
                    f"{where}.{field}: {getattr(owner, field)!r}; set it in one place"
                )
            explicit[section][key] = value
        elif not _has_path(data, [section, key]):
            # The scenario's defaults stand in for what no parameter set says.
            explicit[section][key] = value
    # A section that is not a mapping stays as written, so validation reports it.
    data = _merge(data, {k: v for k, v in explicit.items() if isinstance(data.get(k, {}), dict)})
    # A ceiling fitted on a bigger machine cannot hold on this one: its cores are the ceiling.
    # Only the file's: a scenario that writes both numbers itself gets the error.
    if _has_path(file_data, ["cpu", "usable_cores"]) and not _has_path(api.params, ["cpu", "usable_cores"]) \
            and _has_path(data, ["cpu", "usable_cores"]):
        usable, cores = data["cpu"]["usable_cores"], data["cpu"].get("cores")
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (usable, cores)):
            data = _merge(data, {"cpu": {"usable_cores": min(float(usable), float(cores))}})
    # The default usable-core ceiling was set for the 16-core experiment; on a smaller machine
    # no parameter set wrote, the machine's cores are the ceiling.
    default_usable = CpuParams.model_fields["usable_cores"].default
    cores = data["cpu"].get("cores") if isinstance(data.get("cpu"), dict) else None
    if isinstance(default_usable, (int, float)) and not _has_path(data, ["cpu", "usable_cores"]) \
            and isinstance(cores, (int, float)) and not isinstance(cores, bool) and cores < default_usable:
        data = _merge(data, {"cpu": {"usable_cores": float(cores)}})
    # What the version says, where no parameter set says otherwise: before 1.25 each CRD version's
    # etcd client built its own logger (kubernetes#111477); before 1.28 every CRD change rebuilt
    # the OpenAPI v2 document (kubernetes#118212); before 1.21 kube-apiserver was built with a Go
    # (1.12-1.15) that returned memory with MADV_FREE; before 1.37 a whole Protobuf response got a
    # fresh buffer, not a pooled one (kubernetes#139350); before 1.25 it was built with a Go (1.18 or
    # older) whose bytes.Buffer grew with make, leaving a new array's unwritten tail untouched;
    # from 1.27 to 1.31 a LIST from the watch cache sorted all its objects (kubernetes#113730), and
    # in 1.30 and 1.31 a WatchList its initial events (kubernetes#120897); before 1.27 the watch cache
    # handed every event to every watcher without a trigger value (kubernetes#115918), and before 1.31
    # it built a watch's initial events from every object even when its selector named one
    # (simapf.server.cache_index).
    sorted_cache = not sc.version_before(1, 27) and sc.version_before(1, 32)
    sorted_events = not sc.version_before(1, 30) and sc.version_before(1, 32)
    for keys, value in ((["crds", "etcd_logger_per_client"], sc.version_before(1, 25)),
                        (["request_memory", "buffer_growth_zeroes"], not sc.version_before(1, 25)),
                        (["request_cpu", "cache_list_sorted"], sorted_cache),
                        (["request_cpu", "watchlist_events_sorted"], sorted_events),
                        (["crds", "openapi_v2_eager"], sc.version_before(1, 28)),
                        (["gc", "page_release"], "free" if sc.version_before(1, 21) else "dontneed"),
                        (["request_memory", "protobuf_allocator_pool"], not sc.version_before(1, 37)),
                        (["watch_cache", "watchers_partitioned_by_scope"], not sc.version_before(*SCOPE_PARTITION_RELEASE)),
                        (["watch_cache", "initial_events_by_key"], not sc.version_before(*INITIAL_EVENTS_BY_KEY_RELEASE))):  # fmt: skip
        if not _has_path(data, keys) and isinstance(data.get(keys[0], {}), dict):
            data = _merge(data, {keys[0]: {keys[1]: value}})
    try:
        params = ServerParams.model_validate(data)
    except ValidationError as exc:
        problem, more = first_problem(exc, ServerParams)
        keys = problem.path.split(".") if problem.path else []
        if file_path is not None and keys and not _has_path(api.params, keys) and _has_path(file_data, keys):
            where = f"apiserver.params_file: {file_path}: "
        else:
            where = "apiserver.params." if problem.path else "apiserver.params: "
        text = f"{where}{problem}"
        if more:
            text += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise ConfigError(text) from None
    if params.etcd.embedded and api.replicas > 1:
        raise ConfigError(
            f"{_etcd_field(sc, 'embedded', 'embedded')}: an embedded etcd lives in one apiserver's process; "
            f"apiserver.replicas is {api.replicas}, not 1"
        )
    if params.etcd.embedded and params.etcd.members > 1:
        raise ConfigError(
            f"{_etcd_field(sc, 'members', 'members')}: an embedded etcd is one member in the apiserver's process; "
            f"members is {params.etcd.members}, not 1"
        )
    _check_room_to_start(params, sc)
    return params


def _etcd_field(sc: Scenario, field: str, key: str) -> str:
    """Where the scenario says an etcd parameter: its `etcd` section, or apiserver.params."""
    return f"etcd.{field}" if field in sc.etcd.model_fields_set else f"apiserver.params.etcd.{key}"


def _check_room_to_start(params: ServerParams, sc: Scenario) -> None:
    """A container smaller than the idle process kills every incarnation the moment it starts:
    with a restart time of 0, a crash loop that never lets simulated time move. Its CRDs, once
    installed, are part of what every incarnation holds from its start."""
    p = params.process
    limit = p.memory_limit_bytes
    if limit is None:
        return
    field = "apiserver.memory_limit_bytes" if "memory_limit_bytes" in sc.apiserver.model_fields_set \
        else "apiserver.params.process.memory_limit_bytes"
    meta = 1.0 + p.heap_metadata_fraction
    idle = p.live_heap_bytes * meta + p.nonheap_bytes
    if limit <= idle:
        raise ConfigError(
            f"{field}: {limit / 2**20:.4g} MiB is not more than the idle apiserver's memory "
            f"({idle / 2**20:.4g} MiB: process.live_heap_bytes with its metadata, and process.nonheap_bytes); "
            "the process could never start"
        )
    crds = sum(g.count * params.crds.crd_bytes(g.served_versions, g.schema_bytes) for g in sc.crds)
    if crds and p.restart_s == 0 and limit <= idle + crds * meta:
        raise ConfigError(
            f"{field}: {limit / 2**20:.4g} MiB is not more than the idle apiserver with its CRDs "
            f"({(idle + crds * meta) / 2**20:.4g} MiB): once they are installed every restart would be killed at "
            "once, and with a restart time of 0 simulated time could not move; give apiserver.restart_s or more memory"
        )


def _same_value(key: str, written: Any, value: Any) -> bool:
    """Whether a value written in apiserver.params says what the apiserver field says."""
    if key == "gogc" and (written is False or (isinstance(written, str) and written.strip().lower() == "off")):
        written = None  # off, as the apiserver field's "off" is passed on
    if key.endswith("_bytes"):
        written = parse_bytes(written)
    return written == value


def _has_path(data: Any, keys: list[str]) -> bool:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def check_estimator(spec: Estimator, where: str) -> None:
    """Check an estimator without running anyone's code: a built-in policy is built (and its
    parameters checked); a user's 'package.module:Class' is only checked for its shape, since
    importing it runs the user's code, which happens when a run starts (`user_policies`)."""
    if ":" not in spec.list_policy:
        work_estimator(spec, where)
        return
    module, _, attr = spec.list_policy.partition(":")
    if not module or not attr:
        raise ConfigError(f"{where}.list_policy: {spec.list_policy!r}: expected 'package.module:ClassName'")


def estimator_specs(sc: Scenario) -> dict[int, tuple[Estimator, str]]:
    """A scenario's estimators with their field paths: -1 for apf.estimator, then each policy
    event's by its index in `events`."""
    specs = {-1: (sc.apf.estimator, "apf.estimator")}
    specs |= {i: (e.estimator, f"events[{i}].estimator") for i, e in enumerate(sc.events) if e.kind == "policy"}
    return specs


def user_policies(sc: Scenario) -> list[tuple[Estimator, str]]:
    """The estimators of a scenario that name the user's own code, with their field paths."""
    return [(spec, where) for spec, where in estimator_specs(sc).values() if ":" in spec.list_policy]


def work_estimator(spec: Estimator, where: str) -> WorkEstimator:
    # The policy's name first, so a typo in it is not reported against its parameters.
    try:
        resolve_list_policy_class(spec.list_policy)
    except ConfigError as exc:
        raise ConfigError(f"{where}.list_policy: {exc}") from exc  # the chain keeps the user's traceback
    try:
        return WorkEstimator(
            spec.list_policy, list_params=spec.list_params,
            mutating=MutatingEstimatorConfig(enabled=spec.mutating_enabled),
        )  # fmt: skip
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}.list_params: {exc}") from None
