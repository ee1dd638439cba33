"""Where runs execute: in this process, in local processes (joblib/loky), or on a Dask cluster.

Each backend takes `RunTask`s and yields their rows as they finish, in whatever order they
finish; the caller writes each row as it arrives, so a run is on disk the moment it is done.
The backends do nothing but move tasks and rows: the run itself, its seed and its row are the
same wherever it executes. A row the result cache holds (simapf.simulation.cache) is not sent anywhere:
this process reads it, and keeps every row that comes back (`measure.cached_rows`).
"""

from __future__ import annotations

import logging
import os
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from simapf.version import __version__
from simapf.errors import ConfigError, SimapfError
from simapf.sweeps.measure import RunTask, cached_rows, execute


CONNECT_TIMEOUT = "30s"  # how long to keep trying a Dask scheduler that does not answer


@dataclass(frozen=True)
class Backend:
    kind: str = "joblib"  # joblib | dask | serial
    workers: int | None = None
    address: str | None = None

    def at_once(self) -> int:
        """How many runs it executes at once (a scheduler's cluster: as many as it was asked for,
        else this machine's cores)."""
        return 1 if self.kind == "serial" else self.workers or cpu_count()

    def describe(self) -> str:
        if self.kind == "serial":
            return "serial (this process)"
        if self.kind == "joblib":
            return f"joblib, {self.workers or cpu_count()} worker process(es)"
        if self.address:
            return f"dask at {self.address}"
        return f"dask, a local cluster of {self.workers or cpu_count()} worker(s)"


def choose(kind: str | None, workers: int | None, address: str | None, default_kind: str = "joblib",
           default_workers: int | None = None, default_address: str | None = None) -> Backend:  # fmt: skip
    """A backend from the caller's choices (None = not chosen) over defaults. A scheduler
    address implies Dask."""
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers: must be at least 1, got {workers}")
    if address:
        if kind not in (None, "dask"):
            raise ConfigError(f"--dask {address}: a scheduler address needs the dask backend, not {kind}")
        return Backend("dask", workers or default_workers, _checked_address(address, "--dask"))
    kind = kind or default_kind
    if kind not in ("joblib", "dask", "serial"):
        raise ConfigError(f"--backend: {kind!r} is not one of joblib, dask, serial")
    if kind == "dask" and default_address:
        return Backend(kind, workers or default_workers, _checked_address(default_address, "backend.address"))
    return Backend(kind, workers or default_workers, None)


def _checked_address(address: str, where: str) -> str:
    """`address` if it is one a Dask client can connect to (its scheme, host and port), checked
    before any work: runs the result cache holds would otherwise never show it is not."""
    try:
        from distributed.comm.addressing import get_address_host_port, normalize_address
    except ImportError:
        raise SimapfError(f"{where} {address}: the dask backend needs Dask: pip install 'simapf[dask]' (here, and "
                          "on every Dask worker)") from None  # fmt: skip
    try:
        get_address_host_port(normalize_address(address))
    except ValueError as err:
        raise ConfigError(f"{where} {address}: not a Dask scheduler's address ({err}); give one as tcp://HOST:PORT") from None
    return address


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def run_tasks(tasks: Sequence[RunTask], backend: Backend) -> Iterator[dict]:
    """Rows of `tasks`, as they finish (those from the cache first)."""
    if not tasks:
        return iter(())
    if backend.kind not in ("serial", "joblib", "dask"):
        raise SimapfError(f"unknown backend {backend.kind!r} (joblib, dask or serial)")
    return cached_rows(tasks, lambda todo: _indexed(todo, backend))


def _indexed(tasks: Sequence[RunTask], backend: Backend) -> Iterator[tuple[int, dict]]:
    """(index, row) of `tasks`, as they finish (simapf.jobs.pool, which a time budget stops)."""
    from simapf.jobs.pool import run_each

    if backend.kind == "dask":
        return _dask(tasks, backend)
    return run_each(execute, tasks, backend.at_once(), [t.cost for t in tasks])


def release_workers() -> None:
    """Stop the local worker processes joblib keeps for reuse (loky keeps them alive for minutes
    after the last task): called when a sweep or comparison is over, not between a fit's grids."""
    from simapf.jobs.pool import release

    release()


@contextmanager
def session(backend: Backend) -> Iterator[Callable[[Sequence[RunTask]], Iterator[dict]]]:
    """A `run_tasks` for many batches in turn (a search's trials): a Dask backend keeps one
    client (and a local cluster) for all of them instead of starting one per batch."""
    if backend.kind != "dask":
        yield lambda tasks: run_tasks(tasks, backend)
        return
    with dask_client(backend) as client:
        yield lambda tasks: cached_rows(tasks, lambda todo: _dask_on(client, todo, backend.at_once())) if tasks else iter(())


def _dask(tasks: Sequence[RunTask], backend: Backend) -> Iterator[tuple[int, dict]]:
    with dask_client(backend) as client:
        yield from _dask_on(client, tasks, backend.at_once())


def _dask_on(client: Any, tasks: Sequence[RunTask], workers: int) -> Iterator[tuple[int, dict]]:
    from simapf.jobs.pool import run_on_dask

    # Our own keys: a run's id names its task on the dashboard; the suffix keeps two sweeps
    # that share a scheduler from sharing (or cancelling) each other's futures.
    token = uuid.uuid4().hex[:8]
    keys = [f"simapf-run-{t.key.get('run_id', i)}-{token}" for i, t in enumerate(tasks)]
    for i, row in run_on_dask(client, execute, tasks, keys, [t.cost for t in tasks], workers):
        if row.get("simapf_version") != __version__:
            raise SimapfError(
                f"a Dask worker runs simapf {row.get('simapf_version')}, this process {__version__}: "
                "install the same version on the workers"
            )
        yield i, row


@contextmanager
def dask_client(backend: Backend) -> Iterator[Any]:
    """A Dask client for `backend`: its scheduler's, or a local cluster's that ends with it.

    Fails in one line when Dask is not installed, the scheduler does not answer, or the workers
    cannot run this version of simapf."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SimapfError(
            "the dask backend needs Dask: pip install 'simapf[dask]' (here, and on every Dask worker)"
        ) from None

    # Dask logs its cluster's comings and goings, and its own view of a lost scheduler or a worker
    # killed on Ctrl-C, with tracebacks: simapf says what matters of them itself, in one line.
    with _quiet("distributed", "tornado"), ExitStack() as stack:
        if backend.address:
            try:
                client = Client(backend.address, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise SimapfError(f"cannot reach the Dask scheduler at {backend.address}: {exc}") from None
        else:
            stack.enter_context(_ctrl_c_left_to_this_process())
            with _ctrl_c_deferred():  # a cluster half started would be closed only at exit, noisily
                # silence_logs: a run that fails on a worker comes back here as its error, said in
                # one line; the worker's own log of it ("Compute Failed" and its traceback) would
                # say it again on this terminal.
                # Its scheduler serves HTTP (health, metrics) even without a dashboard, on 8787 unless
                # told: another cluster there would add a warning to the run's output.
                cluster = LocalCluster(n_workers=backend.workers or cpu_count(), threads_per_worker=1,
                                       processes=True, dashboard_address=":0", silence_logs=logging.CRITICAL)  # fmt: skip
                stack.callback(cluster.close)
                # Its scheduler, here, hooks a diagnosis into this process's garbage collector
                # (for logs at INFO), and a Ctrl-C that lands in a gc callback is swallowed.
                from distributed.gc import disable_gc_diagnosis

                disable_gc_diagnosis(force=True)
                client = Client(cluster)
        stack.callback(client.close)
        _check_workers(client)
        yield client


@contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """A Ctrl-C within the block takes effect when it ends, once what it made can be closed."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, _frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if pressed:
        signal.raise_signal(signal.SIGINT)


@contextmanager
def _ctrl_c_left_to_this_process() -> Iterator[None]:
    """Worker processes started within the block never take Ctrl-C. A terminal sends it to
    every process of its group, and a Dask worker that took it, starting or running, would end
    with a traceback of its own; this process takes it, stops the work and closes the workers.
    A process starts with its parent thread's signal mask, so each is started with SIGINT
    blocked in the thread that starts it (only for that moment: this process still takes it)."""
    import multiprocessing.util
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    spawn = multiprocessing.util.spawnv_passfds

    def spawn_without_ctrl_c(*args: Any, **kwargs: Any) -> Any:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return spawn(*args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    multiprocessing.util.spawnv_passfds = spawn_without_ctrl_c
    try:
        yield
    finally:
        multiprocessing.util.spawnv_passfds = spawn


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """The loggers `names` and those under them (Dask's configuration gives some a level of
    their own) log nothing within the block."""
    chosen = [logging.getLogger(n) for n in sorted(logging.root.manager.loggerDict)
              if any(n == name or n.startswith(name + ".") for name in names)]  # fmt: skip
    chosen += [logging.getLogger(name) for name in names]
    before = [(logger, logger.level) for logger in chosen]
    for logger in chosen:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in before:
            logger.setLevel(level)


def _check_workers(client) -> None:
    """Fail early, in one line, when the workers cannot run simapf at all."""

    def probe() -> str:
        from simapf.version import __version__

        return __version__

    try:
        versions = client.run(probe)
    except Exception as exc:  # noqa: BLE001  (ImportError pickled back from a worker, say)
        raise SimapfError(f"the Dask workers cannot import simapf ({exc}): install simapf[dask] on them") from None
    if not versions:
        return  # no workers yet (an adaptive cluster): tasks wait for them
    other = {v for v in versions.values() if v != __version__}
    if other:
        raise SimapfError(
            f"Dask workers run simapf {', '.join(sorted(other))}, this process {__version__}: install the same version on the workers"
        )
