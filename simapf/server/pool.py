"""encoding/json's pool of encode buffers, which keeps large buffers after their responses end.

kube-apiserver encodes every JSON response with Go's encoding/json (apimachinery's
serializer/json): a whole response through `json.NewEncoder(w).Encode`, a streamed one
(KEP-5116) item by item through `json.Marshal`, a watch event through the same encoder. Each
call takes an encodeState from one process-wide `sync.Pool` (encoding/json encode.go
`encodeStatePool`) and puts it back when done, and an encodeState's `bytes.Buffer` keeps the
capacity it grew to: it starts at 64 bytes and doubles as the response is written into it.

A `sync.Pool` (Go's sync/pool.go) is one slot per P (GOMAXPROCS of them) plus a shared chain
per P, and a victim copy of the whole pool:

- Put fills the current P's private slot, or pushes onto its shared chain if the slot is taken;
- Get takes the current P's private slot, then the head of its shared chain, then steals from
  the tail of the other Ps' shared chains, then the victim's slot of this P, then any victim
  shared chain; only then does it make a new one. Another P's private slot is out of reach;
- every GC cycle starts by dropping the victim copy and making the pool the new victim
  (`poolCleanup`), so a buffer nobody takes is freed by the second cycle after its Put.

So a large buffer outlives its response, and sequential LISTs that run on different Ps each
grow one: up to GOMAXPROCS buffers of one to two times the response, for as long as GC cycles
are rare, which they are when the retained buffers themselves raise the heap goal
(golang/go#23199, kubernetes/kubernetes#114276: 1.5 GiB after twenty 50 MiB JSON LISTs).

The P a goroutine runs on is drawn uniformly for each Get and Put: a whole response's handler
blocks on the network while it writes the buffer out, and wakes up on whichever P is free. The
draws belong to the request (its number and the step), not to the moment they are made, as its
work factors do (simapf.server.variation): a parameter that moves the timing a little does not
deal every later request other Ps.

Since 1.37 a whole Protobuf response is encoded the same way with a buffer from apimachinery's
`runtime.AllocatorPool` (kubernetes#139350), another `sync.Pool`: the encoder sizes the
response first and asks its allocator for exactly that many bytes, and an allocator whose
array is too small allocates a new one of twice the old capacity plus the request
(apimachinery runtime/allocator.go `Allocate`). `EncodeBufferPool(…, growth=ALLOCATOR)` is that
pool; the default, `DOUBLING`, encoding/json's.
"""

from __future__ import annotations

from typing import Final

import numpy as np

SMALL_BUFFER_BYTES: Final = 64  # bytes.Buffer's first allocation (buffer.go smallBufferSize)
MASK64: Final = (1 << 64) - 1
GET, PUT = 0, 1  # the steps of a request whose P is drawn
DOUBLING, ALLOCATOR = 0, 1  # how a pool's buffers grow: bytes.Buffer's, runtime.Allocator's
BLOCK: Final = 4096  # requests whose Ps are mixed at once, in numpy: per request it would cost more than the pool
KEPT_BLOCKS: Final = 8  # blocks kept; an evicted one is mixed again, to the same Ps, if asked for
# splitmix64's constants (its increment and its two finalising multipliers)
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def grown_capacity(capacity: float, need: float) -> float:
    """The capacity a buffer of `capacity` bytes has once `need` bytes are written into it:
    bytes.Buffer allocates 64 bytes first and doubles its capacity each time it is full."""
    c = capacity if capacity >= SMALL_BUFFER_BYTES else float(SMALL_BUFFER_BYTES)
    while c < need:
        c *= 2.0
    return c


def growth_alloc_bytes(capacity: float, grown: float) -> float:
    """Bytes allocated growing a buffer from `capacity` to `grown` by doubling: each new array
    is twice the last (2·grown − 2·capacity in all, or 2·grown − 64 from nothing)."""
    if grown <= capacity:
        return 0.0
    start = capacity if capacity >= SMALL_BUFFER_BYTES else SMALL_BUFFER_BYTES / 2.0
    return 2.0 * (grown - start)


def allocator_capacity(capacity: float, need: float) -> float:
    """The capacity a runtime.Allocator of `capacity` bytes has once asked for `need`: the same
    if it fits, else one new array of 2·capacity + need (exactly `need` from nothing)."""
    return capacity if capacity >= need else 2.0 * capacity + need


def grow(growth: int, capacity: float, need: float) -> tuple[float, float]:
    """(capacity after writing `need` bytes into a buffer of `capacity`, bytes allocated doing it)."""
    if growth == ALLOCATOR:
        grown = allocator_capacity(capacity, need)
        return grown, (grown if grown > capacity else 0.0)
    grown = grown_capacity(capacity, need)
    return grown, growth_alloc_bytes(capacity, grown)


def resident_after_growth(grown: float, need: float, free_bytes: float) -> float:
    """Bytes of a new array of `grown` bytes, `need` of them written, that are resident when it
    is grown with make (Go 1.18 and older): the runtime zeroes reused pages, not pages fresh from
    the OS, so a tail that lands on fresh pages stays untouched. The heap's `free_bytes` of free
    pages are taken first (as the model's allocation takes them)."""
    fresh = grown - free_bytes
    if fresh <= 0.0:
        return grown
    tail = grown - need
    return grown - (tail if tail < fresh else fresh)


class EncodeBufferPool:
    """The pooled encode buffers of one process, each a capacity in bytes; `live` is their sum.

    `by_written` (a doubling pool of a build whose buffers grow with make, Go 1.18 and older):
    each buffer is kept as the bytes ever written into it instead, whose capacity follows
    (`grown_capacity`); `untouched` is the capacity never written of the pooled buffers, and
    `freed_untouched` that of arrays that became garbage since the last GC cycle ended (outgrown
    or dropped by the pool): neither is resident."""

    __slots__ = ("procs", "growth", "private", "shared", "victim_private", "victim_shared", "live", "_seed", "_blocks",
                 "by_written", "untouched", "freed_untouched")  # fmt: skip

    def __init__(self, procs: int, seed: int, growth: int = DOUBLING, by_written: bool = False) -> None:
        self.procs = procs
        self.growth = growth
        self.by_written = by_written and growth == DOUBLING
        self.untouched = 0.0
        self.freed_untouched = 0.0
        self._seed = seed & MASK64
        self._blocks: dict[int, list[int]] = {}
        self.private: list[float] = [0.0] * procs  # per P; 0.0: empty
        self.shared: list[list[float]] = [[] for _ in range(procs)]
        self.victim_private: list[float] = [0.0] * procs
        self.victim_shared: list[list[float]] = [[] for _ in range(procs)]
        self.live = 0.0

    def clear(self) -> None:
        """The process died or started: nothing is pooled."""
        n = self.procs
        self.private = [0.0] * n
        self.shared = [[] for _ in range(n)]
        self.victim_private = [0.0] * n
        self.victim_shared = [[] for _ in range(n)]
        self.live = 0.0
        self.untouched = 0.0
        self.freed_untouched = 0.0

    def proc(self, key: int, step: int) -> int:
        """The P that request number `key` (>= 0) runs on at `step` (GET or PUT): uniform, and
        the same for the same request whatever happened before it: splitmix64's mixing of the
        seed and 2·key + step + 1, modulo the Ps."""
        b, i = divmod(key, BLOCK)
        block = self._blocks.get(b)
        if block is None:
            block = self._blocks[b] = self._mix_block(b)
            if len(self._blocks) > KEPT_BLOCKS:  # requests start roughly in arrival order
                del self._blocks[min(self._blocks)]
        return block[2 * i + step]

    def _mix_block(self, b: int) -> list[int]:
        """The Ps of requests b·BLOCK … (b+1)·BLOCK − 1, GET and PUT in turn (uint64 wraps as
        splitmix64's arithmetic does)."""
        n = np.arange(2 * b * BLOCK + 1, 2 * (b + 1) * BLOCK + 1, dtype=np.uint64)
        z = np.uint64(self._seed) + n * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        z = z ^ (z >> np.uint64(31))
        return (z % np.uint64(self.procs)).astype(np.int64).tolist()

    def get(self, pid: int) -> float:
        """Take a buffer on P `pid`: its capacity (`by_written`: the bytes written into it), or
        0.0 if the pool has none for this P."""
        c = self.private[pid]
        if c:
            self.private[pid] = 0.0
        else:
            c = self._get_slow(pid)
        if self.by_written and c:
            capacity = grown_capacity(0.0, c)
            self.live -= capacity
            self.untouched -= capacity - c
            return c
        self.live -= c
        return c

    def _get_slow(self, pid: int) -> float:
        own = self.shared[pid]
        if own:
            return own.pop()  # the head: the one put last
        n = self.procs
        for i in range(1, n):
            other = self.shared[(pid + i) % n]
            if other:
                return other.pop(0)  # stolen from the tail: the one put first
        c = self.victim_private[pid]
        if c:
            self.victim_private[pid] = 0.0
            return c
        for i in range(n):
            other = self.victim_shared[(pid + i) % n]
            if other:
                return other.pop(0)
        return 0.0

    def put(self, pid: int, capacity: float) -> None:
        """Give back a buffer of `capacity` bytes (`by_written`: with that many written) on P `pid`."""
        if self.private[pid]:
            self.shared[pid].append(capacity)
        else:
            self.private[pid] = capacity
        if self.by_written:
            grown = grown_capacity(0.0, capacity)
            self.untouched += grown - capacity
            self.live += grown
            return
        self.live += capacity

    def take(self, pid: int, need: float, free_bytes: float) -> tuple[float, float, float, float]:
        """Take a buffer on P `pid` and write `need` bytes into it, with `free_bytes` of free heap
        pages to grow it on: (its capacity before, its capacity after, the bytes written into it,
        the bytes its growth allocates). Written is the capacity unless `by_written`."""
        taken = self.get(pid)
        if not self.by_written:
            grown, alloc = self.grow(taken, need)
            return taken, grown, grown, alloc
        capacity = grown_capacity(0.0, taken) if taken else 0.0
        grown, alloc = self.grow(capacity, need)
        if grown > capacity:
            self.freed_untouched += capacity - taken  # the outgrown array is garbage
            return capacity, grown, resident_after_growth(grown, need, free_bytes), alloc
        return capacity, grown, (taken if taken > need else need), alloc

    def use(self, pid: int, need: float, free_bytes: float = 0.0) -> float:
        """Encode `need` bytes with a pooled buffer on P `pid` and give it back at once there (one
        item of a streamed response, one watch event): returns the bytes its growth allocates."""
        if self.private[pid] >= need:
            return 0.0  # this P's own buffer, big enough: taken and given back, nothing changes
        _taken, _grown, written, alloc = self.take(pid, need, free_bytes)
        self.put(pid, written)
        return alloc

    def grow(self, capacity: float, need: float) -> tuple[float, float]:
        """(capacity after writing `need` bytes into one of this pool's buffers of `capacity`,
        bytes allocated doing it)."""
        return grow(self.growth, capacity, need)

    def cleanup(self) -> float:
        """A GC cycle starts: the victim copy is dropped (its bytes are garbage now, returned)
        and the pool becomes the new victim."""
        dropped = untouched = 0.0
        for c in [*self.victim_private, *(c for chain in self.victim_shared for c in chain)]:
            if self.by_written and c:
                capacity = grown_capacity(0.0, c)  # c is what was written into it
                untouched += capacity - c
                c = capacity
            dropped += c
        self.untouched -= untouched
        self.freed_untouched += untouched
        self.victim_private = self.private
        self.victim_shared = self.shared
        n = self.procs
        self.private = [0.0] * n
        self.shared = [[] for _ in range(n)]
        self.live -= dropped
        if self.live < 1e-6:
            self.live = 0.0  # rounding of a float sum; the pool holds whole buffers
        return dropped
