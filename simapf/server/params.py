"""Every parameter of the apiserver resource model, with its default, unit and meaning.

One pydantic model, `ServerParams`, grouped by concern. Units are in the field names (`_s`,
`_bytes`, `_cores`, `_core_s` = core-seconds, `_per_s`). Byte fields also accept Kubernetes
quantity strings ("512Mi", "2G") so a scenario can say what an operator would write.

Where a default comes from upstream (Go runtime constants, KEP numbers) the description names
the source. Defaults marked "Fitted" (their default is `fitted(key)`) are the values `simapf
calibrate` fitted to the measured LIST experiment, read from the shipped calibration record
(`calibration/params.yaml`, report: `docs/validation.md`) when the parameters are built: a new
fit written there is the new default, with no copy of its numbers anywhere else. The rest are
sourced or starting hypotheses from `list-memory.md` §6 that the data cannot reach.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from pathlib import Path
from typing import Annotated, Any, Callable, Final, Literal

from pydantic import (
    AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_serializer, field_validator,
    model_validator,
)

from simapf.errors import ConfigError
from simapf.files import read_yaml
from simapf.messages import describe
from simapf.quantities import MAX_CORES, AtLeast, AtMost, Cores, Integer, Number, Rate, Seconds

MiB = 1 << 20

# --------------------------------------------------------------------------------------------
# Fitted defaults: read from the shipped calibration record, the one place their values live.

SHIPPED_RECORD = Path(__file__).resolve().parents[1] / "calibration" / "params.yaml"


@functools.cache
def shipped_record() -> dict[str, Any]:
    """The shipped calibration record, read once (`simapf.calibrate.record` writes and checks it)."""
    record = read_yaml(SHIPPED_RECORD)
    if not isinstance(record, dict):
        raise ConfigError(f"{SHIPPED_RECORD}: a calibration record must be a mapping")
    return record


def fitted_value(key: str) -> Any:
    """The shipped record's value of a fitted parameter, named as its `fit.free_parameters` are:
    `section.field` of the server parameters, or `experiment.field[.field]` of the experiment."""
    parts = key.split(".")
    node: Any = shipped_record()
    for part in (parts if parts[0] == "experiment" else ["server", *parts]):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{SHIPPED_RECORD}: no value for the fitted default {key!r}")
        node = node[part]
    return node


def fitted(key: str) -> Callable[[], Any]:
    """A `default_factory` for a fitted default: its value in the shipped record."""
    factory = functools.partial(fitted_value, key)
    factory.fitted_key = key  # type: ignore[attr-defined]  # tests match it to the field
    return factory

# --------------------------------------------------------------------------------------------
# Byte quantities: numbers, or Kubernetes resource.Quantity-style strings.

_SUFFIX = {
    "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
_QUANTITY_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\s*$")


def parse_bytes(value: Any) -> Any:
    """Turn "512Mi", "2G", "1.5e9" into a float number of bytes; leave numbers and None alone.

    Anything else is passed through so pydantic reports it against the field path.
    """
    if isinstance(value, bool) or not isinstance(value, str):
        return value
    m = _QUANTITY_RE.match(value)
    if not m:
        return value
    number, exponent, suffix = m.groups()
    # float() of the written number: 10 ** int(exponent) would compute "1e99999999" exactly, for ever.
    x = float(f"{number}e{exponent}" if exponent else number) * _SUFFIX[suffix or ""]
    if not math.isfinite(x):
        raise ValueError(f"{value!r} is not a finite number of bytes")
    return x


Bytes = Annotated[Number, BeforeValidator(parse_bytes), Field(ge=0)]
OptionalBytes = Annotated[Number | None, BeforeValidator(parse_bytes)]


def _positive_or_null(value: float | None) -> float | None:
    if value is not None and value <= 0:
        raise ValueError("must be positive or null")
    return value


# A size whose null means "none" (no limit, no growth): 0 or less is a mistake, not a value.
OptionalPositiveBytes = Annotated[OptionalBytes, AfterValidator(_positive_or_null)]


def _gogc_spelling(value: Any) -> Any:
    # YAML 1.1 reads an unquoted `off` as False: left alone, pydantic would make that GOGC=0
    # (collect all the time), the opposite of what was meant. `true` means nothing.
    if value is False or (isinstance(value, str) and value.strip().lower() == "off"):
        return "off"
    if isinstance(value, bool) or (isinstance(value, int) and value < 0) or (isinstance(value, str) and not value.strip().isdigit()):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        raise ValueError(f"GOGC must be a percentage >= 0 or off, got {shown}")
    return int(value) if isinstance(value, str) else value  # GOGC=200 as the environment writes it


# GOGC as an operator writes it: a percentage, `off` (kept as written), or null (also off).
GogcSpelling = Annotated[Integer | None | Literal["off"], BeforeValidator(_gogc_spelling)]
# GOGC as the model reads it: a percentage, or None for off.
Gogc = Annotated[GogcSpelling, AfterValidator(lambda value: None if value == "off" else value)]


# A coefficient of variation is the gamma shape 1/cv^2, which must be a finite float: 0 (none) or more than this.
MIN_CV = AtLeast(1e-150, "the smallest whose 1/cv² is a finite number (0: no variation)")


class _Params(BaseModel):
    """Parameters: unknown keys are typos, so they are errors; values never change mid-run."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


# --------------------------------------------------------------------------------------------


class CpuParams(_Params):
    cores: Cores = Field(
        16.0, gt=0,
        description="CPU cores of the apiserver's machine or container (the seed experiment: 16); from 0.001 (1m) to 4096.",
    )
    usable_cores: Cores | None = Field(
        None,
        gt=0,
        description=(
            "Most cores the apiserver process can actually get, absolute; must not exceed `cores`, and at least "
            "0.001 (1m). null = `usable_fraction` x `cores`."
        ),
    )
    usable_fraction: Number = Field(
        default_factory=fitted("cpu.usable_fraction"),
        gt=0,
        le=1,
        description=(
            "The usable-core ceiling as a fraction of `cores`, when `usable_cores` is null: the "
            "experiments of #132233 saw the apiserver stop using more CPU while cores were free "
            "(etcd and other control-plane processes share the node). Fitted on the 16-core data."
        ),
    )
    gomaxprocs: Integer | None = Field(
        None,
        ge=1, le=MAX_CORES,
        description="GOMAXPROCS: Go threads running Go code at once (Ps; at most 4096). None = ceil(cores), Go's default.",
    )

    @model_validator(mode="after")
    def _check(self) -> "CpuParams":
        if self.usable_cores is not None and self.usable_cores > self.cores:
            raise ValueError(f"usable_cores ({self.usable_cores}) must not exceed cores ({self.cores})")
        return self

    @property
    def procs(self) -> int:
        """Effective GOMAXPROCS."""
        return self.gomaxprocs if self.gomaxprocs is not None else max(1, math.ceil(self.cores))

    @property
    def usable(self) -> float:
        """The usable-core ceiling: `usable_cores`, or `usable_fraction` of `cores`."""
        return self.usable_cores if self.usable_cores is not None else self.usable_fraction * self.cores

    @property
    def effective_cores(self) -> float:
        """Cores the Go code of the process can use at once: the usable ceiling, at most P."""
        return min(self.usable, float(self.procs))


class ProcessParams(_Params):
    nonheap_bytes: Bytes = Field(
        90e6,
        description=(
            "Resident memory outside the Go heap: binary, goroutine stacks, runtime metadata, non-Go "
            "memory. Counted in RSS and, as Go's non-heap memory, against GOMEMLIMIT. Hypothesis."
        ),
    )
    live_heap_bytes: Bytes = Field(
        default_factory=fitted("process.live_heap_bytes"),
        description=(
            "Live Go heap of an idle apiserver other than the watch caches registered with the model "
            "(informers, OpenAPI, schemas, a small cluster's caches). With `nonheap_bytes` it makes a "
            "Kind apiserver's ~0.4 GB baseline (list-memory.md §5). Fitted."
        ),
    )
    heap_metadata_fraction: Number = Field(
        0.03, ge=0, le=1, description="Runtime metadata and fragmentation in RSS per byte of retained heap (list-memory.md §4.7: ~3-5 %)."
    )
    memory_limit_bytes: OptionalPositiveBytes = Field(
        None, description="Container memory limit: RSS above it is an OOM kill. None = no limit."
    )
    restart_s: Seconds = Field(
        30.0, ge=0, description="Time from an OOM kill until the new process serves again (kubelet restart + startup), before the watch caches refill. Hypothesis."
    )
    baseline_cores: Number = Field(
        0.08,
        ge=0,
        description=(
            "CPU the process uses with no request to serve (watch-cache bookmarks and object-count polls, "
            "health checks, its own controllers), in cores. Counted in process CPU and taken from the cores "
            "requests share. A small idle kubeadm apiserver (1.32): 7-9 % of a core (kubernetes#75565, 2025); "
            "production clusters: about 0.3 cores (openshift/cluster-kube-apiserver-operator#1032)."
        ),
    )
    own_alloc_bytes_per_s: Rate = Field(
        4e6,
        ge=0,
        description=(
            "Bytes the process allocates on its own, requests or not (watch-cache dispatch and bookmarks, its "
            "own controllers' informers, timers, compaction, metrics), all of it short-lived: it keeps the heap "
            "cycling up to the GC's trigger with no request at all. Hypothesis, 1-10 MB/s: an idle k3s "
            "(apiserver, controllers, kine and kubelet in one process) ran 0.18 GC cycles a second at 0.12 cores "
            "with 161 MiB of live objects under GOMEMLIMIT=320MiB (orbstack/orbstack#2633), at most ~12 MiB/s; "
            "the apiserver alone, at its idle CPU (`baseline_cores`), at most ~8 MiB/s at that rate per core. 0: none."
        ),
    )


class WatchCacheParams(_Params):
    decoded_size_multiplier: Number = Field(
        3.0,
        ge=0,
        description=(
            "Decoded Go size of a cached object per byte stored in etcd (list-memory.md §5: typed "
            "objects 2-3x, Unstructured ~5.2x, #142062)."
        ),
    )
    per_object_overhead_bytes: Bytes = Field(
        300.0, description="Cache entry, key and index bytes per cached object. Hypothesis."
    )
    watchers_partitioned_by_scope: bool = Field(
        True,
        description=(
            "Whether the cacher hands an event only to the watchers scoped to its object's namespace and name "
            "(kubernetes#115918, 1.27: `startDispatching` over `allWatchers[namespacedName]`). Off: a watcher "
            "with no trigger value is handed every event of its resource and drops the rest itself, as "
            "before 1.27 (simapf.server.cache_index). A scenario's kubernetes.version before 1.27 sets false."
        ),
    )
    initial_events_by_key: bool = Field(
        True,
        description=(
            "Whether a watch whose field selector pins metadata.name builds its initial events from that "
            "object's key alone (k8s.io/apiserver 1.31, watch_cache.go `getAllEventsSinceLocked` with "
            "`MatchesSingle`); off: from every object the cache holds, as before 1.31. A scenario's "
            "kubernetes.version before 1.31 sets false."
        ),
    )


# The most etcd members a scenario may have (simapf's bound, as for apiserver.replicas; etcd's FAQ
# recommends at most seven), and the longest round trip between two of them: etcd's longest
# election timeout (50 s, `--election-timeout` at most 50000 ms) must be ten times the round trip.
MAX_ETCD_MEMBERS = 16
MAX_MEMBER_ROUND_TRIP_S = 5.0
EtcdCores = Annotated[Integer, AtMost(MAX_CORES, "the most cores simapf models (it keeps state for each)")]
EtcdMembers = Annotated[Integer, AtMost(MAX_ETCD_MEMBERS, "the most members simapf models (etcd recommends at most 7)")]
MemberRoundTrip = Annotated[
    Number, AtMost(MAX_MEMBER_ROUND_TRIP_S, "as etcd's longest election timeout (50 s) must be ten round trips")
]


class EtcdParams(_Params):
    """etcd as its own resource: `members`, each with `concurrency` servers (its cores serving
    ranges), shared fairly.

    One range costs `1/requests_per_s + bytes/bytes_per_s + keys/objects_per_s` seconds of one
    server, linear in each; aggregate capacity is `members` x `concurrency` times one server's. The
    calibration's single Kind node gave etcd the equivalent of one server; a scenario says which
    etcd it runs against in its `etcd` section (cores, members), which sets `concurrency`,
    `members`, `member_round_trip_s` and `embedded` here.
    """

    @model_validator(mode="before")
    @classmethod
    def _drop_large_range_penalty(cls, data: Any) -> Any:
        # Records fitted before 2026-11-25 carry a super-linear per-byte penalty that extrapolated
        # to seconds per 100 MB read; the model no longer has it, and their other values still load.
        if isinstance(data, dict) and "large_range_bytes" in data:
            data = {k: v for k, v in data.items() if k != "large_range_bytes"}
            logging.getLogger(__name__).warning(
                "etcd.large_range_bytes is no longer a parameter (etcd's per-byte cost is linear); ignored"
            )
        return data

    bytes_per_s: Rate = Field(
        default_factory=fitted("etcd.bytes_per_s"),
        gt=0,
        description=(
            "Range-read throughput of one etcd server in stored bytes per second: a range's byte cost is "
            "linear in its size (etcd reads, copies and marshals each value once). Fitted."
        ),
    )
    requests_per_s: Rate = Field(
        default_factory=fitted("etcd.requests_per_s"),
        gt=0,
        description="Empty range reads per second of one etcd server (the per-range cost). Fitted.",
    )
    objects_per_s: Rate | None = Field(
        default_factory=fitted("etcd.objects_per_s"), gt=0, description="Keys per second one etcd server walks and marshals in a range (per-object cost); null = none. Fitted."
    )
    concurrency: EtcdCores = Field(1, ge=1, description=(
        "Range reads each etcd member serves side by side (its servers: the cores it gives ranges; at most 4096); one "
        "range runs on one. The calibration's shared Kind node: 1, with `ps`. A scenario's `etcd.cores` sets it."
    ))
    members: EtcdMembers = Field(1, ge=1, description=(
        "Voting members of the etcd cluster (at most 16). The apiserver's etcd client sends each call to the next "
        "member in turn, and that member serves the range with its own `concurrency` cores. With more than one, every "
        "range first waits for a ReadIndex round (the apiserver never asks for serializable reads): the member confirms "
        "with a quorum that the leader is still the leader, one `member_round_trip_s` on the leader and two on a "
        "follower, which asks the leader; reads that arrive during a round wait for the next one. The calibration's "
        "Kind node: 1. A scenario's `etcd.members` sets it."
    ))
    member_round_trip_s: MemberRoundTrip = Field(0.0005, ge=0, description=(
        "Network round trip between two etcd members, in seconds: a ReadIndex round's heartbeat and its acks "
        "(used only with `members` above 1). Default: etcd's performance guide, \"the RTT within a datacenter may be "
        "as long as several hundred microseconds\"; members in several zones are further apart. At most 5 s. A "
        "scenario's `etcd.member_round_trip_s` sets it."
    ))
    embedded: bool = Field(
        False,
        description=(
            "etcd runs inside the apiserver's process, as in upstream's storage tests and benchmarks "
            "(k8s.io/apiserver storage/etcd3/testserver starts it with embed.StartEtcd): each range is a job "
            "of one core on the process's own cores, its CPU is the process's, and concurrency and "
            "discipline do not apply. Its heap is not modelled. Only with one apiserver replica. A scenario's "
            "`etcd.embedded` sets it."
        ),
    )
    discipline: Literal["ps", "fifo"] = Field(
        'ps',
        description=(
            "ps: every range in flight progresses at once (processor sharing over `concurrency` "
            "servers); fifo: `concurrency` ranges are served at a time, the rest wait in arrival order."
        ),
    )
    wait_live_fraction: Number = Field(
        default_factory=fitted("etcd.wait_live_fraction"),
        ge=0,
        description=(
            "Bytes the apiserver holds per stored byte from sending a range to etcd until the response "
            "has arrived (gRPC receive buffers of interleaved responses). 0: nothing until it has arrived. "
            "With EtcdRangeStream, the share of its decoded objects a streamed range holds meanwhile. Fitted."
        ),
    )
    stream_chunk_bytes: Number = Field(
        1.5 * 2**20,
        gt=0,
        description=(
            "Target size of one chunk of a streamed range (EtcdRangeStream): etcd 3.7 sizes its RangeStream "
            "chunks towards its --max-request-bytes, 1.5 MiB by default, keeping each within half to twice "
            "that (adjustChunkLimit in server/etcdserver/v3_server.go); a chunk holds at least one object."
        ),
    )


class ClientParams(_Params):
    """Clients reading responses, when they run on the apiserver's own cores.

    The calibration experiment ran its load generator on the same single Kind node as the
    apiserver: reading (and decoding) a response took CPU from the same cores, and the request
    kept its seats and its response buffer until the client had read the last byte. With
    everything 0 (the default: clients elsewhere, no delay) a request ends when its CPU work does.
    """

    colocated_core_s_per_byte: Seconds = Field(
        0.0, ge=0, description="CPU a co-located client spends per response byte it reads (on the apiserver's cores)."
    )
    colocated_core_s_per_request: Seconds = Field(
        0.0, ge=0, description="CPU a co-located client spends per response, whatever its size."
    )
    colocated_gzip_core_s_per_byte: Seconds = Field(
        0.0,
        ge=0,
        description=(
            "Extra CPU a co-located client spends per byte of a gzip-compressed response "
            "(decompressing it while it reads), on the apiserver's cores."
        ),
    )
    accept_gzip: bool = Field(
        False,
        description=(
            "Clients send Accept-Encoding: gzip (client-go does unless compression is disabled), so "
            "large responses are compressed (APIResponseCompression)."
        ),
    )
    response_latency_s: Seconds = Field(
        0.0,
        ge=0,
        description=(
            "Time from the end of the handler's work until the client has the last byte (network, "
            "TLS, the client's own scheduling), during which the request keeps its seats and its "
            "response buffer. Uses no apiserver CPU."
        ),
    )


class RequestCpuParams(_Params):
    """CPU per request (list-memory.md §6.2): a + decode (etcd) + copy/filter + convert + encode."""

    request_core_s: Seconds = Field(
        default_factory=fitted("request_cpu.request_core_s"), ge=0, description="Fixed CPU per request: HTTP, authn/authz, APF, audit, routing. Fitted (calibration/params.yaml)."
    )
    work_cv: Annotated[Number, MIN_CV] = Field(
        default_factory=fitted("request_cpu.work_cv"),
        ge=0,
        le=3,
        description=(
            "Coefficient of variation of each request's work: its CPU, its etcd range and a co-located "
            "client's reading, each scaled by a gamma factor of mean 1. Identical LISTs still differ "
            "(scheduling, cache misses, assists), and without it a cohort dispatched together stays "
            "together (simapf/server/variation.py). 0 = every request of a kind costs exactly its plan; otherwise at "
            "least 1e-150, so that the gamma shape 1/cv² is a finite number. Fitted."
        ),
    )
    etcd_request_core_s: Seconds = Field(0.5e-3, ge=0, description="apiserver CPU per etcd range call (gRPC client). Hypothesis.")
    etcd_receive_core_s_per_byte: Seconds = Field(
        1.5e-9, ge=0, description=(
            "apiserver CPU per stored byte received from etcd: TLS, HTTP/2 frames and the message's bytes, which "
            "gRPC's transport takes in while etcd sends the range, alongside etcd's work (the RangeResponse's "
            "unmarshal and the objects' decoding follow it, in decode_core_s_per_byte). Hypothesis."
        ),
    )
    decode_core_s_per_object: Seconds = Field(default_factory=fitted("request_cpu.decode_core_s_per_object"), ge=0, description="Decode + storage-to-internal conversion per object read from etcd. Fitted.")
    decode_core_s_per_byte: Seconds = Field(default_factory=fitted("request_cpu.decode_core_s_per_byte"), ge=0, description="Decode per stored byte read from etcd. Fitted.")
    cache_core_s_per_object: Seconds = Field(1e-6, ge=0, description="Watch-cache copy and filter per object read. Hypothesis.")
    cache_list_sorted: bool = Field(
        False,
        description=(
            "Whether a LIST from the watch cache sorts every object the cache holds by key before it "
            "filters them (k8s.io/apiserver 1.27-1.31, kubernetes#113730: `sort.Sort(sortableStoreElements)` in "
            "WaitUntilFreshAndList; from 1.32 the cache is a B-tree that lists in key order, BtreeWatchCache). "
            "A scenario's kubernetes.version from 1.27 to 1.31 sets true."
        ),
    )
    watchlist_events_sorted: bool = Field(
        False,
        description=(
            "Whether a WatchList sorts its initial events by key before it sends them (kubernetes#120897: "
            "k8s.io/apiserver 1.30 and 1.31 sort what the cache's unordered store lists; from 1.32 the "
            "B-tree lists them in order). A scenario's kubernetes.version 1.30 or 1.31 sets true."
        ),
    )
    cache_sort_core_s_per_comparison: Seconds = Field(
        5e-8,
        ge=0,
        description=(
            "CPU per comparison of that sort (n·log2 n of them for n objects): the interface Less, two type "
            "assertions and a key comparison, whose elements lie beyond the CPU's caches in a large "
            "collection. Measured with Go 1.26 (benchmarks/go/watchcache-sort; docs/benchmarks.md), at a "
            "million objects; smaller collections sort faster per comparison, in milliseconds either way."
        ),
    )
    convert_core_s_per_byte: Seconds = Field(
        2e-9, ge=0, description="Internal-to-external list conversion per response byte, for resources that convert (#139026). Hypothesis."
    )
    # Encoding, per item and per response byte, by wire encoding.
    json_encode_core_s_per_object: Seconds = Field(default_factory=fitted("request_cpu.json_encode_core_s_per_object"), ge=0, description="JSON (also as=Table) per item. Fitted.")
    json_encode_core_s_per_byte: Seconds = Field(default_factory=fitted("request_cpu.json_encode_core_s_per_byte"), ge=0, description="JSON per byte. Fitted.")
    json_indent_core_s_per_byte: Seconds = Field(
        1e-9, ge=0,
        description=(
            "A pretty-printed JSON response's second pass per byte: json.MarshalIndent copies the compact "
            "document out of its encoder, then rewrites it indented byte by byte (Go's encoding/json "
            "appendIndent). Hypothesis: a byte loop's cost, about a nanosecond a byte."
        ),
    )
    protobuf_encode_core_s_per_object: Seconds = Field(2.2e-6, ge=0, description="Protobuf per item: ~0.28x JSON (PR #141809: 17 vs 60 us per item).")
    protobuf_encode_core_s_per_byte: Seconds = Field(2.4e-9, ge=0, description="Protobuf per byte: ~0.28x JSON (PR #141809).")
    cbor_encode_core_s_per_object: Seconds = Field(4e-6, ge=0, description="CBOR per item. Hypothesis: between Protobuf and JSON.")
    cbor_encode_core_s_per_byte: Seconds = Field(4.5e-9, ge=0, description="CBOR per byte. Hypothesis: between Protobuf and JSON.")
    yaml_encode_core_s_per_object: Seconds = Field(24e-6, ge=0, description="YAML per item (JSON, then converted). Hypothesis: 3x JSON.")
    yaml_encode_core_s_per_byte: Seconds = Field(25e-9, ge=0, description="YAML per byte. Hypothesis: 3x JSON.")
    streaming_encode_overhead_fraction: Number = Field(
        0.3, ge=0, description="Extra encode CPU when the response is streaming-encoded (PR #129334: +10-60 %)."
    )
    compress_core_s_per_byte: Seconds = Field(
        default_factory=fitted("request_cpu.compress_core_s_per_byte"),
        ge=0,
        description=(
            "gzip (BestSpeed) per response byte, for responses compressed because the client accepts "
            "gzip (`client.accept_gzip`) and they reach `request_memory.compress_threshold_bytes`. Fitted."
        ),
    )
    watch_event_core_s_per_object: Seconds = Field(2e-6, ge=0, description="Per initial event of a WatchList stream (event wrapping, flush). Hypothesis.")
    watch_filter_core_s_per_event: Seconds = Field(
        1e-6,
        ge=0,
        description=(
            "Per event the cacher hands to a watcher whose filter then drops it: no trigger value or scope "
            "sent it elsewhere (simapf.server.cache_index), so it reaches the watcher's input channel and "
            "goroutine, which matches the object's fields and labels against the selector. Hypothesis: "
            "`cache_core_s_per_object`'s prior, the same filter a LIST from the cache applies per object."
        ),
    )
    refill_core_s_per_object: Seconds = Field(2e-6, ge=0, description="Watch-cache insertion per object while a cache refills. Hypothesis.")


class RequestMemoryParams(_Params):
    """Live and allocated bytes per request by serving path (list-memory.md §6.1)."""

    etcd_decoded_multiplier: Number = Field(
        default_factory=fitted("request_memory.etcd_decoded_multiplier"), ge=0, description="k_dec: decoded Go size per stored byte for objects read from etcd, averaged over the request's life (typed 2-3, Unstructured ~5.2, #142062, at its peak). Fitted."
    )
    decoded_bytes_per_object: Bytes = Field(
        default_factory=fitted("request_memory.decoded_bytes_per_object"),
        description=(
            "Decoded bytes per object read from etcd beside its data: the object's Go structs "
            "(TypeMeta and ObjectMeta, ~0.3 KB with their strings), its maps' buckets, its managedFields "
            "entries, the etcd KeyValue it was decoded from (~0.1 KB with its key) and its slot in the "
            "list's items. A 1 KB ConfigMap decodes to ~2.5 KB. Hypothesis from the types' sizes."
        ),
    )
    conversion_copy_fraction: Number = Field(
        0.1,
        ge=0,
        description=(
            "c_conv: external-version copy per decoded response byte, for resources that convert (Pods, Nodes; "
            "casts: 0). The converted list is new structs that share strings and maps with the cache's objects: "
            "kubernetes#139026 measured +35 GiB for 40 concurrent streamed LISTs of 3 GiB of Pods (1.34), at most "
            "0.29 live bytes per response byte in all, so the copy is ~0.1 of the decoded (3x) bytes."
        ),
    )
    encode_buffer_multiplier: Number = Field(
        1.5, ge=0, description="g: live encode-buffer bytes per response byte of a whole CBOR or YAML response, averaged over the request's life (the buffer grows while encoding; a whole JSON response's buffer is encoding/json's pooled one and a whole Protobuf response's one buffer of its exact size, simapf.server.pool). Hypothesis (list-memory.md: 1.0-2.0): the calibration's responses are streamed, so it does not fit it."
    )
    protobuf_allocator_pool: bool = Field(
        True,
        description=(
            "A whole Protobuf response is encoded into a buffer from apimachinery's runtime.AllocatorPool, "
            "which keeps it for the next response (kubernetes#139350, 1.37; a scenario's kubernetes.version "
            "before 1.37 sets false): the encoder sizes the response first and asks for exactly that, and a "
            "pooled array too small is replaced by one of twice its capacity plus the request. false: a "
            "fresh array of the response's size per response (SimpleAllocator)."
        ),
    )
    buffer_growth_zeroes: bool = Field(
        True,
        description=(
            "Whether growing a whole JSON response's encode buffer (a bytes.Buffer) writes the whole new "
            "array, so that it is resident at its capacity at once: Go grows it with append, which "
            "zeroes the array, since Go 1.19 (go.dev/cl/349994; golang/go#51462). false, which a "
            "scenario's kubernetes.version before 1.25 (built with Go "
            "1.18 or older) sets: it is grown with make, and the runtime does not zero pages fresh from "
            "the OS (mheap allocNeedsZero), so the unwritten tail of a buffer grown on fresh pages stays "
            "out of RSS until something is written there."
        ),
    )
    struct_copy_bytes_per_object: Bytes = Field(default_factory=fitted("request_memory.struct_copy_bytes_per_object"), description="s_struct: bytes per object the cache copies into the result slice (§3.2). Fitted.")
    streaming_item_buffer_multiplier: Number = Field(
        default_factory=fitted("request_memory.streaming_item_buffer_multiplier"), ge=0, description="a_item: live bytes of a streaming encoder per byte of the average item (bounded by max_object_bytes)."
    )
    max_object_bytes: Bytes = Field(1.5e6, description="o: the largest object etcd stores (1.5 MB request limit).")
    watchlist_bytes: Bytes = Field(2e6, description="W_const: live bytes of a WatchList initial-events stream (KEP-3157: ~2 MB per watcher).")
    watchlist_bytes_per_object: Bytes = Field(
        16.0,
        description=(
            "Live bytes per object of the resource while a WatchList sends its initial events: the cache "
            "snapshot it walks, one interface value (16 B) per object (cacher watch_cache.go, 1.37)."
        ),
    )
    encode_alloc_multiplier: Number = Field(
        2.0, ge=0, description="Bytes allocated by non-streamed encoding per response byte (a doubling buffer allocates ~2x its final size); a whole JSON response's pooled buffer allocates its actual growth instead."
    )
    streaming_alloc_multiplier: Number = Field(
        default_factory=fitted("request_memory.streaming_alloc_multiplier"),
        ge=0,
        description=(
            "Streamed encoding that copies each item afresh (JSON before 1.37: "
            "`streaming_encoder_reuses_buffer` false; a WatchList's events) allocates this times "
            "`encode_alloc_multiplier` per response byte. Fitted: "
            "kubernetes#139617 found the streamed JSON encoder allocating about the response body in "
            "per-item copies (fixed there, after the calibration data was measured), against the whole "
            "encoder's doubling buffer. PR #129334's +300 % is over a microbenchmark's whole encoder, whose "
            "pooled buffer (encoding/json's encodeState) a benchmark loop reuses."
        ),
    )
    streaming_encoder_reuses_buffer: bool = Field(
        True,
        description=(
            "A streamed JSON LIST encodes each item into one buffer it keeps for the next item "
            "(kubernetes#139617, 1.37: k8s.io/apimachinery runtime/serializer/json collections.go, "
            "streamEncoder.encodeValue), so its encoding allocates that buffer's growth to the largest item, "
            "not bytes in proportion to the response; a scenario's kubernetes.version before 1.37 sets false "
            "(json.Marshal's fresh copy of every item: `streaming_alloc_multiplier`). A streamed Protobuf "
            "LIST marshals each item into the response's runtime.Allocator, which keeps its array, in every "
            "release (protobuf collections.go, doEncodeWithHeader)."
        ),
    )
    temp_garbage_fraction: Number = Field(
        0.5, ge=0, description="Short-lived allocation per live byte of decode, copy and conversion (intermediate buffers). Hypothesis."
    )
    compressor_bytes: Bytes = Field(
        default_factory=fitted("request_memory.compressor_bytes"),
        description=(
            "Live bytes of the gzip writer of a compressed response (compress/flate state; the writers "
            "are pooled, so they are held, not allocated, per response). Fitted."
        ),
    )
    compress_threshold_bytes: Bytes = Field(
        128 * 1024, description="Responses at least this large are compressed when the client accepts gzip (apiserver: 128 KiB)."
    )
    write_hold_fraction: Number = Field(
        1.0,
        ge=0,
        le=1,
        description=(
            "While a co-located client reads the response (`client`), the request still holds its "
            "encoded response and this fraction of its other live bytes (1: the handler keeps the "
            "list object reachable until the write returns)."
        ),
    )
    request_held_bytes: Bytes = Field(
        default_factory=fitted("request_memory.request_held_bytes"),
        description=(
            "Bytes every request holds from its arrival to its end, queued in APF or waiting for seats "
            "included: two goroutines (the timeout filter's and the handler's, ~16 KiB of stack each: "
            "handler stacks measured at ~14 KiB, kubernetes#120901, and Go grows stacks by doubling), the "
            "request and its clone (r.Clone in the timeout filter) with context and audit event (~8 KiB), "
            "and the HTTP/2 stream's 4 KiB response writer. Sum of those priors as the start; fitted."
        ),
    )
    watch_held_bytes: Bytes = Field(
        36 * 1024,
        description=(
            "Bytes an open watch holds for as long as it stays open: its handler goroutine (~16 KiB of "
            "stack, as a request's), the cacher's cacheWatcher with its own processing goroutine (8 KiB, "
            "Go's smallest stack after one doubling) and its buffered input and result channels, the "
            "request with its context (~8 KiB) and the HTTP/2 stream's 4 KiB response writer "
            "(k8s.io/apiserver storage/cacher cache_watcher.go, 1.37). Sum of those priors; not fitted. "
            "Its encode buffers come on top: one or two of the largest object it has sent (simapf.server.costs)."
        ),
    )


class GcParams(_Params):
    """The Go garbage collector (Go 1.26 runtime/mgcpacer.go, mgclimit.go, mgcscavenge.go)."""

    gogc: Gogc = Field(
        100, description="GOGC percent; `off` or null turns the GOGC goal off."
    )
    gomemlimit_bytes: OptionalPositiveBytes = Field(None, description="GOMEMLIMIT soft memory limit; null = none (math.MaxInt64).")
    mark_rate_bytes_per_core_s: Rate = Field(
        default_factory=fitted("gc.mark_rate_bytes_per_core_s"),
        gt=0,
        description="Bytes of live heap the mark phase gets through per core-second (pointer-free bytes are folded in). Fitted.",
    )
    fixed_cost_core_s: Seconds = Field(0.5e-3, ge=0, description="CPU per cycle independent of heap size (sweep termination, stop-the-world phases). Hypothesis.")
    roots_bytes: Bytes = Field(16e6, description="R: scannable stacks and globals, part of the GOGC goal since Go 1.18.")
    heap_minimum_bytes: Bytes = Field(4 * MiB, description="defaultHeapMinimum (4 MiB), scaled by GOGC/100.")
    trigger_fraction: Number | None = Field(
        None, gt=0, lt=1, description="Fixed trigger point as a fraction of the way from the marked heap to the goal; null = Go's pacer (runway from cons/mark)."
    )
    trigger_min_fraction: Number = Field(45 / 64, gt=0, lt=1, description="minTriggerRatioNum/triggerRatioDen = 45/64.")
    trigger_max_fraction: Number = Field(61 / 64, gt=0, lt=1, description="maxTriggerRatioNum/triggerRatioDen = 61/64 (large heaps: goal - heap_minimum).")
    dedicated_fraction: Number = Field(0.25, gt=0, le=1, description="gcBackgroundUtilization: dedicated + fractional mark workers = 0.25 x GOMAXPROCS.")
    idle_mark_workers: bool = Field(True, description=(
        "Ps the mutator leaves idle run idle-priority mark workers (their time is /cpu/classes/gc/mark/idle; the "
        "limiter counts it as idle)."
    ))
    cpu_sharing: Literal["reserved", "shared"] = Field(
        "reserved",
        description=(
            "reserved: dedicated workers hold their Ps (the Go scheduler gives them priority), so request "
            "load cannot squeeze them below their share of the process's CPU. shared: they compete with "
            "request goroutines thread for thread (hypothesis behind 'the GC starved' in #132233)."
        ),
    )
    assists: bool = Field(True, description="Mutator assists: allocating requests do scan work to keep the heap near the goal.")
    overshoot_factor: Number = Field(1.1, ge=1, description="maxOvershoot: assist goal when the heap is already past the goal.")
    limiter_cap_fraction: Number = Field(
        0.5, gt=0, lt=1,
        description=(
            "GC CPU limiter: the GC's share of the non-idle P-time (dedicated workers' 25 % while marking, plus "
            "assists; idle mark workers count as idle) above which the bucket fills (mgclimit.go: 50 %)."
        ),
    )
    limiter_bucket_s_per_proc: Seconds = Field(1.0, gt=0, description="Limiter bucket capacity per P, seconds (capacityPerProc = 1 s).")
    force_period_s: Annotated[Seconds | None, AtLeast(1e-3, "1 ms, the finest series step: shorter, a run would be nothing but forced cycles")] = Field(
        120.0, gt=0, description="forcegcperiod: a cycle is forced after 2 minutes without one (at least 1 ms); null = never."
    )
    scavenge_rate_bytes_per_s: Rate = Field(
        4279765827.3599463,
        gt=0,
        description=(
            "Background scavenger release rate (paced to ~1 % of CPU). Fitted until 2026-11-21, then held: "
            "at this rate RSS follows the heap within a trace step, and the measured peaks cannot tell it."
        ),
    )
    scavenge_retain_factor: Number = Field(
        1.1, ge=1, description="Scavenger keeps retained heap at 1.1 x (goal/last goal) x heap in use at the last mark termination (gcPercent goal, retainExtraPercent = 10)."
    )
    memory_limit_scavenge_fraction: Number = Field(
        0.95, gt=0, le=1, description="With GOMEMLIMIT the scavenger keeps mapped memory below 0.95 x limit (reduceExtraPercent = 5)."
    )
    memory_limit_headroom_fraction: Number = Field(0.03, ge=0, lt=1, description="memoryLimitHeapGoalHeadroomPercent = 3 (at least 1 MiB).")
    page_release: Literal["dontneed", "free"] = Field(
        "dontneed",
        description=(
            "How the scavenger returns pages: dontneed (MADV_DONTNEED, Go's default on Linux since 1.16: RSS falls "
            "at once) or free (MADV_FREE, Go 1.12-1.15's default, or GODEBUG=madvdontneed=0: the pages stay in RSS "
            "until the kernel needs them, which it takes back before an OOM kill). Go 1.16 release notes."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> "GcParams":
        if self.trigger_min_fraction > self.trigger_max_fraction:
            raise ValueError("trigger_min_fraction must not exceed trigger_max_fraction")
        return self


class CrdParams(_Params):
    """What a CustomResourceDefinition costs the apiserver's heap before any custom object exists.

    apiextensions-apiserver serves each version of a CRD with its own REST storage (an etcd3
    store with its own etcd client, kubernetes#111622, and a watch cache), request scopes with
    field managers, and validators built from the version's schema (customresource_handler.go,
    getOrCreateServingInfoFor).
    """

    version_fixed_bytes: Bytes = Field(
        1.4e6,
        description=(
            "Live heap per served version that does not grow with its schema: storage, watch cache, etcd "
            "client, request scopes, metrics. Prior: 1,877 single-version Crossplane CRDs (12.2 KB of YAML "
            "each on average, negz/crossplane-scale etoomanycrds/latest-crds) held kube-apiserver at 5.5-6.5 "
            "GiB RSS with the shared etcd logger (kubernetes#111477); half of 6 GiB as the live heap (GOGC=100), "
            "less a Kind apiserver's ~0.14 GB, is ~1.64 MB per CRD, of which the schema term takes ~0.24 MB."
        ),
    )
    schema_heap_multiplier: Number = Field(
        20.0,
        ge=0,
        description=(
            "Live heap per byte of a served version's openAPIV3Schema (JSON): the CRD object in the "
            "apiextensions informer, the internal and structural copies, the validators and the OpenAPI "
            "models and type converter built from it, each a decoded Go copy of a few times the JSON. Hypothesis."
        ),
    )
    etcd_logger_bytes: Bytes = Field(
        0.84e6,
        description=(
            "Heap of the zap logger each CRD version's etcd client built for itself before kubernetes#111477 "
            "(1.25): ~1.5 GiB for 1,878 CRDs in kubernetes#111476's heap profile."
        ),
    )
    etcd_logger_per_client: bool = Field(
        False,
        description="Whether each etcd client has its own logger (before 1.25; the scenario sets it from kubernetes.version).",
    )
    openapi_v2_eager: bool = Field(
        False,
        description=(
            "Whether every CRD change rebuilds the whole OpenAPI v2 document at once (before 1.28, when "
            "kubernetes#118212 made it lazy; the scenario sets it from kubernetes.version)."
        ),
    )
    openapi_builtin_bytes: Bytes = Field(
        3.5e6,
        description="The OpenAPI v2 document without CRDs: 'the entire Kubernetes API spec is 3.5 MB' (lavalamp, istio/api#368, 2018).",
    )
    openapi_version_bytes: Bytes = Field(
        10e3,
        description=(
            "What a served CRD version adds to the OpenAPI v2 document besides its schema: its paths (list, "
            "create, get, replace, patch, delete, deletecollection, watch, status) with their parameters "
            "and responses, and its List definition. Hypothesis."
        ),
    )
    openapi_alloc_multiplier: Number = Field(
        2.0,
        ge=0,
        description=(
            "Bytes a rebuild allocates per byte of the document: the document marshaled anew as JSON and "
            "as protobuf, the two costly steps kubernetes#86967 found. Hypothesis."
        ),
    )

    def openapi_bytes(self, schema_bytes: float) -> float:
        """Bytes one served version with a schema of `schema_bytes` adds to the OpenAPI v2 document."""
        return schema_bytes + self.openapi_version_bytes

    def version_bytes(self, schema_bytes: float) -> float:
        """Live heap of one served version with a schema of `schema_bytes`."""
        logger = self.etcd_logger_bytes if self.etcd_logger_per_client else 0.0
        return self.version_fixed_bytes + self.schema_heap_multiplier * schema_bytes + logger

    def crd_bytes(self, served_versions: int, schema_bytes: float) -> float:
        """Live heap of one CRD: each served version's."""
        return served_versions * self.version_bytes(schema_bytes)

    def crd_openapi_bytes(self, served_versions: int, schema_bytes: float) -> float:
        """Bytes one CRD adds to the OpenAPI v2 document: each served version's."""
        return served_versions * self.openapi_bytes(schema_bytes)


def _gate(default: bool | None, snake: str, description: str) -> Any:
    """A gate's field: named as upstream names it; a parameter set (and a calibration record)
    may also write it in snake case, as the other parameters are written."""
    return Field(default, description=description, validation_alias=snake)


class FeatureGates(_Params):
    """kube-apiserver and client-go feature gates that change what the simulation does, named as
    upstream names them (defaults are Kubernetes 1.37's). A scenario sets them in
    `kubernetes.feature_gates`; the apiserver's parameters hold them resolved
    (`ServerParams.features`), and APF, the serving paths and the clients read them there."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, populate_by_name=True)

    SizeBasedListCostEstimate: bool = _gate(
        True, "size_based_list_cost_estimate", "APF charges LISTs by response size (Beta, on in 1.37); off: by object count."
    )
    WatchList: bool = _gate(
        True, "watch_list",
        "The apiserver serves WATCH with sendInitialEvents (KEP-3157, on since 1.32); APF charges WATCH initialisation like a LIST.",
    )
    WatchListClient: bool = _gate(
        True, "watch_list_client",
        "client-go informers stream their initial list with a WatchList instead of LISTing (client-go gate, on by default since 1.35). Needs WatchList on the server.",
    )
    StreamingCollectionEncodingToJSON: bool = _gate(
        True, "streaming_collection_encoding_to_json", "JSON LIST responses are encoded item by item (KEP-5116)."
    )
    StreamingCollectionEncodingToProtobuf: bool = _gate(
        True, "streaming_collection_encoding_to_protobuf", "Protobuf LIST responses are encoded item by item (KEP-5116)."
    )
    ConsistentListFromCache: bool = _gate(
        True, "consistent_list_from_cache",
        "LISTs with resourceVersion unset are served from the watch cache (GA 1.34); off: from etcd.",
    )
    ListFromCacheSnapshot: bool = _gate(
        True, "list_from_cache_snapshot",
        "Paged LISTs (continue) and exact-resourceVersion LISTs are served from watch-cache snapshots; off: from etcd.",
    )
    EtcdRangeStream: bool | None = _gate(
        None, "etcd_range_stream",
        "LISTs served from etcd (and a watch cache's fill) read their range as etcd 3.7's RangeStream, decoding "
        "each chunk as it arrives (Beta, on in 1.37). Off: one unary range per page, as before 1.37 or with an "
        "etcd older than 3.7 (the apiserver falls back to pages then). null: by kubernetes.version, on from 1.37.",
    )

    def resolved(self) -> "FeatureGates":
        """These gates with EtcdRangeStream decided: null, which a scenario's loader resolves by
        kubernetes.version, is otherwise the newest release's (on)."""
        return self if self.EtcdRangeStream is not None else self.model_copy(update={"EtcdRangeStream": True})


# The gates the resource model reads, as the apiserver's parameters (and calibration records)
# write them: what `ServerParams.features` keeps in a record; the others are APF's and client-go's.
SERVING_GATES: Final = ("ConsistentListFromCache", "ListFromCacheSnapshot", "StreamingCollectionEncodingToJSON",
                        "StreamingCollectionEncodingToProtobuf", "EtcdRangeStream")  # fmt: skip


def gate_parameter(name: str) -> str:
    """A gate's name as a parameter set writes it (snake case)."""
    return FeatureGates.model_fields[name].validation_alias  # type: ignore[return-value]


# Releases whose apiserver changed what a parameter describes (each field's description says how).
# Watchers partitioned by the namespace and name they are scoped to (kubernetes#115918).
SCOPE_PARTITION_RELEASE: Final = (1, 27)
# A watch's initial events built from its object's key alone (k8s.io/apiserver "cacher: apply key
# for initial events", first released in v0.31.0).
INITIAL_EVENTS_BY_KEY_RELEASE: Final = (1, 31)
# The release whose apiserver reads etcd ranges as a RangeStream by default (EtcdRangeStream,
# beta in 1.37, with etcd 3.7).
RANGE_STREAM_RELEASE: Final = (1, 37)
_VERSION_PREFIX = re.compile(r"v?(\d+)\.(\d+)")


def release_before(version: str, release: tuple[int, int]) -> bool:
    """Whether Kubernetes `version` ("1.33", "v1.33.4-gke.1") is older than `release` (an
    unreadable version is not)."""
    match = _VERSION_PREFIX.match(version.strip())
    return match is not None and (int(match[1]), int(match[2])) < release


class ServerParams(_Params):
    """All parameters of the simulated apiserver (`simapf.server`)."""

    @staticmethod
    def defaults_for(version: str) -> dict[str, dict[str, Any]]:
        """The parameters Kubernetes `version` decides, by section: a scenario's loader applies
        each where no parameter set says otherwise (the fields' own defaults are the newest
        release's).

        Before 1.25 each CRD version's etcd client built its own logger (kubernetes#111477), and
        kube-apiserver was built with a Go (1.18 or older) whose bytes.Buffer grew with make,
        leaving a new array's unwritten tail untouched; before 1.28 every CRD change rebuilt the
        OpenAPI v2 document (kubernetes#118212); before 1.21 it was built with a Go (1.12-1.15)
        that returned memory with MADV_FREE; before 1.37 a whole Protobuf response got a fresh
        buffer, not a pooled one (kubernetes#139350), and a streamed JSON LIST a fresh copy of every
        item (kubernetes#139617); from 1.27 to 1.31 a LIST from the watch
        cache sorted all its objects (kubernetes#113730), and in 1.30 and 1.31 a WatchList its
        initial events (kubernetes#120897); before 1.27 the watch cache handed every event to
        every watcher without a trigger value (kubernetes#115918), and before 1.31 it built a
        watch's initial events from every object even when its selector named one
        (simapf.server.cache_index); before 1.37 LISTs from etcd read pages, not a RangeStream.
        """

        def before(major: int, minor: int) -> bool:
            return release_before(version, (major, minor))

        return {
            "crds": {"etcd_logger_per_client": before(1, 25), "openapi_v2_eager": before(1, 28)},
            "request_memory": {"buffer_growth_zeroes": not before(1, 25), "protobuf_allocator_pool": not before(1, 37),
                               "streaming_encoder_reuses_buffer": not before(1, 37)},
            "request_cpu": {"cache_list_sorted": not before(1, 27) and before(1, 32),
                            "watchlist_events_sorted": not before(1, 30) and before(1, 32)},
            "gc": {"page_release": "free" if before(1, 21) else "dontneed"},
            "watch_cache": {"watchers_partitioned_by_scope": not before(*SCOPE_PARTITION_RELEASE),
                            "initial_events_by_key": not before(*INITIAL_EVENTS_BY_KEY_RELEASE)},
            "features": {"etcd_range_stream": not before(*RANGE_STREAM_RELEASE)},
        }  # fmt: skip

    cpu: CpuParams = Field(default_factory=CpuParams, description="Cores and GOMAXPROCS.")
    process: ProcessParams = Field(default_factory=ProcessParams, description="Baseline memory, memory limit, restart.")
    watch_cache: WatchCacheParams = Field(default_factory=WatchCacheParams, description="Size of cached objects.")
    etcd: EtcdParams = Field(default_factory=EtcdParams, description="etcd's members, their cores and throughput.")
    client: ClientParams = Field(default_factory=ClientParams, description="Clients reading responses on the same cores (calibration experiment).")
    request_cpu: RequestCpuParams = Field(default_factory=RequestCpuParams, description="CPU cost coefficients per request.")
    request_memory: RequestMemoryParams = Field(default_factory=RequestMemoryParams, description="Live and allocated bytes per request.")
    gc: GcParams = Field(default_factory=GcParams, description="Go GC, GOGC, GOMEMLIMIT, scavenger.")
    crds: CrdParams = Field(default_factory=CrdParams, description="What each served CRD version costs the heap.")
    features: FeatureGates = Field(default_factory=FeatureGates, description="Feature gates that change serving path or encoding.")

    @field_validator("features")
    @classmethod
    def _range_stream_resolved(cls, gates: FeatureGates) -> FeatureGates:
        return gates.resolved()

    @field_serializer("features")
    def _gates_as_parameters(self, gates: FeatureGates) -> dict[str, Any]:
        # Every gate, so that a dump validates back to these parameters; spelled as a parameter set
        # writes them.
        return {gate_parameter(name): getattr(gates, name) for name in FeatureGates.model_fields}

    def record_dump(self) -> dict[str, Any]:
        """These parameters (as JSON data) as a calibration record writes them and their hash
        reads them: of the gates, those the resource model reads; APF's and client-go's are a
        scenario's, which has its own hash."""
        data = self.model_dump(mode="json")
        data["features"] = {gate_parameter(name): data["features"][gate_parameter(name)] for name in SERVING_GATES}
        return data

    @classmethod
    def from_dict(cls, data: Any, source_name: str | None = None) -> "ServerParams":
        """Validate already-parsed YAML/JSON data; errors name the field path (ConfigError)."""
        prefix = f"{source_name}: " if source_name else ""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{prefix}server parameters must be a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(prefix + describe(exc, cls)) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> "ServerParams":
        """Load from a YAML file holding a mapping with any subset of the fields."""
        path = Path(path)
        data = read_yaml(path, empty_ok=True)
        return cls.from_dict(data, source_name=str(path))


def parameter_field(path: str) -> Any:
    """The pydantic field of the parameter at `path` ("section.field")."""
    section, field = path.split(".")
    return ServerParams.model_fields[section].annotation.model_fields[field]


def parameter_type(path: str) -> Any:
    """The type of the parameter at `path` ("section.field") with every constraint its field
    declares, for a scenario field that is a shorthand for it: the rule is written once, here."""
    info = parameter_field(path)
    return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation  # type: ignore[return-value]


def parameter_default(path: str) -> Any:
    """The default of the parameter at `path` ("section.field")."""
    return parameter_field(path).get_default(call_default_factory=True)
