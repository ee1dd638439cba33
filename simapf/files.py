"""Reading the user's files with one-line errors, and writing ours so none is left half-written."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import numbers
import os
import shutil
import stat
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

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


def not_regular(mode: int) -> str:
    """What a path of this `st_mode` is, when it is not a regular file: "is a directory", ..."""
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
            raise ConfigError(f"{path}: {not_regular(st.st_mode)}")
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
    # Paths as the objects' own errors name them: spec.x of a single document, documents[1].x
    check_text(data[0] if all_documents and len(data) == 1 else {"documents": data} if all_documents else data, where)
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


# ------------------------------------------------------------------ staging directories

# Every output is written in a staging directory beside (or inside) its destination first, then
# renamed into place. The staging directory holds an owner file, locked for as long as the
# process writing it lives: a later command writing the same kind of output there removes the
# staging a killed process left (its lock is free), and never one still being written (locked),
# one of another kind, or a directory without an owner file (not made by simapf).
STAGING_PREFIX = ".simapf-staging."
_OWNER = ".simapf-owner"

try:
    import fcntl
except ImportError:  # not POSIX: staging carries no lock, and no leftover is ever removed
    fcntl = None  # type: ignore[assignment]


def _own(staging: Path, kind: str) -> int | None:
    """Put a locked owner file into `staging`; returns its descriptor, to keep open while writing."""
    if fcntl is None:
        return None
    fd, tmp = tempfile.mkstemp(prefix=f"{_OWNER}.", dir=staging)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (json.dumps({"kind": kind, "pid": os.getpid()}) + "\n").encode())
        os.replace(tmp, staging / _OWNER)  # under the name others look for only once it is locked
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock_if_stale(entry: Path, kind: str) -> int | None:
    """If `entry` is a staging directory of `kind` whose process is gone: its owner file's
    descriptor, now locked by this process. Otherwise None."""
    if fcntl is None or entry.is_symlink() or not entry.is_dir():
        return None
    try:
        fd = os.open(entry / _OWNER, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None  # no owner file: not simapf's staging, or its process is still setting it up
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its process lives
        owner = json.loads(os.read(fd, 4096))
        if isinstance(owner, dict) and owner.get("kind") == kind:
            return fd
    except (OSError, ValueError):
        pass
    os.close(fd)
    return None


def _staging_entries(folder: Path) -> list[Path]:
    try:
        return [folder / name for name in sorted(os.listdir(folder)) if name.startswith(STAGING_PREFIX)]
    except OSError:
        return []


def stale_staging(folder: Path, kind: str) -> list[Path]:
    """The staging directories of `kind` output in `folder` whose process was killed."""
    found = []
    for entry in _staging_entries(folder):
        fd = _lock_if_stale(entry, kind)
        if fd is not None:
            os.close(fd)
            found.append(entry)
    return found


def remove_stale_staging(folder: Path, kind: str) -> None:
    """Remove the staging directories of `kind` output that killed processes left in `folder`."""
    for entry in _staging_entries(folder):
        fd = _lock_if_stale(entry, kind)
        if fd is not None:
            try:
                shutil.rmtree(entry, ignore_errors=True)
            finally:
                os.close(fd)


@contextmanager
def _staging(parent: Path, kind: str) -> Iterator[Path]:
    """A new staging directory in `parent`, owned by this process until the block ends; removed
    if the block fails. The block moves its files out (`_disown` first, to move it whole)."""
    remove_stale_staging(parent, kind)
    tmp = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    owner = None
    try:
        owner = _own(tmp, kind)
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if owner is not None:
            os.close(owner)


def _disown(staging: Path) -> None:
    # The lock stays held (its descriptor is open) until the staging directory has been moved.
    (staging / _OWNER).unlink(missing_ok=True)


def _make_folder(folder: Path) -> Path | None:
    """Make `folder` with its missing parents; returns the topmost one made, None if it existed."""
    top, path = None, folder.absolute()
    while not os.path.lexists(path):
        top, path = path, path.parent
    folder.mkdir(parents=True, exist_ok=True)
    return top


def _unmake_folder(folder: Path, top: Path | None) -> None:
    """Remove the folders `_make_folder` made, from `folder` up to `top`, while they are empty."""
    path = folder.absolute()
    while top is not None:
        try:
            path.rmdir()
        except OSError:
            return
        if path == top:
            return
        path = path.parent


def check_writable_folder(path: Path, where: str) -> None:
    """Refuse a folder to write in (made if missing) that cannot be made or written: one under a
    regular file or a broken symbolic link, or in a folder simapf may not write in."""
    folder = path
    while not folder.exists() and folder != folder.parent:
        if os.path.lexists(folder):
            raise SimapfError(f"{where}: {folder} is a broken symbolic link")
        folder = folder.parent
    if not folder.is_dir():
        raise SimapfError(f"{where}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        read_only = hasattr(os, "statvfs") and os.statvfs(folder).f_flag & getattr(os, "ST_RDONLY", 1)
        why = "read-only file system" if read_only else "permission denied"
        raise SimapfError(f"{where}: cannot write: {why} on {folder}")


# ------------------------------------------------------------------ output directories

# simapf's own output directories carry this file: what kind of output they hold, which files
# are simapf's, and each one's size and sha256 as written, so that writing the same kind of
# output there again replaces only those files, and a reader can tell a file changed since.
OUTPUT_MARKER = ".simapf-output.json"


def _marker(out: Path) -> dict | None:
    try:
        data = json.loads((out / OUTPUT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return None
    return data


def read_output_marker(out: Path) -> dict | None:
    """`out`'s marker; None if it has none, and a `ConfigError` naming it if it is damaged."""
    path = out / OUTPUT_MARKER
    if not os.path.lexists(path):
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: damaged, not the JSON simapf wrote ({_first_line(exc)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or not isinstance(data.get("files"), list):
        raise ConfigError(f"{path}: damaged, not the list of simapf's files simapf wrote")
    return data


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return " ".join(text.splitlines()[0].split()) if text.strip() else type(exc).__name__


def _fingerprint(path: Path) -> dict[str, Any]:
    """Its size and sha256; a file that cannot be read is one line naming it."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror or err}") from None


def changed_since_written(out: Path, name: str, marker: dict) -> str | None:
    """How `out/name` differs from the file simapf wrote, by the size and sha256 its marker
    recorded: None if it is the same, or if the marker recorded none (written by an older simapf)."""
    recorded = (marker.get("contents") or {}).get(name) if isinstance(marker.get("contents"), dict) else None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("bytes"), int):
        return None
    now = _fingerprint(out / name)
    if now["bytes"] != recorded["bytes"]:
        cut = " (truncated?)" if now["bytes"] < recorded["bytes"] else ""
        return f"{now['bytes']:,} bytes, not the {recorded['bytes']:,} simapf wrote{cut}"
    if now["sha256"] != recorded.get("sha256"):
        return "its content changed since simapf wrote it (sha256 differs)"
    return None


@contextmanager
def refused_by_the_os(where: str) -> Iterator[None]:
    """What the OS refuses of a path the user gave (a name too long, a loop of symbolic links),
    as one line naming `where`."""
    try:
        yield
    except OSError as err:
        raise SimapfError(f"{where}: {err.strerror or err}") from None


def check_output_directory(out: Path, kind: str, force: bool = False, option: str = "--out") -> None:
    """Refuse, before any work is done, an `--out` that would overwrite what is not simapf's.

    Allowed: a path that does not exist yet (its folders are made), an empty directory, a
    directory holding simapf's own earlier output of the same `kind`, or any directory with
    `force` (then simapf's files are added beside what is there, replacing only files of the
    same names). Staging that a killed command writing `kind` left does not count.
    """
    with refused_by_the_os(f"{option} {out}"):
        _check_output_directory(out, kind, force, option)


def _check_output_directory(out: Path, kind: str, force: bool, option: str) -> None:
    where = f"{option} {out}"
    if out.is_symlink() and not out.exists():
        raise SimapfError(f"{where}: is a broken symbolic link")
    if os.path.lexists(out) and not out.is_dir():
        raise SimapfError(f"{where}: exists and is not a directory")
    if out.is_dir():
        if not os.access(out, os.W_OK | os.X_OK):
            raise SimapfError(f"{where}: cannot write: permission denied")
        marker = _marker(out)
        leftovers = set(stale_staging(out, kind))
        holds = [p for p in out.iterdir() if p not in leftovers]
        if force or not holds or (marker is not None and marker.get("kind") == kind):
            return
        what = f"simapf {marker.get('kind')} output" if marker is not None else "files that are not simapf's"
        raise SimapfError(
            f"{where}: directory is not empty (it holds {what}); choose a new directory, "
            "or pass --force to add simapf's files beside what is there"
        )
    check_writable_folder(out.parent, where)


@contextmanager
def output_directory(out: Path, kind: str, force: bool = False, keep_earlier: bool | Callable[[], bool] = False,
                     option: str = "--out") -> Iterator[Path]:  # fmt: skip
    """Yield an empty staging directory; when the block ends, its files are `out`'s.

    Nothing of the user's is deleted: `out` must pass `check_output_directory`. A new `out`
    appears whole (the staging directory is renamed to it); an existing one receives the new
    files by rename, after which simapf's files of its earlier output that this one does not
    write are removed, unless `keep_earlier` (an update of part of the output: they stay
    simapf's; a function is asked when the block ends, for output that turns out partial). If
    the block fails (an exception, or a signal the CLI turns into one), the staging directory
    is removed, and so are the folders made for `out`: `out` is as it was.
    If the process is killed, the next output of this `kind` there removes its staging.
    """
    check_output_directory(out, kind, force, option)
    existed = out.is_dir()
    # inside an existing `out`: `--out .` needs no right to write beside it
    staging_parent = out if existed else out.absolute().parent
    if existed:
        remove_stale_staging(out.absolute().parent, kind)  # left when `out` did not exist yet
    made = None if existed else _make_folder(staging_parent)
    try:
        with _staging(staging_parent, kind) as tmp:
            yield tmp
            try:
                _move_into(tmp, out, kind, existed, keep_earlier() if callable(keep_earlier) else keep_earlier)
            except OSError as err:
                if existed or err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                # Another command made `out` while this one ran (two runs given the same --out).
                raise SimapfError(f"{option} {out}: another command wrote there while this one ran; this one "
                                  "wrote nothing: run it again with a directory of its own") from None  # fmt: skip
    except BaseException:
        _unmake_folder(staging_parent, made)
        raise


def _move_into(tmp: Path, out: Path, kind: str, existed: bool, keep_earlier: bool) -> None:
    """The end of `output_directory`: the marker written, then the staging's files made `out`'s."""
    files = sorted(p.name for p in tmp.iterdir() if p.name != _OWNER)
    earlier = _marker(out) if existed else None
    same_kind = earlier is not None and earlier.get("kind") == kind
    listed = files
    contents = {name: _fingerprint(tmp / name) for name in files if (tmp / name).is_file()}
    if keep_earlier and same_kind:
        kept = [n for n in earlier["files"] if isinstance(n, str) and (out / n).is_file() and n != OUTPUT_MARKER]
        listed = sorted(set(files) | set(kept))
        recorded = earlier.get("contents") if isinstance(earlier.get("contents"), dict) else {}
        contents.update({n: recorded[n] for n in kept if n not in contents and n in recorded})
    marker = {"kind": kind, "files": listed, "contents": dict(sorted(contents.items()))}
    write_text_atomic(tmp / OUTPUT_MARKER, json_text(marker, indent=1) + "\n")
    _disown(tmp)
    if not existed:
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; an output is an ordinary folder
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


# ------------------------------------------------------------------ single output files


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # through symbolic links, `..` and hard links
    except OSError:
        return False


def check_output_file(path: str | Path, option: str, force: bool = False, inputs: Iterable[str | Path] = (),
                      ours: Callable[[Path], bool] | None = None) -> None:  # fmt: skip
    """Refuse, before any work is done, a file to write that would lose the user's data or that
    cannot be written, with one line naming `option`, the path and the reason.

    Refused: a directory (or a name only a directory can have: `.`, `..`, `DIR/`); a path under
    a regular file; a folder simapf may not write in; one of `inputs`, the files the command
    reads (compared as files on disk: through symbolic links, `..` and hard links), even with
    `force`; something that is not a regular file (a device, a pipe); and an existing file,
    unless `force` or `ours(path)` says it is simapf's own earlier output of this kind. A
    missing folder is made when the file is written, as for `--out` directories.
    """
    with refused_by_the_os(f"{option} {path}"):
        _check_output_file(path, option, force, inputs, ours)


def _check_output_file(path: str | Path, option: str, force: bool, inputs: Iterable[str | Path],
                       ours: Callable[[Path], bool] | None) -> None:  # fmt: skip
    where = f"{option} {path}"
    text = os.fspath(path)
    target = Path(text)
    if text.endswith(("/", os.sep)) or target.name in ("", ".", "..") or target.is_dir():
        raise SimapfError(f"{where}: is a directory; give the name of the file to write")
    check_writable_folder(target.parent, where)
    for source in inputs:
        if _same_file(target, Path(source)):
            raise SimapfError(f"{where}: is {source}, which this command reads; choose another file "
                              "(--force never replaces a command's own input)")  # fmt: skip
    if target.exists() and not target.is_file():
        raise SimapfError(f"{where}: exists and is not a regular file")
    if os.path.lexists(target) and not force and not (ours is not None and target.is_file() and ours(target)):
        raise SimapfError(f"{where}: exists; choose another name, or pass --force to replace it")


@contextmanager
def output_file(path: str | Path, kind: str, option: str, force: bool = False, inputs: Iterable[str | Path] = (),
                ours: Callable[[Path], bool] | None = None) -> Iterator[Path]:  # fmt: skip
    """Yield a temporary path to write `path`'s content to; when the block ends, it is `path`.

    `path` must pass `check_output_file` (call it before the work too: this checks again before
    the rename). The temporary file is in a staging directory beside `path` (see
    `output_directory`), so the rename is atomic and a killed command's leftover is removed by
    the next one writing `kind` there. If the block fails, nothing is left: no temporary file,
    no folder made for it; an OSError (a full disk, say) is a `SimapfError` naming `path`.
    """
    inputs = list(inputs)
    check_output_file(path, option, force, inputs, ours)
    target = Path(path)
    folder = target.absolute().parent
    made = None
    try:
        made = _make_folder(folder)
        with _staging(folder, kind) as tmp:
            yield tmp / target.name
            check_output_file(path, option, force, inputs, ours)  # nothing appeared there meanwhile
            os.replace(tmp / target.name, target)
            _disown(tmp)
            tmp.rmdir()
    except OSError as err:
        _unmake_folder(folder, made)
        raise SimapfError(f"{option} {path}: cannot write: {_first_line(err)}") from None
    except BaseException:
        _unmake_folder(folder, made)
        raise


def write_output_file(path: str | Path, text: str, kind: str, option: str, force: bool = False,
                      inputs: Iterable[str | Path] = (), ours: Callable[[Path], bool] | None = None) -> Path:  # fmt: skip
    """Write `text` to `path` as `output_file` does; returns `path`."""
    with output_file(path, kind, option, force, inputs, ours) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_files_together(contents: dict[Path, bytes], kind: str) -> None:
    """Write several files as one unit: all of them, or none (each target as it was before).

    Every file is first written whole under a temporary name in a staging directory beside its
    target (owned, as `output_directory`'s: a killed command's leftover is removed by the next
    one writing `kind` there); only then are they renamed over their targets, in the given
    order. An existing target stays in place until its replacement is complete, with a hard link
    to it kept aside; if a rename fails (or the process is interrupted, which the CLI turns into
    an exception), the targets already replaced get their earlier files back and new ones are
    removed.
    """
    staged: list[tuple[Path, Path, Path | None]] = []  # (new file, target, link to the old one)
    replaced: list[tuple[Path, Path | None]] = []
    with ExitStack() as stack:
        staging: dict[Path, Path] = {}  # a target's directory -> its staging directory
        try:
            for n, (target, data) in enumerate(contents.items()):
                parent = target.absolute().parent
                if parent not in staging:
                    staging[parent] = stack.enter_context(_staging(parent, kind))
                new = staging[parent] / f"{n}.new"
                new.write_bytes(data)
                os.chmod(new, 0o666 & ~_umask())
                old = None
                if target.exists() or target.is_symlink():
                    old = staging[parent] / f"{n}.old"
                    try:
                        os.link(target, old, follow_symlinks=False)
                    except OSError:  # a filesystem without hard links: a copy does as well
                        shutil.copy2(target, old, follow_symlinks=False)
                staged.append((new, target, old))
            for new, target, old in staged:
                os.replace(new, target)
                replaced.append((target, old))
        except BaseException:
            for target, old in reversed(replaced):
                try:  # put back all that can be, whatever failed first
                    if old is not None:
                        os.replace(old, target)
                    else:
                        target.unlink()
                except OSError:
                    pass
            raise
        for folder in staging.values():  # done: what is left in them is the old files' links
            shutil.rmtree(folder, ignore_errors=True)
