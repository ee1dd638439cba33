"""An informer: LIST (or WatchList) then WATCH, with client-go's relist, backoff and resume."""

from __future__ import annotations

from typing import Any, cast

from simapf.apf.types import NS_PER_S, ListOptions, RequestAttributes
from simapf.engine.clock import ARRIVAL
from simapf.scenario.schema import InformerClient
from simapf.server.runtime import OK, ServerRequest
from simapf.workload.clientgo import Backoff, ClientStats
from simapf.workload.cluster import GONE, OpenWatch, Position
from simapf.workload.instance import Group, Instance, stream, with_options


class InformerInstance(Instance):
    """client-go's reflector: list, then watch from the list's resourceVersion.

    A watch that ends normally (timeout) is re-established from the last resourceVersion. A watch
    that cannot start because the server is unreachable or busy (connection refused, 429) is
    retried with backoff, still from the last resourceVersion. A 410 Gone, or a failed list,
    ends the ListAndWatch: after a backoff the informer lists again (a relist).
    """

    watch = None  # its open watch; none before it starts (a ramp may stop it first)
    watching = False  # synced and watching; not before it starts

    @staticmethod
    def summary_fields(stats: ClientStats) -> dict[str, Any]:
        return {"lists": stats.lists, "relists": stats.relists, "watch_breaks": stats.watch_breaks, "gone_410": stats.gone}

    @staticmethod
    def scraped(group: Group) -> tuple[list[tuple[str, float]], bool]:
        # Caught up: every running instance has synced and watches.
        watching = sum(1 for x in cast("list[InformerInstance]", group.instances) if x.active and x.watching)
        series: list[tuple[str, float]] = [
            ("simapf_informers_watching", watching), ("simapf_informer_lists_total", group.stats.lists)]
        return series, watching >= group.active_count

    def start(self) -> None:
        spec: InformerClient = self.group.spec
        self.spec = spec
        self.namespace = spec.namespace.format(i=self.index) if spec.namespace else spec.namespace
        self.backoff = Backoff(spec.backoff, stream(self.ctx.seed, spec.name, self.index, "backoff"))
        self.timeouts = stream(self.ctx.seed, spec.name, self.index, "watch-timeout")
        fs = spec.field_selector.format(i=self.index)
        self.filtered = bool(spec.label_selector or fs)
        self.share = spec.selectivity if self.filtered else 1.0
        self.field_selector = fs
        self.synced = False  # listed, and a watch is open or being re-opened
        self.watching = False
        self.rv: Position = (0, 0, 0)  # the resourceVersion it holds: when it was current, and where
        self.has_listed = False
        self.watch = None
        if spec.synced_at_run_start and self.ctx.clock.now == 0:
            self._already_watching()
        else:
            self._list_and_watch()

    def _already_watching(self) -> None:
        """Listed before the run: its watch is open at the start, opened at a random moment of
        its time-out (so the informers' re-watches are spread as a steady state spreads them)."""
        spec = self.spec
        attrs = self.attrs("watch", spec.resource, self.namespace,
                           self._opts(resource_version="rv", send_initial_events=None))  # fmt: skip
        self.watch = watch = self.ctx.cluster.standing_watch(attrs, self.share, self._broken, self.requester.conn,
                                                             spec.encoding)  # fmt: skip
        self.has_listed = True
        self.rv = (self.ctx.clock.now, watch.replica, watch.incarnation)
        self.synced = True
        if watch.open:
            self._watching(watch, elapsed=self.timeouts.random())

    def stop(self) -> None:
        super().stop()
        if self.watch is not None:
            self.ctx.cluster.close_watch(self.watch)
            self.watch = None

    # ---------------------------------------------------------------- listing

    def _opts(self, **kw) -> ListOptions:
        return ListOptions(label_selector=self.spec.label_selector, field_selector=self.field_selector, **kw)

    def _list_mode(self) -> str:
        mode = self.spec.list.mode
        if mode == "auto":
            if self.ctx.watch_list_client and self.ctx.server_watch_list:
                return "watchlist"
            # client-go's relistResourceVersion: "0" before the first successful list, then the
            # last resourceVersion it saw, with paging switched off ("to force listing from
            # watch cache"); a watch's 410 does not make it forget that resourceVersion.
            return "rv0" if not self.has_listed else "last_rv"
        return mode

    def _list_and_watch(self, _=None) -> None:
        if not self.active:
            return
        self.synced = False
        stats = self.group.stats
        stats.lists += 1
        if self.has_listed:
            stats.relists += 1
        mode = self._list_mode()
        spec = self.spec
        if mode == "watchlist":
            opts = self._opts(resource_version="", resource_version_match="NotOlderThan", send_initial_events=True)
            attrs = self.attrs("watch", spec.resource, self.namespace, opts)
            self.requester.do(attrs, spec.encoding, lambda rec: self._watch_list_done(rec, attrs),
                              selectivity=spec.selectivity, on_arrived=lambda rec: self._stream_arrived(rec, attrs))  # fmt: skip
            return
        if mode == "rv0":
            opts = self._opts(resource_version="0", limit=spec.list.page_size)
        elif mode == "last_rv":
            opts = self._opts(resource_version="rv")  # not older than the informer's; no limit
        elif mode == "consistent":
            opts = self._opts()
        else:  # paged
            opts = self._opts(limit=spec.list.page_size)
        attrs = self.attrs("list", spec.resource, self.namespace, opts)
        self._list_page(attrs, 0)

    def _list_page(self, attrs: RequestAttributes, page: int) -> None:
        spec = self.spec
        paged = attrs.list_options.limit > 0 and attrs.list_options.resource_version != "0"
        if page > 0:
            o = attrs.list_options
            attrs = with_options(attrs, ListOptions(limit=o.limit, continue_token=f"page-{page}",
                                                     label_selector=o.label_selector, field_selector=o.field_selector))  # fmt: skip

        def answered(rec: ServerRequest) -> None:
            if not self.active:
                return
            if rec.outcome != OK:
                self._relist_later()
            elif paged and page + 1 < self.ctx.cluster.pages(attrs, spec.selectivity):
                self._list_page(attrs, page + 1)
            else:
                self._listed(rec)

        self.requester.do(attrs, spec.encoding, answered, selectivity=spec.selectivity, page=page if paged else -1)

    def _listed(self, rec: ServerRequest) -> None:
        self.has_listed = True
        self.rv = self.ctx.cluster.position(rec)
        self.synced = True
        self._start_watch()

    def _stream_arrived(self, rec: ServerRequest, attrs: RequestAttributes) -> None:
        """A WatchList's initial events are out: its stream goes on as the watch, which the
        server holds from now on, while the client may still be decoding them."""
        if self.active:
            self.watch = self.ctx.cluster.open_watch(attrs, self.share, self._broken, rec, self.spec.encoding,
                                                     initial_events=True)  # fmt: skip

    def _watch_list_done(self, rec: ServerRequest, attrs: RequestAttributes) -> None:
        if not self.active:
            return
        if rec.outcome != OK:
            self._relist_later()
            return
        self.has_listed = True
        self.rv = self.ctx.cluster.position(rec)
        self.synced = True
        if self.watch is not None and not self.watching:
            self._watching(self.watch)  # its stream, still open: synced, it watches on (else it broke and re-watched)

    def _relist_later(self) -> None:
        self.synced = False
        clock = self.ctx.clock
        clock.at(clock.now + self.backoff.next_ns(clock.now), self._list_and_watch, None, ARRIVAL)

    # ---------------------------------------------------------------- watching

    def _start_watch(self, _=None) -> None:
        if not self.active:
            return
        spec = self.spec
        attrs = self.attrs("watch", spec.resource, self.namespace,
                           self._opts(resource_version="rv", send_initial_events=None))  # fmt: skip
        self.requester.do(attrs, spec.encoding, lambda rec: self._watch_answer(rec, attrs),
                          selectivity=spec.selectivity, since=self.rv)  # fmt: skip

    def _watch_answer(self, rec: ServerRequest, attrs: RequestAttributes) -> None:
        if not self.active:
            return
        if rec.outcome == OK:
            self._opened(attrs, rec)
        elif rec.outcome == GONE:
            # 410: the replica's watch cache does not reach back to the resourceVersion: relist.
            self.group.stats.gone += 1
            self._relist_later()
        else:
            # Connection refused, 429s past the retries, the process died: back off, re-watch.
            clock = self.ctx.clock
            clock.at(clock.now + self.backoff.next_ns(clock.now), self._start_watch, None, ARRIVAL)

    def _opened(self, attrs: RequestAttributes, rec: ServerRequest) -> None:
        self.watch = watch = self.ctx.cluster.open_watch(attrs, self.share, self._broken, rec, self.spec.encoding)
        self._watching(watch)

    def _watching(self, watch: OpenWatch, elapsed: float = 0.0) -> None:
        """`watch` is open, since a share `elapsed` of its time-out."""
        self.watching = True
        timeout_ns = int(self.spec.watch_timeout_s * NS_PER_S * (1 + self.timeouts.random()) * (1 - elapsed))
        self.ctx.clock.at(self.ctx.clock.now + timeout_ns, lambda _: self._timed_out(watch), None, ARRIVAL)

    def _timed_out(self, watch: OpenWatch) -> None:
        if not self.active or watch is not self.watch or not watch.open:
            return
        self.ctx.cluster.close_watch(watch)
        self.watch = None
        self.watching = False
        # Bookmarks kept the resourceVersion current, on the replica that served the watch.
        self.rv = (self.ctx.clock.now, watch.replica, watch.incarnation)
        self._start_watch()

    def _broken(self, _reason: str) -> None:
        if not self.active:
            return
        self.group.stats.watch_breaks += 1
        watch = self.watch
        self.watch = None
        self.watching = False
        # The resourceVersion was current until now, but it still belongs to the process that
        # served it: that process's successor answers 410; another replica whose watch cache
        # started earlier can resume from it.
        if watch is not None:
            self.rv = (self.ctx.clock.now, watch.replica, watch.incarnation)
        # client-go's watch loop re-watches at once when a stream closes; only a refused
        # attempt (handled in _watch_answer) backs off.
        self._start_watch()
