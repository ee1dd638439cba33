"""The scenario file: one run of simapf, written down.

A scenario says which Kubernetes behaviour to assume (feature gates), what the apiserver is
(cores, concurrency, memory, GC, resource-model parameters), how APF is configured (bootstrap or
the cluster's own objects, the work-estimator policy), what the cluster holds (resources and
their objects), who talks to it (clients), what happens during the run (events) and how long
it runs. Every field has a default and a unit in its name (`_s` seconds, `_bytes` bytes,
`_per_s` per second); unknown fields are errors, since they are typos.

`docs/scenario-reference.md` is generated from this module (`python -m simapf.scenario.docs`),
so the descriptions here are the user's reference.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from simapf.apf.estimators.registry import DEFAULT_LIST_POLICY
from simapf.server.params import Bytes, OptionalBytes

# --------------------------------------------------------------------------------------------


# A duration as Kubernetes and Go write them ("90s", "10m", "1h30m", "500ms", "1.5h"): every field
# in seconds (a name ending in `_s`, not a rate `_per_s`) takes one as well as a number.
_DURATION_RE = re.compile(r"^\s*(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))*\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """Seconds of a Go duration string ("1h30m" -> 5400.0); None if it is not one."""
    if not _DURATION_RE.match(text):
        return None
    return sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _durations(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        seconds = {}
        for key, value in data.items():
            if isinstance(value, str) and key.endswith("_s") and not key.endswith("_per_s") and key in cls.model_fields:
                parsed = parse_duration(value)
                if parsed is not None:
                    seconds[key] = parsed
        return {**data, **seconds} if seconds else data


def _cores(value: Any) -> Any:
    """"8000m" -> 8.0, as a Kubernetes CPU quantity; anything else is left to the field."""
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(?:\.\d+)?m\s*", value):
        return float(value.strip()[:-1]) / 1000.0
    return value


# --------------------------------------------------------------------------------------------
# Kubernetes behaviour


class FeatureGates(_Model):
    """kube-apiserver and client-go feature gates that change what the simulation does
    (defaults are Kubernetes 1.37's)."""

    SizeBasedListCostEstimate: bool = Field(
        True, description="APF charges LISTs by response size (Beta, on in 1.37); off: by object count."
    )
    WatchList: bool = Field(
        True, description="The apiserver serves WATCH with sendInitialEvents (KEP-3157, on since 1.32); APF charges WATCH initialisation like a LIST."
    )
    WatchListClient: bool = Field(
        True,
        description="client-go informers stream their initial list with a WatchList instead of LISTing (client-go gate, on by default since 1.35). Needs WatchList on the server.",
    )
    StreamingCollectionEncodingToJSON: bool = Field(True, description="JSON LIST responses are encoded item by item (KEP-5116).")
    StreamingCollectionEncodingToProtobuf: bool = Field(True, description="Protobuf LIST responses are encoded item by item (KEP-5116).")
    ConsistentListFromCache: bool = Field(
        True, description="LISTs with resourceVersion unset are served from the watch cache (GA 1.34); off: from etcd."
    )
    ListFromCacheSnapshot: bool = Field(
        True, description="Paged LISTs (continue) and exact-resourceVersion LISTs are served from watch-cache snapshots; off: from etcd."
    )


def _number_as_text(value: Any) -> Any:
    # YAML and --set read 0 or 1.38 as numbers; these fields are strings in Kubernetes.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


NumberAsText = BeforeValidator(_number_as_text)


class Kubernetes(_Model):
    version: Annotated[str, NumberAsText] = Field("1.37", description="The Kubernetes version the defaults describe (informational).")
    feature_gates: FeatureGates = Field(FeatureGates(), description="Each is named as upstream names it.")


# --------------------------------------------------------------------------------------------
# The apiserver


class LoadBalancer(_Model):
    """How client connections reach the replicas when there are several (apiserver.replicas > 1).
    A client instance keeps one HTTP/2 connection, so all its requests and watches go to the replica
    that connection reached, until that replica dies (or sends a GOAWAY) and the client reconnects."""

    policy: Literal["round-robin", "least-connections", "random"] = Field(
        "round-robin",
        description=(
            "Which replica a new connection goes to, among those the health checks see serving: in turn "
            "(round-robin), the one with the fewest open connections (least-connections), or at random "
            "(a flow hash, as network load balancers do)."
        ),
    )
    health_check_s: float = Field(
        10.0, ge=0,
        description=(
            "How long the balancer takes to notice that a replica died or came back; until then it sends "
            "new connections by what it saw last (to a dead one they are refused). Default: two failed "
            "checks 5 s apart, the defaults of Google Cloud health checks (checkIntervalSec 5, "
            "unhealthyThreshold 2)."
        ),
    )


class Apiserver(_Model):
    """The kube-apiserver, and how many replicas of it there are. Fields here override the same
    ones of the resource-model parameters; every replica has all of them (its own cores, memory
    limit and APF with the full concurrency limits, as upstream does)."""

    replicas: int = Field(
        1, ge=1, le=16,
        description=(
            "Apiserver replicas behind one load balancer, all reading the same etcd. Each has its own "
            "APF, watch caches, memory, GC and OOM kills."
        ),
    )
    load_balancer: LoadBalancer = Field(LoadBalancer(), description="How connections are spread over the replicas.")
    goaway_chance: float = Field(
        0.0, ge=0, le=0.02,
        description=(
            "--goaway-chance: the share of requests (watches excepted) after which the replica closes the "
            "client's connection with an HTTP/2 GOAWAY, so that the client reconnects through the load "
            "balancer. Upstream: 0 (off) to 0.02; 0.001 recommended as a start."
        ),
    )

    cores: Annotated[float, BeforeValidator(_cores)] = Field(
        16.0, gt=0, description="CPU cores of the apiserver (container limit or machine): a number, or millicores as Kubernetes writes them (8000m)."
    )
    max_requests_inflight: int = Field(
        400, ge=0,
        description=(
            "--max-requests-inflight: the limit on read-only requests in flight. APF's server concurrency"
            " is the sum of this and max_mutating_requests_inflight."
        ),
    )
    max_mutating_requests_inflight: int = Field(
        200, ge=0,
        description=(
            "--max-mutating-requests-inflight: the limit on mutating requests in flight. APF's server "
            "concurrency is the sum of the two."
        ),
    )
    memory_limit_bytes: OptionalBytes = Field(
        None, description="Container memory limit (bytes or a quantity like 8Gi); RSS above it is an OOM kill. null = no limit."
    )
    gogc: int | None | Literal["off"] = Field(
        100,
        description=(
            "GOGC: a GC cycle starts when the heap has grown this many percent over the live heap the "
            "last cycle left; off = no such goal, "
            "only GOMEMLIMIT triggers GC."
        ),
    )
    gomemlimit_bytes: OptionalBytes = Field(
        None,
        description=(
            "GOMEMLIMIT: the Go runtime's soft memory limit, near which it collects more often (bytes or "
            "a quantity); null = none."
        ),
    )
    gomaxprocs: int | None = Field(
        None, ge=1,
        description="GOMAXPROCS: how many threads run Go code at once; null = ceil(cores).",
    )
    restart_s: float | None = Field(
        None, ge=0, description="Seconds from a kill until the new process serves again; null = the resource-model default."
    )
    request_timeout_s: float = Field(
        60.0, gt=0, description="--request-timeout: APF's queue wait limit is a quarter of it, at most 60 s."
    )
    params_file: str | None = Field(
        None, description="A YAML file of resource-model parameters (as written by `simapf calibrate`), relative to the scenario file."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Resource-model parameters (see docs/resource-model.md), applied over params_file; e.g. {gc: {cpu_sharing: shared}}.",
    )

    @field_validator("memory_limit_bytes", "gomemlimit_bytes")
    @classmethod
    def _positive(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be positive or null")
        return v

    @field_validator("gogc", mode="before")
    @classmethod
    def _gogc(cls, v: Any) -> Any:
        # YAML 1.1 reads a bare `off` as false; left alone, pydantic would make that GOGC=0
        # (collect all the time), the opposite of what was meant. `true` means nothing.
        if v is False or (isinstance(v, str) and v.strip().lower() == "off"):
            return "off"
        if isinstance(v, bool) or (isinstance(v, int) and v < 0) or (isinstance(v, str) and not v.strip().isdigit()):
            shown = str(v).lower() if isinstance(v, bool) else repr(v)
            raise ValueError(f"GOGC must be a percentage >= 0 or off, got {shown}")
        return v

    @model_validator(mode="after")
    def _concurrency(self) -> "Apiserver":
        if self.server_concurrency <= 0:
            raise ValueError("max_requests_inflight + max_mutating_requests_inflight must be > 0")
        return self

    @property
    def server_concurrency(self) -> int:
        return self.max_requests_inflight + self.max_mutating_requests_inflight


# --------------------------------------------------------------------------------------------
# APF


class PriorityLevelOverride(_Model):
    """Changes to one priority level of the APF configuration (null keeps its value)."""

    nominal_concurrency_shares: int | None = Field(
        None, ge=0,
        description="nominalConcurrencyShares: the level's share of the server concurrency (against all levels' sum).",
    )
    lendable_percent: int | None = Field(
        None, ge=0, le=100,
        description="lendablePercent: the part of the level's nominal concurrency other levels may borrow.",
    )
    borrowing_limit_percent: int | None = Field(
        None, ge=0,
        description="borrowingLimitPercent: the most the level may borrow, in percent of its nominal concurrency.",
    )
    queues: int | None = Field(None, ge=1, description="limitResponse.queuing.queues: how many queues the level has.")
    hand_size: int | None = Field(
        None, ge=1,
        description="limitResponse.queuing.handSize: how many queues a flow is shuffle-sharded over.",
    )
    queue_length_limit: int | None = Field(
        None, ge=1,
        description="limitResponse.queuing.queueLengthLimit: requests one queue may hold; more are rejected.",
    )


class Estimator(_Model):
    """APF's work estimator."""

    list_policy: str = Field(
        DEFAULT_LIST_POLICY,
        description=(
            "How LIST (and WatchList initialisation) seats are computed: upstream, size-based, count-based, "
            "constant, etcd-uncapped, streamed-cache-cap, borrowing-aware, or 'package.module:Class' for your own. "
            "Your own class is Python code that runs with your rights: a scenario file that names one is "
            "trusted input, like a conftest.py. The module is imported when a run starts, never while a scenario is "
            "only read or checked, and never on a Dask worker unless the sweep allows it (--allow-user-code)."
        ),
    )
    list_params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the LIST policy, e.g. {seats: 10} for constant.")
    mutating_enabled: bool = Field(True, description="Charge writes extra seats for the watches they notify (upstream's mutating estimator).")


class APF(_Model):
    config: str = Field(
        "bootstrap",
        description=(
            "'bootstrap' (the objects a fresh 1.37 apiserver creates), or a path (relative to the scenario "
            "file) to FlowSchema and PriorityLevelConfiguration YAML as `kubectl get -o yaml` prints it."
        ),
    )
    priority_levels: dict[str, PriorityLevelOverride] = Field(
        default_factory=dict, description="Changes to named priority levels of that configuration."
    )
    estimator: Estimator = Field(Estimator(), description="It decides how many seats each request occupies.")


# --------------------------------------------------------------------------------------------
# Cluster inventory


# Bounds of the inputs a run is built from, each a one-line error beyond it (issue 23): simapf
# keeps one size per object, one actor per client instance, and draws every arrival.
MAX_OBJECTS = 50_000_000
MAX_OBJECT_BYTES = 2**31  # gRPC's largest message: no larger object can be read back
MAX_INSTANCES = 1_000_000
MAX_RATE_PER_S = 1e6


class SizeDistribution(_Model):
    """Sizes of objects as stored in etcd."""

    mean_bytes: Bytes = Field(
        ..., le=MAX_OBJECT_BYTES,
        description="Mean object size (bytes or a quantity like 100Ki; at most 2 GiB, gRPC's largest message).",
    )
    distribution: Literal["constant", "lognormal", "exponential"] = Field(
        "constant", description="constant, lognormal (with sigma) or exponential."
    )
    sigma: float = Field(0.5, ge=0, description="lognormal: standard deviation of log(size).")

    @field_validator("mean_bytes")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be positive")
        return v


# Custom resources are decoded into Unstructured: about 5.2x their JSON (kubernetes#142062).
UNSTRUCTURED_DECODED_RATIO = 5.2


class Resource(_Model):
    """One API resource and the objects it holds."""

    name: str = Field(..., min_length=1, description="Resource name as in URLs (pods, secrets, widgets).")
    group: str = Field("", description="API group ('' = core).")
    version: str = Field("v1", description="API version (for discovery).")
    namespaced: bool = Field(True, description="Namespaced or cluster-scoped.")
    count: int = Field(
        ..., ge=0, le=MAX_OBJECTS,
        description="Objects at the start of the run (mutators add and delete some; at most 50,000,000: simapf keeps each one's size).",
    )
    object_size: SizeDistribution = Field(..., description="A size is drawn for each object, at the start and on every create.")
    namespaces: int = Field(1, ge=1, le=MAX_OBJECTS, description="Namespaces the objects are spread over evenly (ns-0, ns-1, ...).")
    watch_cache: bool = Field(True, description="Whether the apiserver keeps a watch cache of it.")
    converts: bool = Field(
        False, description="Whether internal-to-external list conversion copies objects (Pods, Nodes: true; ConfigMaps, Secrets, CRs: false)."
    )
    decoded_size_multiplier: float | None = Field(
        None, gt=0,
        description=(
            "Decoded Go size of one of its objects per byte stored in etcd, in the watch cache and in a LIST "
            "decoded from etcd. null = by kind: ConfigMaps and Secrets 1 (their bulk is Data values, held as "
            "the same bytes: map[string]string, map[string][]byte); custom resources (a group that is not "
            "Kubernetes') 5.2, held as Unstructured (kubernetes#142062); other built-in types the resource "
            "model's watch_cache.decoded_size_multiplier."
        ),
    )

    gzip_ratio: float | None = Field(
        None, gt=0, le=1.1,
        description=(
            "Size of a gzip-compressed response of its objects per byte of the plain one (what a client "
            "link carries when responses are compressed). null = 0.15, a 5000-node cluster's Pods "
            "(kubernetes#138327). Random bytes do not compress (1.0); random base64 text, as test objects "
            "often hold, ~0.75 (6 bits of entropy in 8)."
        ),
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", v):
            raise ValueError("must be a lower-case resource name like 'pods'")
        return v

    @property
    def decoded_ratio(self) -> float | None:
        """`decoded_size_multiplier`, or its default by kind (None: the resource model's)."""
        if self.decoded_size_multiplier is not None:
            return self.decoded_size_multiplier
        if self.group == "" and self.name in ("configmaps", "secrets"):
            return 1.0
        if "." in self.group and not self.group.endswith("k8s.io"):
            return UNSTRUCTURED_DECODED_RATIO
        return None

    @property
    def key(self) -> str:
        return f"{self.name}.{self.group}" if self.group else self.name


# --------------------------------------------------------------------------------------------
# Clients


class Identity(_Model):
    """Who a client is, as APF's FlowSchemas see it. `{i}` in names is the client's index."""

    user: str | None = Field(None, description="User name, e.g. 'alice' or 'system:node:node-{i}'.")
    groups: list[str] = Field(default_factory=list, description="Groups; system:authenticated is always added.")
    service_account: str | None = Field(
        None, description="'namespace/name': user system:serviceaccount:namespace:name with the service-account groups."
    )

    @field_validator("service_account")
    @classmethod
    def _namespace_name(cls, v: str | None) -> str | None:
        # A field validator, so the error names identity.service_account itself.
        if v is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", v):
            raise ValueError(f"must be 'namespace/name', got {v!r}")
        return v

    @model_validator(mode="after")
    def _one(self) -> "Identity":
        if self.user is not None and self.service_account is not None:
            raise ValueError("give user or service_account, not both")
        if self.user is None and self.service_account is None:
            raise ValueError("give user or service_account")
        return self


class ListOptionsSpec(_Model):
    resource_version: Annotated[str | None, NumberAsText] = Field(None, description="resourceVersion: null (unset: a consistent read), '0' (any), or a number.")
    resource_version_match: Literal["", "NotOlderThan", "Exact"] = Field(
        "",
        description="resourceVersionMatch: '' (unset), NotOlderThan or Exact.",
    )
    limit: int = Field(0, ge=0, description="limit (page size); 0 = no paging.")
    paginate: bool = Field(True, description="With a limit: follow continue tokens until the list is complete.")
    label_selector: str = Field(
        "",
        description="labelSelector, e.g. 'app=web'. Only whether one is set matters: selectivity says how much matches.",
    )
    field_selector: str = Field(
        "",
        description=(
            "fieldSelector, e.g. 'spec.nodeName=node-3'. Only whether one is set matters: selectivity says "
            "how much matches."
        ),
    )
    selectivity: float = Field(
        1.0, ge=0, le=1,
        description="With selectors: the fraction of objects that match (the server reads all, returns this many; 0 = none match).",
    )
    send_initial_events: bool | None = Field(
        None,
        description="sendInitialEvents (watch only): true = the watch first sends the current objects; null = unset.",
    )


Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete"]
Encoding = Literal["json", "protobuf", "cbor", "yaml", "table"]


class RequestTemplate(_Model):
    """One request a client sends."""

    verb: Verb = Field(..., description="get, list, watch, create, update, patch or delete.")
    resource: str = Field(..., description="A resource of `resources` (name, or name.group).")
    namespace: str | None = Field(
        None, description="Namespace: a name like ns-3, 'random' (one of the resource's namespaces each time), or null for all namespaces / cluster-scoped."
    )
    options: ListOptionsSpec = Field(ListOptionsSpec(), description="List and watch options.")
    encoding: Encoding = Field("json", description="Response encoding (Accept).")
    watch_duration_s: float = Field(
        300.0, gt=0, description="watch: how long the watch stays open before the client closes it (it counts toward mutating cost meanwhile)."
    )


class RetryPolicy(_Model):
    """client-go's handling of 429s: wait Retry-After, retry at most max_retries times."""

    max_retries: int = Field(10, ge=0, description="Retries after a 429 (client-go's default: 10).")
    honour_retry_after: bool = Field(True, description="Wait the Retry-After the apiserver sends (APF: 1 s, doubling to 32 s under sustained rejection).")
    fallback_wait_s: float = Field(1.0, ge=0, description="Wait when Retry-After is not honoured.")


class RateLimit(_Model):
    """A client-side token bucket (client-go's flowcontrol rate limiter). Write `disabled` (or
    qps 0) for none at all."""

    qps: float = Field(
        ...,
        description=(
            "Tokens added per second: the sustained request rate. 0 or less = no token bucket: every "
            "request goes out at once, as with `disabled`. (client-go's rest.Config reads QPS 0 as its "
            "default 5 and creates no rate limiter for QPS < 0; clients also disable it with "
            "RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter().)"
        ),
    )
    burst: int | None = Field(
        None, ge=1,
        description="Bucket size: how many requests may go at once after a quiet period. Required when qps > 0.",
    )

    @model_validator(mode="after")
    def _burst(self) -> "RateLimit":
        if self.qps > 0 and self.burst is None:
            raise ValueError("burst is required when qps > 0 (qps 0 or `disabled` = no token bucket)")
        return self

    @property
    def enabled(self) -> bool:
        return self.qps > 0


def _rate_limit_text(value: Any) -> Any:
    # `rate_limit: disabled` is the same as {qps: 0}: no token bucket.
    if isinstance(value, str) and value.strip().lower() == "disabled":
        return {"qps": 0}
    return value


RateLimitText = BeforeValidator(_rate_limit_text)


class StartSpec(_Model):
    at_s: float = Field(
        0.0, ge=0,
        description="When the instances start, in seconds from the start of the run (with spread_s: the earliest).",
    )
    spread_s: float = Field(
        0.0, ge=0,
        description=(
            "Each instance starts at a uniformly random time this many seconds long after at_s; 0 = all "
            "at at_s."
        ),
    )


# Client-side processing priors (not fitted to anything; sources in the field descriptions and
# docs/workloads.md "Client-side processing").
# client-go decoding Pods from a watch, one goroutine: JSON 20.3-22.0 MB/s (10-15 KB Pods), protobuf
# 517-561 MB/s (kubernetes/kubernetes#138841, BenchmarkPod{JSON,Protobuf}RESTClientWatch).
JSON_DECODE_S_PER_BYTE = 4.5e-8  # ~22 MB/s
PROTOBUF_DECODE_S_PER_BYTE = 2e-9  # ~500 MB/s
# One net/http round trip on loopback, client and server together: 74 µs (census-instrumentation/
# opencensus-go#467, BenchmarkTransportNoInstrumentation); client-go adds TLS, metrics and headers.
GO_RESPONSE_S = 7e-5
# client-go's indexer: 1274 ns per add/update with an index (kubernetes/kubernetes#105234, BenchmarkIndexer).
INDEXER_S_PER_OBJECT = 1.3e-6
# kubectl with a cold discovery cache against 343 group-versions: 0.28 s user + 0.42 s system
# (crossplane/crossplane#2895, kubernetes/kubernetes#110820, an 8-core Apple M1), less ~0.14 s
# for a kubectl making one request (kubernetes/kubernetes#110753): ~1.6 ms per response, of which
# ~0.27 ms decodes a 6 KB document at the JSON rate; the rest is HTTP and the two cache files.
DISCOVERY_RESPONSE_S = 1.35e-3
# Before 1.25, client-go's disk cache of discovery responses (httpcache's diskcache on diskv) wrote
# each response under one lock and called File.Sync on it; 1.25 replaced the sync with checksums
# (kubernetes/kubernetes#110851). Go's File.Sync on macOS is fcntl(F_FULLFSYNC) (Go 1.12 release
# notes), which Apple Silicon Macs serve at ~46 a second (golang/go#28739, 21.7 ms) and in 18 and
# 19 ms (go-ethereum#28754, cockroachdb/pebble#1851, M1 Pro): 19 ms, on the Apple M1 the other
# kubectl priors assume. A Linux laptop's fsync is ~1 ms (etcd WAL fsyncs, docs/workloads.md).
DISCOVERY_CACHE_FSYNC_S = 0.019
CHECKSUMMED_DISCOVERY_CACHE = (1, 25)
CLIENT_CORES = 8  # the Apple M1 of those measurements; a laptop's cores bound GOMAXPROCS

# Per kind: (per_response_s, per_object_s, workers); per_byte_s follows the response encoding.
PROCESSING_DEFAULTS: dict[str, tuple[float, float, int]] = {
    "open_loop": (GO_RESPONSE_S, 0.0, CLIENT_CORES),
    "closed_loop": (GO_RESPONSE_S, 0.0, CLIENT_CORES),
    "mutator": (GO_RESPONSE_S, 0.0, CLIENT_CORES),
    "informer": (GO_RESPONSE_S, INDEXER_S_PER_OBJECT, 1),
    "discovery": (DISCOVERY_RESPONSE_S, 0.0, CLIENT_CORES),
}


class ClientProcessing(_Model):
    """What each instance does with every response before it acts on it (decode, store, cache
    files): the response waits for one of `workers`, in order, then takes per_response_s +
    per_object_s x objects + per_byte_s x bytes (a 429 or error: per_response_s only). Only then
    does the client go on: next iteration, next page, watch after list, next discovery phase.
    null fields take the client kind's default, a prior from public benchmarks, not fitted
    (docs/workloads.md); all zero = responses are handled the moment they arrive. A mutator's
    writes take effect at the server whatever it does with the responses: no effect there."""

    per_response_s: float | None = Field(
        None, ge=0,
        description=(
            "Seconds per response, whatever it carries. null = the kind's default: discovery 1.35e-3 "
            "(kubectl: ~1.6 ms CPU per response against 343 group-versions, crossplane/crossplane#2895 and "
            "kubernetes/kubernetes#110820, less process start-up, kubernetes/kubernetes#110753, less the decode); "
            "others 7e-5 (a net/http loopback round trip, 74 µs, census-instrumentation/opencensus-go#467)."
        ),
    )
    per_object_s: float | None = Field(
        None, ge=0,
        description=(
            "Seconds per object the response carries. null = the kind's default: informer 1.3e-6 (client-go's "
            "indexer, 1274 ns per add with an index, kubernetes/kubernetes#105234); others 0 (decoding is in per_byte_s)."
        ),
    )
    per_byte_s: float | None = Field(
        None, ge=0,
        description=(
            "Seconds per response byte (decoding). null = by the client's encoding: protobuf 2e-9 (~500 MB/s), "
            "anything else 4.5e-8 (JSON, ~22 MB/s); both from client-go decoding Pods from a watch in one "
            "goroutine, kubernetes/kubernetes#138841. Discovery documents are JSON."
        ),
    )
    workers: int | None = Field(
        None, ge=1,
        description=(
            "How many responses one instance processes at once; more wait, first come first served. null = the "
            "kind's default: informer 1 (the reflector decodes its list and watch in one goroutine); others 8 "
            "(a goroutine per request, bounded by the cores of a laptop, assumed an 8-core Apple M1 as in "
            "kubernetes/kubernetes#110820; kubectl fetches every group-version in its own goroutine)."
        ),
    )

    def resolved(self, kind: str, encoding: str) -> "ClientProcessing":
        """These settings with every null replaced by `kind`'s default for `encoding`."""
        per_response, per_object, workers = PROCESSING_DEFAULTS[kind]
        per_byte = PROTOBUF_DECODE_S_PER_BYTE if encoding == "protobuf" else JSON_DECODE_S_PER_BYTE
        return ClientProcessing(
            per_response_s=per_response if self.per_response_s is None else self.per_response_s,
            per_object_s=per_object if self.per_object_s is None else self.per_object_s,
            per_byte_s=per_byte if self.per_byte_s is None else self.per_byte_s,
            workers=workers if self.workers is None else self.workers,
        )

    @property
    def zero(self) -> bool:
        return not (self.per_response_s or self.per_object_s or self.per_byte_s)


class ClientNetwork(_Model):
    """The way between the apiserver and this client's instances. A response's write returns only
    when the client has taken it (HTTP/2 flow control), so the handler keeps its seats and its
    response in memory while the bytes go out: as they are encoded when the response is streamed,
    after the encoding when not (simapf.server.network)."""

    stream_bytes_per_s: OptionalBytes = Field(
        180e6,
        description=(
            "How fast one response goes out to the client: one HTTP/2 stream through TLS. ~180 MB/s from "
            "kube-apiserver to a client in a GCE cluster: 183 MiB/s writing a 700 MB LIST "
            "(kubernetes#111507), 183 MB/s a 1572 MB WatchList and 145 MB/s a 232 MB gzip LIST "
            "(kubernetes#138327). null = at once (a client that reads as fast as the server writes)."
        ),
    )
    link_bytes_per_s: OptionalBytes = Field(
        None,
        description=(
            "What all the instances' responses share: their node's network, or the CPU the client has to "
            "read them with. Responses in flight split it evenly, each at most stream_bytes_per_s. "
            "null = no limit beyond each stream's."
        ),
    )
    rtt_s: float = Field(
        0.0, ge=0, le=60,
        description=(
            "Round trip between the client and the apiserver: a request reaches the server rtt_s/2 after "
            "it is sent, its response's last byte the client rtt_s/2 after it was written. 0 = in the same "
            "cluster (round trips of a fraction of a millisecond, below what these models resolve)."
        ),
    )

    @field_validator("stream_bytes_per_s", "link_bytes_per_s")
    @classmethod
    def _rate(cls, v: float | None) -> float | None:
        if v is not None and not v > 0:
            raise ValueError("must be positive (or null for no limit)")
        return v


class _Client(_Model):
    name: str = Field(..., min_length=1, description="Unique client name (labels series, targets events).")
    identity: Identity = Field(..., description="Give exactly one of user and service_account.")
    count: int = Field(
        1, ge=0, le=MAX_INSTANCES,
        description="Instances (independent clients with this spec; `{i}` in identity names is the index; at most 1,000,000).",
    )
    start: StartSpec = Field(StartSpec(), description="When the instances start.")
    retry: RetryPolicy = Field(RetryPolicy(), description="Applies to every request the client sends.")
    rate_limit: Annotated[RateLimit | None, RateLimitText] = Field(
        None, description="null or `disabled` = none: requests go out as soon as they are made."
    )
    network: ClientNetwork = Field(
        default_factory=ClientNetwork,
        description="How responses travel to the client: each stream's pace, a shared link, the round trip.",
    )
    processing: ClientProcessing | None = Field(
        default_factory=ClientProcessing,
        description=(
            "Client-side time spent on every response before the client acts on it. Absent, or a mapping whose "
            "fields are absent or null: the kind's priors. null = none: responses are handled the moment they "
            "arrive (as in scenarios written before 2026-11-25)."
        ),
    )

    @model_validator(mode="after")
    def _processing_defaults(self) -> "_Client":
        kind = getattr(self, "kind", None)
        if self.processing is not None and kind in PROCESSING_DEFAULTS:
            request = getattr(self, "request", None)
            encoding = getattr(self, "encoding", None) or (request.encoding if request is not None else "json")
            self.processing = self.processing.resolved(kind, "json" if kind == "discovery" else encoding)
        return self


class OpenLoopClient(_Client):
    """Requests at a rate that does not depend on responses."""

    kind: Literal["open_loop"] = Field(description="open_loop: this kind of client.")
    rate_per_s: float = Field(..., gt=0, le=MAX_RATE_PER_S, description="Requests per second per instance (at most 1,000,000).")
    arrivals: Literal["poisson", "constant"] = Field("poisson", description="Poisson or evenly spaced arrivals.")
    max_in_flight: int | None = Field(
        None,
        ge=1,
        description=(
            "At most this many requests outstanding across all instances, as a load generator's worker "
            "pool: a request due beyond it waits at the client, in order, and is sent when a response "
            "returns. null = every request is sent when due."
        ),
    )
    request: RequestTemplate = Field(..., description="Sent at every arrival.")


class ThinkTime(_Model):
    mean_s: float = Field(..., ge=0, description="Mean think time between a response and the next request.")
    distribution: Literal["constant", "exponential", "uniform"] = Field("exponential", description="constant, exponential, or uniform on [0, 2 x mean].")


class ClosedLoopClient(_Client):
    """Virtual users: send, wait for the response, think, repeat."""

    kind: Literal["closed_loop"] = Field(description="closed_loop: this kind of client.")
    think_time: ThinkTime = Field(ThinkTime(mean_s=1.0), description="Pause after each response.")
    iterations: int | None = Field(
        None, ge=1, description="Total requests shared by all instances (as k6's shared-iterations); null = until the run ends."
    )
    request: RequestTemplate = Field(..., description="Sent at every iteration, after the think time.")


class ListSpec(_Model):
    mode: Literal["auto", "rv0", "paged", "watchlist", "consistent"] = Field(
        "auto",
        description=(
            "How the informer lists. auto = client-go: WatchList when both gates are on; otherwise the first list "
            "with resourceVersion=0 (whole list from the cache), and relists after a 410 at the last resourceVersion without a limit (whole, from the cache). "
            "rv0: always resourceVersion=0. paged/consistent: always resourceVersion unset, paged by page_size / unpaged. "
            "watchlist: always WatchList."
        ),
    )
    page_size: int = Field(500, ge=1, description="client-go's pager page size.")


class Backoff(_Model):
    """client-go reflector backoff (wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0))."""

    initial_s: float = Field(0.8, gt=0, description="First wait after a failure.")
    max_s: float = Field(30.0, gt=0, description="Longest wait before jitter.")
    factor: float = Field(2.0, ge=1, description="Growth per failure.")
    jitter: float = Field(1.0, ge=0, description="Each wait is d x (1 + jitter x U[0,1)).")
    reset_s: float = Field(120.0, gt=0, description="After this long without a failure the backoff starts over.")


class InformerClient(_Client):
    """A client-go informer: list, then watch; relist when the watch cannot resume."""

    kind: Literal["informer"] = Field(description="informer: this kind of client.")
    resource: str = Field(..., description="The resource watched (name, or name.group).")
    namespace: str | None = Field(None, description="A namespace, or null for all.")
    label_selector: str = Field("", description="labelSelector of list and watch.")
    field_selector: str = Field("", description="fieldSelector, e.g. 'spec.nodeName=node-{i}' as a kubelet does.")
    selectivity: float = Field(1.0, ge=0, le=1, description="With selectors: the fraction of objects that match (0 = none).")
    encoding: Encoding = Field("json", description="Encoding (client-go uses protobuf for built-in types).")
    list: ListSpec = Field(ListSpec(), description="How it lists.")
    backoff: Backoff = Field(Backoff(), description="Backoff between failed list/watch attempts.")
    watch_timeout_s: float = Field(
        300.0, gt=0, description="Watches end after a random time in [timeout, 2 x timeout) and are re-established without a relist (client-go's minWatchTimeout: 5 min, so 5-10 min)."
    )


class MutatorClient(_Client):
    """Writes that change the inventory and are sent to watchers."""

    kind: Literal["mutator"] = Field(description="mutator: this kind of client.")
    resource: str = Field(..., description="The resource written.")
    namespace: str | None = Field("random", description="A namespace, 'random', or null (cluster-scoped).")
    rate_per_s: float = Field(..., gt=0, le=MAX_RATE_PER_S, description="Writes per second per instance (Poisson; at most 1,000,000).")
    mix: dict[Literal["create", "update", "patch", "delete"], float] = Field(
        default_factory=lambda: {"update": 1.0},
        description="Relative weights of the verbs, e.g. {create: 1, update: 4, delete: 1}.",
    )
    encoding: Encoding = Field("json", description="Request/response encoding.")

    @field_validator("mix")
    @classmethod
    def _mix(cls, v: dict[str, float]) -> dict[str, float]:
        if not v or any(w < 0 for w in v.values()) or sum(v.values()) <= 0:
            raise ValueError("needs at least one verb with a positive weight and no negative weights")
        return v


class DiscoveryClient(_Client):
    """kubectl with a cold discovery cache: /api, /apis, then every group-version, in parallel
    through its token bucket; repeated every `interval_s`."""

    kind: Literal["discovery"] = Field(description="discovery: this kind of client.")
    interval_s: float = Field(60.0, gt=0, description="Mean time between discovery runs per instance (Poisson).")
    extra_group_versions: int = Field(
        0, ge=0, description="Group-versions served besides those of `resources` (CRDs, aggregated APIs)."
    )
    aggregated: bool = Field(
        False, description="Aggregated discovery (1.30+): 2 requests with every group-version in them, instead of 2 + one per group-version."
    )
    discovery_rate_limit: Annotated[RateLimit, RateLimitText] = Field(
        RateLimit(qps=50, burst=300),
        description=(
            "kubectl's discovery client has its own: QPS 50, burst 300 (client-go's default is QPS 5, "
            "burst 10). For discovery clients it is used instead of rate_limit. `disabled` (or qps 0) = none."
        ),
    )
    bytes_per_group_version: Bytes = Field(
        6000.0,
        description="Size of one group-version's discovery document (bytes or a quantity).",
    )
    cache_fsync_s: float | None = Field(
        None, ge=0,
        description=(
            "Seconds each successful response holds kubectl's disk cache while it is written and synced; responses "
            "are written one at a time (diskv's lock), then processed. null = by kubernetes.version: before 1.25 "
            "0.019 (httpcache's diskcache syncs every file, and Go's File.Sync on macOS is F_FULLFSYNC: 18-22 ms on "
            "Apple Silicon, golang/go#28739, go-ethereum#28754, cockroachdb/pebble#1851; ~0.001 on a Linux laptop); "
            "from 1.25 0 (checksums instead of syncs, kubernetes/kubernetes#110851)."
        ),
    )


Client = Annotated[
    Union[OpenLoopClient, ClosedLoopClient, InformerClient, MutatorClient, DiscoveryClient],
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------------------------
# Events


class _Event(_Model):
    at_s: float = Field(..., ge=0, description="When it happens, in seconds from the start of the run.")


class OutageEvent(_Event):
    """The network between clients and the apiserver fails: requests and watches break."""

    kind: Literal["outage"] = Field(description="outage: this kind of event.")
    duration_s: float = Field(..., gt=0, description="How long the network stays down.")
    relist: Literal["auto", "always", "never"] = Field(
        "auto",
        description=(
            "Whether watches can resume afterwards. auto: they resume when the outage was shorter than the "
            "watch cache's history (75 s), else the server answers 410 Gone and informers relist. always / never force it."
        ),
    )


class RestartEvent(_Event):
    """An apiserver process is killed; it comes back after apiserver.restart_s, its caches empty."""

    kind: Literal["restart"] = Field(description="restart: this kind of event.")
    replica: int = Field(0, ge=0, description="Which apiserver replica is killed (from 0).")


class RampEvent(_Event):
    """Change a client's instance count linearly over a time."""

    kind: Literal["ramp"] = Field(description="ramp: this kind of event.")
    client: str = Field(..., description="The client's name.")
    to_count: int = Field(..., ge=0, le=MAX_INSTANCES, description="Instances at the end.")
    over_s: float = Field(0.0, ge=0, description="Duration of the ramp (0 = at once).")


class PolicyEvent(_Event):
    """Switch the work estimator's LIST policy."""

    kind: Literal["policy"] = Field(description="policy: this kind of event.")
    estimator: Estimator = Field(..., description="The new estimator.")


class APFConfigEvent(_Event):
    """Replace the APF configuration (levels of the old one drain)."""

    kind: Literal["apf_config"] = Field(description="apf_config: this kind of event.")
    config: str = Field("bootstrap", description="As apf.config.")
    priority_levels: dict[str, PriorityLevelOverride] = Field(default_factory=dict, description="As apf.priority_levels.")


class ClientGatesEvent(_Event):
    """Change client-side behaviour, as a rolling upgrade of the clients would."""

    kind: Literal["client_gates"] = Field(description="client_gates: this kind of event.")
    WatchListClient: bool = Field(..., description="New value of the client-go WatchListClient gate.")


class CrdInstallEvent(_Event):
    """Create a group of CRDs (from `crds`) one after another: the apiserver builds each one's
    serving structures, and discovery has their group-versions to walk."""

    kind: Literal["crd_install"] = Field(description="crd_install: this kind of event.")
    crds: str = Field(..., description="The name of a group in `crds`; it is not installed before this event.")
    over_s: float = Field(0.0, ge=0, description="Time to create them all, one after another at even intervals (0 = at once).")


Event = Annotated[
    Union[OutageEvent, RestartEvent, RampEvent, PolicyEvent, APFConfigEvent, ClientGatesEvent, CrdInstallEvent],
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------------------------
# CustomResourceDefinitions

# A CRD is one etcd object, written whole: no larger than etcd's default request limit
# (--max-request-bytes, 1.5 MiB).
MAX_CRD_OBJECT_BYTES = 1.5 * 2**20
MAX_CRDS = 100_000


class CrdGroup(_Model):
    """CustomResourceDefinitions installed together (a provider's or an operator's): the heap
    their serving structures hold before any custom object exists (the resource model's `crds`
    parameters), and the group-versions discovery walks. Their custom objects, if any, are
    `resources` like any other."""

    name: str = Field(..., min_length=1, description="A name for the group (a crd_install event refers to it).")
    count: int = Field(..., ge=1, le=MAX_CRDS, description="How many CRDs.")
    served_versions: int = Field(1, ge=1, le=32, description="Versions each CRD serves: each has its own storage and schema.")
    schema_bytes: Bytes = Field(16 * 1024, description="Size of one version's openAPIV3Schema, as JSON (bytes or a quantity).")
    api_groups: int | None = Field(
        None, ge=1, description="API groups the CRDs span: discovery walks api_groups x served_versions group-versions. null: one per CRD."
    )

    @model_validator(mode="after")
    def _fits(self) -> "CrdGroup":
        if self.schema_bytes <= 0:
            raise ValueError("schema_bytes: must be positive")
        if self.schema_bytes * self.served_versions > MAX_CRD_OBJECT_BYTES:
            raise ValueError(
                f"schema_bytes x served_versions is {self.schema_bytes * self.served_versions:,.0f} bytes: a CRD is "
                "one etcd object, at most 1.5 MiB (etcd's --max-request-bytes)"
            )
        if self.api_groups is not None and self.api_groups > self.count:
            raise ValueError(f"api_groups: {self.api_groups} API groups for {self.count} CRDs")
        return self

    @property
    def group_count(self) -> int:
        return self.api_groups if self.api_groups is not None else self.count


# --------------------------------------------------------------------------------------------


# Bounds of a run: simulated time in integer nanoseconds stays far inside 64 bits, and the series
# (one sample of every metric per scrape) stay a size a notebook can hold.
MAX_DURATION_S = 1e7  # ~116 days of simulated time
MAX_SCRAPES = 1_000_000
# Requests a run may be expected to send (open-loop and writers' rates times the duration) unless
# `run.max_requests` says more: at ~25,000 simulated requests a wall second, 100 M is over an hour.
DEFAULT_MAX_REQUESTS = 100_000_000


class RunSpec(_Model):
    duration_s: float = Field(
        300.0, gt=0, le=MAX_DURATION_S,
        description="How much simulated time the run covers (~116 days at most).",
    )
    seed: int = Field(1, ge=0, description="Seed of every random stream (arrivals, sizes, jitter).")
    scrape_interval_s: float = Field(
        1.0, ge=0.001,
        description=(
            "Step of the time series: every series is sampled this often, like a Prometheus scrape "
            "(at least 1 ms, and at most 1,000,000 samples in a run)."
        ),
    )
    request_records: bool = Field(False, description="Keep one record per request (memory grows with the request count).")
    max_requests: int = Field(
        DEFAULT_MAX_REQUESTS, ge=1,
        description=(
            "The most requests the run may be expected to send (open-loop clients' and writers' rates x instances "
            "x duration); a scenario beyond it is refused before it runs. Raise it for a deliberately long run."
        ),
    )
    steady_state_from_s: float | None = Field(
        None, ge=0,
        description="Start of the steady-state window, in s from the start of the run: the summary's "
        "`*_steady` peaks and means cover [steady_state_from_s, duration_s], leaving out the start-up "
        "ramp. null: the second half of the run (duration_s / 2). Must be before duration_s.",
    )  # fmt: skip

    @field_validator("steady_state_from_s")
    @classmethod
    def _steady_state(cls, x: float | None, info) -> float | None:
        duration = info.data.get("duration_s")
        if x is not None and duration is not None and x >= duration:
            raise ValueError(f"{x:g} s is not before the run ends (run.duration_s: {duration:g})")
        return x

    @model_validator(mode="after")
    def _scrapes(self) -> "RunSpec":
        n = self.duration_s / self.scrape_interval_s
        if n > MAX_SCRAPES:
            raise ValueError(f"duration_s / scrape_interval_s is {n:,.0f} samples, more than {MAX_SCRAPES:,}: "
                             "raise scrape_interval_s")  # fmt: skip
        return self

    @property
    def steady_from_s(self) -> float:
        """Where the steady-state window starts (resolved: null is half the run)."""
        return self.duration_s / 2 if self.steady_state_from_s is None else self.steady_state_from_s


class WebhookServiceTime(_Model):
    mean_s: float = Field(..., gt=0, le=3600, description="Mean time one call takes at the webhook's server.")
    distribution: Literal["constant", "exponential", "lognormal"] = Field("exponential", description="constant, exponential, or lognormal with `sigma`.")
    sigma: float = Field(0.5, gt=0, le=5, description="lognormal: the standard deviation of the log.")


class AdmissionWebhook(_Model):
    """An admission webhook the apiserver calls for matching requests, while they hold their
    APF seats (simapf.server.webhooks): mutating ones first, then validating ones."""

    name: str = Field(..., min_length=1, description="The webhook's name (metrics and the summary use it).")
    type: Literal["mutating", "validating"] = Field("validating", description="MutatingWebhookConfiguration or ValidatingWebhookConfiguration.")
    verbs: list[Literal["create", "update", "patch", "delete", "deletecollection"]] = Field(
        ["create", "update", "patch"], min_length=1,
        description="The requests it sees (upstream's operations CREATE, UPDATE (update and patch), DELETE).",
    )
    resources: list[str] = Field(default_factory=list, description="Resource names it sees; empty: all.")
    failure_policy: Literal["Fail", "Ignore"] = Field(
        "Fail", description="A call that times out fails the request (Fail, upstream's default) or is skipped (Ignore)."
    )
    timeout_s: float = Field(10.0, gt=0, le=30, description="timeoutSeconds: default 10, at most 30 (upstream).")
    replicas: int = Field(1, ge=1, le=10_000, description="Pods serving the webhook.")
    concurrency: int = Field(1, ge=1, le=10_000, description="Calls one replica serves at once; more wait, first come first served.")
    service_time: WebhookServiceTime = Field(..., description="How long one call takes at a free server.")


class Scenario(_Model):
    name: str = Field("scenario", description="A short name, used in outputs.")
    description: str = Field("", description="What the scenario shows.")
    run: RunSpec = Field(RunSpec(), description="Duration, seed, series step.")
    kubernetes: Kubernetes = Field(Kubernetes(), description="Kubernetes version knobs.")
    apiserver: Apiserver = Field(Apiserver(), description="The apiserver.")
    apf: APF = Field(APF(), description="API Priority and Fairness.")
    resources: list[Resource] = Field(default_factory=list, description="The cluster's resources.")
    clients: list[Client] = Field(default_factory=list, description="Who sends requests.")
    events: list[Event] = Field(default_factory=list, description="What happens when.")
    admission_webhooks: list[AdmissionWebhook] = Field(
        default_factory=list, description="Admission webhooks called for matching requests while they hold their seats."
    )
    crds: list[CrdGroup] = Field(
        default_factory=list,
        description="CustomResourceDefinitions, by group: installed before the run, or by a crd_install event.",
    )

    @model_validator(mode="after")
    def _references(self) -> "Scenario":
        seen: dict[str, int] = {}
        for i, r in enumerate(self.resources):
            if r.key in seen:
                raise ValueError(f"resources[{i}].name: duplicate resource {r.key!r} (also resources[{seen[r.key]}])")
            seen[r.key] = i
        names: dict[str, int] = {}
        for i, c in enumerate(self.clients):
            where = f"clients[{i}]"
            if c.name in names:
                raise ValueError(f"{where}.name: duplicate client name {c.name!r} (also clients[{names[c.name]}])")
            names[c.name] = i
            resource = getattr(c, "resource", None) or getattr(getattr(c, "request", None), "resource", None)
            field = "resource" if hasattr(c, "resource") else "request.resource"
            if resource is not None:
                try:
                    self.resource(resource)
                except KeyError as exc:
                    raise ValueError(f"{where}.{field}: {exc.args[0]}") from None
        for i, e in enumerate(self.events):
            if e.at_s > self.run.duration_s:
                raise ValueError(f"events[{i}].at_s: {e.at_s:g} s is after the run ends (run.duration_s: {self.run.duration_s:g})")
            if isinstance(e, RampEvent) and e.client not in names:
                raise ValueError(f"events[{i}].client: no client named {e.client!r}")
            if isinstance(e, RestartEvent) and e.replica >= self.apiserver.replicas:
                raise ValueError(
                    f"events[{i}].replica: there is no replica {e.replica} (apiserver.replicas: "
                    f"{self.apiserver.replicas}; replicas count from 0)"
                )
        groups: dict[str, int] = {}
        for i, g in enumerate(self.crds):
            if g.name in groups:
                raise ValueError(f"crds[{i}].name: duplicate CRD group {g.name!r} (also crds[{groups[g.name]}])")
            groups[g.name] = i
        installed: dict[str, int] = {}
        for i, e in enumerate(self.events):
            if isinstance(e, CrdInstallEvent):
                if e.crds not in groups:
                    known = ", ".join(groups) or "none"
                    raise ValueError(f"events[{i}].crds: no CRD group named {e.crds!r} in crds (there are: {known})")
                if e.crds in installed:
                    raise ValueError(f"events[{i}].crds: {e.crds!r} is already installed by events[{installed[e.crds]}]")
                installed[e.crds] = i
        for c in self.clients:
            if isinstance(c, DiscoveryClient) and c.cache_fsync_s is None:
                c.cache_fsync_s = DISCOVERY_CACHE_FSYNC_S if self.kubectl_syncs_its_cache() else 0.0
        expected = self.expected_requests()
        if expected > self.run.max_requests:
            raise ValueError(
                f"run: its clients would send ~{expected:,.0f} requests in {self.run.duration_s:g} s, more than "
                f"run.max_requests ({self.run.max_requests:,}); shorten the run, lower the rates, or raise run.max_requests"
            )
        return self

    def crds_at_start(self) -> list[CrdGroup]:
        """The CRD groups installed before the run (no crd_install event creates them)."""
        later = {e.crds for e in self.events if isinstance(e, CrdInstallEvent)}
        return [g for g in self.crds if g.name not in later]

    def version_before(self, major: int, minor: int) -> bool:
        """Whether kubernetes.version is older than major.minor (an unreadable version is not)."""
        match = re.match(r"v?(\d+)\.(\d+)", self.kubernetes.version.strip())
        return match is not None and (int(match[1]), int(match[2])) < (major, minor)

    def kubectl_syncs_its_cache(self) -> bool:
        """Whether kubectl of this scenario's version syncs every discovery cache file (before 1.25)."""
        return self.version_before(*CHECKSUMMED_DISCOVERY_CACHE)

    def expected_requests(self) -> float:
        """Requests the rate-driven clients would send over the run: open-loop clients' and writers'
        rate x instances (their largest ramp) x duration. Closed loops and informers are left out:
        their pace depends on the server."""
        peak = {c.name: c.count for c in self.clients}
        for e in self.events:
            if isinstance(e, RampEvent) and e.client in peak:
                peak[e.client] = max(peak[e.client], e.to_count)
        return sum(c.rate_per_s * peak[c.name] * self.run.duration_s
                   for c in self.clients if isinstance(c, (OpenLoopClient, MutatorClient)))  # fmt: skip

    def resource(self, ref: str) -> Resource:
        """The resource a client refers to by name or name.group."""
        matches = [r for r in self.resources if ref in (r.key, r.name)]
        exact = [r for r in matches if r.key == ref]
        if exact:
            return exact[0]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KeyError(f"resource {ref!r} is ambiguous: say {' or '.join(repr(r.key) for r in matches)}")
        known = ", ".join(r.key for r in self.resources) or "none"
        raise KeyError(f"no resource {ref!r} in resources (there are: {known})")
