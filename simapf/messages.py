"""Pydantic validation errors as one line in the user's terms.

Pydantic reports where a problem is as a `loc` tuple that mixes keys the user wrote with its own
bookkeeping: the tag of a discriminated union (`clients[0].open_loop.rate_per_s`), union members
(`gogc.int`), validator names, `[key]` for dict keys. We walk the model's types alongside the
`loc` so only the user's keys are kept, and we say the common problems the way a user would
(an unknown field, with the field they probably meant; a missing or unknown `kind`; a byte
quantity that does not parse).
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

# Problems worth reporting first: a typo in a field name also makes the field it should have
# been "missing", and the typo is the thing to fix.
_FIRST = {"extra_forbidden": 0, "union_tag_invalid": 1, "union_tag_not_found": 1}

# Where the bad value helps the reader, it is shown; containers are not (they can be long).
_SHOW_INPUT = {
    "greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of",
    "int_parsing", "int_from_float", "float_parsing", "bool_parsing", "literal_error",
    "string_too_short", "string_too_long",
}  # fmt: skip


# Type errors, said shortly: pydantic's "Input should be a valid number, unable to parse string
# as a number" is long for "expected a number".
_EXPECTED = {
    "float_parsing": "a number", "float_type": "a number",
    "int_parsing": "an integer", "int_type": "an integer", "int_from_float": "an integer",
    "bool_parsing": "true or false", "bool_type": "true or false",
    "string_type": "a string", "finite_number": "a finite number",
}  # fmt: skip


@dataclass(frozen=True)
class Problem:
    path: str  # e.g. "clients[2].rate_per_s"; "" when the message carries its own path
    message: str
    meant: str | None = None  # for an unknown field: the path of the field probably meant

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def describe(exc: ValidationError, root: type[BaseModel] | None = None, prefix: str = "") -> str:
    """The first problem of `exc` (and how many more) as one line."""
    problem, more = first_problem(exc, root, prefix)
    text = str(problem)
    if more:
        text += f" (and {more} more problem{'s' if more > 1 else ''})"
    return text


def first_problem(exc: ValidationError, root: type[BaseModel] | None = None, prefix: str = "") -> tuple[Problem, int]:
    """The problem to show and the number of other, distinct problems."""
    errors = exc.errors(include_url=False)
    # Names of required fields that are missing: what an unknown field most likely meant.
    missing = {keys[-1] for e in errors if e["type"] == "missing" for keys in [_user_keys(e["loc"], root)[0]] if keys}
    problems = [_problem(e, root, prefix, missing) for e in errors]
    order = sorted(range(len(errors)), key=lambda i: (_FIRST.get(errors[i]["type"], 2), i))
    first = problems[order[0]]
    # Errors that say the same thing again are not "more problems": the missing field an unknown
    # field was probably meant to be, and the other members of a union failing on one value.
    rest = {str(p) for i, p in enumerate(problems) if i != order[0] and p.path != first.path}
    if first.meant is not None:
        rest.discard(str(Problem(first.meant, "required field missing")))
    return first, len(rest)


# ------------------------------------------------------------------------------- one error


def _problem(error: dict[str, Any], root: type[BaseModel] | None, prefix: str, missing: set[Any]) -> Problem:
    kind = error["type"]
    keys, holder, union_at = _user_keys(error["loc"], root)
    msg = error["msg"]
    value = error.get("input")
    meant = None
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif kind == "assertion_error":
        msg = msg.removeprefix("Assertion failed, ")
    if kind == "extra_forbidden":
        msg = "unknown field"
        guess = _guess(str(keys[-1]), _field_names(holder), missing) if keys else None
        if guess:
            msg += f"; did you mean {guess!r}?"
            meant = _format([*_split(prefix), *keys[:-1], guess])
    elif kind == "missing":
        msg = "required field missing"
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = str(error.get("ctx", {}).get("discriminator", "'kind'")).strip("'")
        keys = keys + [discriminator]
        tags = _tags(union_at)
        expected = f"; expected one of: {', '.join(tags)}" if tags else ""
        if kind == "union_tag_invalid":
            msg = f"unknown {discriminator} {brief(error['ctx']['tag'])}{expected}"
        else:
            shown = "required field missing" if isinstance(value, dict) else f"cannot be read from {type_name(value)}"
            msg = f"{shown}{expected}"
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        msg = f"expected a mapping, got {type_name(value)}"
    elif kind in ("list_type", "tuple_type"):
        msg = f"expected a list, got {type_name(value)}"
    elif kind in ("float_parsing", "float_type") and keys and str(keys[-1]).endswith("_bytes"):
        msg = f"expected a number of bytes or a quantity like 512Mi or 2G, got {_shown(value)}"
    elif kind in _EXPECTED:
        msg = f"expected {_EXPECTED[kind]}, got {_shown(value)}"
    elif kind in _SHOW_INPUT and _scalar(value) and "[key]" not in error["loc"]:
        msg = f"{msg}, got {_shown(value)}"
    if "[key]" in error["loc"] and keys:
        keys = keys[:-1]  # the key is the problem, so the path ends at its mapping
        msg = f"key {brief(value)}: {msg}"
    return Problem(_format([*_split(prefix), *keys]), msg, meant)


def _user_keys(loc: tuple[Any, ...], root: type[BaseModel] | None) -> tuple[list[Any], Any, Any]:
    """The parts of `loc` the user wrote; the model holding the last of them (whose fields an
    unknown key is compared with); and the discriminated union met last (for its tags)."""
    keys: list[Any] = []
    tp: Any = root
    holder: Any = None
    union_at: Any = None
    for part in loc:
        tp, args = _unwrap(tp)
        if _is_union(tp):
            members = [m for m in typing.get_args(tp) if m is not type(None)]
            if args is not None or all(_tag_of(m) for m in members):
                union_at = members
            chosen = next((m for m in members if part in (_tag_of(m), getattr(m, "__name__", None))), None)
            tp = chosen
            continue  # a union member's name, not a key
        if isinstance(part, int):
            keys.append(part)
            tp = _item_type(tp)
            continue
        if part == "[key]" or (tp is None and isinstance(part, str) and ("[" in part or part.startswith("function-"))):
            continue
        keys.append(part)
        holder = _strip_none(tp)
        tp = _child_type(tp, part)
    tp, _ = _unwrap(tp)
    if _is_union(tp):
        union_at = [m for m in typing.get_args(tp) if m is not type(None)]
    return keys, holder, union_at


# ------------------------------------------------------------------------------- types


def _unwrap(tp: Any) -> tuple[Any, Any]:
    """Strip Annotated; return the type and a discriminator if the annotation named one."""
    discriminator = None
    while typing.get_origin(tp) is typing.Annotated:
        tp, *meta = typing.get_args(tp)
        for m in meta:
            if isinstance(m, FieldInfo) and m.discriminator is not None:
                discriminator = m.discriminator
    return tp, discriminator


def _is_union(tp: Any) -> bool:
    if typing.get_origin(tp) not in (typing.Union, types.UnionType):
        return False
    return len([m for m in typing.get_args(tp) if m is not type(None)]) > 1


def _item_type(tp: Any) -> Any:
    tp, _ = _unwrap(tp)
    tp = _strip_none(tp)
    if typing.get_origin(tp) in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return args[0] if args else None
    return None


def _child_type(tp: Any, key: Any) -> Any:
    tp, _ = _unwrap(tp)
    tp = _strip_none(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, info in tp.model_fields.items():
            if key in (name, info.alias):
                return info.annotation
        return None
    if typing.get_origin(tp) is dict:
        args = typing.get_args(tp)
        return args[1] if len(args) == 2 else None
    return None


def _strip_none(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def _tag_of(tp: Any) -> str | None:
    """The `kind` literal of a member of a discriminated union."""
    if not (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return None
    info = tp.model_fields.get("kind")
    if info is None or typing.get_origin(info.annotation) is not typing.Literal:
        return None
    values = typing.get_args(info.annotation)
    return str(values[0]) if len(values) == 1 else None


def _tags(members: Any) -> list[str]:
    return [t for t in (_tag_of(m) for m in members or ()) if t]


def _field_names(tp: Any) -> list[str]:
    tp = _strip_none(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [info.alias or name for name, info in tp.model_fields.items()]
    return []


# ------------------------------------------------------------------------------- text


def _split(prefix: str) -> list[str]:
    return [p for p in prefix.split(".") if p] if prefix else []


def _format(keys: list[Any]) -> str:
    path = ""
    for part in keys:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            part = str(part)
            if len(part) > BRIEF_CHARS:
                part = f"{part[:BRIEF_CHARS]}... ({len(part):,} characters)"
            path += f".{part}" if path else part
    return path


# A value shown in a message is cut to this many characters: the message is one line.
BRIEF_CHARS = 60


def brief(value: Any) -> str:
    """repr(value), cut short if long: "'aaaa...' (1,000,000 characters)"."""
    text = repr(value)
    if len(text) <= BRIEF_CHARS + 2:
        return text
    size = f"{len(value):,} characters" if isinstance(value, str) else f"{len(text):,} characters written out"
    return f"{text[:BRIEF_CHARS]}... ({size})"


def _guess(key: str, known: list[str], missing: set[Any]) -> str | None:
    """The field an unknown key was probably meant to be: the same name with a unit suffix
    (rate for rate_per_s) or a close spelling, preferring a required field that is missing."""
    for candidates in ([k for k in known if k in missing], known):
        extended = [k for k in candidates if k.startswith(key + "_")]
        if len(extended) == 1:
            return extended[0]
        close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
        if close:
            return close[0]
    return None


def _shown(value: Any) -> str:
    """A value as the user wrote it in YAML: true, .nan, 'text'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if value != value else ("-.inf" if value < 0 else ".inf")
    return brief(value) if _scalar(value) and value is not None else type_name(value)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def type_name(value: Any) -> str:
    """What a value is, in a user's words: "a number", "a list", "null"."""
    if value is None:
        return "null"
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list", dict: "a mapping"}
    return names.get(type(value), type(value).__name__)
