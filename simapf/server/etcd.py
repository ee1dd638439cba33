"""etcd as a resource of its own: range reads share its capacity.

Work of a range in server-seconds is `1/requests_per_s + stored_bytes/bytes_per_s
+ keys/objects_per_s`: per range, per byte and per key, each linear (etcd reads each key and value
once, copies it into the response and marshals it once). The rates are one server's (one of etcd's
cores serving one range); `concurrency` servers serve ranges side by side, so etcd's aggregate
capacity is `concurrency` times one server's, reached only when `concurrency` or more ranges are
in flight.

Two disciplines (`etcd.discipline`), a choice the calibration makes:

- `ps`, processor sharing over `concurrency` servers: every range in flight progresses at
  once, as etcd serves each gRPC range in its own goroutine over a shared bbolt read
  transaction. Identical ranges started together also finish together.
- `fifo`, `concurrency` servers in arrival order: a range waits until a server is free, then
  runs alone on it. Responses leave one after another, as they do when the bottleneck is one
  stream of bytes (the gRPC connection, bbolt's page reads) rather than many goroutines.

`read(work, callback, arg)`: `callback(arg)` when the response has arrived.

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

import simpy

from simapf.environment import Environment
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


class EtcdModel:
    __slots__ = ("params", "env", "clock", "_ps", "_fifo", "_queue", "_busy", "_busy_s", "_t_busy", "_epoch", "_busy_owners")

    def __init__(self, env: Environment, params: EtcdParams) -> None:
        self.params = params
        self.env = env
        self.clock = env.clock  # the time and its alarms (simapf.environment.Clock)
        c = params.concurrency
        self._fifo = params.discipline == "fifo"
        self._ps = None if self._fifo else ProcessorSharing(env, cores=c, procs=c)
        self._queue: deque[tuple[float, Callback, Any]] = deque()
        self._busy = 0
        self._busy_s = 0.0  # FIFO: server-seconds spent, integrated at each change
        self._t_busy = env.now
        self._epoch = 0
        self._busy_owners: dict[int, int] = {}  # FIFO: ranges being served, per owner's id

    def work(self, stored_bytes: float, objects: int = 0) -> float:
        """Server-seconds of one range read of `stored_bytes` in `objects` keys."""
        return range_work(self.params, stored_bytes, objects)

    def read(self, work: float, callback: Callback, arg: Any = None) -> None:
        """Start a range read of `work` server-seconds (see `work`); `callback(arg)` when done."""
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
        ev = self.env.timeout(max(1, int(round(work * NS))), (self._epoch, callback, arg))
        ev.callbacks.append(self._served)

    def _served(self, event: simpy.Event) -> None:
        epoch, callback, arg = event._value
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

    def capacity_per_s(self, stored_bytes: float, objects: int = 0) -> float:
        """Most ranges of `stored_bytes` (in `objects` keys) etcd completes per second."""
        return self.params.concurrency / self.work(stored_bytes, objects)

    @property
    def in_flight(self) -> int:
        """Ranges etcd is serving or has queued."""
        if self._ps is not None:
            return self._ps.jobs
        return self._busy + len(self._queue)

    def busy_seconds(self) -> float:
        """Server-seconds spent on ranges since the start (divide by concurrency for utilisation)."""
        if self._ps is not None:
            return self._ps.request_core_seconds()
        self._integrate()
        return self._busy_s

    def cancel(self, owner: object) -> None:
        """Forget the reads in flight of `owner` (an apiserver that died); with processor
        sharing the others speed up at once. Under FIFO the ranges it had queued go, and those
        being served finish (their answers are ignored), unless all are its own."""
        if self._ps is not None:
            self._ps.drop(lambda callback: _owner(callback) is not owner)
            return
        others = deque(q for q in self._queue if _owner(q[1]) is not owner)
        if not others and self._busy_owners.get(id(owner), 0) == self._busy:
            self.clear()
            return
        self._queue = others

    def clear(self) -> None:
        """Forget every read in flight (the apiserver that asked for them died)."""
        if self._ps is not None:
            self._ps.clear()
            return
        self._epoch += 1
        self._integrate()
        self._queue.clear()
        self._busy = 0
        self._busy_owners.clear()


class EmbeddedEtcd:
    """etcd inside the apiserver's process: a range is a job on the process's CPU (one core at
    most, as one gRPC range is served by one goroutine), sharing it with requests and the GC."""

    __slots__ = ("params", "cpu", "_in_flight", "_busy_s", "_epoch", "_done_cb")

    def __init__(self, params: EtcdParams, cpu: ProcessorSharing) -> None:
        self.params = params
        self.cpu = cpu
        self._in_flight = 0
        self._busy_s = 0.0
        self._epoch = 0
        self._done_cb = self._done

    def work(self, stored_bytes: float, objects: int = 0) -> float:
        """Core-seconds of one range read of `stored_bytes` in `objects` keys."""
        return range_work(self.params, stored_bytes, objects)

    def read(self, work: float, callback: Callback, arg: Any = None) -> None:
        """Start a range read of `work` core-seconds; `callback(arg)` when done."""
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


def etcd_for(env: Environment, params: EtcdParams, cpu: ProcessorSharing) -> EtcdModel | EmbeddedEtcd:
    """The etcd an apiserver with CPU `cpu` reads: embedded in its process, or its own server."""
    return EmbeddedEtcd(params, cpu) if params.embedded else EtcdModel(env, params)
