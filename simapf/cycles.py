"""Python's cycle collector while a simulation runs.

A busy run keeps tens of thousands of requests alive for a while (queued, executing, being
read), so many objects live long enough to reach the collector's oldest generation and die
soon after, by reference counting. With Python's default thresholds that churn triggers a
full collection, which walks every live object, every few hundred thousand allocations: a
sixth of the time of the calibration's busiest cells, a tenth of its whole grid's. The runs
themselves make little cyclic garbage (a request and APF's record of it are unlinked when it
ends), so full collections can be ten times rarer at the cost of a few tens of MB (24 MB more
peak RSS over four of those cells).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# Young collections every this many of the middle generation's trigger a full one (Python's
# default: 10).
FULL_EVERY = 100


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Full collections at most a tenth as often inside the block; the thresholds as they were after it."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, FULL_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
