"""A progress bar over finished runs, with the ETA tqdm estimates from the pace so far."""

from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def with_progress(rows: Iterable[T], total: int, done: int, name: str, enabled: bool) -> Iterator[T]:
    """Yield `rows`, advancing a bar that starts at `done` of `total` runs (a resumed sweep)."""
    from tqdm import tqdm

    # Shown whenever asked for: a notebook's stderr is no terminal but shows a bar well. The
    # command line asks only when stderr is a terminal.
    bar = tqdm(total=total, initial=done, desc=name, unit="run", disable=not enabled, smoothing=0.1,
               dynamic_ncols=True)  # fmt: skip
    try:
        for row in rows:
            bar.update(1)
            yield row
    finally:
        bar.close()
