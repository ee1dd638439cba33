"""A sweep's result directory: one Parquet file per finished run, and a manifest.

    DIR/_sweep.json           what the sweep is (definition, factor levels, run ids in order)
    DIR/run-<id>.parquet      one row: the run's identity, its factor values and metrics
    DIR/run-<id>~d<d>.parquet the same for parameter draw d of the combination whose replication 0
                              is <id> (`simapf.sweeps.uncertainty`), with its `draw`

A run's file is written under a temporary name in DIR, flushed to disk and renamed into place
(`os.replace` is atomic on POSIX and Windows), so a reader, or a sweep resumed after a crash,
sees a whole file or none. Temporary files a killed sweep left behind are removed when the sweep
is resumed; a run file that cannot be read is deleted and the run done again.

The directory is a Parquet dataset: `pandas.read_parquet(DIR)` works, though `load_sweep` is
better: it orders rows and columns the way the sweep defines them and tolerates files whose
column types differ (a factor that is a number in one run and a quantity string in another).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from simapf.errors import ConfigError, SimapfError
from simapf.files import check_writable_folder, json_text

log = logging.getLogger(__name__)

MANIFEST = "_sweep.json"  # "_": Parquet readers skip it when reading DIR as a dataset
LOCK = ".sweep.lock"
_RUN_FILE = re.compile(r"^run-([0-9a-f]{16}(?:~d[0-9]+)?)\.parquet$")
_TMP_PREFIX = ".tmp-"
ID_COLUMNS = ("run_id", "replication", "seed")


def run_path(out: Path, run_id: str) -> Path:
    return out / f"run-{run_id}.parquet"


def _plain(value: Any) -> Any:
    # Parquet columns hold scalars; a factor whose levels are lists or mappings (list_params,
    # say) is kept as its JSON text.
    if isinstance(value, (dict, list, tuple)):
        from simapf.sweeps.plan import canonical_json

        return canonical_json(value)
    return value


def row_table(row: dict[str, Any]):
    import pyarrow as pa

    return pa.Table.from_pylist([{k: _plain(v) for k, v in row.items()}])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); results are ordinary files, readable as any other.
        if hasattr(os, "fchmod"):
            os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_run(out: Path, row: dict[str, Any]) -> Path:
    """Write one finished run's row as `run-<id>.parquet`, atomically."""
    import pyarrow.parquet as pq

    path = run_path(out, row["run_id"])
    table = row_table(row)
    _atomic_write(path, lambda f: pq.write_table(table, f))
    return path


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    write_manifest_file(out / MANIFEST, manifest)


def write_manifest_file(path: Path, manifest: dict[str, Any]) -> None:
    text = json_text(manifest, indent=2, sort_keys=False) + "\n"
    _atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def read_manifest(out: Path) -> dict[str, Any] | None:
    return read_manifest_file(out / MANIFEST)


def read_manifest_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable manifest: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: unreadable manifest: not a JSON object")
    return data


def _read_run(path: Path, run_id: str):
    """The run's table, or None if the file is not a whole, readable run file."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception:  # noqa: BLE001  (any failure to read means: do it again)
        return None
    if table.num_rows != 1 or "run_id" not in table.column_names or table.column("run_id")[0].as_py() != run_id:
        return None
    return table


def run_files(out: Path) -> Iterator[tuple[str, Path]]:
    for entry in sorted(os.scandir(out), key=lambda e: e.name):
        m = _RUN_FILE.match(entry.name)
        if m:
            yield m.group(1), Path(entry.path)


def scan(out: Path, wanted: set[str]) -> dict[str, Any]:
    """Finished runs among `wanted`: id -> table. Cleans up what a killed sweep left: temporary
    files, and run files that do not read back (deleted, so the run is done again)."""
    for entry in os.scandir(out):
        if entry.name.startswith(_TMP_PREFIX):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    done = {}
    for run_id, path in run_files(out):
        if run_id not in wanted:
            continue
        table = _read_run(path, run_id)
        if table is None:
            log.warning("%s: unreadable; the run will be done again", path)
            with contextlib.suppress(OSError):
                os.unlink(path)
        else:
            done[run_id] = table
    return done


@contextlib.contextmanager
def result_directory(out: Path, holds_ours: bool, force: bool, what: str, runs: Path) -> Iterator[None]:
    """Make `out` (and `runs`, where the run files go) for a sweep or search to write into.

    Refused: a file, or a directory that is not empty and holds no `what` (`holds_ours`), unless
    `force`. If the block fails before its first run file is written (a scheduler that does not
    answer, say), the directories it made are removed; finished runs stay, for a resume."""
    if os.path.lexists(out) and not out.is_dir():
        raise SimapfError(f"--out {out}: exists and is not a directory")
    if not out.is_dir():
        check_writable_folder(out.parent, f"--out {out}")
    if out.is_dir() and not holds_ours and any(out.iterdir()) and not force:
        raise SimapfError(
            f"--out {out}: directory is not empty and holds no {what}; choose a new directory, or pass --force "
            f"to write the {what}'s files beside what is there"
        )
    made = out.absolute()  # the topmost directory this creates, if any
    while not made.parent.exists():
        made = made.parent
    created = not made.exists()
    runs.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        if created and not any(True for _ in run_files(runs)):
            shutil.rmtree(made, ignore_errors=True)
        raise


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """One sweep at a time per directory (two would delete each other's temporary files).
    The lock dies with the process, so a killed sweep never blocks its own resumption."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(out / LOCK, "a+b") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SimapfError(f"{out}: another sweep is writing to this directory") from None
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# ------------------------------------------------------------------------------ tables


def frame(tables: Iterable[Any], order: list[str] | None = None, factors: list[str] | None = None):
    """One DataFrame from run tables: rows in `order` (run ids; others after, by id), columns
    identity, factors, then the metrics as measure.py lists them, per-level ones sorted."""
    import pandas as pd
    import pyarrow as pa

    from simapf.sweeps.measure import RUN_INFO, SCALAR_METRICS

    tables = list(tables)
    if not tables:
        return pd.DataFrame(columns=list(ID_COLUMNS) + list(factors or []))
    try:
        df = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        # A column with strings in some runs and numbers in others: let pandas make it object.
        df = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    position = {rid: i for i, rid in enumerate(order or [])}
    rank = [(position.get(rid, len(position)), rid) for rid in df["run_id"]]
    df = df.iloc[sorted(range(len(df)), key=lambda i: rank[i])].reset_index(drop=True)
    factors = [c for c in (factors or []) if c in df.columns]
    head = [c for c in ID_COLUMNS if c in df.columns] + factors
    scalars = [c for c in SCALAR_METRICS if c in df.columns]
    tail = [c for c in RUN_INFO if c in df.columns]
    rest = sorted(c for c in df.columns if c not in set(head) | set(scalars) | set(tail))
    return df[head + scalars + rest + tail]


def results(tables: dict[str, Any], manifest: dict[str, Any] | None, draws: bool = False, contrasts: bool = False):
    """A sweep's table from its runs' tables (id -> table): one row per point run, with the
    intervals of its parameter draws when there are any; or (`draws`) the draw runs' rows; or
    (`contrasts`) each factor level against the first, with intervals (empty without draws).
    What `sweep()` returns and `load_sweep` reads, so the two cannot differ."""
    from simapf.sweeps.plan import point_run_id

    order = (manifest or {}).get("runs")
    factors = list((manifest or {}).get("factors", {}))
    drawn = [t for rid, t in tables.items() if point_run_id(rid) != rid]
    if draws:
        return frame(drawn, order, factors + ["draw"])
    df = frame((t for rid, t in tables.items() if point_run_id(rid) == rid), order, factors)
    if contrasts:
        from simapf.sweeps.uncertainty import CONTRAST_COLUMNS
        from simapf.sweeps.uncertainty import contrasts as contrasts_of

        if not drawn:
            return pd.DataFrame(columns=CONTRAST_COLUMNS)
        return contrasts_of(df, frame(drawn, order, factors + ["draw"]), manifest)
    if drawn:
        from simapf.sweeps.uncertainty import with_intervals

        df = with_intervals(df, frame(drawn, order, factors + ["draw"]), manifest)
    return df


def load_sweep(out: str | Path, draws: bool = False, contrasts: bool = False):
    """The results of a sweep directory as a DataFrame: one row per finished run, its factor
    values and metrics, and with parameter draws (`uncertainty`) every headline figure's interval
    (see docs/compare-and-sweep.md). `df.attrs["sweep"]` is the manifest. `draws`: the rows of
    the draw runs instead (a `draw` column beside the factors). `contrasts`: each factor's
    levels against its first, the difference and the ratio of every headline figure with their
    intervals (simapf.sweeps.uncertainty.contrasts).

    Reads what is there, so it works on a sweep still running or stopped half-way."""
    out = Path(out)
    if not out.is_dir():
        raise ConfigError(f"{out}: no such sweep directory")
    manifest = read_manifest(out)
    # A sweep run again with fewer levels keeps the other runs' files (they are results, and a
    # wider sweep reuses them) but its results are the runs it defines.
    wanted = set(manifest["runs"]) if manifest is not None and isinstance(manifest.get("runs"), list) else None
    tables = {}
    for run_id, path in run_files(out):
        if wanted is not None and run_id not in wanted:
            continue
        table = _read_run(path, run_id)
        if table is None:
            log.warning("%s: unreadable, skipped", path)
            continue
        tables[run_id] = table
    df = results(tables, manifest, draws, contrasts)
    if manifest is not None:
        df.attrs["sweep"] = manifest
    return df
