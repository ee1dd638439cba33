"""The cluster's objects: how many of each resource, in which namespace, how big.

Objects are not kept one by one: per resource and namespace we keep a count and a byte total,
which is all a LIST's cost, the watch cache's size and APF's object-count statistics need.
Object sizes are drawn from the resource's distribution when objects are created, so a cluster
of 400 Secrets of ~100 KB has a total that varies like a real one.
"""

from __future__ import annotations

from typing import Callable, Final

import numpy as np

from simapf.apf.estimators import ObjectStats
from simapf.scenario.schema import CrdGroup, Resource, SizeDistribution
from simapf.server.model import CachedResource

STATS_REFRESH_NS: Final = 60_000_000_000  # the apiserver refreshes its object counts every minute
# Told of each committed change of a watch-cached resource: (its key, objects added, bytes added;
# both negative for a delete).
CacheListener = Callable[[str, int, float], None]


def draw_sizes(dist: SizeDistribution, n: int, rng: np.random.Generator) -> np.ndarray:
    mean = dist.mean_bytes
    if n <= 0:
        return np.zeros(0)
    if dist.distribution == "constant":
        return np.full(n, mean)
    if dist.distribution == "exponential":
        return np.maximum(1.0, rng.exponential(mean, n))
    # lognormal with the requested mean: mu = ln(mean) - sigma^2/2
    sigma = dist.sigma
    return np.maximum(1.0, rng.lognormal(np.log(mean) - sigma * sigma / 2, sigma, n))


class ResourceObjects:
    """Objects of one resource, per namespace (cluster-scoped resources have one bucket, '')."""

    __slots__ = ("spec", "namespaces", "counts", "bytes", "largest", "rng", "version", "key", "cache_listeners")

    def __init__(self, spec: Resource, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self.namespaces = [f"ns-{i}" for i in range(spec.namespaces)] if spec.namespaced else [""]
        k = len(self.namespaces)
        sizes = draw_sizes(spec.object_size, spec.count, rng)
        # Objects are dealt round-robin over the namespaces.
        self.counts = [spec.count // k + (1 if i < spec.count % k else 0) for i in range(k)]
        self.bytes = [float(sizes[i::k].sum()) for i in range(k)]
        # The largest object each namespace has held: what a watch's encode buffers grow to.
        self.largest = [float(sizes[i::k].max()) if self.counts[i] else 0.0 for i in range(k)]
        self.version = 0  # bumped on every change: a key for cached shapes
        self.key = spec.key  # "name.group", as requests name it
        self.cache_listeners: list[CacheListener] = []  # the watch caches that hold it (Inventory.follow)

    def total(self) -> tuple[int, float]:
        return sum(self.counts), sum(self.bytes)

    def _scope(self, namespace: str | None) -> int | None:
        """The namespace a request scoped to `namespace` sees: its index, None for all of them
        (None/'' or a cluster-scoped resource), -1 for a namespace with nothing in it."""
        if not namespace or not self.spec.namespaced:
            return None
        try:
            return self.namespaces.index(namespace)
        except ValueError:
            return -1

    def in_namespace(self, namespace: str | None) -> tuple[int, float]:
        """(objects, stored bytes) a request scoped to `namespace` sees (None/'' = all)."""
        i = self._scope(namespace)
        if i is None:
            return self.total()
        return (self.counts[i], self.bytes[i]) if i >= 0 else (0, 0.0)

    def largest_size(self, namespace: str | None) -> float:
        """The largest object a request scoped to `namespace` (None/'' = all) has seen in it."""
        i = self._scope(namespace)
        if i is None:
            return max(self.largest, default=0.0)
        return self.largest[i] if i >= 0 else 0.0

    def mean_size(self, namespace: str | None = None) -> float:
        n, b = self.in_namespace(namespace)
        if n > 0:
            return b / n
        return self.spec.object_size.mean_bytes

    def namespace_index(self, namespace: str | None) -> int:
        if not self.spec.namespaced or not namespace:
            return 0
        try:
            return self.namespaces.index(namespace)
        except ValueError:
            self.namespaces.append(namespace)
            self.counts.append(0)
            self.bytes.append(0.0)
            self.largest.append(0.0)
            return len(self.namespaces) - 1

    # --------------------------------------------------------------- mutations

    def draw_size(self) -> float:
        """The size of a new object, from the resource's distribution."""
        return float(draw_sizes(self.spec.object_size, 1, self.rng)[0])

    def add(self, namespace: str | None, size: float) -> None:
        """A new object of `size` bytes."""
        i = self.namespace_index(namespace)
        self.counts[i] += 1
        self.bytes[i] += size
        if size > self.largest[i]:
            self.largest[i] = size
        self.version += 1
        for listener in self.cache_listeners:
            listener(self.key, 1, size)

    def delete(self, namespace: str | None) -> float | None:
        """Remove an object of average size from the namespace; None if it is empty."""
        i = self.namespace_index(namespace)
        if self.counts[i] == 0:
            return None
        size = self.bytes[i] / self.counts[i]
        self.counts[i] -= 1
        self.bytes[i] = self.bytes[i] - size if self.counts[i] else 0.0
        self.version += 1
        for listener in self.cache_listeners:
            listener(self.key, -1, -size)
        return size


class Inventory:
    """Every resource of the cluster; also APF's object-count statistics source."""

    def __init__(self, resources: list[Resource], rng: np.random.Generator) -> None:
        self.by_key: dict[str, ResourceObjects] = {}
        self.by_name: dict[str, list[ResourceObjects]] = {}
        for spec in resources:
            objs = ResourceObjects(spec, rng)
            self.by_key[spec.key] = objs
            self.by_name.setdefault(spec.name, []).append(objs)
        self._stats: dict[tuple[str, str], ObjectStats] = {}
        self._crds: dict[str, tuple[int, CrdGroup]] = {}  # CRD group name -> (CRDs installed, the group)
        self.refresh_stats()

    def get(self, ref: str) -> ResourceObjects:
        if ref in self.by_key:
            return self.by_key[ref]
        return self.by_name[ref][0]

    def refresh_stats(self) -> None:
        """Take the statistics APF's estimator sees (upstream refreshes them every minute)."""
        stats = {}
        for objs in self.by_key.values():
            n, b = objs.total()
            stats[(objs.spec.group, objs.spec.name)] = ObjectStats(n, int(b / n) if n else 0)
        self._stats = stats

    def lookup(self, api_group: str, resource: str) -> ObjectStats | None:
        return self._stats.get((api_group, resource))

    def follow(self, listener: CacheListener) -> None:
        """`listener` (an apiserver's watch caches) is told of every change of every
        watch-cached resource as it is committed, one event at a time."""
        for objs in self.by_key.values():
            if objs.spec.watch_cache:
                objs.cache_listeners.append(listener)

    def cached_resources(self) -> list[CachedResource]:
        out = []
        for objs in self.by_key.values():
            if objs.spec.watch_cache:
                n, b = objs.total()
                out.append(CachedResource(objs.key, n, b, objs.spec.decoded_ratio))
        return out

    def group_versions(self) -> list[tuple[str, str, int]]:
        """(group, version, resources) served, for discovery: the resources', then the API groups
        of the CRDs installed so far (`install_crds`)."""
        gv: dict[tuple[str, str], int] = {}
        for objs in self.by_key.values():
            k = (objs.spec.group, objs.spec.version)
            gv[k] = gv.get(k, 0) + 1
        out = [(g, v, n) for (g, v), n in sorted(gv.items())]
        for name, (installed, crd) in self._crds.items():
            groups = crd.group_count
            # CRDs fill their API groups in turn: after k of n CRDs, ceil(k x groups / n) groups.
            for j in range(-(-installed * groups // crd.count)):
                per_group = crd.count // groups + (1 if j < crd.count % groups else 0)
                out += [(f"g{j}.{name}.crd.simapf.io", f"v{v + 1}", per_group) for v in range(crd.served_versions)]
        return out

    def install_crds(self, crd: CrdGroup, count: int) -> None:
        """`count` more CRDs of the group `crd` are served."""
        installed, _ = self._crds.get(crd.name, (0, crd))
        self._crds[crd.name] = (min(installed + count, crd.count), crd)
