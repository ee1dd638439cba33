"""What one request costs: CPU, etcd work, live bytes and allocated bytes, by serving path.

The formulas are list-memory.md §6.1 (bytes) and §6.2 (CPU), a starting hypothesis that
calibration will fit. Notation: S = response bytes on the wire, n = objects returned,
N = objects read, B = stored bytes read, k = decoded/stored size ratio.

    etcd:       live = B + k·B + o_dec·N + c_conv·k·S + enc_live
    streamed etcd range (EtcdRangeStream): live = k·B + o_dec·N + c_conv·k·S + enc_live, and
                while etcd sends: f·(k·B + o_dec·N) + 3 chunks, decoding alongside etcd's work
    cache:      live = n·s_struct + c_conv·k·S + enc_live          (also cache snapshots)
    WatchList:  live = W_const + 16 B·N + enc_live
    enc_live  = g·S (whole CBOR or YAML buffer) | a_item·min(S/n, o) (streaming encoder)
                | 3·S for a pretty JSON response (json.MarshalIndent: a compact copy, then an
                  indented array of twice its size; 2·S of it while it is written)
                | 0 for a whole JSON response, whose encode buffer comes from encoding/json's
                  pool (simapf.server.pool) and is held as the pool hands it out, and for a
                  whole Protobuf one, whose buffer of exactly S comes from the allocator pool
                  (S of its own before 1.37)
    allocated = (live bytes other than encoding)·(1 + temp_garbage_fraction)
                + encode_alloc·S·(streaming_alloc_multiplier if streamed or WatchList)  (≥ live),
                  but a streamed LIST whose encoder reuses its item buffer (Protobuf; JSON from 1.37)
                  allocates that buffer's growth to one item instead

    cpu = request + [etcd call + receive·B + decode_obj·N + decode_byte·B]   (etcd; receive·B
                  runs alongside etcd's work, as gRPC's transport takes the range in while etcd
                  sends it; a streamed range's decoding does too)
                  + [cache_obj·N]                                            (cache)
                  + convert·S (resources that convert)
                  + (enc_obj·n + enc_byte·S)·(1 + streaming overhead if streamed)

The response then goes to the client: `wire = S` (× the resource's gzip ratio when compressed)
bytes over the client's link, if it has one (simapf.server.network), as it is encoded when
streamed, after the encoding when not; with a co-located client (`client`) it is read on the
same cores: `write = client_request + client_byte·S (+ client_gzip_byte·S if compressed)`
core-seconds of the client's CPU, then `response_latency_s` of pure delay. From the end of its
CPU work until then the request holds `write_live = enc_live + write_hold·(live − enc_live)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from simapf.server.etcd import range_work
from simapf.server.paths import Encoding, RequestCost, ServingPath
from simapf.server.params import ServerParams
from simapf.server.pool import ALLOCATOR, DOUBLING, grow


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """The resource figures of one request, computed once per distinct `RequestCost`.

    `etcd_work` is in etcd server-seconds (0 = no etcd read); `cpu_core_s` excludes GC assists,
    which depend on the GC's state when the request allocates. `write_core_s` is a co-located
    client's CPU to read the response (0 = the request ends with its CPU work), during which
    the request holds `write_live_bytes`.
    """

    cpu_core_s: float
    etcd_work: float
    wait_live_bytes: float
    live_bytes: float
    alloc_bytes: float
    write_core_s: float = 0.0
    write_live_bytes: float = 0.0
    write_delay_ns: int = 0
    # Bytes the response puts on the wire (gzip-compressed when it is), which a client link
    # (simapf.server.network) takes time to carry; the request holds `write_live_bytes` meanwhile.
    wire_bytes: float = 0.0
    streamed: bool = False  # written as it is encoded (a streamed LIST, a WatchList's events)
    error: str = ""  # the request fails once etcd has served its range (HTTP 500)
    # Its garbage is allocated in this many steps along its CPU work (1: all at the start).
    alloc_steps: int = 1
    # CPU that runs while etcd sends the range (a unary range's receiving; a streamed range's
    # decoding, as its chunks arrive);
    # `cpu_core_s` is what follows once both have ended. The request holds `wait_live_bytes` meanwhile.
    decode_core_s: float = 0.0
    # Bytes a pooled encoding/json buffer must hold (0: not encoded by encoding/json). A whole
    # response (`buffer_held`) keeps its buffer until it is written; a streamed one's items and
    # events, and a YAML response's JSON, give theirs back as soon as it is encoded.
    buffer_need: float = 0.0
    buffer_held: bool = False
    # Whose pool: encoding/json's (DOUBLING) or, for a whole Protobuf response, the allocators' (ALLOCATOR).
    buffer_growth: int = DOUBLING


def fresh_buffer_bytes(plan: RequestPlan) -> float:
    """The encode buffer a whole JSON or Protobuf response holds on top of its `live_bytes` until
    it is written, when its pool has none to give it: grown from nothing to its size."""
    return grow(plan.buffer_growth, 0.0, plan.buffer_need)[0] if plan.buffer_held else 0.0


# A request allocates its live bytes when it starts and its garbage as it works: a 1 GB streamed
# LIST allocates ~1 GB over seconds, and the GC collects it meanwhile. The model allocates the
# garbage in steps of about ALLOC_STEP_BYTES (at most MAX_ALLOC_STEPS) between equal parts of the
# CPU work: a numerical grain, fine against a heap of hundreds of MB, not a physical parameter.
ALLOC_STEP_BYTES: Final = 16 * 2**20
MAX_ALLOC_STEPS: Final = 64


def alloc_steps(live_bytes: float, alloc_bytes: float) -> int:
    garbage = alloc_bytes - live_bytes
    return max(1, min(MAX_ALLOC_STEPS, int(garbage // ALLOC_STEP_BYTES)))


# gRPC's default largest message the apiserver's etcd client receives (math.MaxInt32; the
# apiserver sets no other): a larger range response fails with ResourceExhausted, which the
# client sees as a 500 (etcd-io/etcd#14809). Paging is the only way past it.
ETCD_MAX_RESPONSE_BYTES: Final = 2**31 - 1
ETCD_RESPONSE_TOO_LARGE: Final = "etcd-response-too-large"

# Capacity of the array json.MarshalIndent indents into, per byte of the compact document (Go's
# encoding/json indent.go, indentGrowthFactor).
INDENT_GROWTH: Final = 2.0

# Chunks of a streamed range the apiserver holds undecoded at once: the one being decoded, the
# next, which GetList receives before it yields the current one (k8s.io/apiserver v0.37.2
# storage/etcd3/store.go, streamChunks), and one in the etcd client's channel, whose buffer is
# one (go.etcd.io/etcd/client/v3 v3.7.0 kv.go, GetStream). Each chunk is freed as it is decoded.
STREAM_CHUNKS_HELD: Final = 3


def stream_window_bytes(params: ServerParams, stored_bytes: float, objects: int) -> float:
    """Undecoded bytes a streamed range holds in the apiserver at once: STREAM_CHUNKS_HELD chunks
    of etcd's target size (or of one object, when objects are larger), at most the whole range."""
    per_object = stored_bytes / objects if objects > 0 else stored_bytes
    chunk = max(params.etcd.stream_chunk_bytes, per_object)
    return min(stored_bytes, STREAM_CHUNKS_HELD * chunk)


def watch_buffer_copies(encoding: Encoding) -> int:
    """Encode buffers an open watch keeps, each as large as the largest object it has sent.

    A watch's handler encodes each event in two steps, the object into one buffer and the
    event around it into another, and resets both after each event, which keeps their capacity
    for as long as the watch is open (k8s.io/apiserver endpoints/handlers: watchEncoder's
    `buffer` and `eventBuffer`). A protobuf watch takes a memory allocator for its whole
    session instead, and the event splices the object's bytes in without copying them: one
    buffer's worth."""
    return 1 if encoding is Encoding.PROTOBUF else 2


def receive_cost(params: ServerParams, stored_bytes: float) -> float:
    """Core-seconds gRPC's transport spends taking a range in as etcd sends it (part of
    `decode_cost`)."""
    return params.request_cpu.etcd_receive_core_s_per_byte * stored_bytes


def sort_cost(params: ServerParams, objects: int) -> float:
    """Core-seconds the watch cache spends sorting `objects` elements by key (n·log2 n
    comparisons), as 1.27-1.31 did for a LIST and 1.30-1.31 for a WatchList's initial events."""
    if objects < 2:
        return 0.0
    return params.request_cpu.cache_sort_core_s_per_comparison * objects * math.log2(objects)


def decode_cost(params: ServerParams, stored_bytes: float, objects: int) -> float:
    """Core-seconds to call etcd for a range, receive it and decode its objects."""
    c = params.request_cpu
    return (
        c.etcd_request_core_s
        + c.etcd_receive_core_s_per_byte * stored_bytes
        + c.decode_core_s_per_object * objects
        + c.decode_core_s_per_byte * stored_bytes
    )


# Responses encoded by Go's encoding/json, through its pool of encode buffers: JSON, a server-side
# Table (JSON-encoded) and YAML (json.Marshal, then converted).
JSON_ENCODED = frozenset((Encoding.JSON, Encoding.TABLE, Encoding.YAML))

# Compressed / plain size of a gzip response whose resource says nothing: a LIST of a 5000-node
# cluster's Pods, 1572 MB of Protobuf, went out as 232 MB (kubernetes#138327's traces, 2026).
DEFAULT_GZIP_RATIO: Final = 0.15


def encode_cost(params: ServerParams, encoding: Encoding) -> tuple[float, float]:
    """(core-s per item, core-s per byte) of encoding a response."""
    c = params.request_cpu
    if encoding is Encoding.PROTOBUF:
        return c.protobuf_encode_core_s_per_object, c.protobuf_encode_core_s_per_byte
    if encoding is Encoding.CBOR:
        return c.cbor_encode_core_s_per_object, c.cbor_encode_core_s_per_byte
    if encoding is Encoding.YAML:
        return c.yaml_encode_core_s_per_object, c.yaml_encode_core_s_per_byte
    return c.json_encode_core_s_per_object, c.json_encode_core_s_per_byte  # JSON and as=Table


def etcd_work(params: ServerParams, stored_bytes: float, objects: int = 0) -> float:
    """Server-seconds of one etcd range of `stored_bytes` in `objects` keys (simapf.server.etcd)."""
    return range_work(params.etcd, stored_bytes, objects)


def compressed(params: ServerParams, path: ServingPath, response_bytes: float) -> bool:
    """Whether the response is gzip-compressed: the client accepts gzip and it reaches the
    threshold (a WatchList stream's events never are)."""
    return (
        params.client.accept_gzip
        and response_bytes >= params.request_memory.compress_threshold_bytes
        and path is not ServingPath.WATCHLIST_STREAM
    )


def compute_plan(params: ServerParams, cost: RequestCost) -> RequestPlan:
    shape = cost.shape
    path = cost.path
    cpu_p = params.request_cpu
    mem_p = params.request_memory
    S = float(shape.response_bytes)
    n = shape.objects_returned
    N = shape.n_read
    B = float(shape.b_read)
    streaming = cost.streaming

    per_item, per_byte = encode_cost(params, shape.encoding)
    encode_cpu = per_item * n + per_byte * S
    if streaming and path is not ServingPath.WATCHLIST_STREAM:
        encode_cpu *= 1.0 + cpu_p.streaming_encode_overhead_fraction

    k = mem_p.etcd_decoded_multiplier if path is ServingPath.ETCD else params.watch_cache.decoded_size_multiplier
    if shape.decoded_multiplier is not None:
        # A resource whose objects decode larger or smaller than the typed default (Unstructured
        # custom resources: ~5.2x their JSON) scales what decoding holds in proportion.
        k *= shape.decoded_multiplier / params.watch_cache.decoded_size_multiplier
    conv_cpu = cpu_p.convert_core_s_per_byte * S if shape.converts else 0.0
    conv_live = mem_p.conversion_copy_fraction * k * S if shape.converts else 0.0
    # An encoder that writes one object at a time (a streamed LIST, WatchList's events).
    item_by_item_alloc = mem_p.encode_alloc_multiplier * S * mem_p.streaming_alloc_multiplier
    buffer_need = S if shape.encoding in JSON_ENCODED and S > 0.0 else 0.0
    buffer_held = False
    buffer_growth = DOUBLING
    if streaming:
        item = S / n if n > 0 else 0.0
        enc_live = mem_p.streaming_item_buffer_multiplier * min(item, mem_p.max_object_bytes)
        enc_alloc = item_by_item_alloc
        if item:
            buffer_need = min(buffer_need, item)  # json.Marshal of one item, or a watch event, at a time
        if shape.encoding is Encoding.PROTOBUF:
            # Each item is marshalled into the response's runtime.Allocator, which keeps its array.
            enc_alloc = grow(ALLOCATOR, 0.0, item)[1]
        elif shape.encoding is Encoding.JSON and mem_p.streaming_encoder_reuses_buffer:
            # One bytes.Buffer, reset for each item: its growth to the largest item (1.37).
            enc_alloc = grow(DOUBLING, 0.0, item)[1]
    elif buffer_need and cost.indented:
        # json.MarshalIndent (pretty=true): json.Marshal builds the document in a pooled buffer,
        # which goes back to the pool, and returns a fresh copy of it (S); the indented document
        # goes into an array made with twice that capacity (encoding/json's indentGrowthFactor),
        # which the handler writes. Indentation adds a few bytes a field, which are not counted.
        enc_live = (1.0 + INDENT_GROWTH) * S
        enc_alloc = enc_live
        encode_cpu += cpu_p.json_indent_core_s_per_byte * S
    elif buffer_need and shape.encoding is not Encoding.YAML:
        # json.NewEncoder(w).Encode: the pool's buffer is the whole response's buffer.
        enc_live = enc_alloc = 0.0
        buffer_held = True
    elif shape.encoding is Encoding.PROTOBUF and S > 0.0:
        # The protobuf encoder sizes the response, then marshals it into one array of that size:
        # the allocator pool's since 1.37, a fresh one before.
        if mem_p.protobuf_allocator_pool:
            enc_live = enc_alloc = 0.0
            buffer_need, buffer_held, buffer_growth = S, True, ALLOCATOR
        else:
            enc_live = enc_alloc = S
    else:
        enc_live = mem_p.encode_buffer_multiplier * S
        enc_alloc = mem_p.encode_alloc_multiplier * S
    temp = 1.0 + mem_p.temp_garbage_fraction
    gzip = compressed(params, path, S)
    if gzip:
        # gzip: CPU per byte, and a (pooled) compressor held while the response is written.
        encode_cpu += cpu_p.compress_core_s_per_byte * S
        enc_live += mem_p.compressor_bytes

    etcd = 0.0
    wait_live = 0.0
    decode = 0.0
    if path is ServingPath.ETCD:
        decoded = k * B + mem_p.decoded_bytes_per_object * N
        etcd = etcd_work(params, B, N)
        if cost.range_streamed:
            # RangeStream: each chunk is decoded as it arrives, and freed once decoded. Until etcd
            # has sent the last chunk and it is decoded, the request holds the objects decoded so
            # far (the received share of its range, as for a unary range) and a few chunks; then
            # its decoded objects. Every chunk is still allocated, so the garbage is a unary range's.
            held = decoded + conv_live
            alloc = (B + held) * temp + enc_alloc
            decode = decode_cost(params, B, N)
            cpu = cpu_p.request_core_s + conv_cpu + encode_cpu
            wait_live = params.etcd.wait_live_fraction * decoded + stream_window_bytes(params, B, N)
        else:
            held = B + decoded + conv_live
            alloc = held * temp + enc_alloc
            # gRPC's transport takes the response in (TLS, HTTP/2 frames, the message's bytes)
            # while etcd sends it; the unmarshal and the objects' decoding follow.
            decode = receive_cost(params, B)
            cpu = cpu_p.request_core_s + decode_cost(params, B, N) - decode + conv_cpu + encode_cpu
            wait_live = params.etcd.wait_live_fraction * B
            if B > ETCD_MAX_RESPONSE_BYTES:
                # etcd builds and sends the whole response; the client refuses it, and the handler
                # fails with nothing decoded or encoded.
                return RequestPlan(cpu_p.request_core_s + cpu_p.etcd_request_core_s, etcd, wait_live, 0.0, 0.0,
                                   error=ETCD_RESPONSE_TOO_LARGE)  # fmt: skip
        live = held + enc_live
    elif path is ServingPath.WATCHLIST_STREAM:
        # The watcher holds its stream's buffers, a snapshot of the cache (one interface value
        # per object) and the event it is encoding; each initial event it sends is a deep copy of
        # the cached object (cached objects are not shared serializations), garbage once written
        # (cacher's watcher.go).
        live = mem_p.watchlist_bytes + mem_p.watchlist_bytes_per_object * N + enc_live
        alloc = (k * S + mem_p.decoded_bytes_per_object * n + conv_live) * temp + item_by_item_alloc
        cpu = (
            cpu_p.request_core_s
            + cpu_p.cache_core_s_per_object * N
            + cpu_p.watch_event_core_s_per_object * n
            + conv_cpu
            + encode_cpu
        )
        if cpu_p.watchlist_events_sorted:
            cpu += sort_cost(params, N)
    else:  # CACHE, CACHE_SNAPSHOT
        held = mem_p.struct_copy_bytes_per_object * n + conv_live
        live = held + enc_live
        alloc = held * temp + enc_alloc
        cpu = cpu_p.request_core_s + cpu_p.cache_core_s_per_object * N + conv_cpu + encode_cpu
        if cpu_p.cache_list_sorted:
            cpu += sort_cost(params, N)
    if alloc < live:
        alloc = live
    cl = params.client
    write = cl.colocated_core_s_per_request + cl.colocated_core_s_per_byte * S
    if gzip:
        write += cl.colocated_gzip_core_s_per_byte * S
    enc = enc_live if enc_live < live else live
    write_live = enc + mem_p.write_hold_fraction * (live - enc)
    if cost.indented and buffer_need:
        write_live -= S  # the compact copy is garbage once indented; the indented array is written
    delay = int(round(cl.response_latency_s * 1e9))
    ratio = shape.gzip_ratio if shape.gzip_ratio is not None else DEFAULT_GZIP_RATIO
    wire = S * ratio if gzip else S
    # A pooled buffer's growth is garbage along the work too: step as for one grown from nothing.
    steps = alloc_steps(live, alloc + (grow(buffer_growth, 0.0, buffer_need)[0] if buffer_held else 0.0))
    return RequestPlan(cpu, etcd, wait_live, live, alloc, write, write_live, delay, wire, streaming,
                       alloc_steps=steps, decode_core_s=decode,
                       buffer_need=buffer_need, buffer_held=buffer_held, buffer_growth=buffer_growth)  # fmt: skip


def refill_plan(params: ServerParams, object_count: int, stored_bytes: float,
                decoded_multiplier: float | None = None) -> tuple[RequestPlan, float]:  # fmt: skip
    """A watch cache's initial LIST from etcd after a restart, and the bytes the cache keeps.

    Live while it runs: the range response and the decoded objects; when it ends the response
    is garbage and the decoded objects stay as the cache. A unary range is taken in while etcd
    sends it and decoded after (`decode_core_s` is the receiving, alongside etcd's work); with
    EtcdRangeStream it is decoded as its chunks arrive (`decode_core_s` is all of the decoding),
    and only a few chunks of it are held at once.
    """
    B = float(stored_bytes)
    cache = cache_bytes(params, object_count, stored_bytes, decoded_multiplier)
    alloc = (B + cache) * (1.0 + params.request_memory.temp_garbage_fraction)
    decode = decode_cost(params, B, object_count)
    insert = params.request_cpu.refill_core_s_per_object * object_count
    etcd = etcd_work(params, B, object_count)
    if params.features.EtcdRangeStream:
        live = stream_window_bytes(params, B, object_count) + cache
        return RequestPlan(insert, etcd, 0.0, live, alloc, decode_core_s=decode), cache
    receive = receive_cost(params, B)
    return RequestPlan(decode - receive + insert, etcd, 0.0, B + cache, alloc, decode_core_s=receive), cache


def cache_bytes(params: ServerParams, object_count: int, stored_bytes: float,
                decoded_multiplier: float | None = None) -> float:  # fmt: skip
    """Heap bytes a watch cache holds for a resource: decoded objects plus per-entry overhead.
    `decoded_multiplier`: the resource's own decoded/stored ratio (None: the typed default)."""
    wc = params.watch_cache
    k = wc.decoded_size_multiplier if decoded_multiplier is None else decoded_multiplier
    return k * stored_bytes + wc.per_object_overhead_bytes * object_count
