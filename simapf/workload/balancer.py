"""The load balancer in front of the apiserver replicas, and the clients' connections through it.

A client instance holds one long-lived HTTP/2 connection (client-go shares one per host), so
every request and watch it sends goes to the replica that connection reached. The connection
lasts until that replica's process dies (or the replica closes it with a GOAWAY); the next
request then opens a new one, and the balancer picks a replica for it among those its health
checks last saw serving. Health checks see a change only `health_check_s` after it happened:
meanwhile a dead replica still gets new connections, which are refused, and a restarted one
gets none.

With one replica the balancer has no choice to make; the connection still notices a restart,
which is what ties a watch to the process that served it.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from simapf.apf.types import NS_PER_S
from simapf.engine.clock import ARRIVAL

if TYPE_CHECKING:
    from simapf.server.runtime import SimulatedAPIServer

POLICIES = ("round-robin", "least-connections", "random")


class Connection:
    """One client instance's connection: the replica it reached, that replica's process
    incarnation then (a process that died since took the connection with it), and the
    balancer's network epoch (a network failure since broke it). -1: none open."""

    __slots__ = ("replica", "incarnation", "epoch")

    def __init__(self) -> None:
        self.replica = -1
        self.incarnation = -1
        self.epoch = -1


class LoadBalancer:
    def __init__(self, servers: list["SimulatedAPIServer"], policy: str = "round-robin",
                 health_check_s: float = 0.0, goaway_chance: float = 0.0,
                 rng: np.random.Generator | None = None) -> None:  # fmt: skip
        if policy not in POLICIES:
            raise ValueError(f"unknown load-balancing policy {policy!r}")
        self.servers = servers
        self.policy = policy
        self.health_check_ns = int(round(health_check_s * NS_PER_S))
        self.goaway_chance = goaway_chance
        self.rng = rng if rng is not None else np.random.default_rng(0)
        n = len(servers)
        self.in_pool = [True] * n  # what the health checks last saw: serving or not
        self.connections = [0] * n  # open client connections per replica
        self.goaways = 0
        self.epoch = 0  # bumped when the network fails: every connection breaks
        self._turn = 0
        for i, server in enumerate(servers):
            server.on_restart(partial(self._changed, i))

    # ------------------------------------------------------------------ routing

    def server_for(self, conn: Connection) -> "SimulatedAPIServer":
        """The replica a request on `conn` goes to: the one it is connected to while that
        process lives, else the one a new connection reaches."""
        r = conn.replica
        if r >= 0:
            server = self.servers[r]
            if server.incarnation == conn.incarnation and conn.epoch == self.epoch:
                return server
        r = self._pick()
        server = self.servers[r]
        if server.up:
            conn.replica = r
            conn.incarnation = server.incarnation
            conn.epoch = self.epoch
            self.connections[r] += 1
        else:
            conn.replica = -1  # refused: no connection; the next request tries again
        return server

    def goaway(self, conn: Connection) -> bool:
        """After a request (not a watch) the replica may close the connection (--goaway-chance);
        the client reconnects for its next request."""
        if not self.goaway_chance or self.rng.random() >= self.goaway_chance:
            return False
        self.disconnect(conn)
        self.goaways += 1
        return True

    def disconnect(self, conn: Connection) -> None:
        """The client closes its connection (it stopped)."""
        r = conn.replica
        if r >= 0 and self.servers[r].incarnation == conn.incarnation and conn.epoch == self.epoch:
            self.connections[r] -= 1
        conn.replica = -1

    def network_failed(self) -> None:
        """The network between clients and replicas failed: every connection broke."""
        self.epoch += 1
        self.connections = [0] * len(self.servers)

    def _pick(self) -> int:
        n = len(self.servers)
        if n == 1:
            return 0
        pool = [i for i in range(n) if self.in_pool[i]] or list(range(n))  # none healthy: try them all
        if self.policy == "least-connections":
            return min(pool, key=lambda i: (self.connections[i], i))
        if self.policy == "random":
            return pool[int(self.rng.integers(len(pool)))]
        # Round robin over the pool: the next replica in the pool after the last one picked.
        later = [i for i in pool if i >= self._turn]
        r = later[0] if later else pool[0]
        self._turn = r + 1
        return r

    # ------------------------------------------------------------------ health

    def replica_died(self, i: int, now_ns: int) -> None:
        """Replica `i`'s process died (the cluster tells, from its one death hook)."""
        self.connections[i] = 0  # every connection went with the process
        self._changed(i, now_ns)

    def _changed(self, i: int, now_ns: int) -> None:
        server = self.servers[i]
        if not self.health_check_ns:
            self.in_pool[i] = server.up
            return
        server.clock.at(now_ns + self.health_check_ns, self._checked, i, ARRIVAL)

    def _checked(self, i: int) -> None:
        # A health check sees the state the replica is in when it looks.
        self.in_pool[i] = self.servers[i].up
