"""A cache of simulation results: a run computed once is read back, not computed again.

Redrawing a figure after a style change, rerunning a notebook after editing its text, or running
a comparison again with one more policy reruns simulations whose inputs have not changed. Their
results are kept here, content-addressed: an entry's name is the SHA-256 of everything that
decides it, so the same inputs find it and any other input misses it.

What decides an entry (its key):

- the run: the fully resolved scenario (every default filled in, its seed), the resource
  model's parameters (the calibration) and the APF objects it starts with (the contents of the
  files it names), as `simapf.provenance` hashes them, or for a task of a sweep or comparison,
  its scenario and the contents of the files bundled with it;
- what was asked of the run: a whole `Result` (`simapf.run`: series, tables, histograms,
  request records), a sweep's row of metrics (`simapf.sweeps.measure`: the metric patterns
  asked), a calibration cell's figures, a validation run's readings;
- the code: the simapf version and a digest of the package's sources and data files (the model,
  the calibration, everything but the modules that only draw or print: `PRESENTATION`), so
  that a code change never returns results of the old code. The compiled core is built from the
  same sources and gives the same results, so it has the same keys (a stale build, made from
  other sources, is never cached).

Runs that import the user's own policy module (`list_policy: module:Class`) are never cached:
the cache cannot tell when that code changes.

Where: `$SIMAPF_CACHE_DIR`, else `$XDG_CACHE_HOME/simapf`, else `~/.cache/simapf`; entries are
files of `results/` there. An entry is a pickle (zlib-compressed): reading one runs code, like
importing a module, so the folder must be yours and writable by nobody else (simapf makes it
so, and refuses to use a folder that is not).

How large: at most `$SIMAPF_CACHE_SIZE` bytes (a number or a quantity as Kubernetes writes
one: "2Gi", "500M"; default 1Gi; 0 keeps nothing); past it the least recently used entries are
removed (parallel writers may pass it briefly by what they add between two checks). One entry
larger than an eighth of it is not kept.

Parallel writers: an entry is written under a temporary name and renamed into place, so a
reader sees a whole entry or none; two processes computing the same run both write the same
bytes, the last rename wins. Only the process that asked for runs reads and writes the cache
(sweep and comparison workers do not), so a Dask cluster's workers need no access to it.

Off: `--no-cache` on any command that runs simulations, `SIMAPF_NO_CACHE=1`, `simapf.run(...,
cache=False)`, or `with turned_off():`. `simapf cache` shows it, `simapf cache --clear` empties
it. docs/result-cache.md says all this for users.

A result from the cache is the fresh one, byte for byte, its `wall_s` included: the time the
simulation took when it ran. The Result says where it came from (`Result.cached`), and the
commands say how many runs they took from the cache.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import pickle
import re
import stat
import tempfile
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from simapf.errors import ConfigError

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parents[1]
FORMAT = 1  # of an entry's bytes: part of every key, so a new format never reads an old entry
MAGIC = b"simapf-cache 1\n"
DEFAULT_SIZE = 2**30
ENTRY = re.compile(r"^(?P<kind>[a-z]+)-(?P<key>[0-9a-f]{64})$")
KINDS = {  # what an entry of each kind holds
    "result": "a run's whole Result",
    "row": "a sweep's or comparison's row of metrics",
    "cell": "a calibration cell's figures",
    "validation": "a validation run's readings",
}
STALE_TEMPORARY_S = 3600.0  # a temporary file this old is a killed writer's: removed when pruning
# Modules that only draw, print or read the command line: nothing an entry holds comes from them,
# so changing them (a figure's style) keeps the cache. Everything else in the package counts.
PRESENTATION = frozenset({
    "cli.py", "figures/kepfigures.py", "outputs/figures.py", "outputs/style.py", "simulation/summary_text.py",
    "progress.py", "outputs/overlay.py", "outputs/export.py", "outputs/metric_help.py", "messages.py",
    "compiled_core.py", "scenario/importer.py", "scenario/docs.py",
    "sweeps/progress.py", "sweeps/report.py", "comparison/text.py", "comparison/figure.py", "search/report.py",
    "calibrate/report.py", "calibrate/command.py",
})  # fmt: skip
SOURCE_SUFFIXES = (".py", ".yaml", ".json", ".csv")
# The real bench (`simapf measure`), its data set and the commands that make it: what they measure
# is no simulated run's input, so re-measuring a cell keeps the cache and what was made from it.
BENCH = ("bench/", "calibration/bench/", "calibrate/bench_")


# ------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Settings:
    folder: Path
    max_bytes: int
    off: str | None  # why the cache is not used, or None


_turned_off = 0  # depth of `turned_off()` blocks (--no-cache)


def settings() -> Settings:
    """Where the cache is, how large it may grow and whether it is used, from the environment.
    A size that does not parse is a ConfigError."""
    folder = os.environ.get("SIMAPF_CACHE_DIR") or str(Path(os.environ.get("XDG_CACHE_HOME") or
                                                            Path.home() / ".cache") / "simapf")  # fmt: skip
    off = None
    if os.environ.get("SIMAPF_NO_CACHE", "") not in ("", "0"):
        off = "SIMAPF_NO_CACHE is set"
    elif _turned_off:
        off = "--no-cache"
    elif _stale_compiled_core():
        off = "the compiled core is stale"
    return Settings(Path(folder).expanduser(), _max_bytes(), off)


def _max_bytes() -> int:
    text = os.environ.get("SIMAPF_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_SIZE
    from simapf.server.params import parse_bytes

    try:
        value = float(parse_bytes(text))
    except (TypeError, ValueError):
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"SIMAPF_CACHE_SIZE={text!r}: not a size; give bytes or a quantity such as 2Gi or 500M "
                          "(suffixes k, M, G, Ki, Mi, Gi...)")
    return int(value)


@functools.lru_cache(maxsize=1)
def _stale_compiled_core() -> bool:
    if not any(PACKAGE_DIR.glob("_compiled__mypyc*")):
        return False
    from simapf.compiled_core import compiled

    return compiled() == "stale"


@contextmanager
def turned_off(off: bool = True) -> Iterator[None]:
    """Within the block, no run is read from or written to the cache (`--no-cache`)."""
    global _turned_off
    _turned_off += bool(off)
    try:
        yield
    finally:
        _turned_off -= bool(off)


def check() -> Settings:
    """The settings, checked before any work: a size that does not parse, or a folder that is
    not one or that others can write to, is a ConfigError (when the cache is used)."""
    s = settings()
    if s.off is None:
        _check_folder(s.folder)
    return s


def _check_folder(folder: Path) -> None:
    for path in (folder, folder / "results"):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        except OSError as err:
            raise ConfigError(f"the cache folder {path}: {err.strerror or err} (SIMAPF_CACHE_DIR names another; "
                              "--no-cache runs without it)") from None  # fmt: skip
        if not stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"the cache folder {path} is not a folder (SIMAPF_CACHE_DIR names another; "
                              "--no-cache runs without it)")  # fmt: skip
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise ConfigError(f"the cache folder {path} is writable by other users, whose entries simapf would load "
                              f"as code: `chmod go-w {path}`, or SIMAPF_CACHE_DIR names one of yours, or "
                              "--no-cache")  # fmt: skip


# ------------------------------------------------------------------------------ keys


@functools.lru_cache(maxsize=4)
def source_digest(package_dir: Path = PACKAGE_DIR, leave_out: frozenset[str] = frozenset()) -> str:
    """SHA-256 of the package's sources and data files, but for PRESENTATION's modules, the
    BENCH's files and the files `leave_out` names (paths inside the package: what a command that records this digest
    writes itself)."""
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*")):
        rel = path.relative_to(package_dir).as_posix()
        if path.suffix not in SOURCE_SUFFIXES or rel in PRESENTATION or rel in leave_out or rel.startswith(BENCH) \
                or "__pycache__" in rel or not path.is_file():  # fmt: skip
            continue
        content = path.read_bytes()
        digest.update(f"{rel}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()


def key(kind: str, identity: Any) -> str:
    """The key of an entry of `kind` ("result", "row", "cell", "validation") for a run named by
    `identity` (plain data: JSON with sorted keys is hashed), with this simapf's version and
    sources."""
    from simapf.provenance import canonical_sha256
    from simapf.version import __version__

    return canonical_sha256({"format": FORMAT, "kind": kind, "simapf_version": __version__,
                             "sources_sha256": source_digest(), "identity": identity})  # fmt: skip


def run_identity(loaded: Any) -> dict[str, Any]:
    """What a loaded scenario's run is made of: the hashes `simapf.provenance` records (the
    resolved scenario, the calibration) and the APF objects of the files it names."""
    from simapf.provenance import canonical_sha256

    def objects(o: Any) -> list:
        return [m.model_dump(mode="json") for m in (*o.flow_schemas, *o.priority_levels)]

    apf = [objects(loaded.apf), [[i, objects(o)] for i, o in sorted(loaded.event_apf.items())]]
    return {
        "scenario_sha256": canonical_sha256(loaded.scenario.model_dump(mode="json")),
        "calibration_sha256": canonical_sha256(loaded.params.record_dump()),
        "apf_sha256": canonical_sha256(apf),
    }


def names_user_code(scenario: dict[str, Any]) -> bool:
    """Whether a scenario (as data) runs the user's own policy module, which no key can cover."""
    estimators = [(scenario.get("apf") or {}).get("estimator") or {}]
    estimators += [e.get("estimator") or {} for e in scenario.get("events") or [] if isinstance(e, dict)]
    return any(":" in str(e.get("list_policy", "")) for e in estimators if isinstance(e, dict))


# ------------------------------------------------------------------------------ reading and writing


class Tally:
    """Runs this process asked for: how many were read from the cache, how many computed."""

    def __init__(self) -> None:
        self.reused = 0
        self.ran = 0

    def snapshot(self) -> tuple[int, int]:
        return self.reused, self.ran


tally = Tally()


class Cache:
    """The entries of one folder (`results/` under `folder`), at most `max_bytes` in all."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_SIZE) -> None:
        self.folder = Path(folder)
        self.entries = self.folder / "results"
        self.max_bytes = max_bytes
        self._total: int | None = None  # this process's estimate of the entries' size
        self._broken = False  # a write failed: say so once, then stop writing
        self._warned = False  # a damaged entry has been said

    def path(self, kind: str, key: str) -> Path:
        return self.entries / f"{kind}-{key}"

    def get(self, kind: str, key: str, valid: Callable[[Any], bool]) -> Any:
        """The value of an entry, or MISS. The folder is untrusted input: an entry that is not a
        file, does not decode, is another key's or holds what `valid` refuses (a dict where a run
        should be) is damaged, and misses; it is removed (a folder is left alone), so that the
        computed value replaces it, and the first of them is said once."""
        path = self.path(kind, key)
        try:
            data = _read_entry(path)
        except FileNotFoundError:
            return MISS
        except (OSError, ValueError) as err:
            return self._damaged(path, getattr(err, "strerror", None) or str(err))
        try:
            stored, value = _decode(data)
        except Exception:  # noqa: BLE001 - damaged or truncated: compute it again
            return self._damaged(path, "it does not decode")
        if stored != key:
            return self._damaged(path, "it holds another entry's content")
        try:
            fits = bool(valid(value))
        except Exception:  # noqa: BLE001 - what an odd object does when looked at is no answer
            fits = False
        if not fits:
            return self._damaged(path, f"it holds {type(value).__name__}, not {KINDS[kind]}")
        try:
            os.utime(path)  # used now: the last to be evicted
        except OSError:
            pass
        tally.reused += 1
        return value

    def _damaged(self, path: Path, why: str) -> Any:
        if not self._warned:
            self._warned = True
            log.warning("the result cache's entry %s is damaged (%s): it is computed again and replaced", path, why)
        try:
            if not stat.S_ISDIR(path.lstat().st_mode):
                path.unlink()
        except OSError:
            pass
        return MISS

    def put(self, kind: str, key: str, value: Any) -> None:
        """Keep `value`; on a failure to write, warn once and keep nothing more."""
        if self._broken:
            return
        data = _encode(key, value)
        if len(data) > self.max_bytes / 8:
            return
        try:
            # Private: an entry is loaded as code (parents made on the way keep the umask's mode).
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.entries.mkdir(mode=0o700, exist_ok=True)
            _write_atomic(self.path(kind, key), data)
        except OSError as err:
            self._broken = True
            log.warning("cannot write to the cache in %s (%s): runs from now on are not kept", self.folder,
                        err.strerror or err)  # fmt: skip
            return
        if self._total is None:
            self._total = self.size()
        else:
            self._total += len(data)
        if self._total > self.max_bytes:
            self.prune()

    def scan(self) -> list[tuple[float, int, Path]]:
        """(last used, bytes, path) of every entry; temporary files a killed writer left are removed."""
        found = []
        now = time.time()
        try:
            listing = list(os.scandir(self.entries))
        except OSError:
            return []
        for item in listing:
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if ENTRY.match(item.name) and stat.S_ISREG(st.st_mode):
                found.append((st.st_mtime, st.st_size, Path(item.path)))
            elif _temporary(item.name) and now - st.st_mtime > STALE_TEMPORARY_S:
                _unlink(Path(item.path))
        return found

    def size(self) -> int:
        return sum(n for _t, n, _p in self.scan())

    def prune(self) -> None:
        """Remove the least recently used entries until the rest fit in max_bytes."""
        entries = sorted(self.scan())
        total = sum(n for _t, n, _p in entries)
        for _t, n, path in entries:
            if total <= self.max_bytes:
                break
            _unlink(path)
            total -= n
        self._total = total

    def clear(self) -> tuple[int, int]:
        """Remove every entry (and only entries); returns how many and their bytes."""
        entries = self.scan()
        for _t, _n, path in entries:
            _unlink(path)
        self._total = 0
        return len(entries), sum(n for _t, n, _p in entries)


class _Miss:
    def __repr__(self) -> str:
        return "MISS"


MISS: Any = _Miss()


def _encode(key: str, value: Any) -> bytes:
    return MAGIC + zlib.compress(pickle.dumps((key, value), protocol=5), 6)


def _decode(data: bytes) -> tuple[str, Any]:
    if not data.startswith(MAGIC):
        raise ValueError("not an entry")
    stored, value = pickle.loads(zlib.decompress(data[len(MAGIC):]))
    return stored, value


def _read_entry(path: Path) -> bytes:
    """An entry's bytes; ValueError if it is not a regular file (a FIFO would block a read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ValueError("it is not a file")
        return fh.read()


def _temporary(name: str) -> bool:
    """Whether a file name is one `_write_atomic` gives an entry while it is written."""
    return name.startswith(".") and bool(ENTRY.match(name[1:].split(".")[0]))


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(Path(tmp))
        raise


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


_caches: dict[tuple[Path, int], Cache] = {}


def active() -> Cache | None:
    """The cache runs use now, or None when it is off."""
    s = check()
    if s.off is not None:
        return None
    return _caches.setdefault((s.folder, s.max_bytes), Cache(s.folder, s.max_bytes))


# ------------------------------------------------------------------------------ the kinds of entries


def result(loaded: Any, compute: Callable[[], Any], enabled: bool = True) -> Any:
    """A loaded scenario's whole Result (`simapf.run`): from the cache when it holds it, else
    `compute()`d and kept there. `enabled` False, or a run of the user's own code: computed."""
    from simapf.provenance import git_state
    from simapf.scenario.load import user_policies

    cache = active() if enabled and not user_policies(loaded.scenario) else None
    # The scenario's source (its file name) is in the summary: part of what is asked.
    k = key("result", {**run_identity(loaded), "source": loaded.source}) if cache is not None else ""
    checked: list[Any] = []  # the summary the entry's check validated, read once
    got = cache.get("result", k, lambda value: _is_result(value, checked)) if cache is not None else MISS
    if got is not MISS:
        got.cached = True
        # The build that makes these numbers now: the same sources (the key), maybe another commit.
        commit, dirty = git_state()
        got.summary.update(provenance={**checked[-1].provenance, "git_commit": commit, "git_dirty": dirty})
        return got
    got = compute()
    tally.ran += 1
    if cache is not None:
        cache.put("result", k, got)
    return got


def _is_result(value: Any, checked: list[Any] | None = None) -> bool:
    """Whether `value` is a Result whose summary this schema reads; the validated summary is
    appended to `checked`."""
    import pandas as pd
    from pydantic import ValidationError

    from simapf.simulation.result import Result

    if not (isinstance(value, Result) and isinstance(value.summary, dict)
            and all(isinstance(t, pd.DataFrame) for t in (value.series, value.latency, value.levels))):  # fmt: skip
        return False
    try:
        typed = value.typed  # a summary this schema reads
    except ValidationError:
        return False
    if checked is not None:
        checked.append(typed)
    return True


def entries_by_kind(cache: Cache) -> dict[str, tuple[int, int]]:
    """{kind: (entries, bytes)} of a cache's entries."""
    out: dict[str, tuple[int, int]] = {}
    for _t, n, path in cache.scan():
        m = ENTRY.match(path.name)
        if m:
            count, size = out.get(m["kind"], (0, 0))
            out[m["kind"]] = (count + 1, size + n)
    return dict(sorted(out.items()))
