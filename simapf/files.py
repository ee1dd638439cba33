"""Reading the user's files with one-line errors, and writing ours so none is left half-written."""

from __future__ import annotations

import json
import math
import numbers
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import yaml

from simapf.errors import ConfigError, SimapfError


def read_text(path: Path) -> str:
    """The file's text; a missing or unreadable file is a `ConfigError` naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


# What a YAML document may hold once its aliases are expanded, and how deep it may nest. No input
# simapf reads needs more than a few thousand values or a dozen levels; a few hundred bytes of
# nested aliases ("billion laughs") expand to billions, and deep nesting exhausts Python's stack.
MAX_YAML_VALUES = 1_000_000
MAX_YAML_DEPTH = 64


def _too_deep(where: str) -> ConfigError:
    return ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep; no simapf input needs that")


def check_yaml_size(data: Any, where: str) -> None:
    """Refuse a document larger than MAX_YAML_VALUES values with its aliases expanded, or nested
    deeper than MAX_YAML_DEPTH; counted without expanding anything, and stopped at the limit."""
    count = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise ConfigError(f"{where}: more than {MAX_YAML_VALUES:,} values once its aliases are expanded "
                              "(nested YAML aliases?); simapf reads no input that large")  # fmt: skip
        if depth > MAX_YAML_DEPTH:
            raise _too_deep(where)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def check_text(data: Any, where: str) -> None:
    """Refuse a string simapf could not write out: one holding a lone surrogate, which no UTF-8
    file can hold (YAML's "\\ud800" escape makes one, and so do command-line bytes that are not
    UTF-8). Names and labels end up in outputs, so every string and key is checked; the first bad
    one is named by its path."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str) and not _encodable(node):
            raise _not_utf8(where, path, node)
        if isinstance(node, dict):
            for key in node:
                if isinstance(key, str) and not _encodable(key):
                    raise _not_utf8(where, path, key, "key ")
            stack.extend((value, f"{path}.{key}" if path else str(key)) for key, value in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((value, f"{path}[{i}]") for i, value in reversed(list(enumerate(node))))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_utf8(where: str, path: str, text: str, what: str = "") -> ConfigError:
    surrogate = next(ch for ch in text if "\ud800" <= ch <= "\udfff")
    at = f"{path}: " if path else ""
    return ConfigError(f"{where}: {at}{what}{text!r} cannot be written as UTF-8: it holds the lone surrogate "
                       f"{ascii(surrogate)[1:-1]} (half of a UTF-16 pair, or a byte that was not UTF-8)")  # fmt: skip


def read_yaml(path: Path) -> Any:
    """The file's YAML; bad YAML is a `ConfigError` with the line and column of the problem, and
    so is one too large or too deep (`check_yaml_size`)."""
    text = read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(" ".join(f"{path}: invalid YAML{where}: {problem}".split())) from None
    except RecursionError:
        raise _too_deep(str(path)) from None
    check_yaml_size(data, str(path))
    check_text(data, str(path))
    return data


def json_text(value: Any, **options: Any) -> str:
    """`value` as strict JSON, which every JSON file and --json output of simapf is: JSON has no
    NaN or infinity, so those are null (a statistic with no samples, a ratio over nothing).
    allow_nan=False turns any that slips past into an error instead of a file no JSON reader
    takes. `options` are json.dumps's (indent, sort_keys, default)."""
    return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (bool, str)) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)  # numpy's too
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    return value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write under a temporary name in the same directory, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; ours are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# simapf's own output directories carry this file: what kind of output they hold and which files
# are simapf's, so that writing the same kind of output there again replaces only those files.
OUTPUT_MARKER = ".simapf-output.json"


def _marker(out: Path) -> dict | None:
    try:
        data = json.loads((out / OUTPUT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None
    return data


def check_output_directory(out: Path, kind: str, force: bool = False) -> None:
    """Refuse, before any work is done, an `--out` that would overwrite what is not simapf's.

    Allowed: a path that does not exist yet, an empty directory, a directory holding simapf's
    own earlier output of the same `kind`, or any directory with `force` (then simapf's files
    are added beside what is there, replacing only files of the same names).
    """
    if out.exists() and not out.is_dir():
        raise SimapfError(f"--out {out}: exists and is not a directory")
    if out.is_dir():
        if not os.access(out, os.W_OK | os.X_OK):
            raise SimapfError(f"--out {out}: cannot write: permission denied")
        marker = _marker(out)
        if force or not any(out.iterdir()) or (marker is not None and marker.get("kind") == kind):
            return
        what = f"simapf {marker.get('kind')} output" if marker is not None else "files that are not simapf's"
        raise SimapfError(
            f"--out {out}: directory is not empty (it holds {what}); choose a new directory, "
            "or pass --force to add simapf's files beside what is there"
        )
    parent = _existing_ancestor(out)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SimapfError(f"--out {out}: cannot write: permission denied on {parent}")


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@contextmanager
def output_directory(out: Path, kind: str, force: bool = False, keep_earlier: bool = False) -> Iterator[Path]:
    """Yield an empty staging directory; when the block ends, its files are `out`'s.

    Nothing of the user's is deleted: `out` must pass `check_output_directory`. A new `out`
    appears whole (the staging directory is renamed to it); an existing one receives the new
    files by rename, after which simapf's files of its earlier output that this one does not
    write are removed, unless `keep_earlier` (an update of part of the output: they stay
    simapf's). If the block fails (an exception, or a signal the CLI turns into one), the
    staging directory is removed and `out` is as it was.
    """
    check_output_directory(out, kind, force)
    existed = out.is_dir()
    if existed:
        staging_parent = out  # inside: `--out .` needs no right to write beside it
    else:
        staging_parent = out.absolute().parent
        staging_parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".simapf-staging.", dir=staging_parent))
    try:
        yield tmp
        files = sorted(p.name for p in tmp.iterdir())
        earlier = _marker(out) if existed else None
        same_kind = earlier is not None and earlier.get("kind") == kind
        listed = files
        if keep_earlier and same_kind:
            kept = [n for n in earlier["files"] if isinstance(n, str) and (out / n).is_file() and n != OUTPUT_MARKER]
            listed = sorted(set(files) | set(kept))
        write_text_atomic(tmp / OUTPUT_MARKER, json_text({"kind": kind, "files": listed}, indent=1) + "\n")
        if not existed:
            os.replace(tmp, out)
            return
        for name in files:
            os.replace(tmp / name, out / name)
        os.replace(tmp / OUTPUT_MARKER, out / OUTPUT_MARKER)
        tmp.rmdir()
        if same_kind:
            for name in set(earlier["files"]) - set(listed):
                if isinstance(name, str) and "/" not in name and name not in (OUTPUT_MARKER, ""):
                    (out / name).unlink(missing_ok=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
