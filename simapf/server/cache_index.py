"""The watch cache's indexes and trigger functions: which LISTs read only part of a resource, and
which watchers are handed only their own objects' events.

kube-apiserver's registry gives some resources' watch caches an index (`Indexers`) and a trigger
function (`TriggerFunc`), and each resource's `PredicateFunc` names the fields they cover
(`IndexFields`). A LIST served from the cache's current state whose field selector pins such a
field to one value (`spec.nodeName=node-3`) takes that value's objects from the index and filters
only them (k8s.io/apiserver `storage/cacher/watch_cache.go`, `waitAndGetLatestSnapshot` with the
predicate's `MatcherIndex`); a LIST from a snapshot (continue, exact resourceVersion) or from etcd
reads every object. A watcher whose selector pins the trigger's field is registered under that
value, and the cacher hands an event only to the watchers of its object's value (`cacher.go`,
`startDispatching`); every other watcher is handed every event and its own goroutine drops what
its filter rejects.

Two mechanisms cover every resource, without an index. A selector pinning `metadata.name` names
one object's key: the registry reads that key alone for a LIST (`registry/store.go`,
`ListPredicate` with `MatchesSingle`, when the key can be built: a cluster-scoped resource or a
namespaced request), and from 1.31 the watch cache builds a watch's initial events from that key
alone (`getAllEventsSinceLocked`). From 1.27 the cacher partitions its watchers by the namespace
and name they are scoped to (kubernetes#115918), which made the `metadata.name` triggers of
Nodes, Secrets and ConfigMaps unnecessary; before 1.27 a watcher with neither a trigger value nor
such a trigger was handed every event of its resource, whatever its namespace.

Values that are node names (a Pod's `spec.nodeName`, a Node's `metadata.name`) follow the
inventory's nodes: the cluster's Nodes are its core `nodes` resource, named node-0, node-1, ...,
as simapf names namespaces ns-0, ns-1, ...; a resource's objects, and the events of its writes,
are dealt to the nodes in turn, as its objects are dealt to its namespaces. Without a `nodes`
resource simapf knows no nodes, and an index holds what the selector matches (its selectivity).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from simapf.apf.estimators.watch_tracker import field_selector_exact_value
from simapf.server.params import SCOPE_PARTITION_RELEASE

Release = tuple[int, int]

NODES: Final = "nodes"  # the inventory key of the cluster's Nodes (the core group's)
NAME: Final = "metadata.name"

_NODE_NAME = re.compile(r"node-(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class CacheIndex:
    """An index or a trigger function a resource's watch cache has upstream.

    `use` is "list" for an index (a LIST from the cache's current state pinning `field` reads only
    that value's objects) and "watch" for a trigger (events go only to the watchers of their
    object's value, besides the watchers without one). `since`: the first release with it (None:
    one before 1.20, the oldest simapf models, which the sources do not pin down); `until`: the
    release that made it unnecessary (None: still there)."""

    resource: str  # the inventory key ("pods": the core group's)
    field: str
    use: str
    since: Release | None
    until: Release | None
    node_valued: bool  # its values are node names
    source: str


WATCH_CACHE_INDEXES: Final[tuple[CacheIndex, ...]] = (
    CacheIndex("pods", "spec.nodeName", "watch", None, None, True,
               "pkg/registry/core/pod/storage/storage.go NewStorage: TriggerFunc {spec.nodeName: NodeNameTriggerFunc} "
               "(pkg/registry/core/pod/strategy.go); the cacher's trigger functions come from kubernetes#27277 "
               "(2016), and Pods have one in 1.7's registry"),
    CacheIndex("pods", "spec.nodeName", "list", (1, 19), None, True,
               "pkg/registry/core/pod/storage/storage.go NewStorage: Indexers (strategy.go Indexers, "
               "NodeNameIndexFunc; MatchPod's IndexFields); kubernetes#87939, SelectorIndex alpha 1.18, on by "
               "default from 1.19, GA 1.20"),
    CacheIndex("nodes", NAME, "watch", None, SCOPE_PARTITION_RELEASE, True,
               "pkg/registry/core/node/strategy.go MatchNode: IndexFields {metadata.name}, NameTriggerFunc; "
               "removed by kubernetes#115918 (1.27), whose partition by name replaces it"),
    CacheIndex("secrets", NAME, "watch", None, SCOPE_PARTITION_RELEASE, False,
               "pkg/registry/core/secret: a metadata.name trigger for the kubelet's watch-based secret manager "
               "(kubernetes#80521 unified it with ConfigMaps'); replaced by kubernetes#115918 (1.27)"),
    CacheIndex("configmaps", NAME, "watch", (1, 18), SCOPE_PARTITION_RELEASE, False,
               "pkg/registry/core/configmap: a metadata.name trigger (kubernetes#80521, 1.16), used from 1.18 "
               "once ConfigMaps had a PredicateFunc naming it (kubernetes#85844); replaced by kubernetes#115918 (1.27)"),
)


def _active(row: CacheIndex, scope_partitioned: bool) -> bool:
    """Whether a row (which predates 1.20) is in the release: those that partitioning replaced are
    there until it is."""
    return row.until is None or not scope_partitioned


def list_index(resource: str, field_selector: str) -> tuple[CacheIndex, str] | None:
    """The index a LIST of `resource` from the watch cache's current state reads, and the value
    its field selector pins; None when the selector pins no indexed field."""
    for row in WATCH_CACHE_INDEXES:
        if row.resource == resource and row.use == "list":
            value = field_selector_exact_value(field_selector, row.field)
            if value:
                return row, value
    return None


def watch_trigger(resource: str, field_selector: str, scope_partitioned: bool) -> tuple[bool, str] | None:
    """How the cacher dispatches to a watch of `resource` with `field_selector`: (whether the value
    is a node's name, the value) when it is handed only the events of objects of that value (a
    trigger function, or from 1.27 its partition by name); None when it is handed every event
    (of its namespace, from 1.27) and filters them itself."""
    for row in WATCH_CACHE_INDEXES:
        if row.resource == resource and row.use == "watch" and _active(row, scope_partitioned):
            value = field_selector_exact_value(field_selector, row.field)
            if value:
                return row.node_valued, value
    if scope_partitioned:
        name = field_selector_exact_value(field_selector, NAME)
        if name:
            return resource == NODES, name
    return None


def pinned_name(field_selector: str) -> str | None:
    """The object name a field selector pins (`metadata.name=x`), if any."""
    return field_selector_exact_value(field_selector, NAME) or None


def node_objects(objects: int, node: str, nodes: int) -> int:
    """Objects on the node named `node` when `objects` are dealt in turn over `nodes` nodes named
    node-0, node-1, ...: none on a node the cluster does not have."""
    match = _NODE_NAME.fullmatch(node)
    i = int(match[1]) if match else -1
    if not 0 <= i < nodes:
        return 0
    return objects // nodes + (1 if i < objects % nodes else 0)


def node_name(turn: int, nodes: int) -> str:
    """The node the `turn`-th object or event is dealt to."""
    return f"node-{turn % nodes}"


# Resources whose events a trigger dispatches by node: each write's event is dealt to a node.
NODE_VALUED: Final = frozenset(row.resource for row in WATCH_CACHE_INDEXES if row.node_valued) | {NODES}
