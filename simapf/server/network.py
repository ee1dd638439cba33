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

import simpy

from simapf.server.cpu import ProcessorSharing

# Responses in flight on one link with no limit of its own (each still at its stream's pace):
# a processor-sharing server this wide never makes one wait for another.
UNLIMITED_STREAMS = 1e9


class Link:
    """Responses to one client group: each at most `stream_bytes_per_s`, together at most
    `link_bytes_per_s` (None: no shared limit)."""

    __slots__ = ("stream_bytes_per_s", "link_bytes_per_s", "_ps")

    def __init__(self, env: simpy.Environment, stream_bytes_per_s: float,
                 link_bytes_per_s: float | None = None) -> None:  # fmt: skip
        if stream_bytes_per_s <= 0 or (link_bytes_per_s is not None and link_bytes_per_s <= 0):
            raise ValueError("link rates must be positive")
        self.stream_bytes_per_s = float(stream_bytes_per_s)
        self.link_bytes_per_s = link_bytes_per_s
        # Work is in seconds of one stream at full pace; the link serves link/stream of them at once.
        width = UNLIMITED_STREAMS if link_bytes_per_s is None else link_bytes_per_s / self.stream_bytes_per_s
        self._ps = ProcessorSharing(env, cores=width, procs=width)

    def send(self, nbytes: float, callback: Callable[[Any], None], arg: Any = None) -> None:
        """Write `nbytes` to the client; `callback(arg)` once the last byte has gone."""
        self._ps.add(nbytes / self.stream_bytes_per_s, callback, arg)

    @property
    def in_flight(self) -> int:
        """Responses being written on this link."""
        return self._ps.jobs

    def clear(self) -> None:
        """Drop every response being written, without calling back (the connections broke)."""
        self._ps.clear()
