"""The scenario itself: how long and how it runs, and every part above in one file."""

from __future__ import annotations

import math
import re

from pydantic import Field, field_validator, model_validator

from simapf.scenario.schema.base import MAX_LIST_ITEMS, MAX_NAME_LENGTH, Integer, Seconds, StrictModel
from simapf.scenario.schema.clients import (
    CHECKSUMMED_DISCOVERY_CACHE, DISCOVERY_CACHE_FSYNC_S, Client, DiscoveryClient, InformerClient, MutatorClient,
    OpenLoopClient,
)  # fmt: skip
from simapf.scenario.schema.events import CrdInstallEvent, Event, RampEvent, RestartEvent
from simapf.scenario.schema.inventory import CrdGroup, Resource
from simapf.scenario.schema.server import APF, AdmissionWebhook, Apiserver, Etcd, Kubernetes


# Bounds of a run: simulated time in integer nanoseconds stays far inside 64 bits, and the series
# (one sample of every metric per scrape) stay a size a notebook can hold.
MAX_DURATION_S = 1e7  # ~116 days of simulated time
MAX_SCRAPES = 1_000_000
# Requests a run may be expected to send (open-loop and writers' rates times the duration) unless
# `run.max_requests` says more: at ~25,000 simulated requests a wall second, 100 M is over an hour.
DEFAULT_MAX_REQUESTS = 100_000_000
MAX_REQUESTS = 10_000_000_000  # run.max_requests: days of simulation
MAX_EVENTS = 10 * MAX_LIST_ITEMS


def _unique(field: str, names: list[str], what: str) -> dict[str, int]:
    """Each name's index in `field`; a name given twice is an error (which one would an event,
    a metric or a series mean?)."""
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in seen:
            raise ValueError(f"{field}[{i}].name: duplicate {what} {name!r} (also {field}[{seen[name]}])")
        seen[name] = i
    return seen


# The latencies of one request class kept exactly before they are sketched (simapf.workload.latencies).
EXACT_LATENCIES = 1 << 20


class RunSpec(StrictModel):
    duration_s: Seconds = Field(
        300.0, gt=0, le=MAX_DURATION_S,
        description="How much simulated time the run covers (~116 days at most).",
    )
    seed: Integer = Field(1, ge=0, description="Seed of every random stream (arrivals, sizes, jitter).")
    scrape_interval_s: Seconds = Field(
        1.0, ge=0.001,
        description=(
            "Step of the time series: every series is sampled this often, like a Prometheus scrape "
            "(at least 1 ms, and at most 1,000,000 steps in a run; the run's series, about 50 plus a few per "
            "priority level, FlowSchema, client and resource, may hold at most 10,000,000 samples in all). It "
            "changes only what is seen, never what is simulated: the summary's counters and true peaks are the "
            "same at any step; the series, the `scraped_*` peaks and the per-interval CPU peaks follow it."
        ),
    )
    request_records: bool = Field(False, description="Keep one record per request (memory grows with the request count).")
    exact_percentiles: bool = Field(
        False,
        description=(
            "Keep every latency, for exact percentiles however long the run (memory grows with the request "
            "count: 8 bytes a request, 9 more for its client's view). Otherwise latencies are exact up to "
            f"{EXACT_LATENCIES:,} of a request class (a priority level and verb, a client and verb) and sketched "
            "past that, within 0.1 % of the exact percentiles, in memory that does not grow with the run."
        ),
    )
    max_requests: Integer = Field(
        DEFAULT_MAX_REQUESTS, ge=1, le=MAX_REQUESTS,
        description=(
            "The most requests the run may be expected to send (open-loop clients' and writers' rates x instances "
            "x duration, a paged LIST by its pages; discovery clients' walks; paged informers' first lists); a "
            "scenario beyond it is refused before it runs. Raise it for "
            "a deliberately long run (at most 10,000,000,000)."
        ),
    )
    steady_state_from_s: Seconds | None = Field(
        None, ge=0,
        description="Start of the steady-state window, in s from the start of the run: the summary's "
        "`*_steady` peaks and means cover [steady_state_from_s, duration_s], leaving out the start-up "
        "ramp. null: the second half of the run (duration_s / 2). Must be before duration_s.",
    )  # fmt: skip

    @field_validator("steady_state_from_s")
    @classmethod
    def _steady_state(cls, x: float | None, info) -> float | None:
        duration = info.data.get("duration_s")
        if x is not None and duration is not None and x >= duration:
            raise ValueError(f"{x:g} s is not before the run ends (run.duration_s: {duration:g})")
        return x

    @model_validator(mode="after")
    def _scrapes(self) -> "RunSpec":
        n = self.duration_s / self.scrape_interval_s
        if n > MAX_SCRAPES:
            raise ValueError(f"duration_s / scrape_interval_s is {n:,.0f} samples, more than {MAX_SCRAPES:,}: "
                             "raise scrape_interval_s")  # fmt: skip
        return self

    @property
    def steady_from_s(self) -> float:
        """Where the steady-state window starts (resolved: null is half the run)."""
        return self.duration_s / 2 if self.steady_state_from_s is None else self.steady_state_from_s


class Scenario(StrictModel):
    name: str = Field("scenario", max_length=MAX_NAME_LENGTH, description="A short name, used in outputs (at most 253 characters).")
    description: str = Field("", description="What the scenario shows.")
    run: RunSpec = Field(RunSpec(), description="Duration, seed, series step.")
    kubernetes: Kubernetes = Field(Kubernetes(), description="Kubernetes version knobs.")
    apiserver: Apiserver = Field(Apiserver(), description="The apiserver.")
    etcd: Etcd = Field(Etcd(), description="The etcd the apiserver reads: its members and cores (default: the calibration's kind node).")
    apf: APF = Field(APF(), description="API Priority and Fairness.")
    resources: list[Resource] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="The cluster's resources (at most 1,000)."
    )
    clients: list[Client] = Field(default_factory=list, max_length=MAX_LIST_ITEMS, description="Who sends requests (at most 1,000).")
    events: list[Event] = Field(default_factory=list, max_length=MAX_EVENTS, description="What happens when (at most 10,000).")
    admission_webhooks: list[AdmissionWebhook] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS,
        description="Admission webhooks called for matching requests while they hold their seats (at most 1,000).",
    )
    crds: list[CrdGroup] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS,
        description="CustomResourceDefinitions, by group: installed before the run, or by a crd_install event (at most 1,000).",
    )

    @model_validator(mode="after")
    def _references(self) -> "Scenario":
        _unique("resources", [r.key for r in self.resources], "resource")
        names = _unique("clients", [c.name for c in self.clients], "client name")
        groups = _unique("crds", [g.name for g in self.crds], "CRD group")
        _unique("admission_webhooks", [w.name for w in self.admission_webhooks], "webhook name")
        for i, c in enumerate(self.clients):
            where = f"clients[{i}]"
            resource = getattr(c, "resource", None) or getattr(getattr(c, "request", None), "resource", None)
            field = "resource" if hasattr(c, "resource") else "request.resource"
            if resource is not None:
                try:
                    self.resource(resource)
                except KeyError as exc:
                    raise ValueError(f"{where}.{field}: {exc.args[0]}") from None
        for i, e in enumerate(self.events):
            if e.at_s > self.run.duration_s:
                raise ValueError(f"events[{i}].at_s: {e.at_s:g} s is after the run ends (run.duration_s: {self.run.duration_s:g})")
            if isinstance(e, RampEvent) and e.client not in names:
                raise ValueError(f"events[{i}].client: no client named {e.client!r}")
            if isinstance(e, RestartEvent) and e.replica >= self.apiserver.replicas:
                raise ValueError(
                    f"events[{i}].replica: there is no replica {e.replica} (apiserver.replicas: "
                    f"{self.apiserver.replicas}; replicas count from 0)"
                )
        installed: dict[str, int] = {}
        for i, e in enumerate(self.events):
            if isinstance(e, CrdInstallEvent):
                if e.crds not in groups:
                    known = ", ".join(groups) or "none"
                    raise ValueError(f"events[{i}].crds: no CRD group named {e.crds!r} in crds (there are: {known})")
                if e.crds in installed:
                    raise ValueError(f"events[{i}].crds: {e.crds!r} is already installed by events[{installed[e.crds]}]")
                installed[e.crds] = i
        for c in self.clients:
            if isinstance(c, DiscoveryClient) and c.cache_fsync_s is None:
                c.cache_fsync_s = DISCOVERY_CACHE_FSYNC_S if self.kubectl_syncs_its_cache() else 0.0
        expected = self.expected_requests()
        if expected > self.run.max_requests:
            raise ValueError(
                f"run: its clients would send ~{expected:,.0f} requests in {self.run.duration_s:g} s, more than "
                f"run.max_requests ({self.run.max_requests:,}); shorten the run, lower the rates, or raise run.max_requests"
            )
        return self

    def crds_at_start(self) -> list[CrdGroup]:
        """The CRD groups installed before the run (no crd_install event creates them)."""
        later = {e.crds for e in self.events if isinstance(e, CrdInstallEvent)}
        return [g for g in self.crds if g.name not in later]

    def version_before(self, major: int, minor: int) -> bool:
        """Whether kubernetes.version is older than major.minor (an unreadable version is not)."""
        match = re.match(r"v?(\d+)\.(\d+)", self.kubernetes.version.strip())
        return match is not None and (int(match[1]), int(match[2])) < (major, minor)

    def kubectl_syncs_its_cache(self) -> bool:
        """Whether kubectl of this scenario's version syncs every discovery cache file (before 1.25)."""
        return self.version_before(*CHECKSUMMED_DISCOVERY_CACHE)

    def expected_requests(self) -> float:
        """Requests the rate-driven clients would send over the run: open-loop clients' and writers'
        rate x instances (their largest ramp) x duration, each paged LIST counted by its pages;
        discovery clients' walks of every group-version; paged informers' first lists. Closed loops
        and the rest of informers' work are left out: their pace depends on the server."""
        peak = {c.name: c.count for c in self.clients}
        for e in self.events:
            if isinstance(e, RampEvent) and e.client in peak:
                peak[e.client] = max(peak[e.client], e.to_count)
        rated = sum(c.rate_per_s * peak[c.name] * self.run.duration_s * self._pages(c)
                    for c in self.clients if isinstance(c, (OpenLoopClient, MutatorClient)))  # fmt: skip
        rated += sum(peak[c.name] * self._pages(c) for c in self.clients if isinstance(c, InformerClient))
        served = len({(r.group, r.version) for r in self.resources}) + sum(g.group_count * g.served_versions for g in self.crds)
        walks = sum(peak[c.name] * self.run.duration_s / c.interval_s * (2 if c.aggregated else 2 + served + c.extra_group_versions)
                    for c in self.clients if isinstance(c, DiscoveryClient))  # fmt: skip
        return rated + walks

    def _pages(self, client: OpenLoopClient | MutatorClient | InformerClient) -> float:
        """Requests one of the client's LISTs takes, page by page (1 for anything unpaged)."""
        if isinstance(client, InformerClient):
            if client.list.mode != "paged":
                return 1.0
            limit, namespace, selectivity = client.list.page_size, client.namespace, client.selectivity
            resource = client.resource
        elif isinstance(client, OpenLoopClient):
            o = client.request.options
            if client.request.verb != "list" or o.limit <= 0 or not o.paginate or o.resource_version == "0":
                return 1.0
            limit, namespace, selectivity = o.limit, client.request.namespace, o.selectivity
            resource = client.request.resource
        else:
            return 1.0
        r = self.resource(resource)
        objects = r.count / r.namespaces if namespace is not None else r.count
        return max(1.0, math.ceil(objects * selectivity / limit))

    def resource(self, ref: str) -> Resource:
        """The resource a client refers to by name or name.group."""
        matches = [r for r in self.resources if ref in (r.key, r.name)]
        exact = [r for r in matches if r.key == ref]
        if exact:
            return exact[0]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KeyError(f"resource {ref!r} is ambiguous: say {' or '.join(repr(r.key) for r in matches)}")
        known = ", ".join(r.key for r in self.resources) or "none"
        raise KeyError(f"no resource {ref!r} in resources (there are: {known})")
