"""etcd as a resource of its own: its members serve range reads with their cores.

Work of a range in server-seconds is `1/requests_per_s + stored_bytes/bytes_per_s
+ keys/objects_per_s`: per range, per byte and per key, each linear (etcd reads each key and value
once, copies it into the response and marshals it once). The rates are one server's (one of etcd's
cores serving one range); a member's `concurrency` servers (its cores, a scenario's `etcd.cores`)
serve ranges side by side, so a member's capacity is `concurrency` times one server's, reached
only when `concurrency` or more ranges are in flight on it: etcd serves each gRPC call in a
goroutine of its own (grpc-go's server, one per stream) over a read transaction that shares
bbolt with the others (etcd 3.4 and later: concurrent read transactions, mvcc `ConcurrentReadTx`).

Two disciplines (`etcd.discipline`), a choice the calibration makes:

- `ps`, processor sharing over `concurrency` servers: every range in flight progresses at
  once, as etcd serves each gRPC range in its own goroutine over a shared bbolt read
  transaction. Identical ranges started together also finish together.
- `fifo`, `concurrency` servers in arrival order: a range waits until a server is free, then
  runs alone on it. Responses leave one after another, as they do when the bottleneck is one
  stream of bytes (the gRPC connection, bbolt's page reads) rather than many goroutines.

An etcd cluster of several members (`etcd.members`) is `EtcdModel` over `EtcdMember`s: the
apiserver's etcd client sends each call to the next member in turn (gRPC's round_robin balancer,
etcd client/v3 internal/resolver), and that member serves the range from its own copy of the data
with its own cores. Every range kube-apiserver reads is linearizable: its etcd client never asks
for a serializable one (k8s.io/apiserver storage/etcd3 `store.GetList` through etcd's
client/v3/kubernetes `List`), and etcd's `Range` runs `linearizableReadNotify` for every range
that is not serializable, whatever revision it asks for (server/etcdserver/v3_server.go, v3.5 and
v3.6). So with several members a range first waits for its member's ReadIndex round
(`ReadIndexLoop`); with one member raft answers a ReadIndex at once (go.etcd.io/raft `stepLeader`:
a singleton cluster responds without a heartbeat round), and there is no wait.

`EtcdModel.pick()` gives the member the next call goes to; `member.read_index` (None: no wait)
and `member.read(work, callback, arg)`: `callback(arg)` when the response has arrived.

An etcd embedded in the apiserver's process (`etcd.embedded`, as upstream's storage benchmarks
run it) is `EmbeddedEtcd`: each range is a job of one core among the process's own, so it takes
its turn with the requests and the GC, and its CPU is the process's.

Several apiserver replicas share one etcd. When one of them dies, etcd stops its ranges (it
checks the gRPC context between keys) and the others' go on: `cancel(owner)` drops the reads
whose callback is a method of `owner`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from simapf.engine.clock import FINISH
from simapf.engine.environment import RunClock
from simapf.server.cpu import NS, ProcessorSharing
from simapf.server.params import EtcdParams

Callback = Callable[[Any], None]


def _owner(callback: Callback) -> object:
    """Whose read it is: the object a bound-method callback belongs to (an apiserver's model)."""
    return getattr(callback, "__self__", None)


def range_work(params: EtcdParams, stored_bytes: float, objects: int = 0) -> float:
    """Server-seconds of one range read of `stored_bytes` in `objects` keys."""
    per_byte = stored_bytes / params.bytes_per_s
    per_key = objects / params.objects_per_s if params.objects_per_s is not None else 0.0
    return 1.0 / params.requests_per_s + per_byte + per_key


class ReadIndexLoop:
    """One member's wait for linearizable reads (raft's ReadIndex, ReadOnlySafe).

    Before a member serves a linearizable range it asks raft for the index committed now, and
    raft confirms with a quorum that the leader is still the leader: the leader broadcasts a
    heartbeat and waits for a quorum's acks (one round trip); a follower forwards the request
    to the leader, which does the same and answers (two round trips). go.etcd.io/raft `raft.go`:
    `stepLeader` and `sendMsgReadIndexResponse` (`bcastHeartbeatWithCtx`), `stepFollower`
    (MsgReadIndex sent on to the leader).

    The member batches: etcd's `linearizableReadLoop` (server/etcdserver/v3_server.go) asks for
    one read index for every read waiting when a round starts, and reads that arrive while it is
    out wait for the next round, which starts as soon as it returns. No CPU is spent: a round is
    network time. `wait(then, arg)`: `then(arg)` once the read's round has returned."""

    __slots__ = ("clock", "round_ns", "_waiting", "_out", "_epoch", "rounds", "_confirmed_cb")

    def __init__(self, clock: RunClock, round_ns: int) -> None:
        self.clock = clock  # the time and its alarms
        self.round_ns = round_ns
        self._waiting: list[tuple[Callback, Any]] = []  # reads for the next round
        self._out: list[tuple[Callback, Any]] | None = None  # the round out, and its reads
        self._epoch = 0
        self.rounds = 0  # rounds started since the start
        self._confirmed_cb = self._confirmed

    def wait(self, then: Callback, arg: Any = None) -> None:
        """A linearizable read arrives: `then(arg)` once the member's next round has returned."""
        self._waiting.append((then, arg))
        if self._out is None:
            self._start()

    def _start(self) -> None:
        self._out = self._waiting
        self._waiting = []
        self.rounds += 1
        clock = self.clock
        clock.at(clock.now + self.round_ns, self._confirmed_cb, self._epoch, FINISH)

    def _confirmed(self, epoch: int) -> None:
        if epoch != self._epoch:
            return
        batch = self._out or []
        self._out = None
        if self._waiting:
            self._start()
        for then, arg in batch:
            then(arg)

    @property
    def waiting(self) -> int:
        """Reads waiting for a round (the one out, or the next)."""
        return len(self._waiting) + (len(self._out) if self._out is not None else 0)

    def cancel(self, owner: object) -> None:
        """Forget the reads of `owner` (an apiserver that died); a round out still returns."""
        self._waiting = [x for x in self._waiting if _owner(x[0]) is not owner]
        if self._out:
            self._out[:] = [x for x in self._out if _owner(x[0]) is not owner]

    def clear(self) -> None:
        """Forget every read waiting, and the round out."""
        self._epoch += 1
        self._waiting = []
        self._out = None


class EtcdMember:
    """One member: its cores serving the ranges sent to it (`concurrency` servers, by
    `discipline`), and its ReadIndex wait (None: one member, no wait)."""

    __slots__ = ("params", "clock", "_ps", "_fifo", "_queue", "_busy", "_busy_s", "_t_busy", "_epoch", "_busy_owners",
                 "read_index", "ranges", "_served_cb")  # fmt: skip

    def __init__(self, clock: RunClock, params: EtcdParams, read_index: ReadIndexLoop | None = None) -> None:
        self.params = params
        self.clock = clock  # the time and its alarms
        self.read_index = read_index
        self.ranges = 0  # ranges started since the start
        c = params.concurrency
        self._fifo = params.discipline == "fifo"
        self._ps = None if self._fifo else ProcessorSharing(clock, cores=c, procs=c)
        self._queue: deque[tuple[float, Callback, Any]] = deque()
        self._busy = 0
        self._busy_s = 0.0  # FIFO: server-seconds spent, integrated at each change
        self._t_busy = clock.now
        self._epoch = 0
        self._busy_owners: dict[int, int] = {}  # FIFO: ranges being served, per owner's id
        self._served_cb = self._served  # bound once: a FIFO member serves every range through it

    def work(self, stored_bytes: float, objects: int = 0) -> float:
        """Server-seconds of one range read of `stored_bytes` in `objects` keys."""
        return range_work(self.params, stored_bytes, objects)

    def read(self, work: float, callback: Callback, arg: Any = None) -> None:
        """Start a range read of `work` server-seconds (see `work`) now; `callback(arg)` when done.
        A linearizable read waits for `read_index` first (ResourceModel does)."""
        self.ranges += 1
        if self._ps is not None:
            self._ps.add(work, callback, arg)
        elif self._busy < self.params.concurrency:
            self._serve(work, callback, arg)
        else:
            self._queue.append((work, callback, arg))

    # ------------------------------------------------------------------ FIFO

    def _integrate(self) -> None:
        now = self.clock.now
        self._busy_s += self._busy * (now - self._t_busy) / NS
        self._t_busy = now

    def _serve(self, work: float, callback: Callback, arg: Any) -> None:
        self._integrate()
        self._busy += 1
        owner = id(_owner(callback))
        self._busy_owners[owner] = self._busy_owners.get(owner, 0) + 1
        clock = self.clock
        clock.at(clock.now + max(1, int(round(work * NS))), self._served_cb, (self._epoch, callback, arg), FINISH)

    def _served(self, value: tuple[int, Callback, Any]) -> None:
        epoch, callback, arg = value
        if epoch != self._epoch:
            return
        self._integrate()
        self._busy -= 1
        owner = id(_owner(callback))
        self._busy_owners[owner] -= 1
        if self._queue:
            self._serve(*self._queue.popleft())
            if epoch != self._epoch:
                return
        callback(arg)

    # ------------------------------------------------------------------ gauges

    @property
    def in_flight(self) -> int:
        """Ranges the member is serving or has queued, and reads waiting for a ReadIndex round."""
        waiting = self.read_index.waiting if self.read_index is not None else 0
        if self._ps is not None:
            return self._ps.jobs + waiting
        return self._busy + len(self._queue) + waiting

    def busy_seconds(self) -> float:
        """Server-seconds spent on ranges since the start (divide by concurrency for utilisation).
        A reading: it leaves the model's arithmetic as it was, so reading it changes no result."""
        if self._ps is not None:
            return self._ps.usage_now()[0]
        return self._busy_s + self._busy * (self.clock.now - self._t_busy) / NS

    def cancel(self, owner: object) -> None:
        """Forget the reads in flight of `owner` (an apiserver that died); with processor
        sharing the others speed up at once. Under FIFO the ranges it had queued go, and those
        being served finish (their answers are ignored), unless all are its own."""
        if self.read_index is not None:
            self.read_index.cancel(owner)
        if self._ps is not None:
            self._ps.drop(lambda callback: _owner(callback) is not owner)
            return
        others = deque(q for q in self._queue if _owner(q[1]) is not owner)
        if not others and self._busy_owners.get(id(owner), 0) == self._busy:
            self._clear_ranges()
            return
        self._queue = others

    def clear(self) -> None:
        """Forget every read in flight (the apiserver that asked for them died)."""
        if self.read_index is not None:
            self.read_index.clear()
        self._clear_ranges()

    def _clear_ranges(self) -> None:
        if self._ps is not None:
            self._ps.clear()
            return
        self._epoch += 1
        self._integrate()
        self._queue.clear()
        self._busy = 0
        self._busy_owners.clear()


class EtcdModel:
    """etcd's members (`etcd.members`), each an `EtcdMember` with `concurrency` cores; the
    apiserver's calls go to them in turn (`pick`). Member 0 is the leader: with several members
    its ReadIndex round is one `member_round_trip_s`, a follower's two."""

    __slots__ = ("params", "members", "_next")

    def __init__(self, clock: RunClock, params: EtcdParams) -> None:
        self.params = params
        n = params.members
        rtt = int(round(params.member_round_trip_s * NS))
        self.members = [
            EtcdMember(clock, params, None if n == 1 else ReadIndexLoop(clock, rtt if i == 0 else 2 * rtt)) for i in range(n)
        ]
        self._next = 0  # the member the next call goes to

    def pick(self) -> EtcdMember:
        """The member the next call goes to (round robin)."""
        member = self.members[self._next]
        self._next = self._next + 1 if self._next + 1 < len(self.members) else 0
        return member

    def work(self, stored_bytes: float, objects: int = 0) -> float:
        """Server-seconds of one range read of `stored_bytes` in `objects` keys."""
        return range_work(self.params, stored_bytes, objects)

    def read(self, work: float, callback: Callback, arg: Any = None) -> None:
        """Start a range of `work` server-seconds now on the next member; `callback(arg)` when done
        (without the member's ReadIndex wait: ResourceModel waits for it first)."""
        self.pick().read(work, callback, arg)

    def capacity_per_s(self, stored_bytes: float, objects: int = 0) -> float:
        """Most ranges of `stored_bytes` (in `objects` keys) etcd completes per second: every
        member's cores."""
        return len(self.members) * self.params.concurrency / self.work(stored_bytes, objects)

    @property
    def in_flight(self) -> int:
        """Ranges being served or queued, and reads waiting for a ReadIndex round, on every member."""
        return sum(m.in_flight for m in self.members)

    @property
    def ranges(self) -> int:
        """Ranges started since the start, on every member."""
        return sum(m.ranges for m in self.members)

    @property
    def read_index_rounds(self) -> int:
        """ReadIndex rounds since the start, on every member."""
        return sum(m.read_index.rounds for m in self.members if m.read_index is not None)

    def busy_seconds(self) -> float:
        """Server-seconds spent on ranges since the start, on every member (a reading: it
        changes no result)."""
        return sum(m.busy_seconds() for m in self.members)

    def cancel(self, owner: object) -> None:
        """Forget the reads in flight of `owner` (an apiserver that died), on every member."""
        for m in self.members:
            m.cancel(owner)

    def clear(self) -> None:
        """Forget every read in flight."""
        for m in self.members:
            m.clear()


class EmbeddedEtcd:
    """etcd inside the apiserver's process: a range is a job on the process's CPU (one core at
    most, as one gRPC range is served by one goroutine), sharing it with requests and the GC."""

    __slots__ = ("params", "cpu", "_in_flight", "_busy_s", "_epoch", "_done_cb", "read_index", "ranges")

    def __init__(self, params: EtcdParams, cpu: ProcessorSharing) -> None:
        self.params = params
        self.cpu = cpu
        self.read_index: ReadIndexLoop | None = None  # one member, in the process: no round trip
        self.ranges = 0
        self._in_flight = 0
        self._busy_s = 0.0
        self._epoch = 0
        self._done_cb = self._done

    def work(self, stored_bytes: float, objects: int = 0) -> float:
        """Core-seconds of one range read of `stored_bytes` in `objects` keys."""
        return range_work(self.params, stored_bytes, objects)

    def pick(self) -> "EmbeddedEtcd":
        """The one member, itself."""
        return self

    @property
    def read_index_rounds(self) -> int:
        return 0

    def read(self, work: float, callback: Callback, arg: Any = None) -> None:
        """Start a range read of `work` core-seconds; `callback(arg)` when done."""
        self.ranges += 1
        self._in_flight += 1
        self.cpu.add(work, self._done_cb, (self._epoch, work, callback, arg))

    def _done(self, value: tuple[int, float, Callback, Any]) -> None:
        epoch, work, callback, arg = value
        if epoch != self._epoch:
            return
        self._in_flight -= 1
        self._busy_s += work
        callback(arg)

    @property
    def in_flight(self) -> int:
        """Ranges being served."""
        return self._in_flight

    def busy_seconds(self) -> float:
        """Core-seconds of the ranges served so far."""
        return self._busy_s

    def cancel(self, owner: object) -> None:
        """The process died, and its etcd with it (its CPU jobs are cleared by the caller)."""
        self.clear()

    def clear(self) -> None:
        self._epoch += 1
        self._in_flight = 0


def etcd_for(clock: RunClock, params: EtcdParams, cpu: ProcessorSharing) -> EtcdModel | EmbeddedEtcd:
    """The etcd an apiserver with CPU `cpu` reads: embedded in its process, or its own server."""
    return EmbeddedEtcd(params, cpu) if params.embedded else EtcdModel(clock, params)
