"""The clients of a scenario: open-loop, closed-loop, informers, writers, kubectl discovery.

A scenario client is a group of `count` instances, each an actor of its own
(`simapf.workload.instance`); an informer's list and watch are `simapf.workload.informer`.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from typing import Any, Callable

import numpy as np

from simapf.apf.types import NS_PER_S, ListOptions, RequestAttributes
from simapf.engine.clock import ARRIVAL
from simapf.scenario.schema import Backoff as BackoffSpec
from simapf.scenario.schema import DiscoveryClient, MutatorClient, OpenLoopClient, RequestTemplate
from simapf.server.network import Link
from simapf.server.paths import Encoding
from simapf.server.runtime import FAILED, OK, ServerRequest
from simapf.workload.clientgo import Backoff, ClientStats, token_bucket
from simapf.workload.informer import InformerInstance
from simapf.workload.latencies import EXACT_UP_TO
from simapf.workload.instance import (
    GAPS_AT_ONCE,
    Context,
    Instance,
    PoissonGaps,
    PreparedTemplate,
    stream,
    with_options,
)


def template_options(t: RequestTemplate) -> ListOptions:
    o = t.options
    return ListOptions(
        resource_version=o.resource_version, resource_version_match=o.resource_version_match,
        limit=o.limit, label_selector=o.label_selector, field_selector=o.field_selector,
        send_initial_events=o.send_initial_events, pretty=o.pretty,
    )  # fmt: skip


class _TemplateSender(Instance):
    """Sends a RequestTemplate: a whole paged LIST counts as one request to the caller."""

    def send_template(self, t: RequestTemplate, on_complete: Callable[[bool], None] | None) -> None:
        """Send `t`; `on_complete(ok)` when it is done (None: nobody waits for its outcome)."""
        p = self._prepared.get(id(t))
        if p is None:
            p = self._prepared[id(t)] = self._prepare(t)
        attrs = p.attrs if p.attrs is not None else self._draw_attrs(t)
        sel = p.selectivity
        then = on_complete if on_complete is not None else _ignore
        if p.paged:
            self._page(attrs, t, sel, 0, then)
        elif p.verb == "watch":
            self.requester.do(attrs, p.encoding, lambda rec: self._watch_started(rec, attrs, t, then),
                              selectivity=sel)  # fmt: skip
        elif on_complete is None:
            # An open loop's single request: no closure to make, call and free per request.
            self.requester.do(attrs, p.encoding, _unawaited, selectivity=sel)
        else:
            self.requester.do(attrs, p.encoding, lambda rec: then(rec.outcome == OK), selectivity=sel)

    def _prepare(self, t: RequestTemplate) -> PreparedTemplate:
        opts = template_options(t)
        paged = t.verb == "list" and opts.limit > 0 and t.options.paginate and opts.resource_version != "0"
        same = t.namespace != "random" and t.verb != "get"  # else each request draws its own
        return PreparedTemplate(t, self._draw_attrs(t) if same else None, paged)

    def _draw_attrs(self, t: RequestTemplate) -> RequestAttributes:
        ns = self.pick_namespace(t.resource, t.namespace)
        return self.attrs(t.verb, t.resource, ns, template_options(t), name=self._name_for(t))

    def _name_for(self, t: RequestTemplate) -> str:
        if t.verb == "get":
            return f"obj-{int(self.rng.integers(1_000_000))}"
        return ""

    def _page(self, attrs: RequestAttributes, t: RequestTemplate, sel: float, page: int,
              on_complete: Callable[[bool], None]) -> None:  # fmt: skip
        cluster = self.ctx.cluster
        if page > 0:
            opts = attrs.list_options
            attrs = with_options(attrs, ListOptions(limit=opts.limit, continue_token=f"page-{page}",
                                                     label_selector=opts.label_selector,
                                                     field_selector=opts.field_selector))  # fmt: skip

        def answered(rec: ServerRequest) -> None:
            if rec.outcome != OK:
                on_complete(False)
            elif page + 1 < cluster.pages(attrs, sel):
                self._page(attrs, t, sel, page + 1, on_complete)
            else:
                on_complete(True)

        self.requester.do(attrs, t.encoding, answered, selectivity=sel, page=page)

    def _watch_started(self, rec: ServerRequest, attrs: RequestAttributes, t: RequestTemplate,
                       on_complete: Callable[[bool], None]) -> None:  # fmt: skip
        if rec.outcome != OK or not self.active:
            on_complete(False)
            return
        cluster = self.ctx.cluster
        share = t.options.selectivity if (attrs.list_options.label_selector or attrs.list_options.field_selector) else 1.0
        state = {"done": False}

        def finish(ok: bool) -> None:
            if not state["done"]:
                state["done"] = True
                cluster.close_watch(w)
                on_complete(ok)

        w = cluster.open_watch(attrs, share, lambda reason: finish(False), rec, t.encoding)
        clock = self.ctx.clock
        clock.at(clock.now + int(t.watch_duration_s * NS_PER_S), lambda _: finish(True), None, ARRIVAL)


class OpenLoopInstance(_TemplateSender):
    """Requests at a rate of their own, whatever the responses."""

    def start(self) -> None:
        spec: OpenLoopClient = self.group.spec
        mean_gap_ns = NS_PER_S / spec.rate_per_s
        rng = stream(self.ctx.seed, spec.name, self.index, "arrivals")
        self.ramp: RampingArrivals | None = None
        if spec.ramp_up_s > 0:
            self.ramp = RampingArrivals(rng, spec.arrivals == "constant", spec.rate_per_s, spec.ramp_up_s,
                                        self.ctx.clock.now)  # fmt: skip
        self.constant_gap_ns = int(mean_gap_ns) if spec.arrivals == "constant" else None
        self.gaps = PoissonGaps(rng, mean_gap_ns)
        self.ctx.clock.at(self.ctx.clock.now + self._gap(), self._arrive, None, ARRIVAL)

    def _gap(self) -> int:
        if self.ramp is not None:
            return max(0, self.ramp.next_at_ns() - self.ctx.clock.now)
        return self.constant_gap_ns if self.constant_gap_ns is not None else self.gaps.next_ns()

    def _arrive(self, _=None) -> None:
        if not self.active:
            return
        group = self.group
        cap = group.spec.max_in_flight
        if cap is None:
            self.send_template(group.spec.request, None)
        elif group.outstanding < cap:
            group.outstanding += 1
            self._send_counted()
        else:
            group.held.append(self)
        self.ctx.clock.at(self.ctx.clock.now + self._gap(), self._arrive, None, ARRIVAL)

    def _send_counted(self, _=None) -> None:
        """Send one request that holds a slot of the group's `max_in_flight` until it returns."""
        if not self.active:
            self._returned(False)
            return
        self.send_template(self.group.spec.request, self._returned)

    def _returned(self, _ok: bool) -> None:
        group = self.group
        group.outstanding -= 1
        while group.held:
            inst = group.held.popleft()
            if inst.active and isinstance(inst, OpenLoopInstance):
                # The slot passes to the oldest held request, sent from a fresh event rather than
                # from inside the server's completion callback.
                group.outstanding += 1
                self.ctx.clock.at(self.ctx.clock.now, inst._send_counted, None, ARRIVAL)
                break


class RampingArrivals:
    """Arrivals whose rate rises linearly from 0 to `rate_per_s` over `ramp_s`, then stays.

    The k-th arrival is where the cumulative rate Λ(t) reaches the k-th point of a unit-rate
    process (k itself for evenly spaced arrivals, a sum of unit exponentials for Poisson ones):
    the time change that turns a unit-rate process into one of any rate.
    """

    __slots__ = ("rng", "constant", "rate", "ramp_s", "start_ns", "points", "_drawn", "_next")

    def __init__(self, rng: np.random.Generator, constant: bool, rate_per_s: float, ramp_s: float,
                 start_ns: int) -> None:  # fmt: skip
        self.rng = rng
        self.constant = constant
        self.rate = rate_per_s
        self.ramp_s = ramp_s
        self.start_ns = start_ns
        self.points = 0.0  # the unit-rate process so far
        self._drawn: list[float] = []
        self._next = 0

    def next_at_ns(self) -> int:
        """When the next arrival is (absolute ns)."""
        if self.constant:
            self.points += 1.0
        else:
            if self._next == len(self._drawn):
                self._drawn = self.rng.exponential(1.0, GAPS_AT_ONCE).tolist()
                self._next = 0
            self.points += self._drawn[self._next]
            self._next += 1
        return self.start_ns + int(self._time_s(self.points) * NS_PER_S)

    def _time_s(self, points: float) -> float:
        """Λ⁻¹: when the cumulative rate reaches `points`."""
        ramp_area = self.rate * self.ramp_s / 2.0
        if points <= ramp_area:
            return math.sqrt(2.0 * self.ramp_s * points / self.rate)
        return self.ramp_s + (points - ramp_area) / self.rate


class ClosedLoopInstance(_TemplateSender):
    """A virtual user: send, wait for the whole response, think, repeat. After an iteration that
    failed (connection refused, a 429 its retries did not get past, a response lost), it waits
    at least client-go's backoff (0.8 s doubling to 30 s, jittered, as the reflector's), as a
    client-go program does: it never resends at the instant of a refusal."""

    def start(self) -> None:
        self.think = stream(self.ctx.seed, self.group.spec.name, self.index, "think")
        self.backoff = Backoff(BackoffSpec(), stream(self.ctx.seed, self.group.spec.name, self.index, "backoff"))
        self._next()

    def _next(self, _=None) -> None:
        if not self.active:
            return
        group = self.group
        if group.iterations_left is not None:
            if group.iterations_left <= 0:
                return
            group.iterations_left -= 1
        self.send_template(group.spec.request, self._done)

    def _done(self, ok: bool) -> None:
        if not self.active:
            return
        tt = self.group.spec.think_time
        mean_ns = tt.mean_s * NS_PER_S
        if tt.distribution == "constant":
            pause = mean_ns
        elif tt.distribution == "uniform":
            pause = self.think.random() * 2 * mean_ns
        else:
            pause = self.think.exponential(mean_ns) if mean_ns > 0 else 0
        if not ok:
            pause = max(pause, self.backoff.next_ns(self.ctx.clock.now))
        self.ctx.clock.at(self.ctx.clock.now + int(pause), self._next, None, ARRIVAL)


class MutatorInstance(Instance):
    """Writes at a Poisson rate; successful writes change the inventory and reach watchers."""

    def start(self) -> None:
        spec: MutatorClient = self.group.spec
        self.gaps = PoissonGaps(stream(self.ctx.seed, spec.name, self.index, "arrivals"), NS_PER_S / spec.rate_per_s)
        self.verbs = list(spec.mix)
        w = np.array([spec.mix[v] for v in self.verbs], dtype=float)
        self.cum: list[float] = np.cumsum(w / w.sum()).tolist()  # bisect on a list: numpy is slow on scalars
        self.objects = self.group.resource(spec.resource)
        self.ctx.clock.at(self.ctx.clock.now + self.gaps.next_ns(), self._arrive, None, ARRIVAL)

    def _arrive(self, _=None) -> None:
        if not self.active:
            return
        spec: MutatorClient = self.group.spec
        verb = self.verbs[min(bisect_right(self.cum, self.rng.random()), len(self.verbs) - 1)]
        ns = self.pick_namespace(spec.resource, spec.namespace)
        objs = self.objects
        if verb == "create":
            size = objs.draw_size()
            name = ""
        else:
            size = objs.mean_size(ns)
            name = f"obj-{int(self.rng.integers(1_000_000))}"
        attrs = self.attrs(verb, spec.resource, ns, name=name)
        self.requester.do(attrs, spec.encoding, lambda rec: self._written(rec, verb, ns or "", size), object_bytes=size)
        self.ctx.clock.at(self.ctx.clock.now + self.gaps.next_ns(), self._arrive, None, ARRIVAL)

    def _written(self, rec: ServerRequest, verb: str, ns: str, size: float) -> None:
        if rec.outcome != OK and not (rec.outcome == FAILED and rec.reason == "network"):
            return  # a response lost on the way back (reason "network") was still committed
        objs = self.objects
        if verb == "create":
            objs.add(ns, size)
        elif verb == "delete":
            if objs.delete(ns) is None:
                return
        self.ctx.cluster.fan_out(objs.key, ns, size, Encoding(self.group.spec.encoding))


class DiscoveryInstance(Instance):
    """kubectl on a cold discovery cache, every `interval_s` on average."""

    @staticmethod
    def summary_fields(stats: ClientStats) -> dict[str, Any]:
        if not stats.run_durations_ns:
            return {}
        d = np.asarray(stats.run_durations_ns) / NS_PER_S
        return {"runs": stats.runs, "run_p50_s": float(np.percentile(d, 50)), "run_max_s": float(d.max())}

    def start(self) -> None:
        spec: DiscoveryClient = self.group.spec
        self.gaps = stream(self.ctx.seed, spec.name, self.index, "arrivals")
        self._run()

    def _paths(self) -> list[tuple[str, float]]:
        spec: DiscoveryClient = self.group.spec
        gvs = self.group.ctx.cluster.inventory.group_versions()
        n_gv = len(gvs) + spec.extra_group_versions
        per_gv = spec.bytes_per_group_version
        if spec.aggregated:
            return [("/api", per_gv), ("/apis", per_gv * n_gv)]
        paths = [("/api", 500.0), ("/apis", 200.0 * n_gv)]
        paths += [(f"/apis/{g}/{v}" if g else f"/api/{v}", per_gv) for g, v, _n in gvs]
        paths += [(f"/apis/extra-{k}.example.com/v1", per_gv) for k in range(spec.extra_group_versions)]
        return paths

    def _run(self, _=None) -> None:
        if not self.active:
            return
        self.run_started = self.ctx.clock.now
        # Every run is a new kubectl process: its token bucket starts full (if it has one).
        self.requester.bucket = token_bucket(self.group.spec.discovery_rate_limit)
        paths = self._paths()
        first, rest = paths[:2], paths[2:]
        self._fetch(first, lambda: self._fetch(rest, self._finished))

    def _fetch(self, paths: list[tuple[str, float]], then: Callable[[], None]) -> None:
        if not paths:
            then()
            return
        left = {"n": len(paths)}

        def one_done(_rec: ServerRequest) -> None:
            left["n"] -= 1
            if left["n"] == 0 and self.active:
                then()

        for path, nbytes in paths:
            attrs = RequestAttributes(user=self.user, groups=self.groups, verb="get", is_resource_request=False, path=path)
            self.requester.do(attrs, "json", one_done, object_bytes=nbytes)

    def _finished(self) -> None:
        stats = self.group.stats
        stats.runs += 1
        stats.run_durations_ns.append(self.ctx.clock.now - self.run_started)
        interval_ns = self.group.spec.interval_s * NS_PER_S
        self.ctx.clock.at(self.ctx.clock.now + int(self.gaps.exponential(interval_ns)), self._run, None, ARRIVAL)



# ---------------------------------------------------------------------------------------------

INSTANCE_CLASSES = {
    "open_loop": OpenLoopInstance,
    "closed_loop": ClosedLoopInstance,
    "informer": InformerInstance,
    "mutator": MutatorInstance,
    "discovery": DiscoveryInstance,
}


class ClientGroup:
    """One scenario client: its instances, its counters, its ramp."""

    def __init__(self, spec, ctx: Context, resolve_resource, exact_up_to: int | None = EXACT_UP_TO) -> None:
        self.spec = spec
        self.ctx = ctx
        self.stats = ClientStats(exact_up_to)  # latencies exact up to this many per verb (RequestLog)
        self.resource = resolve_resource
        self.instances: list[Instance] = []
        self.active_count = 0  # instances launched and not stopped (kept, not recounted: it is read at every scrape)
        self.iterations_left = getattr(spec, "iterations", None)
        self.outstanding = 0  # open-loop requests holding a max_in_flight slot
        self.held: deque[Instance] = deque()  # open-loop arrivals waiting for a slot, oldest first
        self.start_rng = stream(ctx.seed, spec.name, 0, "start")
        self._cls = INSTANCE_CLASSES[spec.kind]
        net = spec.network
        # The way responses come back to every instance (their node, their CPU to read them).
        self.link = None
        if net.stream_bytes_per_s is not None or net.link_bytes_per_s is not None:
            stream_rate = net.stream_bytes_per_s if net.stream_bytes_per_s is not None else net.link_bytes_per_s
            self.link = Link(ctx.cluster.clock, stream_rate, net.link_bytes_per_s)
        # The cores of the one program its instances run in, if they share one.
        shared = spec.processing.shared_cores if spec.processing is not None else None
        self.cores: list[int] | None = [0] * shared if shared else None

    def start(self) -> None:
        spec = self.spec
        for i in range(spec.count):
            offset = spec.start.at_s + (self.start_rng.random() * spec.start.spread_s if spec.start.spread_s else 0.0)
            self._launch_at(int(offset * NS_PER_S))

    def _launch_at(self, delay_ns: int) -> None:
        inst = self._cls(self, len(self.instances))
        self.instances.append(inst)
        self.active_count += 1  # an instance is active from its launch until it stops
        clock = self.ctx.clock
        clock.at(clock.now + delay_ns, lambda _: inst.start() if inst.active else None, None, ARRIVAL)

    def set_count(self, n: int) -> None:
        """Add instances (started now) or stop the newest ones."""
        live = [x for x in self.instances if x.active]
        for _ in range(n - len(live)):
            self._launch_at(0)
        for inst in reversed(live[n:] if n < len(live) else []):
            inst.stop()

    def scraped(self) -> tuple[list[tuple[str, float]], bool]:
        """The series of its kind a scrape adds, and whether its instances are caught up (its
        instance class's `scraped`)."""
        return self._cls.scraped(self)

    def summary_row(self, by_verb: dict[str, Any]) -> dict[str, Any]:
        """The group's row of the summary's `clients`: what became of every attempt, the
        counters of its kind (its instance class's `summary_fields`), and `by_verb`, its logical
        requests per verb as its instances saw them (client_latency.csv's rows)."""
        s = self.stats
        # Every attempt is accounted for: attempts = sum(outcomes) + retries_after_429 +
        # in_flight_at_end, for the client and for each of its verbs (`attempts_by_verb`;
        # `abandoned`: answers that came to an instance which had stopped, never read).
        abandoned = sum(c.abandoned for c in s.by_verb.values())
        outcomes = dict(s.outcomes, **({"abandoned": abandoned} if abandoned else {}))
        row: dict[str, Any] = {
            "client": self.spec.name, "kind": self.spec.kind, "instances": self.active_count,
            "attempts": s.attempts, "outcomes": dict(sorted(outcomes.items())), "retries_after_429": s.retries,
            "in_flight_at_end": sum(c.in_flight for c in s.by_verb.values()),
        }  # fmt: skip
        row.update(self._cls.summary_fields(s))
        if s.throttle_wait_ns and s.attempts:
            row["mean_throttle_wait_s"] = s.throttle_wait_ns / NS_PER_S / s.attempts
        if s.processing_ns:
            # Worker time the instances spent on their responses (clients.processing); discovery
            # run durations already include it.
            row["processing_busy_s"] = s.processing_ns / NS_PER_S
        row["by_verb"] = by_verb
        row["attempts_by_verb"] = {
            verb: {"attempts": c.sent, "outcomes": c.outcomes + c.abandoned, "abandoned": c.abandoned,
                   "retries_after_429": c.retries, "in_flight_at_end": c.in_flight}
            for verb, c in sorted(s.by_verb.items())
        }  # fmt: skip
        return row


def _ignore(_ok: bool) -> None:
    pass


def _unawaited(_rec: ServerRequest) -> None:
    pass
