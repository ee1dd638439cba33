"""Reading the user's files with one-line errors, and writing ours so none is left half-written."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import yaml

from simapf.errors import ConfigError, SimapfError


# The most bytes simapf reads from one input file, by kind, so that a wrong path (a disk image, a
# log, /dev/zero) is refused at once instead of filling memory. Each is far above what such a file
# holds in use and within what simapf then processes in a minute or so: YAML is parsed at a few
# hundred KiB a second, and a replay keeps every trace row in memory. README.md lists them.
MAX_YAML_BYTES = 2 * 2**20  # scenarios, APF objects, sweep, optimize and figures specs, records
MAX_TEXT_BYTES = 16 * 2**20  # calibration data, api-resources.txt, a replay level, provenance
MAX_METRICS_BYTES = 128 * 2**20  # a scraped /metrics page, a query_range result
MAX_TRACE_BYTES = 128 * 2**20  # a replay trace (a few million rows)


def _size(n: int) -> str:
    return f"{n / 2**20:.3g} MiB" if n >= 2**20 else f"{n / 2**10:.3g} KiB" if n >= 2**10 else f"{n} bytes"


def _not_regular(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory"
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "special")  # fmt: skip
    return f"is {kind}, not a regular file"


def read_bytes(path: Path, limit: int = MAX_TEXT_BYTES, what: str = "an input file") -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else (missing, unreadable,
    a directory, a device, a FIFO, too large) is a `ConfigError` naming it. Nothing is read
    past `limit`, and a FIFO is not waited on."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it changes nothing for a file).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: {_not_regular(st.st_mode)}")
        raise _too_large(path, st.st_size, limit, what)
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(limit + 1)  # the file may have grown since
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise _too_large(path, None, limit, what)  # its size said less: a growing file, a /proc file
    return data


def _too_large(path: Path, size: int | None, limit: int, what: str) -> ConfigError:
    size_text = f"{_size(size)} is more" if size is not None else "more"
    return ConfigError(f"{path}: {size_text} than simapf reads from {what} ({_size(limit)})")


def read_text(path: Path, limit: int = MAX_TEXT_BYTES, what: str = "an input file") -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes (`read_bytes`)."""
    data = read_bytes(path, limit, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as open() reads text


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


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping of YAML that writes one key twice."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key written twice in one mapping, which YAML would silently
    keep as the last. (Not libyaml's faster one: it crashes the process on deep nesting, where
    this one raises RecursionError.)"""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # `<<: *defaults` merges keys that an explicit one may override
                key = self.construct_object(key_node)
                if key in seen:
                    raise DuplicateKeyError(
                        None, None, f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                        key_node.start_mark)  # fmt: skip
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _yaml_error(where: str, exc: yaml.YAMLError) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return ConfigError(" ".join(f"{where}: invalid YAML{at}: {problem}".split()))


def load_yaml(text: str, where: str, all_documents: bool = False) -> Any:
    """Parse YAML text (every document of it, as a list, with `all_documents`); bad YAML, a
    duplicate key, or a document too large or too deep (`check_yaml_size`) is a `ConfigError`
    that starts with `where` and gives the line and column of the problem."""
    try:
        data = list(yaml.load_all(text, Loader=_Loader)) if all_documents else yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise _yaml_error(where, exc) from None
    except RecursionError:
        raise _too_deep(where) from None
    check_yaml_size(data, where)
    return data


def parse_yaml_value(text: str, where: str) -> Any:
    """A value given on the command line (`--set key=VALUE`), read as YAML: text that is not
    YAML is taken as the string it is, and empty text as ""; a duplicate key, or a value too
    large or too deep, is a `ConfigError` starting with `where`."""
    if not text.strip():
        return ""
    try:
        data = yaml.load(text, Loader=_Loader)
    except DuplicateKeyError as exc:
        raise _yaml_error(where, exc) from None
    except yaml.YAMLError:
        return text
    except RecursionError:
        raise _too_deep(where) from None
    check_yaml_size(data, where)
    return data


def read_yaml(path: Path, empty_ok: bool = False) -> Any:
    """The YAML of a file of at most MAX_YAML_BYTES (`read_text`, `load_yaml`). A file with no
    YAML in it (empty, or only comments) is a `ConfigError` unless `empty_ok`: what a user
    meant to give is not there."""
    data = load_yaml(read_text(path, MAX_YAML_BYTES, "a YAML file"), str(path))
    if data is None and not empty_ok:
        raise ConfigError(f"{path}: empty: no YAML in it")
    return data


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


def check_output_file(path: Path, option: str = "--out") -> None:
    """Refuse, before any work is done, an output file path that cannot be written: a directory
    or other non-file, a path under a file, a folder simapf may not write in."""
    if path.is_dir():
        raise SimapfError(f"{option} {path}: is a directory; name a file")
    if path.exists() and not path.is_file():
        raise SimapfError(f"{option} {path}: exists and is not a regular file")
    parent = _existing_ancestor(path.parent)
    if not parent.is_dir():
        raise SimapfError(f"{option} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SimapfError(f"{option} {path}: cannot write: permission denied on {parent}")


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
        write_text_atomic(tmp / OUTPUT_MARKER, json.dumps({"kind": kind, "files": listed}, indent=1) + "\n")
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
