"""Who talks to the cluster: the client kinds, their requests, rate limits, retries, and the
time they take to handle responses."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, field_validator, model_validator

from simapf.scenario.schema.base import (
    MAX_GO_DURATION_S, MAX_INSTANCES, MAX_NAME_LENGTH, MAX_RATE_PER_S, RATE_FLOOR, Integer, Number, NumberAsText,
    Rate, Seconds, StrictModel,
)  # fmt: skip
from simapf.server.params import Bytes, OptionalBytes


MAX_GROUPS = 100
MAX_RETRIES = 1000
MAX_WORKERS = 10_000  # one response slot is held per worker and core
MAX_GROUP_VERSIONS = 100_000  # a discovery client keeps each group-version it walks


class Identity(StrictModel):
    """Who a client is, as APF's FlowSchemas see it. `{i}` in names is the client's index."""

    user: str | None = Field(None, description="User name, e.g. 'alice' or 'system:node:node-{i}'.")
    groups: list[str] = Field(
        default_factory=list, max_length=MAX_GROUPS, description="Groups (at most 100); system:authenticated is always added."
    )
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


class ListOptionsSpec(StrictModel):
    resource_version: Annotated[str | None, NumberAsText] = Field(None, description="resourceVersion: null (unset: a consistent read), '0' (any), or a number.")
    resource_version_match: Literal["", "NotOlderThan", "Exact"] = Field(
        "",
        description="resourceVersionMatch: '' (unset), NotOlderThan or Exact.",
    )
    limit: Integer = Field(0, ge=0, description="limit (page size); 0 = no paging.")
    paginate: bool = Field(True, description="With a limit: follow continue tokens until the list is complete.")
    label_selector: str = Field(
        "",
        description="labelSelector, e.g. 'app=web'. Only whether one is set matters: selectivity says how much matches.",
    )
    field_selector: str = Field(
        "",
        description=(
            "fieldSelector, e.g. 'spec.nodeName=node-3'. selectivity says how much matches; what it pins "
            "matters where the apiserver has an index or a key for it: Pods by spec.nodeName (from the watch "
            "cache: the node's Pods only, the Nodes being the resource `nodes` named node-0, node-1, ...) and "
            "any object by metadata.name (its key alone)."
        ),
    )
    selectivity: Number = Field(
        1.0, ge=0, le=1,
        description=(
            "With selectors: the fraction of objects that match (0 = none match). The server reads every object "
            "to filter them, except those an index or the object's key leaves out (field_selector)."
        ),
    )
    send_initial_events: bool | None = Field(
        None,
        description="sendInitialEvents (watch only): true = the watch first sends the current objects; null = unset.",
    )
    pretty: bool = Field(
        False,
        description=(
            "pretty=true: a JSON response is written indented, as one document (json.MarshalIndent), so it is "
            "never streamed item by item: whole JSON, which a client can still ask for where the streaming "
            "encoder's gate is locked on (1.37)."
        ),
    )


Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete"]
Encoding = Literal["json", "protobuf", "cbor", "yaml", "table"]


class RequestTemplate(StrictModel):
    """One request a client sends."""

    verb: Verb = Field(..., description="get, list, watch, create, update, patch or delete.")
    resource: str = Field(..., description="A resource of `resources` (name, or name.group).")
    namespace: str | None = Field(
        None, description="Namespace: a name like ns-3, 'random' (one of the resource's namespaces each time), or null for all namespaces / cluster-scoped."
    )
    options: ListOptionsSpec = Field(ListOptionsSpec(), description="List and watch options.")
    encoding: Encoding = Field("json", description="Response encoding (Accept).")
    watch_duration_s: Seconds = Field(
        300.0, gt=0, description="watch: how long the watch stays open before the client closes it (it counts toward mutating cost meanwhile)."
    )


class RetryPolicy(StrictModel):
    """client-go's handling of 429s: wait Retry-After, retry at most max_retries times."""

    max_retries: Integer = Field(10, ge=0, le=MAX_RETRIES, description="Retries after a 429 (client-go's default: 10; at most 1,000).")
    honour_retry_after: bool = Field(True, description="Wait the Retry-After the apiserver sends (APF: 1 s, doubling to 32 s under sustained rejection).")
    fallback_wait_s: Seconds = Field(1.0, ge=0, description="Wait when Retry-After is not honoured.")


class RateLimit(StrictModel):
    """A client-side token bucket (client-go's flowcontrol rate limiter). Write `disabled` (or
    qps 0) for none at all."""

    qps: Rate = Field(
        ...,
        description=(
            "Tokens added per second: the sustained request rate. 0 or less = no token bucket: every "
            "request goes out at once, as with `disabled`. (client-go's rest.Config reads QPS 0 as its "
            "default 5 and creates no rate limiter for QPS < 0; clients also disable it with "
            "RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter().)"
        ),
    )
    burst: Integer | None = Field(
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


class StartSpec(StrictModel):
    at_s: Seconds = Field(
        0.0, ge=0,
        description="When the instances start, in seconds from the start of the run (with spread_s: the earliest).",
    )
    spread_s: Seconds = Field(
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


class ClientProcessing(StrictModel):
    """What each instance does with every response before it acts on it (decode, store, cache
    files): the response waits for one of `workers`, in order, then takes per_response_s +
    per_object_s x objects + per_byte_s x bytes (a 429 or error: per_response_s only). Only then
    does the client go on: next iteration, next page, watch after list, next discovery phase.
    null fields take the client kind's default, a prior from public benchmarks, not fitted
    (docs/workloads.md); all zero = responses are handled the moment they arrive. A mutator's
    writes take effect at the server whatever it does with the responses: no effect there."""

    per_response_s: Seconds | None = Field(
        None, ge=0,
        description=(
            "Seconds per response, whatever it carries. null = the kind's default: discovery 1.35e-3 "
            "(kubectl: ~1.6 ms CPU per response against 343 group-versions, crossplane/crossplane#2895 and "
            "kubernetes/kubernetes#110820, less process start-up, kubernetes/kubernetes#110753, less the decode); "
            "others 7e-5 (a net/http loopback round trip, 74 µs, census-instrumentation/opencensus-go#467)."
        ),
    )
    per_object_s: Seconds | None = Field(
        None, ge=0,
        description=(
            "Seconds per object the response carries. null = the kind's default: informer 1.3e-6 (client-go's "
            "indexer, 1274 ns per add with an index, kubernetes/kubernetes#105234); others 0 (decoding is in per_byte_s)."
        ),
    )
    per_byte_s: Seconds | None = Field(
        None, ge=0,
        description=(
            "Seconds per response byte (decoding). null = by the client's encoding: protobuf 2e-9 (~500 MB/s), "
            "anything else 4.5e-8 (JSON, ~22 MB/s); both from client-go decoding Pods from a watch in one "
            "goroutine, kubernetes/kubernetes#138841. Discovery documents are JSON."
        ),
    )
    workers: Integer | None = Field(
        None, ge=1, le=MAX_WORKERS,
        description=(
            "How many responses one instance processes at once (at most 10,000); more wait, first come first served. null = the "
            "kind's default: informer 1 (the reflector decodes its list and watch in one goroutine); others 8 "
            "(a goroutine per request, bounded by the cores of a laptop, assumed an 8-core Apple M1 as in "
            "kubernetes/kubernetes#110820; kubectl fetches every group-version in its own goroutine)."
        ),
    )

    shared_cores: Integer | None = Field(
        None, ge=1, le=MAX_WORKERS,
        description=(
            "The instances are one program's (a process that starts N informers; at most 10,000 cores): its cores process at most "
            "this many responses at once, all instances together, first come first served, each instance "
            "still within its own `workers`. null = each instance is a process of its own."
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
            shared_cores=self.shared_cores,
        )

    @property
    def zero(self) -> bool:
        return not (self.per_response_s or self.per_object_s or self.per_byte_s)


class ClientNetwork(StrictModel):
    """The way between the apiserver and this client's instances. A response's write returns only
    when the client has taken it (HTTP/2 flow control), so the handler keeps its seats and its
    response in memory while the bytes go out: as they are encoded when the response is streamed,
    after the encoding when not (simapf.server.network)."""

    stream_bytes_per_s: Annotated[OptionalBytes, RATE_FLOOR] = Field(
        180e6,
        description=(
            "How fast one response goes out to the client: one HTTP/2 stream through TLS. ~180 MB/s from "
            "kube-apiserver to a client in a GCE cluster: 183 MiB/s writing a 700 MB LIST "
            "(kubernetes#111507), 183 MB/s a 1572 MB WatchList and 145 MB/s a 232 MB gzip LIST "
            "(kubernetes#138327). null = at once (a client that reads as fast as the server writes)."
        ),
    )
    link_bytes_per_s: Annotated[OptionalBytes, RATE_FLOOR] = Field(
        None,
        description=(
            "What all the instances' responses share: their node's network, or the CPU the client has to "
            "read them with. Responses in flight split it evenly, each at most stream_bytes_per_s. "
            "null = no limit beyond each stream's."
        ),
    )
    rtt_s: Seconds = Field(
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


class ClientBase(StrictModel):
    name: str = Field(
        ..., min_length=1, max_length=MAX_NAME_LENGTH,
        description="Unique client name (labels series, targets events; at most 253 characters).",
    )
    identity: Identity = Field(..., description="Give exactly one of user and service_account.")
    count: Integer = Field(
        1, ge=0, le=MAX_INSTANCES,
        description=(
            "Instances (independent clients with this spec; `{i}` in identity names is the index; at most 100,000, "
            "and 100,000 in all clients together: simapf keeps each one's state and random streams)."
        ),
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
    def _processing_defaults(self) -> "ClientBase":
        kind = getattr(self, "kind", None)
        if self.processing is not None and kind in PROCESSING_DEFAULTS:
            request = getattr(self, "request", None)
            encoding = getattr(self, "encoding", None) or (request.encoding if request is not None else "json")
            self.processing = self.processing.resolved(kind, "json" if kind == "discovery" else encoding)
        return self


class OpenLoopClient(ClientBase):
    """Requests at a rate that does not depend on responses."""

    kind: Literal["open_loop"] = Field(description="open_loop: this kind of client.")
    rate_per_s: Rate = Field(..., gt=0, le=MAX_RATE_PER_S, description="Requests per second per instance (at most 1,000,000).")
    arrivals: Literal["poisson", "constant"] = Field("poisson", description="Poisson or evenly spaced arrivals.")
    ramp_up_s: Seconds = Field(
        0.0,
        ge=0,
        le=1e7,
        description=(
            "Each instance's rate rises linearly from 0 to rate_per_s over this time from its start, as a load "
            "generator's ramping arrival rate (k6's ramping-arrival-rate executor): arrivals are those of the "
            "chosen kind at the ramping rate. 0 = the full rate from the start."
        ),
    )
    max_in_flight: Integer | None = Field(
        None,
        ge=1,
        description=(
            "At most this many requests outstanding across all instances, as a load generator's worker "
            "pool: a request due beyond it waits at the client, in order, and is sent when a response "
            "returns. null = every request is sent when due."
        ),
    )
    request: RequestTemplate = Field(..., description="Sent at every arrival.")


class ThinkTime(StrictModel):
    mean_s: Seconds = Field(..., ge=0, description="Mean think time between a response and the next request.")
    distribution: Literal["constant", "exponential", "uniform"] = Field("exponential", description="constant, exponential, or uniform on [0, 2 x mean].")


class ClosedLoopClient(ClientBase):
    """Virtual users: send, wait for the response, think, repeat."""

    kind: Literal["closed_loop"] = Field(description="closed_loop: this kind of client.")
    think_time: ThinkTime = Field(ThinkTime(mean_s=1.0), description="Pause after each response.")
    iterations: Integer | None = Field(
        None, ge=1, description="Total requests shared by all instances (as k6's shared-iterations); null = until the run ends."
    )
    request: RequestTemplate = Field(..., description="Sent at every iteration, after the think time.")


class ListSpec(StrictModel):
    mode: Literal["auto", "rv0", "paged", "watchlist", "consistent"] = Field(
        "auto",
        description=(
            "How the informer lists. auto = client-go: WatchList when both gates are on; otherwise the first list "
            "with resourceVersion=0 (whole list from the cache), and relists after a 410 at the last resourceVersion without a limit (whole, from the cache). "
            "rv0: always resourceVersion=0. paged/consistent: always resourceVersion unset, paged by page_size / unpaged. "
            "watchlist: always WatchList."
        ),
    )
    page_size: Integer = Field(500, ge=1, description="client-go's pager page size.")


class Backoff(StrictModel):
    """client-go reflector backoff (wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0))."""

    initial_s: Seconds = Field(0.8, gt=0, description="First wait after a failure.")
    max_s: Seconds = Field(30.0, gt=0, description="Longest wait before jitter.")
    factor: Number = Field(2.0, ge=1, description="Growth per failure.")
    jitter: Number = Field(
        1.0, ge=0,
        description="Each wait is d x (1 + jitter x U[0,1)); the longest, max(initial_s, max_s) x (1 + jitter), is a Go duration (~292 years at most).",
    )
    reset_s: Seconds = Field(120.0, gt=0, description="After this long without a failure the backoff starts over.")

    @model_validator(mode="after")
    def _longest_wait(self) -> "Backoff":
        longest = max(self.initial_s, self.max_s) * (1 + self.jitter)
        if longest > MAX_GO_DURATION_S:
            raise ValueError(f"the longest wait, max(initial_s, max_s) x (1 + jitter), is {longest:.4g} s, more than "
                             f"{MAX_GO_DURATION_S:.4g} s, the longest duration Go's int64 nanoseconds hold")  # fmt: skip
        return self


class InformerClient(ClientBase):
    """A client-go informer: list, then watch; relist when the watch cannot resume."""

    kind: Literal["informer"] = Field(description="informer: this kind of client.")
    resource: str = Field(..., description="The resource watched (name, or name.group).")
    namespace: str | None = Field(None, description="A namespace, or null for all.")
    label_selector: str = Field("", description="labelSelector of list and watch.")
    field_selector: str = Field(
        "",
        description=(
            "fieldSelector, e.g. 'spec.nodeName=node-{i}' as a kubelet does: the watch is then handed only its "
            "node's Pods' events (a trigger), and a LIST from the watch cache reads only its node's Pods (an index)."
        ),
    )
    selectivity: Number = Field(1.0, ge=0, le=1, description="With selectors: the fraction of objects that match (0 = none).")
    encoding: Encoding = Field("json", description="Encoding (client-go uses protobuf for built-in types).")
    list: ListSpec = Field(ListSpec(), description="How it lists.")
    backoff: Backoff = Field(Backoff(), description="Backoff between failed list/watch attempts.")
    watch_timeout_s: Seconds = Field(
        300.0, gt=0, description="Watches end after a random time in [timeout, 2 x timeout) and are re-established without a relist (client-go's minWatchTimeout: 5 min, so 5-10 min)."
    )
    synced_at_run_start: bool = Field(
        False,
        description=(
            "The instances running when the run starts listed before it, as in a cluster in its steady state (what "
            "`simapf import` writes): each starts with its watch open, as if opened at a random moment of its "
            "time-out, and lists only when it has to (a 410, a failure). false: each lists first, as a new informer "
            "does; instances started later always do."
        ),
    )


class MutatorClient(ClientBase):
    """Writes that change the inventory and are sent to watchers."""

    kind: Literal["mutator"] = Field(description="mutator: this kind of client.")
    resource: str = Field(..., description="The resource written.")
    namespace: str | None = Field("random", description="A namespace, 'random', or null (cluster-scoped).")
    rate_per_s: Rate = Field(..., gt=0, le=MAX_RATE_PER_S, description="Writes per second per instance (Poisson; at most 1,000,000).")
    mix: dict[Literal["create", "update", "patch", "delete"], Number] = Field(
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


class DiscoveryClient(ClientBase):
    """kubectl with a cold discovery cache: /api, /apis, then every group-version, in parallel
    through its token bucket; repeated every `interval_s`."""

    kind: Literal["discovery"] = Field(description="discovery: this kind of client.")
    interval_s: Seconds = Field(60.0, gt=0, description="Mean time between discovery runs per instance (Poisson).")
    extra_group_versions: Integer = Field(
        0, ge=0, le=MAX_GROUP_VERSIONS,
        description="Group-versions served besides those of `resources` (CRDs, aggregated APIs; at most 100,000).",
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
    cache_fsync_s: Seconds | None = Field(
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
