"""What every client instance is made of: its identity, its random streams, the context it
shares with the others.

Each instance is an independent actor with its own identity (`{i}` in names is its index) and
its own random streams, seeded from the scenario seed, the client's name and the instance index.
Nothing else draws from them, so two runs that differ only in APF policy see the same arrivals,
think times and jitter.
"""

from __future__ import annotations

import zlib
from collections import deque
from typing import Any, Callable, Final, Protocol

import numpy as np

from simapf.apf.types import ListOptions, RequestAttributes
from simapf.engine.environment import RunClock
from simapf.scenario.schema import Identity, RequestTemplate
from simapf.server.network import Link
from simapf.workload.clientgo import ClientStats, Requester
from simapf.workload.cluster import Cluster
from simapf.workload.inventory import ResourceObjects

AUTHENTICATED: Final = "system:authenticated"


def stream(seed: int, client: str, instance: int, purpose: str) -> np.random.Generator:
    """An independent, reproducible random stream (no Python hash(): it changes per process)."""
    return np.random.default_rng([seed, zlib.crc32(client.encode()), instance, zlib.crc32(purpose.encode())])


GAPS_AT_ONCE: Final = 1024


class PoissonGaps:
    """Exponential gaps of mean `mean_ns` (whole ns) from their own stream: a Poisson process.

    Drawn GAPS_AT_ONCE at a time, because one numpy call per arrival costs more than the rest of
    the arrival; numpy draws an array of them as the same numbers, in the same order, as one at
    a time, so the arrivals do not change.
    """

    __slots__ = ("rng", "mean_ns", "_drawn", "_next")

    def __init__(self, rng: np.random.Generator, mean_ns: float) -> None:
        self.rng = rng
        self.mean_ns = mean_ns
        self._drawn: list[float] = []
        self._next = 0

    def next_ns(self) -> int:
        if self._next == len(self._drawn):
            self._drawn = self.rng.exponential(self.mean_ns, GAPS_AT_ONCE).tolist()
            self._next = 0
        gap = self._drawn[self._next]
        self._next += 1
        return int(gap)


def user_info(identity: Identity, i: int) -> tuple[str, tuple[str, ...]]:
    """User name and groups as the apiserver's authenticator would set them."""
    if identity.service_account is not None:
        ns, name = identity.service_account.format(i=i).split("/", 1)
        user = f"system:serviceaccount:{ns}:{name}"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
    elif identity.user is not None:
        user = identity.user.format(i=i)
        groups = []
    else:  # the schema requires one of the two
        raise ValueError("an identity needs a user or a service account")
    for g in identity.groups:
        g = g.format(i=i)
        if g not in groups:
            groups.append(g)
    if AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return user, tuple(groups)


class Context:
    """What every client instance shares: the clock, the cluster, the run's seed, client gates."""

    def __init__(self, cluster: Cluster, clock: RunClock, seed: int, watch_list_client: bool) -> None:
        self.cluster = cluster
        self.clock = clock
        self.seed = seed
        self.watch_list_client = watch_list_client

    @property
    def server_watch_list(self) -> bool:
        gates = self.cluster.servers[0].apf.gates  # every replica runs the same version
        return gates.WatchList if gates is not None else True  # none given: 1.37's, on



# ---------------------------------------------------------------------------------------------


class Group(Protocol):
    """What an instance reads of its client group (a `simapf.workload.clients.ClientGroup`)."""

    spec: Any  # the scenario's client: one of simapf.scenario.schema's client kinds
    ctx: Context
    stats: ClientStats
    link: Link | None
    cores: list[int] | None  # free times of the cores its instances share (processing.shared_cores)
    resource: Callable[[str], ResourceObjects]
    iterations_left: int | None  # closed-loop: iterations its instances may still start (None: no end)
    outstanding: int  # open-loop: requests holding a `max_in_flight` slot
    instances: list[Instance]  # every instance launched, stopped ones included
    active_count: int  # instances launched and not stopped
    held: deque[Instance]  # open-loop: arrivals waiting for a slot, oldest first


class PreparedTemplate:
    """A request template as its instance sends it. `attrs` is None when each request draws
    its own namespace or object name; `paged`: a LIST read from etcd page by page."""

    __slots__ = ("template", "attrs", "verb", "encoding", "selectivity", "paged")

    def __init__(self, template: RequestTemplate, attrs: RequestAttributes | None, paged: bool) -> None:
        self.template = template  # kept, so that its id stays its own
        self.attrs = attrs
        self.verb = template.verb
        self.encoding = template.encoding
        self.selectivity = template.options.selectivity
        self.paged = paged


class Instance:
    """One running client. `stop()` ends it: pending callbacks become no-ops."""

    def __init__(self, group: Group, index: int) -> None:
        self.group = group
        self.index = index
        self.ctx = group.ctx
        self.user, self.groups = user_info(group.spec.identity, index)
        # kubectl's discovery client has a token bucket of its own.
        rate_limit = getattr(group.spec, "discovery_rate_limit", None) or group.spec.rate_limit
        # Every response is processed client-side (group.spec.processing) before the instance acts
        # on it. Not a writer's: its write takes effect at the server (inventory, watch events)
        # whatever the client then does with the response, and nothing it does waits for one.
        processing = group.spec.processing if group.spec.kind != "mutator" else None
        self.requester = Requester(group.ctx.cluster, group.ctx.clock, group.spec.retry, rate_limit,
                                   group.stats, group.spec.name, processing, group.link,
                                   group.spec.network.rtt_s,
                                   cache_write_s=getattr(group.spec, "cache_fsync_s", None) or 0.0,
                                   cores=group.cores)  # fmt: skip
        self.active = True
        self.rng = stream(group.ctx.seed, group.spec.name, index, "workload")
        # What each request of a template reads of it, found at its first request (the scenario's
        # models are slow to read from once per request): {id(template): PreparedTemplate}.
        self._prepared: dict[int, PreparedTemplate] = {}

    def start(self) -> None:
        raise NotImplementedError

    @staticmethod
    def summary_fields(stats: ClientStats) -> dict[str, Any]:
        """What the summary's row of a client of this kind adds to every client's: its own
        counters (none here)."""
        return {}

    @staticmethod
    def scraped(group: Group) -> tuple[list[tuple[str, float]], bool]:
        """What a scrape reads of a client of this kind beyond every client's series: its own
        series as (metric, value), and whether all its instances are caught up (a run is healthy
        only while they are; none of this kind are ever behind)."""
        return [], True

    def stop(self) -> None:
        if self.active:
            self.group.active_count -= 1
        self.active = False
        self.requester.active = False
        self.ctx.cluster.balancer.disconnect(self.requester.conn)

    def attrs(self, verb: str, resource_ref: str, namespace: str | None, opts: ListOptions = ListOptions(),
              name: str = "") -> RequestAttributes:  # fmt: skip
        res = self.group.resource(resource_ref)
        ns = namespace if (namespace and res.spec.namespaced) else ""
        return RequestAttributes(
            user=self.user, groups=self.groups, verb=verb, api_group=res.spec.group,
            resource=res.spec.name, namespace=ns, name=name, list_options=opts,
        )  # fmt: skip

    def pick_namespace(self, resource_ref: str, namespace: str | None) -> str | None:
        if namespace == "random":
            res = self.group.resource(resource_ref)
            if not res.spec.namespaced:
                return None
            return res.namespaces[int(self.rng.integers(len(res.namespaces)))]
        return namespace.format(i=self.index) if namespace else namespace


def with_options(attrs: RequestAttributes, opts: ListOptions) -> RequestAttributes:
    """`attrs` with other list options (the next page of a LIST, a relist's)."""
    return RequestAttributes(
        user=attrs.user, groups=attrs.groups, verb=attrs.verb, api_group=attrs.api_group,
        resource=attrs.resource, namespace=attrs.namespace, name=attrs.name, list_options=opts,
    )  # fmt: skip
