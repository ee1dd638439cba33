"""The cluster as clients see it: the network, the apiserver replicas, their objects and open watches.

`Cluster.send` takes a request as a client would write it, sends it over the client's connection
to a replica (simapf.workload.balancer), works out what it costs from the inventory (how many
objects a LIST returns, where it is served from, whether it streams), and hands it to that
simulated apiserver. It also plays the parts of the apiserver that live outside APF and the
resource model: watches that stay open on their replica and receive events, 410 Gone for a watch
that asks for history the replica's watch cache does not have, and 429 while a watch cache refills.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Final, NamedTuple

from simapf.apf.types import NS_PER_S, ListOptions, RequestAttributes
from simapf.engine.clock import ARRIVAL
from simapf.engine.environment import RunClock
from simapf.server.cache_index import (NODE_VALUED, NODES, list_index, node_name, node_objects, pinned_name,
                                       watch_trigger)  # fmt: skip
from simapf.server.costs import encode_cost, watch_buffer_copies
from simapf.server.network import Link
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath, plan_request
from simapf.server.runtime import FAILED, OK, REJECTED, UNAVAILABLE, ServerRequest, SimulatedAPIServer
from simapf.workload.balancer import Connection, LoadBalancer
from simapf.workload.inventory import STATS_REFRESH_NS, Inventory, ResourceObjects

GONE: Final = "gone"  # 410: the watch's resourceVersion is older than the watch cache's history
WATCH_HISTORY_NS: Final = 75 * NS_PER_S  # the watch cache keeps at least 75 s of events (eventFreshDuration)
COST_CACHE_LIMIT: Final = 20_000  # distinct request classes whose cost the cluster keeps

ENCODINGS = {e.value: e for e in Encoding}
Done = Callable[[ServerRequest], None]
# A resourceVersion as a client holds it: when it was current, and the replica and process
# incarnation that served it (a watch from it can resume only where that history is kept).
Position = tuple[int, int, int]


class Selected(NamedTuple):
    """The most objects a field selector can match, pinning an indexed field or an object's name:
    `by` "index" (a watch-cache index holds them) or "key" (the object's own key)."""

    objects: int
    bytes: float
    by: str


class OpenWatch:
    """A watch a replica is sending events to."""

    __slots__ = ("resource", "namespace", "share", "on_broken", "token", "open", "replica", "incarnation",
                 "copies", "held", "trigger", "by_node")

    def __init__(self, resource: str, namespace: str, share: float, on_broken: Callable[[str], None],
                 replica: int, incarnation: int, copies: int) -> None:  # fmt: skip
        self.resource = resource
        self.namespace = namespace
        self.share = share  # the fraction of the resource's events it receives (selectors)
        self.on_broken = on_broken
        self.token: tuple[str, str, str, str] | None = None  # its entry in the watch tracker
        self.open = True
        self.replica = replica  # the replica serving it, and its process incarnation
        self.incarnation = incarnation
        self.copies = copies  # encode buffers it keeps (simapf.server.costs.watch_buffer_copies)
        self.held = 0.0  # bytes it holds on its replica: its goroutines and structures, its buffers
        # The value the cacher dispatches its events by (a trigger's, or the name it is scoped to),
        # and whether that value is a node's name; None: it is handed every event and filters them.
        self.trigger: str | None = None
        self.by_node = False


class Death:
    """One replica's process died: when, why, and what it held."""

    __slots__ = ("replica", "at_s", "reason", "rss_bytes", "demand_bytes", "connections", "open_watches")

    def __init__(self, replica: int, at_s: float, reason: str, rss_bytes: float | None, demand_bytes: float | None,
                 connections: int, open_watches: int) -> None:  # fmt: skip
        self.replica = replica
        self.at_s = at_s
        self.reason = reason
        self.rss_bytes = rss_bytes  # an OOM kill: what the process had then (at most the limit)
        self.demand_bytes = demand_bytes  # an OOM kill: what the allocation that did not fit asked for
        self.connections = connections  # client connections it held: they move to the others
        self.open_watches = open_watches  # watches it served: they break, and their informers relist

    def as_dict(self) -> dict:
        return {"replica": self.replica, "at_s": self.at_s, "reason": self.reason, "rss_bytes": self.rss_bytes,
                "connections": self.connections, "open_watches": self.open_watches}  # fmt: skip


class Cluster:
    def __init__(self, clock: RunClock, servers: list[SimulatedAPIServer], inventory: Inventory,
                 balancer: LoadBalancer | None = None) -> None:  # fmt: skip
        self.clock = clock  # the time and its alarms
        self.servers = servers
        self.balancer = balancer if balancer is not None else LoadBalancer(servers)
        self.inventory = inventory
        self.network_up = True
        self.network_epoch = 0  # bumped when the network fails: responses in flight are lost
        # Outages that force (or forbid) a relist: (start ns, end ns, "always"|"never").
        self.forced_relists: list[tuple[int, int, str]] = []
        # Open watches per replica and resource. Dicts (insertion-ordered), not sets: sets of
        # objects iterate in address order, which would make event fan-out sums and break order
        # vary per process.
        self._watches: list[dict[str, dict[OpenWatch, None]]] = [{} for _ in servers]
        self.watch_events_total = 0.0
        self._costs: dict[tuple, RequestCost | None] = {}  # per request class and state: see _cost
        self._last_stats_ns = 0
        # Each sees every request the apiserver answered, in the order they were added.
        self.observers: list[Done] = []
        # The one log of the replicas' deaths, and who hears of each (after the cluster's own
        # bookkeeping: connections closed, watches broken).
        self.deaths: list[Death] = []
        self._death_observers: list[Callable[[Death], None]] = []
        for i, server in enumerate(servers):
            server.on_death(partial(self._server_died, i))
        self.params = servers[0].params
        self._event_cpu = self.params.request_cpu.watch_event_core_s_per_object
        self._filter_cpu = self.params.request_cpu.watch_filter_core_s_per_event
        self._watch_bytes = self.params.request_memory.watch_held_bytes
        self._scope_partitioned = self.params.watch_cache.watchers_partitioned_by_scope
        self._events_by_key = self.params.watch_cache.initial_events_by_key
        self._event_turns: dict[str, int] = {}  # writes so far per node-valued resource (their nodes)

    # ------------------------------------------------------------------ requests

    def send(
        self,
        attrs: RequestAttributes,
        encoding: str,
        on_done: Done,
        *,
        selectivity: float = 1.0,
        page: int = -1,
        object_bytes: float = 0.0,
        tag: object = None,
        since: Position | None = None,
        link: Link | None = None,
        conn: Connection | None = None,
    ) -> None:
        """Send a request now; `on_done(request)` gets it back with `outcome` set.

        `page` >= 0 is the page index of a paged LIST (its continue token stands for it);
        `object_bytes` is the size of a written object; `since`: for a WATCH from a
        resourceVersion, where that resourceVersion came from: if the replica cannot resume
        from it, it answers 410 Gone once APF admits the request; `link`: the way to the client
        (simapf.server.network), which its response takes time on; `conn`: the client's
        connection (none: the first replica).
        """
        if not self.network_up:
            self._refuse(attrs, on_done, tag)
            return
        now = self.clock.now
        if now - self._last_stats_ns >= STATS_REFRESH_NS:
            self._last_stats_ns = now
            self.inventory.refresh_stats()
        server = self.balancer.server_for(conn) if conn is not None else self.servers[0]
        up = server.up
        gone = up and since is not None and not self._resumable(since, server)
        epoch = self.network_epoch
        done = lambda rec: self._deliver(rec, epoch, on_done, gone)  # noqa: E731
        if not up:
            # No process listens: connection refused. Checked before the cost, because a dead
            # process's watch caches are empty too and must not turn this into a 429.
            server.refuse(attrs, done, tag, UNAVAILABLE, "down")
            return
        cost = self._cost(server, attrs, encoding, selectivity, page, object_bytes)
        if cost is None:
            # The watch cache is refilling and cannot send this to etcd: 429 before APF.
            server.refuse(attrs, done, tag, REJECTED, "cache-not-ready", retry_after_s=1)
            return
        server.submit(attrs, cost, done, tag=tag, link=link)
        if conn is not None and self.balancer.goaway_chance and attrs.verb != "watch":
            self.balancer.goaway(conn)

    def _deliver(self, rec: ServerRequest, epoch: int, on_done: Done, gone: bool = False) -> None:
        if gone and rec.outcome == OK:
            rec.outcome = GONE
            rec.reason = "too-old-resource-version"
        for observe in self.observers:
            observe(rec)
        # A response the network lost on the way back is an error to the client.
        if epoch != self.network_epoch:
            rec.outcome = FAILED
            rec.reason = "network"
        on_done(rec)

    def _refuse(self, attrs: RequestAttributes, on_done: Done, tag: object) -> None:
        rec = ServerRequest(attrs, None, 0, on_done, self.clock.now, tag)
        rec.outcome = UNAVAILABLE
        rec.reason = "network"
        rec.done_ns = self.clock.now
        self.clock.at(self.clock.now, on_done, rec, ARRIVAL)

    def _cost(self, server: SimulatedAPIServer, attrs: RequestAttributes, encoding: str, selectivity: float,
              page: int, object_bytes: float) -> RequestCost | None:  # fmt: skip
        if not attrs.is_resource_request:
            # Discovery documents: built in memory, encoded, no storage read.
            n = max(1, int(object_bytes // 2000))
            return RequestCost(ServingPath.CACHE, ResponseShape(object_bytes, n, Encoding.JSON))
        objs = self.inventory.get(self._key(attrs))
        cached = objs.spec.watch_cache
        ready = server.watch_cache_ready(objs.key) if cached else True
        # A request's cost follows from its class and the objects as they are now: computed once
        # per class and state (the objects' version), not per request.
        key = (attrs.verb, attrs.namespace, attrs.list_options, encoding, selectivity, page, object_bytes,
               objs, objs.version, ready, self._nodes())  # fmt: skip
        cost = self._costs.get(key)
        if cost is None:
            if len(self._costs) >= COST_CACHE_LIMIT:
                self._costs.clear()
            cost = self._costs[key] = self._class_cost(objs, cached, ready, attrs, encoding, selectivity, page,
                                                       object_bytes)  # fmt: skip
        return cost

    def _class_cost(self, objs: ResourceObjects, cached: bool, ready: bool, attrs: RequestAttributes,
                    encoding: str, selectivity: float, page: int, object_bytes: float) -> RequestCost | None:  # fmt: skip
        enc = ENCODINGS[encoding]
        verb = attrs.verb
        gates = self.params.features
        if verb == "list" or verb == "watch":
            opts = attrs.list_options
            replays = verb == "list" or _replays_state(opts)
            cap = self._selectable(objs, attrs, selectivity) if replays and opts.field_selector else None
            shape = ResponseShape(0.0, 0, enc)
            if replays:
                shape = self._list_shape(objs, attrs, enc, selectivity, page, cap)
            cost = plan_request(verb, opts, shape, watch_cache_enabled=cached, cache_ready=ready, gates=gates)
            if cost is not None and cap is not None and self._reads_only(cap, verb, cost.path):
                shape = self._list_shape(objs, attrs, enc, selectivity, page, cap, narrowed=True)
                cost = RequestCost(cost.path, shape, cost.streaming, cost.range_streamed)
            return cost
        if verb == "get":
            size = objs.mean_size(attrs.namespace)
            rv = attrs.list_options.resource_version
            path = ServingPath.CACHE if cached and ready and rv not in (None, "") else ServingPath.ETCD
            return RequestCost(path, _shape(objs, size, 1, enc))
        # Writes: a transaction in etcd, the object decoded and encoded back.
        size = object_bytes or objs.mean_size(attrs.namespace)
        return RequestCost(ServingPath.ETCD, _shape(objs, size, 1, enc))

    def _key(self, attrs: RequestAttributes) -> str:
        return f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource

    def _list_shape(self, objs: ResourceObjects, attrs: RequestAttributes, enc: Encoding, selectivity: float,
                    page: int, cap: Selected | None = None, narrowed: bool = False) -> ResponseShape:  # fmt: skip
        """What a LIST (or a watch's initial events) returns and reads. `cap`: the most objects its
        field selector can match (`_selectable`); `narrowed`: the server reads only those."""
        n_all, b_all = objs.in_namespace(attrs.namespace)
        opts = attrs.list_options
        filtered = bool(opts.label_selector or opts.field_selector)
        share = selectivity if filtered else 1.0
        n = int(round(n_all * share))
        b = b_all * share
        if cap is not None:
            if n > cap.objects:
                n, b = cap.objects, cap.bytes
            if narrowed:
                n_all, b_all = cap.objects, cap.bytes
                share = n / n_all if n_all else 0.0
        limit = opts.limit
        if page >= 0 and limit > 0 and attrs.verb == "list" and opts.resource_version != "0":
            first = page * limit
            n_page = max(0, min(limit, n - first))
            b_page = b * n_page / n if n else 0.0
            # A selector that matches nothing (share 0) reads everything for its one, empty page.
            read = n_page if not filtered else (int(min(n_all, round(n_page / share))) if share > 0 else n_all)
            b_read = b_all * read / n_all if n_all else 0.0
            return _shape(objs, b_page, n_page, enc, objects_read=read, bytes_read=b_read)
        # With selectors the server reads (and decodes) every object to filter them, whatever matches.
        if filtered:
            return _shape(objs, b, n, enc, objects_read=n_all, bytes_read=b_all)
        return _shape(objs, b, n, enc)

    def pages(self, attrs: RequestAttributes, selectivity: float) -> int:
        """How many pages a paged LIST of `attrs` has now."""
        objs = self.inventory.get(self._key(attrs))
        n_all, _ = objs.in_namespace(attrs.namespace)
        opts = attrs.list_options
        n = n_all * (selectivity if (opts.label_selector or opts.field_selector) else 1.0)
        cap = self._selectable(objs, attrs, selectivity) if opts.field_selector else None
        if cap is not None:
            n = min(n, cap.objects)
        limit = opts.limit
        return max(1, -(-int(round(n)) // limit)) if limit > 0 else 1

    # ------------------------------------------------------------------ indexes

    def _nodes(self) -> int | None:
        """The cluster's Nodes: its core `nodes` resource's objects; None if it has none."""
        objs = self.inventory.by_key.get(NODES)
        return objs.total()[0] if objs is not None else None

    def _selectable(self, objs: ResourceObjects, attrs: RequestAttributes, selectivity: float) -> Selected | None:
        """The most objects `attrs`' field selector can match, where it pins an object's name
        (one key, when the key can be built: a cluster-scoped resource or a namespaced request)
        or a field a watch-cache index covers (that value's objects, cluster-wide); None otherwise."""
        selector = attrs.list_options.field_selector
        name = pinned_name(selector)
        if name and (not objs.spec.namespaced or attrs.namespace):
            n, b = objs.in_namespace(attrs.namespace)
            exists = node_objects(n, name, n) if objs.key == NODES else min(n, 1)
            return Selected(exists, b / n if exists else 0.0, "key")
        found = list_index(objs.key, selector)
        if found is None:
            return None
        row, value = found
        n, b = objs.total()
        nodes = self._nodes() if row.node_valued else None
        if nodes is None:
            # No nodes to deal the objects to: the index holds what the selector matches.
            return Selected(int(round(n * selectivity)), b * selectivity, "index")
        k = node_objects(n, value, nodes)
        return Selected(k, b * k / n if n else 0.0, "index")

    def _reads_only(self, cap: Selected, verb: str, path: ServingPath) -> bool:
        """Whether the server reads only the objects `cap` counts: an object's key, for a LIST
        on any path and for a watch's initial events from etcd or (from 1.31) the watch cache;
        an index, for a LIST from the watch cache's current state."""
        if cap.by == "key":
            return verb == "list" or path is ServingPath.ETCD or self._events_by_key
        return verb == "list" and path is ServingPath.CACHE

    def _event_node(self, resource: str, nodes: int | None) -> str | None:
        """The node whose object a write of `resource` changed: writes are dealt to the nodes in
        turn, as objects are. None where no trigger dispatches by node, or there are no nodes."""
        if not nodes or resource not in NODE_VALUED:
            return None
        turn = self._event_turns.get(resource, 0)
        self._event_turns[resource] = turn + 1
        return node_name(turn, nodes)

    # ------------------------------------------------------------------ watches

    def position(self, rec: ServerRequest) -> Position:
        """The resourceVersion a successful response `rec` gave its client, as a Position."""
        return (self.clock.now, rec.replica, rec.incarnation)

    def _resumable(self, since: Position, server: SimulatedAPIServer) -> bool:
        """Whether `server` can resume a watch from `since` (else it answers 410 Gone). Its
        watch cache keeps events from when its process started, for at least 75 s: the process
        that gave the resourceVersion can resume while it lives; another replica can if its
        cache started no later than the resourceVersion (revisions are etcd's, shared by all)."""
        since_ns, replica, incarnation = since
        if replica == server.replica:
            if incarnation != server.incarnation:
                return False  # a new process: its watch cache starts at etcd's current revision
        elif server.up_since_ns > since_ns:
            return False
        for start, end, policy in self.forced_relists:
            if start <= since_ns <= end:
                return policy == "never"
        return self.clock.now - since_ns <= WATCH_HISTORY_NS

    def open_watch(self, attrs: RequestAttributes, share: float, on_broken: Callable[[str], None],
                   rec: ServerRequest, encoding: str, initial_events: bool = False) -> OpenWatch:  # fmt: skip
        """The watch `rec` (its successful answer) started stays open on the replica that served
        it, holding memory there, until it is closed or broken. If that process has died since
        the answer, the watch is broken at once. `initial_events`: it has just sent every object
        it selects (a WatchList), so its encode buffers are as large as the largest of them."""
        return self._open_watch(attrs, share, on_broken, rec.replica, rec.incarnation, encoding, initial_events)

    def standing_watch(self, attrs: RequestAttributes, share: float, on_broken: Callable[[str], None],
                       conn: Connection, encoding: str) -> OpenWatch:  # fmt: skip
        """A watch opened before the run started (an informer of a cluster in its steady state):
        open, with no request, on the replica its client's connection `conn` reaches."""
        server = self.balancer.server_for(conn)
        return self._open_watch(attrs, share, on_broken, server.replica, server.incarnation, encoding, False)

    def _open_watch(self, attrs: RequestAttributes, share: float, on_broken: Callable[[str], None], replica: int,
                    incarnation: int, encoding: str, initial_events: bool) -> OpenWatch:  # fmt: skip
        server = self.servers[replica]
        copies = watch_buffer_copies(ENCODINGS[encoding])
        w = OpenWatch(self._key(attrs), attrs.namespace, share, on_broken, replica, incarnation, copies)
        trigger = watch_trigger(w.resource, attrs.list_options.field_selector, self._scope_partitioned)
        if trigger is not None:
            w.by_node, w.trigger = trigger
        held = self._watch_bytes
        if initial_events and share > 0.0:
            held += copies * self.inventory.get(w.resource).largest_size(attrs.namespace)
        # Its memory first: holding it may kill the process, and then the watch never opened.
        if not self.network_up or incarnation != server.incarnation or not server.hold(held):
            # Broken after the caller has the watch in hand, never from inside this call.
            w.open = False
            self.clock.at(self.clock.now, on_broken, "server-died" if self.network_up else "network", ARRIVAL)
            return w
        w.held = held
        w.token = server.watch_tracker.register(attrs)
        self._watches[replica].setdefault(w.resource, {})[w] = None
        return w

    def close_watch(self, w: OpenWatch) -> None:
        if not w.open:
            return
        w.open = False
        watches = self._watches[w.replica].get(w.resource)
        if watches is not None:
            watches.pop(w, None)
        self._let_go(w)

    def _let_go(self, w: OpenWatch) -> None:
        """A watch no longer open: the process that serves it, if it still lives, stops counting
        it and frees what it held."""
        w.open = False
        server = self.servers[w.replica]
        if w.incarnation == server.incarnation:
            server.watch_tracker.unregister(w.token)
            server.release(w.held)

    def open_watches(self, replica: int | None = None) -> int:
        """Open watches on one replica, or on all."""
        chosen = self._watches if replica is None else [self._watches[replica]]
        return sum(len(ws) for by_resource in chosen for ws in by_resource.values())

    def break_watches(self, reason: str, replica: int | None = None) -> None:
        """Every open watch (of one replica, or of all) ends with an error (server death,
        network failure). A replica that still lives frees what the watches held."""
        chosen = range(len(self.servers)) if replica is None else [replica]
        broken = []
        for i in chosen:
            for ws in self._watches[i].values():
                for w in ws:
                    self._let_go(w)
                    broken.append(w)
            self._watches[i] = {}
        for w in broken:
            w.on_broken(reason)

    def on_replica_death(self, observer: Callable[[Death], None]) -> None:
        """`observer(death)` hears of every replica death, once the cluster has written it in
        `deaths`, closed the replica's connections and broken its watches."""
        self._death_observers.append(observer)

    def _server_died(self, replica: int, now_ns: int) -> None:
        # The apiserver has failed what it held (its own hook runs first: it registers it when
        # built); the log, the balancer, the watches and then the observers, in this order.
        snap = self.servers[replica].snapshot()
        reason = snap.last_down_reason or "killed"
        oom = reason == "oom"
        death = Death(replica, now_ns / NS_PER_S, reason, snap.rss_at_oom_bytes if oom else None,
                      snap.oom_demand_bytes if oom else None, self.balancer.connections[replica],
                      self.open_watches(replica))  # fmt: skip
        self.deaths.append(death)
        self.balancer.replica_died(replica, now_ns)
        self.break_watches("server-died", replica)
        for observer in self._death_observers:
            observer(death)

    def fan_out(self, resource: str, namespace: str, object_bytes: float, encoding: Encoding) -> None:
        """A write succeeded: its event goes to every watch that selects it, on every replica
        (each has its own watch cache, fed by etcd). A replica encodes the event once (the
        apiserver caches serializations) and writes it to each of its watchers. A watcher's
        encode buffers grow to the event's size if it is the largest it has sent.

        The cacher hands the event to the watchers of its namespace (from 1.27; of every
        namespace before) that no trigger value sends elsewhere, and to those whose trigger value
        is the object's (simapf.server.cache_index): each of the first kind filters it and drops
        what it does not select. A watcher selecting a share of the objects receives that share
        of each event; one dispatched by node receives its node's events whole."""
        per_item, per_byte = encode_cost(self.params, encoding)
        nodes = self._nodes()
        node = self._event_node(resource, nodes)
        for i, by_resource in enumerate(self._watches):
            watches = by_resource.get(resource)
            server = self.servers[i]
            if not watches or not server.up:
                continue
            receivers = 0.0
            dropped = 0.0  # watchers handed the event that filter it out
            grown = 0.0
            for w in watches:
                in_scope = not w.namespace or w.namespace == namespace
                if w.trigger is not None:
                    if not in_scope or (w.by_node and node is not None and w.trigger != node):
                        continue
                    share = min(1.0, w.share * nodes) if w.by_node and node is not None and nodes else w.share
                elif in_scope:
                    share = w.share
                    if share < 1.0:
                        dropped += 1.0 - share
                else:
                    if not self._scope_partitioned:
                        dropped += 1.0
                    continue
                if share > 0.0:
                    receivers += share
                    need = self._watch_bytes + w.copies * object_bytes
                    if need > w.held:
                        grown += need - w.held
                        w.held = need
            if receivers <= 0:
                if dropped > 0 and self._filter_cpu > 0:
                    server.spend_cpu(self._filter_cpu * dropped)
                continue
            self.watch_events_total += receivers
            work = per_item + per_byte * object_bytes + self._event_cpu * receivers
            if dropped > 0:
                work += self._filter_cpu * dropped
            server.spend_cpu(work)
            # After the loop: holding may kill the process, which breaks these watches.
            server.hold(grown)

    # ------------------------------------------------------------------ outages

    def network_down(self, relist: str = "auto", end_ns: int | None = None) -> None:
        """The network fails now (until `network_restored`). `relist` "always"/"never" decides
        for the watches it breaks whether they can resume; "auto" leaves it to the history."""
        if not self.network_up:
            return
        self.network_up = False
        self.network_epoch += 1
        self.balancer.network_failed()
        if relist != "auto":
            self.forced_relists.append((self.clock.now, end_ns if end_ns is not None else self.clock.now, relist))
        self.break_watches("network")

    def network_restored(self) -> None:
        self.network_up = True


def _shape(objs: ResourceObjects, response_bytes: float, objects: int, enc: Encoding,
           objects_read: int | None = None, bytes_read: float | None = None) -> ResponseShape:  # fmt: skip
    """A response of `objs`' resource, with what its objects are like (conversion, decoded and
    compressed sizes); `objects_read` / `bytes_read` where the server reads more."""
    spec = objs.spec
    return ResponseShape(response_bytes, objects, enc, converts=spec.converts,
                         decoded_multiplier=spec.decoded_ratio, gzip_ratio=spec.gzip_ratio,
                         objects_read=objects_read, bytes_read=bytes_read)  # fmt: skip


def _replays_state(opts: ListOptions) -> bool:
    """Whether a WATCH starts by sending the current state (sendInitialEvents, or the legacy
    synthetic ADDED events of a watch from resourceVersion unset or 0)."""
    if opts.send_initial_events is not None:
        return opts.send_initial_events
    return opts.resource_version in (None, "", "0")
