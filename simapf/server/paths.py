"""Where a LIST or WATCH is served from, whether its response is streamed, and what it carries.

The serving path follows the KEP-2340 table (list-memory.md §2.1, the 1.34+ column, v0.37.2
`pkg/storage/cacher/delegator`), with the older columns reachable by turning the feature gates
off. The cost of a request is described by a `ResponseShape` (what the response holds and what
had to be read to build it) and a `RequestCost` (shape + path + whether the response is streamed
and whether an etcd range is), which the `ResourceModel` turns into CPU, etcd work and bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from simapf.apf.types import ListOptions, PickledByFields
from simapf.server.params import FeatureGates

_DEFAULT_GATES = FeatureGates().resolved()


class ServingPath(enum.Enum):
    ETCD = "etcd"  # range read from etcd, decoded in the apiserver
    CACHE = "cache"  # the watch cache's current state
    CACHE_SNAPSHOT = "cache_snapshot"  # a KEP-4988 B-tree snapshot at an older revision
    WATCHLIST_STREAM = "watchlist_stream"  # initial events streamed one by one from the watch cache


class Encoding(enum.Enum):
    JSON = "json"
    PROTOBUF = "protobuf"
    CBOR = "cbor"
    YAML = "yaml"
    TABLE = "table"  # as=Table: a server-side table, JSON-encoded, never streamed


@dataclass(frozen=True, slots=True)
class ResponseShape(PickledByFields):
    """What a response holds and what the server read to build it.

    `objects_read`/`bytes_read` exceed `objects_returned`/`response_bytes` when selectors filter
    server-side (None = same as returned; bytes scaled by the object ratio). `bytes_read` are the
    bytes as stored in etcd. `converts` is True for resources whose internal-to-external list
    conversion copies objects (Pods, Nodes), False where it is a cast (ConfigMaps, Secrets, CRs).
    """

    response_bytes: float
    objects_returned: int
    encoding: Encoding = Encoding.JSON
    objects_read: int | None = None
    bytes_read: float | None = None
    converts: bool = False
    decoded_multiplier: float | None = None  # the resource's decoded/stored ratio; None: typed default
    gzip_ratio: float | None = None  # the resource's gzip-compressed/plain size; None: DEFAULT_GZIP_RATIO

    @property
    def n_read(self) -> int:
        return self.objects_returned if self.objects_read is None else self.objects_read

    @property
    def b_read(self) -> float:
        if self.bytes_read is not None:
            return self.bytes_read
        if self.objects_read is None or self.objects_returned <= 0:
            return self.response_bytes
        return self.response_bytes * self.objects_read / self.objects_returned


@dataclass(frozen=True, slots=True)
class RequestCost:
    """What the resource model needs to know about one request. Hashable: the model caches
    the CPU and byte figures per distinct cost, so reuse one object per request kind."""

    path: ServingPath
    shape: ResponseShape
    streaming: bool = False
    # An etcd range read as a stream of chunks, each decoded as it arrives (EtcdRangeStream).
    range_streamed: bool = False
    # A pretty-printed JSON response (pretty=true): one json.MarshalIndent of the whole list.
    indented: bool = False
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Hashed once: the model looks its plan up on every start().
        object.__setattr__(self, "_hash", hash((self.path, self.shape, self.streaming, self.range_streamed, self.indented)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:
        # Rebuild on unpickling: string hashes differ between processes (joblib sweeps).
        return (RequestCost, (self.path, self.shape, self.streaming, self.range_streamed, self.indented))


class InvalidListOptions(ValueError):
    """List options the apiserver's validation rejects (HTTP 400)."""


def _has_selectors(opts: ListOptions) -> bool:
    return bool(opts.label_selector or opts.field_selector)


def serving_path(
    verb: str,
    opts: ListOptions,
    *,
    watch_cache_enabled: bool = True,
    cache_ready: bool = True,
    snapshot_available: bool = True,
    gates: FeatureGates = _DEFAULT_GATES,
) -> ServingPath | None:
    """The serving path of a `list` or `watch`, or None when the apiserver answers 429.

    `snapshot_available` says whether the cache still holds a snapshot at the requested revision
    (continue token or exact RV); when not, the request goes to etcd. None is returned while the
    watch cache is not ready for requests it cannot send to etcd (KEP-4568: only LISTs with a
    limit and no selectors go to etcd then). The consistent-read freshness wait and its 3 s
    fallback to etcd are not decided here.
    """
    if verb == "watch":
        # Watches are always served by the watch cache when it exists; their initial state
        # (sendInitialEvents, or the legacy synthetic ADDED events) streams from it.
        if not watch_cache_enabled:
            return ServingPath.ETCD
        return ServingPath.WATCHLIST_STREAM if cache_ready else None
    if verb != "list":
        raise ValueError(f"serving_path is for list and watch, got verb {verb!r}")
    _validate(opts)
    if not watch_cache_enabled:
        return ServingPath.ETCD
    if not cache_ready:
        return ServingPath.ETCD if opts.limit > 0 and not _has_selectors(opts) else None

    rv = opts.resource_version or ""
    match = opts.resource_version_match

    def snapshot_or_etcd() -> ServingPath:
        if gates.ListFromCacheSnapshot and snapshot_available:
            return ServingPath.CACHE_SNAPSHOT
        return ServingPath.ETCD

    if opts.continue_token:
        return snapshot_or_etcd()
    if match == "Exact":
        return snapshot_or_etcd()
    if rv == "":
        # Consistent read: the cache after it caught up with etcd's current revision.
        return ServingPath.CACHE if gates.ConsistentListFromCache else ServingPath.ETCD
    if rv == "0":
        return ServingPath.CACHE  # any state is fine; limit is ignored, the whole list is served
    # A specific RV.
    if match == "NotOlderThan" or opts.limit <= 0:
        return ServingPath.CACHE
    return snapshot_or_etcd()  # legacy: RV=X with a limit means "exactly X"


def _validate(opts: ListOptions) -> None:
    # The apiserver's ValidateListOptions rules that change which row applies.
    rv = opts.resource_version or ""
    match = opts.resource_version_match
    if match not in ("", "NotOlderThan", "Exact"):
        raise InvalidListOptions(f"resourceVersionMatch: unsupported value {match!r}")
    if match and rv == "":
        raise InvalidListOptions("resourceVersionMatch is forbidden unless resourceVersion is set")
    if match == "Exact" and rv == "0":
        raise InvalidListOptions("resourceVersionMatch=Exact is forbidden for resourceVersion 0")
    if opts.continue_token and (rv not in ("", "0") or match):
        raise InvalidListOptions("resourceVersion and resourceVersionMatch are forbidden with continue")


def is_streaming_encoded(path: ServingPath, encoding: Encoding, gates: FeatureGates = _DEFAULT_GATES) -> bool:
    """Whether the response is encoded item by item (KEP-5116), so no whole-response buffer.

    JSON and Protobuf lists stream when their gate is on; CBOR, YAML and Table never do. A
    WatchList sends events one at a time and is always streamed.
    """
    if path is ServingPath.WATCHLIST_STREAM:
        return True
    if encoding is Encoding.JSON:
        return gates.StreamingCollectionEncodingToJSON
    if encoding is Encoding.PROTOBUF:
        return gates.StreamingCollectionEncodingToProtobuf
    return False


def is_range_streamed(verb: str, path: ServingPath, opts: ListOptions, gates: FeatureGates = _DEFAULT_GATES) -> bool:
    """Whether a LIST from etcd reads its range as a RangeStream (v0.37.2 etcd3 store's
    `shouldStream`): with the gate on, unless it is a page (a limit) filtered by selectors, since
    etcd cannot apply a limit to matches it does not see."""
    if verb != "list" or path is not ServingPath.ETCD or not gates.EtcdRangeStream:
        return False
    return not (opts.limit > 0 and _has_selectors(opts))


def plan_request(
    verb: str,
    opts: ListOptions,
    shape: ResponseShape,
    *,
    watch_cache_enabled: bool = True,
    cache_ready: bool = True,
    snapshot_available: bool = True,
    gates: FeatureGates = _DEFAULT_GATES,
) -> RequestCost | None:
    """`serving_path` and `is_streaming_encoded` together; None = rejected with 429."""
    path = serving_path(
        verb,
        opts,
        watch_cache_enabled=watch_cache_enabled,
        cache_ready=cache_ready,
        snapshot_available=snapshot_available,
        gates=gates,
    )
    if path is None:
        return None
    # A pretty-printed JSON response is one json.MarshalIndent of the whole list (the apiserver's
    # JSON serializer takes its Pretty branch before the streaming one): never streamed.
    indented = opts.pretty and shape.encoding is Encoding.JSON
    streamed = is_streaming_encoded(path, shape.encoding, gates) and not indented
    return RequestCost(path, shape, streamed, is_range_streamed(verb, path, opts, gates), indented)
