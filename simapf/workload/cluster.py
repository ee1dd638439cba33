"""The cluster as clients see it: the network, one apiserver, its objects and its open watches.

`Cluster.send` takes a request as a client would write it, works out what it costs from the
inventory (how many objects a LIST returns, where it is served from, whether it streams), and
hands it to the simulated apiserver. It also plays the parts of the apiserver that live outside
APF and the resource model: watches that stay open and receive events, 410 Gone for a watch
that asks for history the watch cache no longer has, and 429 while a watch cache refills.
"""

from __future__ import annotations

from typing import Callable

import simpy

from simapf.apf.clock import ARRIVAL
from simapf.apf.types import NS_PER_S, ListOptions, RequestAttributes
from simapf.server.costs import encode_cost
from simapf.server.network import Link
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath, plan_request
from simapf.server.runtime import FAILED, OK, REJECTED, UNAVAILABLE, ServerRequest, SimulatedAPIServer
from simapf.workload.inventory import STATS_REFRESH_NS, Inventory, ResourceObjects

GONE = "gone"  # 410: the watch's resourceVersion is older than the watch cache's history
WATCH_HISTORY_NS = 75 * NS_PER_S  # the watch cache keeps at least 75 s of events (eventFreshDuration)
PLAN_CACHE_LIMIT = 20_000  # distinct request costs the resource model may keep planned

ENCODINGS = {e.value: e for e in Encoding}
Done = Callable[[ServerRequest], None]


class OpenWatch:
    """A watch the server is sending events to."""

    __slots__ = ("resource", "namespace", "share", "on_broken", "token", "open")

    def __init__(self, resource: str, namespace: str, share: float, on_broken: Callable[[str], None]) -> None:
        self.resource = resource
        self.namespace = namespace
        self.share = share  # the fraction of the resource's events it receives (selectors)
        self.on_broken = on_broken
        self.token = None
        self.open = True


class Cluster:
    def __init__(self, env: simpy.Environment, server: SimulatedAPIServer, inventory: Inventory) -> None:
        self.env = env
        self.server = server
        self.inventory = inventory
        self.network_up = True
        self.network_epoch = 0  # bumped when the network fails: responses in flight are lost
        # Outages that force (or forbid) a relist: (start ns, end ns, "always"|"never").
        self.forced_relists: list[tuple[int, int, str]] = []
        # Open watches per resource. Dicts (insertion-ordered), not sets: sets of objects iterate
        # in address order, which would make event fan-out sums and break order vary per process.
        self._watches: dict[str, dict[OpenWatch, None]] = {}
        self.watch_events_total = 0.0
        self._last_stats_ns = 0
        self.observer: Done | None = None  # sees every request the apiserver answered
        server.model.process.on_oom.append(self._server_died)
        self.params = server.model.params
        self._event_cpu = server.model.params.request_cpu.watch_event_core_s_per_object

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
        gone: bool = False,
        link: Link | None = None,
    ) -> None:
        """Send a request now; `on_done(request)` gets it back with `outcome` set.

        `page` >= 0 is the page index of a paged LIST (its continue token stands for it);
        `object_bytes` is the size of a written object; `gone`: a WATCH from a resourceVersion
        the watch cache no longer has, which the server answers with 410 once APF admits it;
        `link`: the way to the client (simapf.server.network), which its response takes time on.
        """
        if not self.network_up:
            self._refuse(attrs, on_done, tag)
            return
        if self.env._now - self._last_stats_ns >= STATS_REFRESH_NS:
            self._last_stats_ns = self.env._now
            self.inventory.refresh_stats()
        epoch = self.network_epoch
        done = lambda rec: self._deliver(rec, epoch, on_done, gone)  # noqa: E731
        if not self.server.model.up:
            # No process listens: connection refused. Checked before the cost, because a dead
            # process's watch caches are empty too and must not turn this into a 429.
            self.server._end(ServerRequest(attrs, None, 0, done, self.env._now, tag), UNAVAILABLE, "down")
            return
        cost = self._cost(attrs, encoding, selectivity, page, object_bytes)
        if cost is None:
            # The watch cache is refilling and cannot send this to etcd: 429 before APF.
            rec = ServerRequest(attrs, None, 0, done, self.env._now, tag)
            rec.retry_after_s = 1
            self.server._end(rec, REJECTED, "cache-not-ready")
            return
        self.server.submit(attrs, cost, done, tag=tag, link=link)

    def _deliver(self, rec: ServerRequest, epoch: int, on_done: Done, gone: bool = False) -> None:
        if gone and rec.outcome == OK:
            rec.outcome = GONE
            rec.reason = "too-old-resource-version"
        if self.observer is not None:
            self.observer(rec)
        # A response the network lost on the way back is an error to the client.
        if epoch != self.network_epoch:
            rec.outcome = FAILED
            rec.reason = "network"
        on_done(rec)

    def _refuse(self, attrs: RequestAttributes, on_done: Done, tag: object) -> None:
        rec = ServerRequest(attrs, None, 0, on_done, self.env._now, tag)
        rec.outcome = UNAVAILABLE
        rec.reason = "network"
        rec.done_ns = self.env._now
        self.server.scheduler.call_at(self.env._now, ARRIVAL, 0, on_done, rec)

    def _cost(self, attrs: RequestAttributes, encoding: str, selectivity: float, page: int,
              object_bytes: float) -> RequestCost | None:  # fmt: skip
        model = self.server.model
        if len(model._plans) > PLAN_CACHE_LIMIT:
            model._plans.clear()
        enc = ENCODINGS[encoding]
        verb = attrs.verb
        if not attrs.is_resource_request:
            # Discovery documents: built in memory, encoded, no storage read.
            n = max(1, int(object_bytes // 2000))
            return RequestCost(ServingPath.CACHE, ResponseShape(object_bytes, n, Encoding.JSON))
        objs = self.inventory.get(self._key(attrs))
        cached = objs.spec.watch_cache
        ready = model.watch_cache_ready(objs.key) if cached else True
        gates = self.params.features
        if verb == "list" or verb == "watch":
            opts = attrs.list_options
            shape = self._list_shape(objs, attrs, enc, selectivity, page)
            if verb == "watch" and not _replays_state(opts):
                shape = ResponseShape(0.0, 0, enc)
            return plan_request(verb, opts, shape, watch_cache_enabled=cached, cache_ready=ready, gates=gates)
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

    def _list_shape(self, objs: ResourceObjects, attrs: RequestAttributes, enc: Encoding,
                    selectivity: float, page: int) -> ResponseShape:  # fmt: skip
        n_all, b_all = objs.in_namespace(attrs.namespace)
        opts = attrs.list_options
        filtered = bool(opts.label_selector or opts.field_selector)
        share = selectivity if filtered else 1.0
        n = int(round(n_all * share))
        b = b_all * share
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
        limit = opts.limit
        return max(1, -(-int(round(n)) // limit)) if limit > 0 else 1

    # ------------------------------------------------------------------ watches

    def watch_resumable(self, since_ns: int, incarnation: int) -> bool:
        """Whether a watch from a resourceVersion seen at `since_ns`, on the server incarnation
        `incarnation`, can resume (else the server answers 410 Gone)."""
        if incarnation != self.server.incarnation:
            return False  # a new process: its watch cache starts at etcd's current revision
        for start, end, policy in self.forced_relists:
            if start <= since_ns <= end:
                return policy == "never"
        return self.env._now - since_ns <= WATCH_HISTORY_NS

    def open_watch(self, attrs: RequestAttributes, share: float, on_broken: Callable[[str], None]) -> OpenWatch:
        w = OpenWatch(self._key(attrs), attrs.namespace, share, on_broken)
        w.token = self.server.watch_tracker.register(attrs)
        self._watches.setdefault(w.resource, {})[w] = None
        return w

    def close_watch(self, w: OpenWatch) -> None:
        if not w.open:
            return
        w.open = False
        watches = self._watches.get(w.resource)
        if watches is not None:
            watches.pop(w, None)
        try:
            self.server.watch_tracker.unregister(w.token)
        except KeyError:
            pass  # the tracker was replaced with the process that counted it

    def open_watches(self) -> int:
        return sum(len(ws) for ws in self._watches.values())

    def watchers_by_resource(self) -> dict[str, int]:
        return {k: len(ws) for k, ws in self._watches.items()}

    def break_watches(self, reason: str) -> None:
        """Every open watch ends with an error (server death, network failure)."""
        broken = [w for ws in self._watches.values() for w in ws]
        self._watches.clear()
        for w in broken:
            w.open = False
        for w in broken:
            w.on_broken(reason)

    def _server_died(self, _now_ns: int) -> None:
        self.break_watches("server-died")

    def fan_out(self, resource: str, namespace: str, object_bytes: float, encoding: Encoding) -> None:
        """A write succeeded: its event goes to every watch that selects it. The event is
        encoded once (the apiserver caches serializations) and written to each watcher."""
        watches = self._watches.get(resource)
        if not watches or not self.server.model.up:
            return
        receivers = 0.0
        for w in watches:
            if not w.namespace or w.namespace == namespace:
                receivers += w.share
        if receivers <= 0:
            return
        self.watch_events_total += receivers
        per_item, per_byte = encode_cost(self.params, encoding)
        work = per_item + per_byte * object_bytes + self._event_cpu * receivers
        self.server.model.cpu.add(work, _nothing)

    # ------------------------------------------------------------------ outages

    def network_down(self, relist: str = "auto", end_ns: int | None = None) -> None:
        """The network fails now (until `network_restored`). `relist` "always"/"never" decides
        for the watches it breaks whether they can resume; "auto" leaves it to the history."""
        if not self.network_up:
            return
        self.network_up = False
        self.network_epoch += 1
        if relist != "auto":
            self.forced_relists.append((self.env._now, end_ns if end_ns is not None else self.env._now, relist))
        self.break_watches("network")

    def network_restored(self) -> None:
        self.network_up = True


def _shape(objs: ResourceObjects, response_bytes: float, objects: int, enc: Encoding,
           **read: float) -> ResponseShape:  # fmt: skip
    """A response of `objs`' resource, with what its objects are like (conversion, decoded and
    compressed sizes); `read`: objects_read / bytes_read where the server reads more."""
    spec = objs.spec
    return ResponseShape(response_bytes, objects, enc, converts=spec.converts,
                         decoded_multiplier=spec.decoded_ratio, gzip_ratio=spec.gzip_ratio, **read)  # fmt: skip


def _replays_state(opts: ListOptions) -> bool:
    """Whether a WATCH starts by sending the current state (sendInitialEvents, or the legacy
    synthetic ADDED events of a watch from resourceVersion unset or 0)."""
    if opts.send_initial_events is not None:
        return opts.send_initial_events
    return opts.resource_version in (None, "", "0")


def _nothing(_arg: object) -> None:
    pass
