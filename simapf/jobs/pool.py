"""The one place runs are executed: in this process, in local worker processes, or on Dask.

Every command that runs many simulations (a sweep's runs, a search's trials, a comparison, the
validation table, a fit's grid of cells) hands them here as a function and its items, and gets
`(index, result)` back for each as it finishes, in whatever order they finish; the caller keeps
each result as it arrives (a sweep's directory, the result cache).

Here, too, a time budget applied to the work (`simapf.jobs.budget.Budget.applied`) is checked,
between runs and while waiting for them: once it is spent no run is started, the runs under way
may finish within the budget's grace and are abandoned after it (local workers are stopped, Dask
futures cancelled), and `simapf.jobs.budget.Spent` is raised after every finished run was
handed over. In this process a run cannot be interrupted: the budget is checked between runs.

Each run is timed where it runs; within `timed_into` (simapf.jobs.estimate.recorded) its time,
its cost and how many ran beside it are told to the estimates, which learn this machine's pace.

Local workers are loky's reusable processes (as joblib's), at most one run each at a time, so
that a run is only started when a worker is free for it and nothing waits in a queue when the
budget ends.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import time
from typing import Any, Callable, Iterator, Sequence

from simapf.errors import SimapfError
from simapf.jobs import budget as budgets

# Thread pools of numerical libraries in each worker: the cores shared out, as joblib does.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")  # fmt: skip


def run_each(fn: Callable[[Any], Any], items: Sequence[Any], workers: int = 1,
             costs: Sequence[float | None] | None = None) -> Iterator[tuple[int, Any]]:  # fmt: skip
    """`(i, fn(items[i]))` for every item, as each finishes: in this process for one worker,
    else in `workers` local processes. Raises `Spent` (after the finished ones) when the budget
    applied stops the work. `costs`: each item's cost (simapf.jobs.estimate.cost), so that its
    time teaches the estimates this machine's pace."""
    if not items:
        return iter(())
    timed = functools.partial(_timed, fn)
    if workers <= 1:
        return _observed(_here(timed, items), costs, 1)
    at_once = min(workers, len(items))
    return _observed(_drain(_Local(workers), timed, items, at_once), costs, at_once)


def run_on_dask(client: Any, fn: Callable[[Any], Any], items: Sequence[Any], keys: Sequence[str] | None = None,
                costs: Sequence[float | None] | None = None, workers: int = 1) -> Iterator[tuple[int, Any]]:  # fmt: skip
    """`run_each` on a Dask client's cluster of `workers`, every item submitted at once (its
    scheduler shares them out); `keys` name the tasks (on its dashboard)."""
    if not items:
        return iter(())
    timed = functools.partial(_timed, fn)
    return _observed(_drain(_Dask(client, keys), timed, items, len(items)), costs, max(1, min(workers, len(items))))


def _timed(fn: Callable[[Any], Any], item: Any) -> tuple[float, Any]:
    """(seconds, fn(item)), timed where it runs."""
    began = time.perf_counter()
    result = fn(item)
    return time.perf_counter() - began, result


_listeners: list[Callable[[float, float, int], None]] = []  # `timed_into` blocks open now, innermost last


@contextlib.contextmanager
def timed_into(listener: Callable[[float, float, int], None]) -> Iterator[None]:
    """Within the block, each run given a cost is told to `listener(cost, seconds, at_once)`:
    how long it took with `at_once` - 1 others beside it (simapf.jobs.estimate learns the pace)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def timed() -> bool:
    """Whether a `timed_into` block is open."""
    return bool(_listeners)


def _observed(results: Iterator[tuple[int, tuple[float, Any]]], costs: Sequence[float | None] | None,
              at_once: int) -> Iterator[tuple[int, Any]]:  # fmt: skip
    with contextlib.closing(results):  # closed early too: the runs under way are abandoned at once
        for i, (seconds, result) in results:
            cost_s = costs[i] if costs is not None else None
            if _listeners and cost_s is not None:
                _listeners[-1](cost_s, seconds, at_once)
            yield i, result


def _here(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
    for i, item in enumerate(items):
        budget = budgets.current()
        if budget is not None and budget.may_stop():
            raise budgets.Spent(budget)
        result = fn(item)
        if budget is not None:
            budget.progressed()
        yield i, result


def _drain(where: "_Local | _Dask", fn: Callable[[Any], Any], items: Sequence[Any], at_once: int,
           ) -> Iterator[tuple[int, Any]]:  # fmt: skip
    """Keep `at_once` items under way, yield each result as it comes, stop for the budget."""
    pending: dict[Any, int] = {}
    following = 0
    stop_by: float | None = None  # once stopping: when the runs under way are abandoned
    stopped_for: budgets.Budget | None = None
    try:
        while following < len(items) or pending:
            budget = budgets.current()
            if stop_by is None and budget is not None and budget.may_stop():
                stopped_for = budget
                stop_by = time.monotonic() + max(0.0, budget.grace_s + min(budget.left(), 0.0))
            while stop_by is None and following < len(items) and len(pending) < at_once:
                pending[where.submit(fn, items[following], following)] = following
                following += 1
            if not pending:
                break
            if stop_by is not None:
                timeout: float | None = max(0.0, stop_by - time.monotonic())
            elif budget is not None and budget.done_any:
                timeout = max(0.01, budget.left())  # wake when it ends, to stop
            else:
                timeout = None  # nothing done yet under it: the first run always finishes
            done = where.wait(list(pending), timeout)
            if not done and stop_by is not None:
                break  # the grace is over: abandon the runs under way
            for future in done:
                i = pending.pop(future)
                result = where.result(future)
                if budget is not None:
                    budget.progressed()
                yield i, result
    finally:
        if pending:
            where.abandon(list(pending))
    if stopped_for is not None and (following < len(items) or pending):
        raise budgets.Spent(stopped_for)


def release() -> None:
    """Stop the local workers kept for reuse, if there are any (loky keeps them alive for
    minutes after the last run). Asking loky for its executor would start one: its module's
    own reference says whether there is one, started or stopped by a budget."""
    import sys

    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None) if module is not None else None
    if executor is not None:
        executor.shutdown(wait=True)


class _Local:
    """loky's reusable worker processes (the same joblib uses)."""

    def __init__(self, workers: int) -> None:
        from joblib.externals.loky import get_reusable_executor

        threads = str(max(1, (os.cpu_count() or 1) // workers))
        env = {var: os.environ.get(var, threads) for var in THREAD_VARS}
        self.executor = get_reusable_executor(max_workers=workers, env=env)

    def submit(self, fn: Callable[[Any], Any], item: Any, _i: int) -> concurrent.futures.Future:
        return self.executor.submit(fn, item)

    def wait(self, futures: list, timeout: float | None) -> list:
        done, _ = concurrent.futures.wait(futures, timeout, return_when=concurrent.futures.FIRST_COMPLETED)
        return [f for f in futures if f in done]  # in submission order: the same order each time

    def result(self, future: concurrent.futures.Future) -> Any:
        return future.result()

    def abandon(self, futures: list) -> None:
        """Cancel what has not started; stop the workers if a run is still under way."""
        running = [f for f in futures if not f.cancel()]
        if any(not f.done() for f in running):
            self.executor.shutdown(wait=True, kill_workers=True)


class _Dask:
    def __init__(self, client: Any, keys: Sequence[str] | None) -> None:
        self.client = client
        self.keys = keys

    def submit(self, fn: Callable[[Any], Any], item: Any, i: int) -> Any:
        key = self.keys[i] if self.keys is not None else None
        return self.client.submit(fn, item, key=key, pure=False)

    def wait(self, futures: list, timeout: float | None) -> list:
        from concurrent.futures import CancelledError

        from distributed import wait

        try:
            done, _ = wait(futures, timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        except (CancelledError, OSError) as exc:  # waiting, too, learns that the scheduler went away
            if self.client.status == "running" and not any(f.status == "cancelled" for f in futures):
                raise
            raise self._lost(exc) from None
        return [f for f in futures if f in done]

    def result(self, future: Any) -> Any:
        from concurrent.futures import CancelledError

        try:
            result = future.result()
        except (CancelledError, OSError) as exc:  # the scheduler went away (killed, its host down)
            if future.status != "cancelled" and self.client.status == "running":
                raise
            raise self._lost(exc) from None
        future.release()
        return result

    def _lost(self, exc: BaseException) -> SimapfError:
        address = getattr(getattr(self.client, "scheduler", None), "address", None)
        at = f" at {address}" if address else ""
        return SimapfError(f"lost the Dask scheduler{at} ({' '.join(str(exc).split())[:200]}); "
                           "the runs that finished are kept")  # fmt: skip

    def abandon(self, futures: list) -> None:
        self.client.cancel(futures)
