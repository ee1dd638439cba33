"""The scenario reference, generated from the schema: `python -m simapf.scenario.docs`.

Every field of every scenario model becomes one table row: the dotted path a user writes, its
type, default, unit and description. The descriptions live in the `schema` package and nowhere
else, so the reference cannot drift from what the loader accepts; a test fails when the committed
`docs/scenario-reference.md` differs from what this module renders.

    python -m simapf.scenario.docs            # rewrite docs/scenario-reference.md
    python -m simapf.scenario.docs --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Union

import yaml
from pydantic import BaseModel, BeforeValidator
from annotated_types import Ge, Gt, Le, Lt
from pydantic.fields import FieldInfo

from simapf.quantities import AtLeast, AtMost
from simapf.scenario import schema
from simapf.server.params import parse_bytes

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO_ROOT / "docs" / "scenario-reference.md"

# Units of numeric fields whose name does not carry one (`_s`, `_bytes`, `_per_s`, `_percent`
# do). Keyed by the class that declares the field, since `count` means objects in a resource
# and instances in a client. A numeric field missing here and without a unit suffix makes the
# generator fail, so a new field cannot reach the reference without its unit.
UNITS: dict[str, str] = {
    "Apiserver.cores": "cores",
    "Etcd.cores": "cores per member",
    "Etcd.members": "members",
    "Apiserver.max_requests_inflight": "requests",
    "Apiserver.max_mutating_requests_inflight": "requests",
    "Apiserver.gogc": "%",
    "Apiserver.gomaxprocs": "threads",
    "PriorityLevelOverride.nominal_concurrency_shares": "shares",
    "PriorityLevelOverride.queues": "queues",
    "PriorityLevelOverride.hand_size": "queues",
    "PriorityLevelOverride.queue_length_limit": "requests",
    "SizeDistribution.sigma": "ln(bytes)",
    "Resource.count": "objects",
    "Resource.namespaces": "namespaces",
    "ListOptionsSpec.limit": "objects",
    "ListOptionsSpec.selectivity": "fraction",
    "RetryPolicy.max_retries": "retries",
    "RateLimit.qps": "tokens/s",
    "RateLimit.burst": "tokens",
    "ClientBase.count": "instances",
    "ClientProcessing.workers": "responses",
    "ClientProcessing.shared_cores": "cores",
    "Resource.decoded_size_multiplier": "ratio",
    "Resource.gzip_ratio": "ratio",
    "ClientNetwork.stream_bytes_per_s": "bytes/s",
    "ClientNetwork.link_bytes_per_s": "bytes/s",
    "ClosedLoopClient.iterations": "requests",
    "OpenLoopClient.max_in_flight": "requests",
    "ListSpec.page_size": "objects",
    "Backoff.factor": "ratio",
    "Backoff.jitter": "fraction",
    "InformerClient.selectivity": "fraction",
    "MutatorClient.mix": "relative weight",
    "DiscoveryClient.extra_group_versions": "group-versions",
    "RampEvent.to_count": "instances",
    "RunSpec.seed": "—",  # an identifier, not a quantity
    "RunSpec.max_requests": "requests",
    "AdmissionWebhook.replicas": "pods",
    "Apiserver.replicas": "processes",
    "Apiserver.goaway_chance": "fraction of requests",
    "RestartEvent.replica": "index",
    "AdmissionWebhook.concurrency": "calls",
    "WebhookServiceTime.sigma": "—",
    "CrdGroup.count": "CRDs",
    "CrdGroup.served_versions": "versions",
    "CrdGroup.api_groups": "API groups",
}

_SUFFIX_UNITS = (("_per_s", "1/s"), ("_percent", "%"), ("_bytes", "bytes"), ("bytes_per_", "bytes"), ("_s", "s"))


@dataclass(frozen=True)
class Row:
    path: str
    type: str
    default: str
    unit: str
    description: str


# ------------------------------------------------------------------------------ fields


def _declaring_class(model: type[BaseModel], name: str) -> type:
    """The class in `model`'s MRO whose own annotations declare field `name`."""
    for cls in model.__mro__:
        if name in cls.__dict__.get("__annotations__", {}):
            return cls
    return model


def _strip_none(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None was allowed)."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        if len(args) == 1:
            return args[0], nullable
        return Union[tuple(args)], nullable
    return tp, False


def _unwrap_annotated(tp: Any) -> tuple[Any, list[Any]]:
    if typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        return args[0], list(args[1:])
    return tp, []


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _is_bytes(info: FieldInfo) -> bool:
    return any(isinstance(m, BeforeValidator) and m.func is parse_bytes for m in info.metadata)


def _is_numeric(tp: Any) -> bool:
    tp, _ = _strip_none(tp)
    tp, _ = _unwrap_annotated(tp)
    if tp in (int, float):
        return True
    if typing.get_origin(tp) in (Union, types.UnionType):
        return any(_is_numeric(a) for a in typing.get_args(tp))
    if typing.get_origin(tp) is dict:
        return _is_numeric(typing.get_args(tp)[1])
    return False


def _bounds(metadata: list[Any]) -> str:
    # pydantic keeps Field(gt=..., ge=...) as annotated-types markers (Gt, Ge, ...); the numeric
    # types carry AtLeast/AtMost (simapf.quantities), shown where the field's own are not tighter.
    lower, upper, other = [], [], []
    floor = next((m for m in metadata if isinstance(m, AtLeast)), None)
    for m in metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            bound = getattr(m, attr, None)
            if type(m).__name__ == attr.capitalize() and bound is not None:
                if floor is not None and attr in ("gt", "ge") and bound <= floor.limit:
                    continue  # "> 0" says less than the type's floor
                (lower if attr in ("gt", "ge") else upper).append(f"{sign} {bound:g}")
        if isinstance(m, AtMost) and not any(
            getattr(o, "le", None) is not None and o.le <= m.limit or getattr(o, "lt", None) is not None and o.lt <= m.limit
            for o in metadata if isinstance(o, (Le, Lt))
        ):  # fmt: skip
            upper.append(f"≤ {m.limit:.4g}")
        if type(m).__name__ == "MinLen" and getattr(m, "min_length", 0) > 0:
            other.append("non-empty")
    if floor is not None:
        positive = any(isinstance(m, (Gt, Ge)) and getattr(m, "gt", getattr(m, "ge", None)) == 0 for m in metadata)
        lower.insert(0, f"≥ {floor.limit:.4g}" if positive else f"(≥ {floor.limit:.4g} if > 0)")
    return ", ".join(lower + upper + other)


def type_text(tp: Any, metadata: list[Any] = (), is_bytes: bool = False) -> str:
    """A type as a user reads it: `number > 0`, `one of json, protobuf`, `integer or null`."""
    tp, extra = _unwrap_annotated(tp)
    metadata = list(metadata) + extra
    inner, nullable = _strip_none(tp)
    inner, extra = _unwrap_annotated(inner)  # Number | None: the number's own bounds
    metadata += extra
    if is_bytes:
        text = "bytes (number or quantity like `8Gi`)"
    elif inner is bool:
        text = "boolean"
    elif inner is int:
        text = "integer"
    elif inner is float:
        text = "number"
    elif inner is str:
        text = "string"
    elif inner is Any:
        text = "any"
    elif typing.get_origin(inner) is Literal:
        values = typing.get_args(inner)
        shown = [f"`{v}`" if v != "" else '`""`' for v in values]
        text = shown[0] if len(shown) == 1 else "one of " + ", ".join(shown)
    elif _is_model(inner):
        text = "mapping (fields below)"
    elif typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        item, _ = _unwrap_annotated(item)
        if item is str:
            text = "list of strings"
        else:
            text = "list of mappings"
    elif typing.get_origin(inner) is dict:
        key, value = typing.get_args(inner)
        key_text = " / ".join(f"`{k}`" for k in typing.get_args(key)) if typing.get_origin(key) is Literal else "name"
        if value is Any:
            text = "mapping"
        elif _is_model(value):
            text = f"mapping of {key_text} to mapping (fields below)"
        else:
            text = f"mapping of {key_text} to {type_text(value)}"
    elif typing.get_origin(inner) in (Union, types.UnionType):
        parts = [type_text(a) for a in typing.get_args(inner)] + (["null"] if nullable else [])
        return ", ".join(parts[:-1]) + " or " + parts[-1]
    else:  # pragma: no cover - a type the schema does not use yet
        raise TypeError(f"no text for type {inner!r}")
    bounds = _bounds(metadata)
    if bounds:
        text = f"{text} {bounds}"
    if nullable:
        text += " or null"
    return text


def default_text(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "see below"
    return f"`{_yaml_value(value)}`"


def _yaml_value(value: Any) -> str:
    """A default as it would be written in the scenario's YAML (flow style)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        # Quote what YAML would read as something else ("1.37" is a number, "" is null).
        return value if value and yaml.safe_load(value) == value else f'"{value}"'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return str(value)


def unit_text(model: type[BaseModel], name: str, info: FieldInfo) -> str:
    key = f"{_declaring_class(model, name).__name__}.{name}"
    if key in UNITS:
        return UNITS[key]
    for suffix, unit in _SUFFIX_UNITS:
        if name.endswith(suffix) or (suffix.endswith("_") and name.startswith(suffix)):
            return unit
    if _is_bytes(info):
        return "bytes"
    if _is_numeric(info.annotation):
        raise ValueError(f"{key}: a numeric field needs a unit (a suffix like _s, or an entry in UNITS)")
    return "—"


def _description(info: FieldInfo) -> str:
    return " ".join((info.description or "").split())


def field_rows(model: type[BaseModel], prefix: str, skip: tuple[str, ...] = ()) -> Iterator[Row]:
    """One row per field of `model` and, below a nested model, its fields too."""
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        path = f"{prefix}{name}"
        inner, _ = _strip_none(info.annotation)
        description = _description(info)
        if _is_model(inner) and _doc(inner):
            # The nested model's own docstring says what the object as a whole is.
            description = f"{_doc(inner)} {description}"
        yield Row(
            path=path,
            type=type_text(info.annotation, info.metadata, _is_bytes(info)),
            default=default_text(info),
            unit=unit_text(model, name, info),
            description=description,
        )
        if _is_model(inner):
            yield from field_rows(inner, f"{path}.")
        elif typing.get_origin(inner) is dict and _is_model(typing.get_args(inner)[1]):
            yield from field_rows(typing.get_args(inner)[1], f"{path}.<name>.")


def all_fields(model: type[BaseModel] = schema.Scenario) -> Iterator[tuple[str, type[BaseModel], str, FieldInfo]]:
    """Every (path, model, name, field) reachable from `model`, through lists, mappings and
    the kinds of a discriminated union (the tests walk this, not the rendered tables)."""
    for name, info in model.model_fields.items():
        path = f"{name}"
        yield path, model, name, info
        for sub, prefix in _nested_models(info.annotation, path):
            for p, m, n, i in all_fields(sub):
                yield prefix + p, m, n, i


def _nested_models(tp: Any, path: str) -> Iterator[tuple[type[BaseModel], str]]:
    tp, _ = _unwrap_annotated(tp)
    inner, _ = _strip_none(tp)
    origin = typing.get_origin(inner)
    if _is_model(inner):
        yield inner, f"{path}."
    elif origin is list:
        (item,) = typing.get_args(inner)
        item, _ = _unwrap_annotated(item)
        for m in _models_of(item):
            yield m, f"{path}[]."
    elif origin is dict:
        value = typing.get_args(inner)[1]
        if _is_model(value):
            yield value, f"{path}.<name>."
    elif origin in (Union, types.UnionType):
        for a in typing.get_args(inner):
            yield from _nested_models(a, path)


def _models_of(tp: Any) -> list[type[BaseModel]]:
    if _is_model(tp):
        return [tp]
    if typing.get_origin(tp) in (Union, types.UnionType):
        return [a for a in typing.get_args(tp) if _is_model(a)]
    return []


# ------------------------------------------------------------------------------ rendering


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(rows: list[Row]) -> list[str]:
    out = ["| Field | Type | Default | Unit | Description |", "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| `{r.path}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.unit)} | {_cell(r.description)} |")
    return out


def _doc(model: type) -> str:
    doc = model.__dict__.get("__doc__")
    return " ".join(inspect.cleandoc(doc).split()) if doc else ""


def _kinds(annotation: Any) -> list[type[BaseModel]]:
    """The models of a discriminated union `list[Annotated[Union[...], ...]]`."""
    (item,) = typing.get_args(annotation)
    item, _ = _unwrap_annotated(item)
    return list(typing.get_args(item))


SECTIONS = (
    ("run", "How long the run lasts, its seed and the step of its series."),
    ("kubernetes", "Which Kubernetes behaviour to assume."),
    ("apiserver", ""),
    ("etcd", ""),
    ("apf", "How API Priority and Fairness is configured."),
)

SECTION_NAMES = tuple(name for name, _ in SECTIONS) + ("resources", "clients", "events", "admission_webhooks", "crds")

INTRO = """\
# Scenario reference

<!-- Generated by `python -m simapf.scenario.docs` from simapf/scenario/schema/.
     Do not edit by hand: change the descriptions there and run the command again. -->

A scenario is one YAML file: what the apiserver is, how APF is configured, what the cluster
holds, who sends requests, what happens during the run and how long it lasts. Every field has a
default unless it says **required**; unknown fields are errors (they are usually typos). The
built-in default scenario is `simapf/scenario/default.yaml`; shipped examples are in
`scenarios/`; [the tutorial](tutorial.md) walks through writing one.

How to read the tables:

- **Field** is the dotted path. `resources[]` is each element of the `resources` list;
  `apf.priority_levels.<name>` is a key you choose (here, a priority level's name).
- **Type**: bytes accept a number or a Kubernetes quantity (`512Mi`, `2G`); bounds say what
  validation accepts; "mapping (fields below)" is a nested object whose fields follow. A
  number is finite (not `.nan` or `.inf`) and not a boolean; an integer is written as one (not
  `true`, not `2.0`). A duration is at most ~292 years (9.223e+09 s), the longest Go's int64
  nanoseconds, and APF's clock, hold; a rate that is not 0 is at least one per ~292 years
  (1.084e-10 per second), so that the time between two is a duration too.
  Any text is at most 10,000 characters. Besides each field's bound, a run as a whole is bounded: at most
  100,000 client instances and 50,000,000 objects in all, 1,000,000 queues in all priority
  levels, 10,000,000 series samples, and an estimated 8 GiB of memory.
- **Default** is the value used when the field is absent, written as in YAML.
- **Unit**: `s` seconds, `1/s` per second, `bytes`, `%` percent; "—" for values without one. A
  field in seconds also takes a duration as Kubernetes and Go write it (`90s`, `10m`,
  `1h30m`, `500ms`), and `apiserver.cores` millicores (`8000m`).

The same paths work with `simapf run --set KEY=VALUE` (the value is read as YAML). There a list
element is picked by its index or by its `name`: `--set resources.0.count=1000`,
`--set clients.controllers.count=50`, `--set events.0.duration_s=120`.
"""


def render() -> str:
    """The whole reference as Markdown."""
    sc = schema.Scenario
    lines = [INTRO.rstrip("\n"), ""]
    lines += ["## Top level", "", _doc(sc) or "The scenario file's top-level fields.", ""]
    top = []
    for r in field_rows(sc, ""):
        if "." in r.path:
            continue
        if r.path in SECTION_NAMES:
            # Sections get their own tables; here a pointer and the field's own words.
            kind = "list of mappings" if r.type.startswith("list") else "mapping"
            r = Row(r.path, f"{kind}, see [{r.path}](#{r.path})", r.default, r.unit,
                    _description(sc.model_fields[r.path]))  # fmt: skip
        top.append(r)
    lines += table(top)
    lines.append("")

    for name, intro in SECTIONS:
        info = sc.model_fields[name]
        model = info.annotation
        lines += [f"## {name}", ""]
        text = " ".join(x for x in (intro, _doc(model)) if x)
        if text:
            lines += [text, ""]
        lines += table(list(field_rows(model, f"{name}.")))
        lines.append("")

    lines += ["## resources", "", _doc(schema.Resource), ""]
    lines += table(list(field_rows(schema.Resource, "resources[].")))
    lines.append("")

    for section, base, what in (("clients", schema.ClientBase, "client"), ("events", schema.EventBase, "event")):
        kinds = _kinds(sc.model_fields[section].annotation)
        kind_names = ", ".join(f"`{typing.get_args(k.model_fields['kind'].annotation)[0]}`" for k in kinds)
        lines += [f"## {section}", "", _description(sc.model_fields[section]) + f" Each {what} has a `kind` "
                  f"({kind_names}) that decides its other fields. Fields every {what} has:", ""]  # fmt: skip
        lines += table(list(field_rows(base, f"{section}[].")))
        lines.append("")
        common = tuple(base.model_fields)
        for k in kinds:
            kind = typing.get_args(k.model_fields["kind"].annotation)[0]
            lines += [f"### {section}: {kind}", "", _doc(k), ""]
            lines += table(list(field_rows(k, f"{section}[].", skip=common)))
            lines.append("")

    for name, model in (("admission_webhooks", schema.AdmissionWebhook), ("crds", schema.CrdGroup)):
        lines += [f"## {name}", "", _doc(model), ""]
        lines += table(list(field_rows(model, f"{name}[].")))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simapf.scenario.docs", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"file to write (default: {DEFAULT_OUT})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run python -m simapf.scenario.docs", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out)  # never a half-written reference
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
