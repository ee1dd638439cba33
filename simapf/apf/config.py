"""Reading APF configuration, and what the APF controller makes of it.

`load_objects` and `parse_objects` read FlowSchemas and priority levels (`simapf.apf.objects`)
as kubectl prints them, and reject what the apiserver's validation would
(`simapf.apf.validation`); `bootstrap_objects` is the built-in configuration.
`build_effective_config` then does what the APF controller does with the objects it sees:
supply the mandatory ones, drop FlowSchemas whose priority level is missing, and put the rest in
matching order.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simapf.apf.objects import (
    API_VERSION,
    CATCH_ALL,
    EXEMPT,
    FLOW_SCHEMA,
    LIST_KINDS,
    PRIORITY_LEVEL,
    APFObjects,
    FlowSchema,
    PriorityLevelConfiguration,
)
from simapf.apf.validation import Problems, validate_flow_schema, validate_priority_level
from simapf.errors import ConfigError
from simapf.files import MAX_YAML_BYTES, load_yaml, read_text
from simapf.messages import describe, type_name

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Loading


def load_objects(source: str | os.PathLike[str]) -> APFObjects:
    """Read FlowSchemas and priority levels from a file path or from YAML text.

    A `Path` (or any path-like) is read from disk; a `str` is YAML text if it contains a
    newline and a file path otherwise. Accepted shapes: a `kind: List` with items (what kubectl
    prints), several YAML documents, single objects, or any mix of those.
    Raises ConfigError with a one-line message naming the file, the object and the field.
    """
    if isinstance(source, str) and "\n" in source:
        return parse_objects(source)
    path = Path(source)
    documents = load_yaml(read_text(path, MAX_YAML_BYTES, "a YAML file"), str(path), all_documents=True)
    if all(d is None for d in documents):
        raise ConfigError(f"{path}: empty: no FlowSchema or PriorityLevelConfiguration in it")
    return objects_from_data(documents, source_name=str(path), multi_document=True)


def parse_objects(text: str, source_name: str | None = None) -> APFObjects:
    """Parse YAML text holding APF objects; `source_name` prefixes error messages."""
    documents = load_yaml(text, source_name or "<APF objects>", all_documents=True)
    return objects_from_data(documents, source_name=source_name, multi_document=True)


def objects_from_data(
    data: Any, source_name: str | None = None, *, multi_document: bool = False
) -> APFObjects:
    """Build APFObjects from already-parsed YAML/JSON data (a dict, or a list of them).

    With `multi_document`, `data` is the list of YAML documents of one file; otherwise a list is
    taken as a list of objects. Meant for scenario files that embed APF objects.
    """
    flow_schemas: list[FlowSchema] = []
    priority_levels: list[PriorityLevelConfiguration] = []
    seen: dict[tuple[str, str], str] = {}
    for where, item in _located_items(data, multi_document, _prefix(source_name)):
        obj = _parse_object(item, where, source_name)
        key = (obj.kind, obj.name)
        if key in seen:
            raise ConfigError(
                _prefix(source_name)
                + f"{_label(where, obj.kind, obj.name)}: metadata.name: "
                + f"duplicate {obj.kind} name (first seen at {seen[key] or 'the top level'})"
            )
        seen[key] = where
        problems = (
            validate_flow_schema(obj)
            if isinstance(obj, FlowSchema)
            else validate_priority_level(obj)
        )
        if problems:
            raise ConfigError(
                _prefix(source_name)
                + f"{_label(where, obj.kind, obj.name)}: "
                + _first_problem(problems)
            )
        if isinstance(obj, FlowSchema):
            flow_schemas.append(obj)
        else:
            priority_levels.append(obj)
    return APFObjects(tuple(flow_schemas), tuple(priority_levels))


def _located_items(data: Any, multi_document: bool, prefix: str) -> Iterator[tuple[str, Any]]:
    """Yield (where, raw object) for every object, `where` being a path like `items[3]`."""
    if multi_document:
        documents = data if isinstance(data, list) else [data]
        several = len(documents) > 1
        for index, document in enumerate(documents):
            where = f"documents[{index}]" if several else ""
            yield from _items_of_document(document, where, prefix)
    else:
        yield from _items_of_document(data, "", prefix)


def _items_of_document(document: Any, where: str, prefix: str) -> Iterator[tuple[str, Any]]:
    if document is None:  # an empty YAML document
        return
    if isinstance(document, list):
        # A bare YAML sequence of objects.
        for index, item in enumerate(document):
            yield f"{where}[{index}]", item
        return
    if isinstance(document, dict) and document.get("kind") in LIST_KINDS:
        items_path = f"{where}.items" if where else "items"
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ConfigError(f"{prefix}{items_path}: must be a list of objects")
        for index, item in enumerate(items):
            yield f"{items_path}[{index}]", item
        return
    yield where, document


def _parse_object(
    item: Any, where: str, source_name: str | None
) -> FlowSchema | PriorityLevelConfiguration:
    prefix = _prefix(source_name)
    place = where or "document"
    if not isinstance(item, dict):
        raise ConfigError(
            f"{prefix}{place}: expected an API object (a mapping), got {type_name(item)}"
        )
    kind = item.get("kind")
    name = _name_of(item)
    model: type[FlowSchema | PriorityLevelConfiguration]
    if kind == FLOW_SCHEMA:
        model = FlowSchema
    elif kind == PRIORITY_LEVEL:
        model = PriorityLevelConfiguration
    else:
        shown = "missing" if kind is None else f"{kind!r}"
        raise ConfigError(
            f"{prefix}{_label(where, None, name)}: kind: {shown}; "
            f"expected {FLOW_SCHEMA} or {PRIORITY_LEVEL}"
        )
    api_version = item.get("apiVersion")
    if api_version != API_VERSION:
        raise ConfigError(
            f"{prefix}{_label(where, kind, name)}: apiVersion: must be {API_VERSION}, "
            f"got {api_version!r}"
        )
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        raise ConfigError(
            f"{prefix}{_label(where, kind, name)}: {describe(exc, model)}"
        ) from None


def _name_of(item: dict[str, Any]) -> str | None:
    metadata = item.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        return metadata["name"]
    return None


def _prefix(source_name: str | None) -> str:
    return f"{source_name}: " if source_name else ""


def _label(where: str, kind: str | None, name: str | None) -> str:
    what = kind or "object"
    if name is not None:
        what = f'{what} "{name}"'
    return f"{where} ({what})" if where else what


def _first_problem(problems: Problems) -> str:
    path, message = problems[0]
    text = f"{path}: {message}"
    if len(problems) > 1:
        extra = len(problems) - 1
        text += f" (and {extra} more problem{'s' if extra > 1 else ''})"
    return text


# ---------------------------------------------------------------------------------------------
# The built-in configuration


@functools.cache
def bootstrap_objects() -> APFObjects:
    """The v1.37 bootstrap configuration: mandatory and suggested objects (reference §1.3, §1.4).

    Read from the packaged `bootstrap.yaml`, which is written the way `kubectl get flowschemas,
    prioritylevelconfigurations -o yaml` prints these objects from a fresh cluster.
    """
    text = resources.files("simapf.apf").joinpath("bootstrap.yaml").read_text(encoding="utf-8")
    return parse_objects(text, source_name="simapf/apf/bootstrap.yaml")


def mandatory_objects() -> APFObjects:
    """The `exempt` and `catch-all` FlowSchemas and priority levels the apiserver always keeps."""
    boot = bootstrap_objects()
    return APFObjects(
        tuple(fs for fs in boot.flow_schemas if fs.name in (EXEMPT, CATCH_ALL)),
        tuple(pl for pl in boot.priority_levels if pl.name in (EXEMPT, CATCH_ALL)),
    )


# ---------------------------------------------------------------------------------------------
# The configuration the APF controller ends up using


@dataclass(frozen=True)
class EffectiveConfig:
    """What the APF controller works with after digesting a set of objects.

    `flow_schemas` are in matching order; `priority_levels` maps names to levels;
    `dangling` names the FlowSchemas ignored because their priority level does not exist;
    `inserted` names the mandatory objects supplied ("FlowSchema/exempt", ...);
    `warnings` are the messages also sent to the log.
    """

    flow_schemas: tuple[FlowSchema, ...]
    priority_levels: Mapping[str, PriorityLevelConfiguration]
    dangling: tuple[str, ...] = ()
    inserted: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def build_effective_config(objects: APFObjects) -> EffectiveConfig:
    """Digest objects the way the apiserver does (reference §1.1, §1.5).

    Missing mandatory objects are added first, as the apiserver's bootstrap ensurer creates
    them as real objects, so they take part in the dangling check and the sort like any other.
    FlowSchemas naming a missing priority level are ignored (upstream sets their Dangling
    condition); the rest are sorted by (matchingPrecedence, name). A mandatory object whose spec
    differs from the built-in one is kept, with a warning, since a real apiserver would refuse
    or overwrite it (except the exempt level's shares and lendable percent).
    """
    warnings: list[str] = []
    inserted: list[str] = []
    mandatory = mandatory_objects()
    flow_schemas = list(objects.flow_schemas)
    priority_levels = {pl.name: pl for pl in objects.priority_levels}

    for pl in mandatory.priority_levels:
        given = priority_levels.get(pl.name)
        if given is None:
            priority_levels[pl.name] = pl
            inserted.append(f"{PRIORITY_LEVEL}/{pl.name}")
        elif _differs_from_mandatory(given, pl):
            warnings.append(
                f"{PRIORITY_LEVEL} {pl.name!r} differs from the mandatory one; "
                "a real apiserver would not allow that"
            )
    present = {fs.name for fs in flow_schemas}
    for fs in mandatory.flow_schemas:
        if fs.name not in present:
            flow_schemas.append(fs)
            inserted.append(f"{FLOW_SCHEMA}/{fs.name}")
        elif next(f for f in flow_schemas if f.name == fs.name).spec != fs.spec:
            warnings.append(
                f"{FLOW_SCHEMA} {fs.name!r} differs from the mandatory one; "
                "a real apiserver would not allow that"
            )

    dangling: list[str] = []
    usable: list[FlowSchema] = []
    for fs in flow_schemas:
        if fs.priority_level_name in priority_levels:
            usable.append(fs)
        else:
            dangling.append(fs.name)
            warnings.append(
                f"FlowSchema {fs.name!r} is ignored: its priority level "
                f"{fs.priority_level_name!r} does not exist"
            )
    usable.sort(key=lambda fs: (fs.matching_precedence, fs.name))
    for message in warnings:
        log.warning("%s", message)
    return EffectiveConfig(
        flow_schemas=tuple(usable),
        priority_levels=dict(sorted(priority_levels.items())),
        dangling=tuple(dangling),
        inserted=tuple(inserted),
        warnings=tuple(warnings),
    )


def _differs_from_mandatory(
    given: PriorityLevelConfiguration, mandatory: PriorityLevelConfiguration
) -> bool:
    if given.name == EXEMPT:
        # Operators may tune the exempt level's shares and lendable percent.
        return given.spec.model_copy(update={"exempt": None}) != mandatory.spec.model_copy(
            update={"exempt": None}
        )
    return given.spec != mandatory.spec
