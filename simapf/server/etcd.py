"""etcd as a resource of its own: range reads share its capacity.

Choice: processor sharing over `concurrency` servers, the same mechanism as the apiserver's CPU.
etcd serves each gRPC range in its own goroutine and reads from bbolt under a shared read
transaction, so concurrent ranges progress together and a large range does not block small
ones behind it, which a FIFO queue would impose. One range alone can use one of the
`concurrency` servers (one core), so a single range's latency is `concurrency` times its share of
the aggregate cost, and the aggregate capacity is reached only when `concurrency` or more ranges
are in flight.

Work of a range in aggregate-etcd-seconds: `1/requests_per_s + stored_bytes/bytes_per_s`; in
server-seconds, times `concurrency`. Hypothesis, to be calibrated.
"""

from __future__ import annotations

from typing import Any, Callable

import simpy

from simapf.server.cpu import ProcessorSharing
from simapf.server.params import EtcdParams


def range_work(params: EtcdParams, stored_bytes: float) -> float:
    """Server-seconds of one range read of `stored_bytes`."""
    return params.concurrency * (1.0 / params.requests_per_s + stored_bytes / params.bytes_per_s)


class EtcdModel:
    __slots__ = ("params", "_ps")

    def __init__(self, env: simpy.Environment, params: EtcdParams) -> None:
        self.params = params
        c = params.concurrency
        self._ps = ProcessorSharing(env, cores=c, procs=c)

    def work(self, stored_bytes: float) -> float:
        """Server-seconds of one range read of `stored_bytes`."""
        return range_work(self.params, stored_bytes)

    def read(self, work: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Start a range read of `work` server-seconds (see `work`); `callback(arg)` when done."""
        self._ps.add(work, callback, arg)

    def capacity_per_s(self, stored_bytes: float) -> float:
        """Most ranges of `stored_bytes` etcd completes per second."""
        return self.params.concurrency / self.work(stored_bytes)

    @property
    def in_flight(self) -> int:
        return self._ps.jobs

    def busy_seconds(self) -> float:
        """Server-seconds spent on ranges since the start (divide by concurrency for utilisation)."""
        return self._ps.request_core_seconds()

    def clear(self) -> None:
        """Forget every read in flight (the apiserver that asked for them died)."""
        self._ps.clear()
