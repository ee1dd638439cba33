"""Python's cycle collector while a simulation runs.

A run allocates container objects (tuples on the event queue, requests, their records) by the
million, and nearly all of them die young by reference counting; the runs make little cyclic
garbage (a request and APF's record of it are unlinked when it ends). Python's defaults are
tuned for the opposite: a young collection whenever 700 more objects have been allocated than
freed, which moves the requests still queued, executing or being read into older generations,
whose collections then walk them again, and a full collection, walking every live object, every
ten of the middle generation's. So inside a run:

- young collections wait until `YOUNG_AT` more objects have been allocated than freed: far fewer of
  them, each finding most of what it would have walked already gone;
- full collections are ten times rarer;
- what was built before the run (the scenario, its models, the compiled APF configuration) is
  frozen out of the collector's reach (`gc.freeze`): none of it is garbage until the run ends.

The cost is memory: cyclic garbage waits longer, at most a young threshold's worth of objects.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# Allocations not yet freed that trigger a young collection (Python's default: 700).
YOUNG_AT = 50_000
# Young collections every this many of the middle generation's trigger a full one (Python's
# default: 10).
FULL_EVERY = 100


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Rarer collections inside the block, and what exists when it starts frozen; the thresholds
    as they were after it, and the frozen objects back in the oldest generation."""
    young, middle, old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(young, YOUNG_AT), middle, max(old, FULL_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)
        gc.unfreeze()
