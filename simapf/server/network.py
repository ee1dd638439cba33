"""The way from the apiserver to a client: how long writing a response takes.

A handler's write returns only when the client has taken the bytes: HTTP/2 flow control lets
the server run at most one window ahead of what the client has read. So a response moves at
the pace of the slower side (one stream's throughput through TLS and HTTP/2, what the client's
node or CPU can take), and the handler keeps its seats and its response in memory until the
last byte has gone. One `Link` is the way to one client group: the responses in flight to its
instances share `link_bytes_per_s` evenly (processor sharing), each at most
`stream_bytes_per_s`.

`send(nbytes, callback, arg)`: `callback(arg)` when the last byte has been written.
"""

from __future__ import annotations

from typing import Any, Callable

from simapf.engine.clock import FINISH
from simapf.engine.environment import RunClock
from simapf.server.cpu import ProcessorSharing


class Link:
    """Responses to one client group: each at most `stream_bytes_per_s`, together at most
    `link_bytes_per_s` (None: no shared limit)."""

    __slots__ = ("clock", "stream_bytes_per_s", "link_bytes_per_s", "_ps", "_writing", "_epoch", "_done_cb")

    def __init__(self, clock: RunClock, stream_bytes_per_s: float,
                 link_bytes_per_s: float | None = None) -> None:  # fmt: skip
        if stream_bytes_per_s <= 0 or (link_bytes_per_s is not None and link_bytes_per_s <= 0):
            raise ValueError("link rates must be positive")
        self.clock = clock  # the time and its alarms
        self.stream_bytes_per_s = float(stream_bytes_per_s)
        self.link_bytes_per_s = link_bytes_per_s
        # With a shared limit, work is in seconds of one stream at full pace and the link serves
        # link/stream of them at once; without one, each response simply takes its own time.
        self._ps = None
        if link_bytes_per_s is not None:
            width = link_bytes_per_s / self.stream_bytes_per_s
            self._ps = ProcessorSharing(clock, cores=width, procs=width)
        self._writing = 0
        self._epoch = 0  # bumped by clear(): writes of broken connections do not call back
        self._done_cb = self._done

    def send(self, nbytes: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Write `nbytes` to the client; `callback(arg)` once the last byte has gone."""
        if self._ps is not None:
            self._ps.add(nbytes / self.stream_bytes_per_s, callback, arg)
            return
        self._writing += 1
        delay = int(nbytes * 1e9 / self.stream_bytes_per_s + 0.999999)  # whole ns, rounded up
        self.clock.at(self.clock.now + delay, self._done_cb, (self._epoch, callback, arg), FINISH)

    def _done(self, value: tuple[int, Callable[[Any], None], Any]) -> None:
        epoch, callback, arg = value
        if epoch == self._epoch:
            self._writing -= 1
            callback(arg)

    @property
    def in_flight(self) -> int:
        """Responses being written on this link."""
        return self._ps.jobs if self._ps is not None else self._writing

    def clear(self) -> None:
        """Drop every response being written, without calling back (the connections broke)."""
        if self._ps is not None:
            self._ps.clear()
        self._epoch += 1
        self._writing = 0
