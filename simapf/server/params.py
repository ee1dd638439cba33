"""Every parameter of the apiserver resource model, with its default, unit and meaning.

One pydantic model, `ServerParams`, grouped by concern. Units are in the field names (`_s`,
`_bytes`, `_cores`, `_core_s` = core-seconds, `_per_s`). Byte fields also accept Kubernetes
quantity strings ("512Mi", "2G") so a scenario can say what an operator would write.

Where a default comes from upstream (Go runtime constants, KEP numbers) the description names
the source. The rest are starting hypotheses from `list-memory.md` §6, chosen so that a 16-core
server with a ~0.5 GB baseline serving 1800 LIST/s of 100 KB from etcd uses about 6.5 cores and
0.4-0.6 GB, the order of the first row of `list-memory-experiments.csv`. Fitting them to the
data is the calibration's job, not this file's.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from simapf.errors import ConfigError

MiB = 1 << 20

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
    x = float(number) * (10 ** int(exponent) if exponent else 1)
    return x * _SUFFIX[suffix or ""]


Bytes = Annotated[float, BeforeValidator(parse_bytes), Field(ge=0)]
OptionalBytes = Annotated[float | None, BeforeValidator(parse_bytes)]


def _gogc(value: Any) -> Any:
    # YAML 1.1 reads an unquoted `off` as False; GOGC=off means "no GOGC goal".
    if value is False or (isinstance(value, str) and value.strip().lower() == "off"):
        return None
    return value


class _Params(BaseModel):
    """Parameters: unknown keys are typos, so they are errors; values never change mid-run."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


# --------------------------------------------------------------------------------------------


class CpuParams(_Params):
    cores: float = Field(16.0, gt=0, description="CPU cores of the apiserver's machine or container (the seed experiment: 16).")
    usable_cores: float = Field(
        12.5,
        gt=0,
        description=(
            "Most cores the apiserver process can actually get: the experiments of #132233 saw it stop "
            "using more CPU while cores were free (etcd, other control-plane processes and the load "
            "generator share the node). 12.5 = the highest CPU measured in the data (12.49 cores). "
            "Must not exceed `cores`."
        ),
    )
    gomaxprocs: int | None = Field(
        None,
        ge=1,
        description="GOMAXPROCS: Go threads running Go code at once (Ps). None = ceil(cores), Go's default.",
    )

    @model_validator(mode="after")
    def _check(self) -> "CpuParams":
        if self.usable_cores > self.cores:
            raise ValueError(f"usable_cores ({self.usable_cores}) must not exceed cores ({self.cores})")
        return self

    @property
    def procs(self) -> int:
        """Effective GOMAXPROCS."""
        return self.gomaxprocs if self.gomaxprocs is not None else max(1, math.ceil(self.cores))

    @property
    def effective_cores(self) -> float:
        """Cores the Go code of the process can use at once: the usable ceiling, at most P."""
        return min(self.usable_cores, float(self.procs))


class ProcessParams(_Params):
    nonheap_bytes: Bytes = Field(
        90e6,
        description=(
            "Resident memory outside the Go heap: binary, goroutine stacks, runtime metadata, non-Go "
            "memory. Counted in RSS and, as Go's non-heap memory, against GOMEMLIMIT. Hypothesis."
        ),
    )
    live_heap_bytes: Bytes = Field(
        150e6,
        description=(
            "Live Go heap of an idle apiserver other than the watch caches registered with the model "
            "(informers, OpenAPI, schemas, a small cluster's caches). With `nonheap_bytes` it makes a "
            "Kind apiserver's ~0.4-0.5 GB baseline (list-memory.md §5). Hypothesis."
        ),
    )
    heap_metadata_fraction: float = Field(
        0.03, ge=0, le=1, description="Runtime metadata and fragmentation in RSS per byte of retained heap (list-memory.md §4.7: ~3-5 %)."
    )
    memory_limit_bytes: OptionalBytes = Field(
        None, description="Container memory limit: RSS above it is an OOM kill. None = no limit."
    )
    restart_s: float = Field(
        30.0, ge=0, description="Time from an OOM kill until the new process serves again (kubelet restart + startup), before the watch caches refill. Hypothesis."
    )

    @model_validator(mode="after")
    def _check(self) -> "ProcessParams":
        if self.memory_limit_bytes is not None and self.memory_limit_bytes <= 0:
            raise ValueError("memory_limit_bytes must be positive or null")
        return self


class WatchCacheParams(_Params):
    decoded_size_multiplier: float = Field(
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


class EtcdParams(_Params):
    """etcd as its own resource: `concurrency` range reads progress at once, shared fairly.

    Aggregate capacity is `1 / (1/requests_per_s + bytes/bytes_per_s)` ranges per second; a read
    alone runs at 1/concurrency of it (one etcd goroutine on one core).
    """

    bytes_per_s: float = Field(
        320e6,
        gt=0,
        description="Aggregate range-read throughput in stored bytes per second. The 1 MB etcd rows saturate between 260 and 345 LIST/s. Hypothesis.",
    )
    requests_per_s: float = Field(
        5300.0,
        gt=0,
        description="Aggregate range reads per second for empty ranges (per-request cost). With bytes_per_s gives ~2000 ranges/s at 100 KB: the 100 KB etcd rows saturate between 1800 and 2400 LIST/s. Hypothesis.",
    )
    concurrency: int = Field(8, ge=1, description="Range reads etcd progresses at once (its cores). Hypothesis.")
    wait_live_fraction: float = Field(
        0.0,
        ge=0,
        description="Bytes the apiserver holds per stored byte while it waits for the range (gRPC receive buffer). 0: the response lands only when etcd has built it.",
    )


class RequestCpuParams(_Params):
    """CPU per request (list-memory.md §6.2): a + decode (etcd) + copy/filter + convert + encode."""

    request_core_s: float = Field(
        0.5e-3, ge=0, description="Fixed CPU per request: HTTP, authn/authz, APF, audit, routing. Fitted by eye to the cache 100 KB row."
    )
    etcd_request_core_s: float = Field(0.5e-3, ge=0, description="apiserver CPU per etcd range call (gRPC client). Hypothesis.")
    etcd_receive_core_s_per_byte: float = Field(
        1.5e-9, ge=0, description="apiserver CPU per stored byte received from etcd (gRPC, unmarshal RangeResponse). Hypothesis."
    )
    decode_core_s_per_object: float = Field(6e-6, ge=0, description="Decode + storage-to-internal conversion per object read from etcd. Hypothesis.")
    decode_core_s_per_byte: float = Field(6e-9, ge=0, description="Decode per stored byte read from etcd (~6 ms/MB). Hypothesis.")
    cache_core_s_per_object: float = Field(1e-6, ge=0, description="Watch-cache copy and filter per object read. Hypothesis.")
    convert_core_s_per_byte: float = Field(
        2e-9, ge=0, description="Internal-to-external list conversion per response byte, for resources that convert (#139026). Hypothesis."
    )
    # Encoding, per item and per response byte, by wire encoding.
    json_encode_core_s_per_object: float = Field(8e-6, ge=0, description="JSON (also as=Table) per item. Fitted by eye to the cache rows.")
    json_encode_core_s_per_byte: float = Field(8.5e-9, ge=0, description="JSON per byte (~8.5 ms/MB; ~10 ms/MB with GC in the cache rows).")
    protobuf_encode_core_s_per_object: float = Field(2.2e-6, ge=0, description="Protobuf per item: ~0.28x JSON (PR #141809: 17 vs 60 us per item).")
    protobuf_encode_core_s_per_byte: float = Field(2.4e-9, ge=0, description="Protobuf per byte: ~0.28x JSON (PR #141809).")
    cbor_encode_core_s_per_object: float = Field(4e-6, ge=0, description="CBOR per item. Hypothesis: between Protobuf and JSON.")
    cbor_encode_core_s_per_byte: float = Field(4.5e-9, ge=0, description="CBOR per byte. Hypothesis: between Protobuf and JSON.")
    yaml_encode_core_s_per_object: float = Field(24e-6, ge=0, description="YAML per item (JSON, then converted). Hypothesis: 3x JSON.")
    yaml_encode_core_s_per_byte: float = Field(25e-9, ge=0, description="YAML per byte. Hypothesis: 3x JSON.")
    streaming_encode_overhead_fraction: float = Field(
        0.3, ge=0, description="Extra encode CPU when the response is streaming-encoded (PR #129334: +10-60 %)."
    )
    watch_event_core_s_per_object: float = Field(2e-6, ge=0, description="Per initial event of a WatchList stream (event wrapping, flush). Hypothesis.")
    refill_core_s_per_object: float = Field(2e-6, ge=0, description="Watch-cache insertion per object while a cache refills. Hypothesis.")


class RequestMemoryParams(_Params):
    """Live and allocated bytes per request by serving path (list-memory.md §6.1)."""

    etcd_decoded_multiplier: float = Field(
        3.0, ge=0, description="k_dec: decoded Go size per stored byte for objects read from etcd (typed 2-3, Unstructured ~5.2, #142062)."
    )
    conversion_copy_fraction: float = Field(
        0.5, ge=0, description="c_conv: external-version copy per decoded response byte, for resources that convert (Pods, Nodes: 0.3-1; casts: 0)."
    )
    encode_buffer_multiplier: float = Field(
        1.5, ge=0, description="g: live encode-buffer bytes per response byte, non-streamed (buffer doubling; json pool)."
    )
    struct_copy_bytes_per_object: Bytes = Field(1000.0, description="s_struct: bytes per object the cache copies into the result slice (§3.2).")
    streaming_item_buffer_multiplier: float = Field(
        3.0, ge=0, description="a_item: live bytes of a streaming encoder per byte of the average item (bounded by max_object_bytes)."
    )
    max_object_bytes: Bytes = Field(1.5e6, description="o: the largest object etcd stores (1.5 MB request limit).")
    watchlist_bytes: Bytes = Field(2e6, description="W_const: live bytes of a WatchList initial-events stream (KEP-3157: ~2 MB per watcher).")
    encode_alloc_multiplier: float = Field(
        2.0, ge=0, description="Bytes allocated by non-streamed encoding per response byte (a doubling buffer allocates ~2x its final size)."
    )
    streaming_alloc_multiplier: float = Field(
        4.0, ge=0, description="Streamed encoding allocates this times the non-streamed encoding (PR #129334: about +300 %)."
    )
    temp_garbage_fraction: float = Field(
        0.5, ge=0, description="Short-lived allocation per live byte of decode, copy and conversion (intermediate buffers). Hypothesis."
    )


class GcParams(_Params):
    """The Go garbage collector (Go 1.26 runtime/mgcpacer.go, mgclimit.go, mgcscavenge.go)."""

    gogc: Annotated[int | None, BeforeValidator(_gogc)] = Field(
        100, ge=0, description="GOGC percent; `off` or null turns the GOGC goal off."
    )
    gomemlimit_bytes: OptionalBytes = Field(None, description="GOMEMLIMIT soft memory limit; null = none (math.MaxInt64).")
    mark_rate_bytes_per_core_s: float = Field(
        1e9,
        gt=0,
        description="Bytes of live heap the mark phase gets through per core-second (pointer-free bytes are folded in). Hypothesis.",
    )
    fixed_cost_core_s: float = Field(0.5e-3, ge=0, description="CPU per cycle independent of heap size (sweep termination, stop-the-world phases). Hypothesis.")
    roots_bytes: Bytes = Field(16e6, description="R: scannable stacks and globals, part of the GOGC goal since Go 1.18.")
    heap_minimum_bytes: Bytes = Field(4 * MiB, description="defaultHeapMinimum (4 MiB), scaled by GOGC/100.")
    trigger_fraction: float | None = Field(
        None, gt=0, lt=1, description="Fixed trigger point as a fraction of the way from the marked heap to the goal; null = Go's pacer (runway from cons/mark)."
    )
    trigger_min_fraction: float = Field(45 / 64, gt=0, lt=1, description="minTriggerRatioNum/triggerRatioDen = 45/64.")
    trigger_max_fraction: float = Field(61 / 64, gt=0, lt=1, description="maxTriggerRatioNum/triggerRatioDen = 61/64 (large heaps: goal - heap_minimum).")
    dedicated_fraction: float = Field(0.25, gt=0, le=1, description="gcBackgroundUtilization: dedicated + fractional mark workers = 0.25 x GOMAXPROCS.")
    idle_mark_workers: bool = Field(True, description="Ps the mutator leaves idle run idle-priority mark workers.")
    cpu_sharing: Literal["reserved", "shared"] = Field(
        "reserved",
        description=(
            "reserved: dedicated workers hold their Ps (the Go scheduler gives them priority), so request "
            "load cannot squeeze them below their share of the process's CPU. shared: they compete with "
            "request goroutines thread for thread (hypothesis behind 'the GC starved' in #132233)."
        ),
    )
    assists: bool = Field(True, description="Mutator assists: allocating requests do scan work to keep the heap near the goal.")
    overshoot_factor: float = Field(1.1, ge=1, description="maxOvershoot: assist goal when the heap is already past the goal.")
    limiter_cap_fraction: float = Field(0.5, gt=0, lt=1, description="GC CPU limiter: GC share of CPU above which the bucket fills (mgclimit.go: 50 %).")
    limiter_bucket_s_per_proc: float = Field(1.0, gt=0, description="Limiter bucket capacity per P, seconds (capacityPerProc = 1 s).")
    force_period_s: float | None = Field(120.0, gt=0, description="forcegcperiod: a cycle is forced after 2 minutes without one; null = never.")
    scavenge_rate_bytes_per_s: float = Field(
        100e6, gt=0, description="Background scavenger release rate (paced to ~1 % of CPU). Hypothesis."
    )
    scavenge_retain_factor: float = Field(
        1.1, ge=1, description="Scavenger keeps retained heap at 1.1 x (goal/last goal) x heap in use (gcPercent goal)."
    )
    memory_limit_scavenge_fraction: float = Field(
        0.95, gt=0, le=1, description="With GOMEMLIMIT the scavenger keeps mapped memory below 0.95 x limit (reduceExtraPercent = 5)."
    )
    memory_limit_headroom_fraction: float = Field(0.03, ge=0, lt=1, description="memoryLimitHeapGoalHeadroomPercent = 3 (at least 1 MiB).")

    @model_validator(mode="after")
    def _check(self) -> "GcParams":
        if self.trigger_min_fraction > self.trigger_max_fraction:
            raise ValueError("trigger_min_fraction must not exceed trigger_max_fraction")
        if self.gomemlimit_bytes is not None and self.gomemlimit_bytes <= 0:
            raise ValueError("gomemlimit_bytes must be positive or null")
        return self


class FeatureGates(_Params):
    """kube-apiserver feature gates that change serving path or encoding (v1.37 defaults)."""

    consistent_list_from_cache: bool = Field(True, description="ConsistentListFromCache (GA 1.34): RV=\"\" LISTs from the cache.")
    list_from_cache_snapshot: bool = Field(True, description="ListFromCacheSnapshot (beta on 1.34): continue/exact LISTs from cache snapshots.")
    streaming_collection_encoding_to_json: bool = Field(True, description="StreamingCollectionEncodingToJSON (KEP-5116).")
    streaming_collection_encoding_to_protobuf: bool = Field(True, description="StreamingCollectionEncodingToProtobuf (KEP-5116).")


class ServerParams(_Params):
    """All parameters of the simulated apiserver (`simapf.server`)."""

    cpu: CpuParams = Field(CpuParams(), description="Cores and GOMAXPROCS.")
    process: ProcessParams = Field(ProcessParams(), description="Baseline memory, memory limit, restart.")
    watch_cache: WatchCacheParams = Field(WatchCacheParams(), description="Size of cached objects.")
    etcd: EtcdParams = Field(EtcdParams(), description="etcd throughput.")
    request_cpu: RequestCpuParams = Field(RequestCpuParams(), description="CPU cost coefficients per request.")
    request_memory: RequestMemoryParams = Field(RequestMemoryParams(), description="Live and allocated bytes per request.")
    gc: GcParams = Field(GcParams(), description="Go GC, GOGC, GOMEMLIMIT, scavenger.")
    features: FeatureGates = Field(FeatureGates(), description="Feature gates that change serving path or encoding.")

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
            raise ConfigError(prefix + describe_validation_error(exc)) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> "ServerParams":
        """Load from a YAML file holding a mapping with any subset of the fields."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(" ".join(f"{path}: invalid YAML{where}: {problem}".split())) from None
        return cls.from_dict(data, source_name=str(path))


def describe_validation_error(exc: ValidationError) -> str:
    """One line: the first problem's dotted field path and message, and how many more."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = ""
    for part in first["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif isinstance(part, str) and ("[" in part or part.startswith("function-")):
            continue  # union members and validators, not keys the user wrote
        else:
            path += f".{part}" if path else str(part)
    message = f"{path or 'server parameters'}: {first['msg']}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return message
