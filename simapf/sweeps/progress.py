"""Progress over finished runs, with an ETA from the pace so far (simapf.progress)."""

from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def with_progress(rows: Iterable[T], total: int, done: int, name: str, enabled: bool) -> Iterator[T]:
    """Yield `rows`, advancing a bar that starts at `done` of `total` runs (a resumed sweep)."""
    from simapf.progress import progress_bar

    # A bar on a terminal or in a notebook; log lines elsewhere (a sweep under CI).
    bar = progress_bar(total, name, "runs", enabled, initial=done, smoothing=0.1)
    try:
        for row in rows:
            bar.update(1)
            yield row
    finally:
        bar.close()
