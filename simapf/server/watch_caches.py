"""The watch caches of one apiserver: which resources it caches, what etcd holds of each now,
and the bytes each cache holds while it is ready.

The bookkeeping only: what the bytes do to the process (live heap, a GC cycle, an OOM kill) is
the resource model's (simapf.server.model), which asks this for the sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from simapf.server.costs import cache_bytes
from simapf.server.params import ServerParams


@dataclass(frozen=True, slots=True)
class CachedResource:
    """A resource held in the watch cache: `stored_bytes` in etcd over `object_count` objects."""

    name: str
    object_count: int
    stored_bytes: float
    decoded_multiplier: float | None = None  # None: watch_cache.decoded_size_multiplier


class WatchCaches:
    """Each cached resource as registered, the writes committed to it since, and its cache:
    ready (filled and following etcd) or not (the process down, or its refill under way)."""

    __slots__ = ("params", "_resources", "_objects", "_bytes", "_ready")

    def __init__(self, params: ServerParams) -> None:
        self.params = params
        self._resources: dict[str, CachedResource] = {}  # as registered
        self._objects: dict[str, list[float]] = {}  # name -> [objects, stored bytes] in etcd now
        self._bytes: dict[str, float] = {}  # what each cache held when it was last sized
        self._ready: set[str] = set()

    def register(self, res: CachedResource, up: bool) -> float:
        """Register `res` as etcd holds it now, its cache filled if the process is `up`; returns
        the bytes the cache grew by (what the process must now hold beyond what it did)."""
        self._resources[res.name] = res
        self._objects[res.name] = [res.object_count, res.stored_bytes]
        nbytes = self.size_now(res.name)
        old = self._bytes.get(res.name, 0.0) if res.name in self._ready else 0.0
        self._bytes[res.name] = nbytes
        if up:
            self._ready.add(res.name)
        return nbytes - old

    def commit(self, name: str, objects: int, stored_bytes: float) -> bool:
        """A write committed to `name` (`objects` 1 a create, -1 a delete; `stored_bytes`
        negative for a delete); returns whether a ready cache must now apply it."""
        now = self._objects[name]
        now[0] += objects
        now[1] += stored_bytes
        return name in self._ready

    def size_now(self, name: str) -> float:
        """The bytes the cache of `name` holds once it has every write committed so far."""
        objects, stored = self._objects[name]
        return cache_bytes(self.params, int(objects), stored, self._resources[name].decoded_multiplier)

    def resize(self, name: str, nbytes: float) -> float:
        """The cache of `name` holds `nbytes` from now on; returns what it grew by."""
        grown = nbytes - self._bytes[name]
        self._bytes[name] = nbytes
        return grown

    def filled(self, name: str, nbytes: float) -> None:
        """A refill of `name` ended with `nbytes` in its cache: it is ready."""
        self._bytes[name] = nbytes
        self._ready.add(name)

    def ready(self, name: str) -> bool:
        return name in self._ready

    def lost(self) -> None:
        """The process died: no cache is ready until its refill."""
        self._ready.clear()

    def current(self) -> tuple[CachedResource, ...]:
        """Every cached resource as etcd holds it now (registered, then every write since)."""
        return tuple(
            CachedResource(res.name, int(self._objects[res.name][0]), self._objects[res.name][1], res.decoded_multiplier)
            for res in self._resources.values()
        )
