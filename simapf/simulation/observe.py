"""What a run measured: series scraped at a fixed interval, latencies, request records.

Series are long-form rows (time, metric, labels, value) named like the real metrics, so a
notebook can lay a simulation over Prometheus data: `apiserver_flowcontrol_*` per priority
level, `process_resident_memory_bytes`, `go_memstats_heap_inuse_bytes`,
`process_cpu_seconds_total`, ... Counters (`*_total`) run over the whole run, across restarts.

Latency is kept per (priority level, verb) as a typed array of the server-side latencies of
successful requests (8 bytes each, no Python object per request): exact percentiles, no
bucket error, read without a copy when the result is built; past `EXACT_UP_TO` of a class, a
sketch of fixed size within 0.1 % (simapf.workload.latencies), unless the run asks for exact
percentiles (`run.exact_percentiles`). One record per request is opt-in (`run.request_records`).

Peaks come two ways. The true peaks of RSS and heap in use are the model's own
(`MemoryModel.peak_rss`, followed at every change, an OOM kill's RSS included), kept per segment
of the run between marks: the start of the steady-state window (`steady_from_ns`) and each
scenario event's time, so that a window starting at a mark reads its exact peak. The scraped
peaks are the highest scrape, what Prometheus scraping at the same interval would show: they
miss whatever rose and fell between two scrapes, an OOM kill's RSS too. With several apiserver
replicas each has its own per-process series (label `replica`) and peaks; `peak_rss` and the
like are the highest replica's.

Nothing here changes the model: a scrape reads it (`SimulatedAPIServer.snapshot`), a mark only
restarts the peaks the model follows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from simapf.apf.types import NS_PER_S, RequestAttributes
from simapf.simulation.histograms import Histograms
from simapf.server.runtime import FAILED, OK, REJECTED, ServerRequest, SimulatedAPIServer
from simapf.workload.cluster import GONE, Death
from simapf.workload.latencies import EXACT_UP_TO, Latencies

if TYPE_CHECKING:
    from collections.abc import Sequence

    from simapf.workload.cluster import Cluster
    from simapf.workload.clients import ClientGroup

LABELS = ("priority_level", "flow_schema", "reason", "verb", "code", "resource", "client", "replica")
# `client` is the scenario client that sent the request, `attempt` its number (0 = the first,
# k = the k-th retry after a 429), so retries can be told from new requests. `replica` is the
# apiserver replica a per-process series belongs to (from "0"; empty when there is only one).
RECORD_FIELDS = ("received_s", "done_s", "user", "verb", "resource", "namespace", "priority_level",
                 "flow_schema", "seats", "outcome", "reason", "client", "attempt")  # fmt: skip
CODES = {OK: "200", REJECTED: "429", FAILED: "500", GONE: "410"}


class ProcessReading(NamedTuple):
    """One replica's RSS and CPU counters at one scrape, as its series give them (core- and
    P-seconds since the start of the run; `gc_s` is every GC class, `idle_mark_s` one of them)."""

    t_s: float
    rss_bytes: float
    cpu_s: float  # process_cpu_seconds_total
    gc_s: float  # go_cpu_classes_gc_total_cpu_seconds_total
    dedicated_s: float
    assist_s: float
    idle_mark_s: float
    gc_cycles: int


class Recorder:
    def __init__(self, cluster: "Cluster", groups: list["ClientGroup"], keep_records: bool,
                 steady_from_ns: int | None = None, exact_up_to: int | None = EXACT_UP_TO) -> None:  # fmt: skip
        self.cluster = cluster
        self.groups = groups
        self.keep_records = keep_records
        self.time_s: list[float] = []
        self.metric: list[str] = []
        self.labels: list[tuple[str, ...]] = []
        self.value: list[float] = []
        self.latencies: dict[tuple[str, str], Latencies] = defaultdict(partial(Latencies, exact_up_to))
        self.request_counts: dict[tuple[str, str], int] = defaultdict(int)  # (verb, code)
        # Successful LISTs (and WatchList's initial events) by serving path: [requests, bytes].
        self.lists_by_path: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        # A watch is a LIST's stand-in only when it is a WatchList: one asking for its initial
        # events (sendInitialEvents=true) of an apiserver that serves them.
        self._serves_watch_list = cluster.params.features.WatchList
        self.records: list[tuple] = []
        self.histograms = Histograms()
        self.health: list[tuple[float, bool]] = []  # (time, healthy) per scrape
        self._rejected_seen = 0
        # None: no steady-state window (its peaks and CPU are then those of no time at all).
        self.steady_from_ns = steady_from_ns
        self.steady_from_s = steady_from_ns / NS_PER_S if steady_from_ns is not None else float("inf")
        n = len(cluster.servers)
        # True peaks per replica and segment: (its start, peak RSS, peak heap in use).
        self.segments: list[list[tuple[int, float, float]]] = [[] for _ in range(n)]
        self._segment_from_ns = cluster.clock.now
        # Scraped peaks per replica, over the run and from steady_from_ns on.
        self.scraped_peak_rss_by_replica = [0.0] * n
        self.scraped_peak_heap_by_replica = [0.0] * n
        self.scraped_peak_rss_steady_by_replica = [0.0] * n
        self.scraped_peak_heap_steady_by_replica = [0.0] * n
        # Each replica's process_cpu_seconds_total when the steady state starts, and the
        # server-seconds etcd had spent on ranges then.
        self.cpu_seconds_at_steady = [0.0] * n
        self.etcd_busy_s_at_steady = 0.0
        # Each replica's RSS and CPU counters at every scrape: what the summary's figures of
        # them are computed from.
        self.readings: list[list[ProcessReading]] = [[] for _ in range(n)]
        if steady_from_ns is not None and steady_from_ns <= cluster.clock.now:
            self._steady_starts()
        self.rss_at_oom_kill: float | None = None  # the highest RSS an OOM kill ended (<= the limit)
        self.oom_demand: float | None = None  # the most an allocation that did not fit asked for
        self.replica_labels = [str(i) for i in range(n)] if n > 1 else [""]
        cluster.on_replica_death(self._killed)

    # ------------------------------------------------------------------ true peaks

    def mark(self) -> None:
        """A window starts now (the steady state, an event): the true peaks start a segment."""
        now = self.cluster.clock.now
        self._close_segment()
        self._segment_from_ns = now
        if now == self.steady_from_ns:
            self._steady_starts()

    def finish(self) -> None:
        """The run has ended: the last segment is closed."""
        self._close_segment()

    def _close_segment(self) -> None:
        start = self._segment_from_ns
        for i, server in enumerate(self.cluster.servers):
            rss, heap = server.restart_peaks()
            self.segments[i].append((start, rss, heap))

    def _steady_starts(self) -> None:
        snaps = [server.snapshot() for server in self.cluster.servers]
        for i, snap in enumerate(snaps):
            self.cpu_seconds_at_steady[i] = snap.resources.cpu_seconds_total
        self.etcd_busy_s_at_steady = snaps[0].etcd_busy_core_s

    def true_peaks(self, replica: int | None = None, from_ns: int = 0,
                   until_ns: int | None = None) -> tuple[float, float]:  # fmt: skip
        """(peak RSS, peak heap in use) of one replica, or the highest replica's, over the
        segments that start in [from_ns, until_ns): exact for a window that starts at a mark."""
        rss = heap = 0.0
        replicas = range(len(self.segments)) if replica is None else [replica]
        for i in replicas:
            for start, r, h in self.segments[i]:
                if start >= from_ns and (until_ns is None or start < until_ns):
                    rss = r if r > rss else rss
                    heap = h if h > heap else heap
        return rss, heap

    def true_peaks_steady(self, replica: int | None = None) -> tuple[float, float]:
        if self.steady_from_ns is None:
            return 0.0, 0.0
        return self.true_peaks(replica, self.steady_from_ns)

    # The highest of any replica: what a memory limit is compared with.
    @property
    def peak_rss(self) -> float:
        return self.true_peaks()[0]

    @property
    def peak_heap(self) -> float:
        return self.true_peaks()[1]

    @property
    def peak_rss_steady(self) -> float:
        return self.true_peaks_steady()[0]

    @property
    def peak_heap_steady(self) -> float:
        return self.true_peaks_steady()[1]

    @property
    def scraped_peak_rss(self) -> float:
        return max(self.scraped_peak_rss_by_replica)

    @property
    def scraped_peak_heap(self) -> float:
        return max(self.scraped_peak_heap_by_replica)

    @property
    def scraped_peak_rss_steady(self) -> float:
        return max(self.scraped_peak_rss_steady_by_replica)

    @property
    def scraped_peak_heap_steady(self) -> float:
        return max(self.scraped_peak_heap_steady_by_replica)

    # ------------------------------------------------------------------ per request

    def _is_watch_list(self, attrs: RequestAttributes) -> bool:
        return attrs.verb == "watch" and attrs.list_options.send_initial_events is True and self._serves_watch_list

    def completed(self, rec: ServerRequest) -> None:
        """Called for every request the apiserver answered (or lost)."""
        outcome = rec.outcome
        verb = rec.attrs.verb
        code = CODES.get(outcome)
        if code is not None:
            self.request_counts[(verb, code)] += 1
        if outcome == OK:
            self.latencies[(rec.priority_level, verb)].append((rec.done_ns - rec.received_ns) / NS_PER_S)
            cost = rec.cost
            if cost is not None and (verb == "list" or self._is_watch_list(rec.attrs)):
                served = self.lists_by_path[cost.path.value]
                served[0] += 1
                served[1] += cost.shape.response_bytes
        if code is not None and code != "410":
            a = rec.attrs
            self.histograms.observe(verb, a.resource or a.path, a.namespace, a.name, rec.priority_level,
                                    rec.flow_schema, rec.exempt, rec.received_ns, rec.dispatch_ns,
                                    rec.done_ns)  # fmt: skip
        if self.keep_records:
            a = rec.attrs
            client, attempt = rec.tag if isinstance(rec.tag, tuple) else ("", 0)
            self.records.append((
                rec.received_ns / NS_PER_S, rec.done_ns / NS_PER_S, a.user, verb,
                a.resource or a.path, a.namespace, rec.priority_level, rec.flow_schema, rec.seats,
                outcome, rec.reason, client, attempt,
            ))  # fmt: skip

    # ------------------------------------------------------------------ scraping

    def _add(self, t: float, metric: str, value: float, **labels: str) -> None:
        self.time_s.append(t)
        self.metric.append(metric)
        self.labels.append(tuple(labels.get(k, "") for k in LABELS))
        self.value.append(float(value))

    def scrape(self) -> None:
        cluster = self.cluster
        add = self._add
        t = cluster.clock.now / NS_PER_S
        all_up = True
        rejected = 0
        for i, server in enumerate(cluster.servers):
            replica = self.replica_labels[i]
            up, n = self._scrape_replica(t, i, server, replica)
            all_up = all_up and up
            rejected += n
        for (verb, code), n in self.request_counts.items():
            add(t, "apiserver_request_total", n, verb=verb, code=code)
        add(t, "simapf_watch_events_total", cluster.watch_events_total)
        for key, objs in cluster.inventory.by_key.items():
            add(t, "apiserver_storage_objects", objs.total()[0], resource=key)
        synced = True
        for g in self.groups:
            s = g.stats
            add(t, "simapf_client_instances", g.active_count, client=g.spec.name)
            add(t, "simapf_client_retries_total", s.retries, client=g.spec.name)
            for outcome, n in s.outcomes.items():
                add(t, "simapf_client_requests_total", n, client=g.spec.name, code=outcome)
            series, caught_up = g.scraped()
            for metric, value in series:
                add(t, metric, value, client=g.spec.name)
            synced = synced and caught_up
        self.histograms.scrape(t)
        healthy = all_up and cluster.network_up and synced and rejected == self._rejected_seen
        self._rejected_seen = rejected
        self.health.append((t, healthy))

    def _scrape_replica(self, t: float, i: int, server: SimulatedAPIServer, replica: str) -> tuple[bool, int]:
        """One replica's process and APF series; returns (up with its caches ready, APF rejections so far)."""
        add = self._add
        facts = server.snapshot()
        snap = facts.resources
        # A process's memory is read in whole bytes, as the kernel and the Go runtime count it
        # (the model's sums are floats).
        rss, heap = round(snap.rss_bytes), round(snap.heap_inuse_bytes)
        add(t, "up", 1.0 if snap.up else 0.0, replica=replica)
        add(t, "process_resident_memory_bytes", rss, replica=replica)
        add(t, "go_memstats_heap_inuse_bytes", heap, replica=replica)
        add(t, "go_memstats_next_gc_bytes", round(snap.heap_goal_bytes), replica=replica)
        add(t, "go_gc_duration_seconds_count", snap.gc_cycles, replica=replica)
        add(t, "process_cpu_seconds_total", snap.cpu_seconds_total, replica=replica)
        # The GC's CPU by class, as the runtime's metrics export it (P-seconds; the total holds
        # idle mark work, which the GC CPU limiter and gctrace's percentage leave out).
        add(t, "go_cpu_classes_gc_total_cpu_seconds_total", snap.gc_cpu_seconds_total, replica=replica)
        add(t, "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total", snap.gc_mark_dedicated_seconds_total,
            replica=replica)  # fmt: skip
        add(t, "go_cpu_classes_gc_mark_assist_cpu_seconds_total", snap.gc_mark_assist_seconds_total, replica=replica)
        add(t, "go_cpu_classes_gc_mark_idle_cpu_seconds_total", snap.gc_mark_idle_seconds_total, replica=replica)
        add(t, "simapf_live_bytes", round(snap.live_bytes), replica=replica)
        add(t, "simapf_inflight_live_bytes", round(snap.inflight_live_bytes), replica=replica)
        add(t, "simapf_oom_kills_total", snap.oom_kills, replica=replica)
        self.readings[i].append(ProcessReading(
            t, rss, snap.cpu_seconds_total, snap.gc_cpu_seconds_total, snap.gc_mark_dedicated_seconds_total,
            snap.gc_mark_assist_seconds_total, snap.gc_mark_idle_seconds_total, snap.gc_cycles))  # fmt: skip
        if facts.openapi_v2_eager:
            add(t, "aggregator_openapi_v2_regeneration_count", facts.openapi_v2_rebuilds, replica=replica)
        self.scraped_peak_rss_by_replica[i] = max(self.scraped_peak_rss_by_replica[i], rss)
        self.scraped_peak_heap_by_replica[i] = max(self.scraped_peak_heap_by_replica[i], heap)
        if self.steady_from_ns is not None and snap.t_ns >= self.steady_from_ns:
            self.scraped_peak_rss_steady_by_replica[i] = max(self.scraped_peak_rss_steady_by_replica[i], rss)
            self.scraped_peak_heap_steady_by_replica[i] = max(self.scraped_peak_heap_steady_by_replica[i], heap)
        if snap.up:
            for g in facts.levels:
                name = g.name
                add(t, "apiserver_flowcontrol_current_executing_seats", g.executing_seats, priority_level=name,
                    replica=replica)  # fmt: skip
                add(t, "apiserver_flowcontrol_current_executing_requests", g.executing_requests, priority_level=name,
                    replica=replica)  # fmt: skip
                add(t, "apiserver_flowcontrol_current_inqueue_requests", g.inqueue_requests, priority_level=name,
                    replica=replica)  # fmt: skip
                add(t, "apiserver_flowcontrol_current_limit_seats", g.limit_seats, priority_level=name,
                    replica=replica)  # fmt: skip
                add(t, "apiserver_flowcontrol_nominal_limit_seats", g.nominal_limit_seats, priority_level=name,
                    replica=replica)  # fmt: skip
        for (name, fs), n in facts.dispatched_by_flow.items():
            add(t, "apiserver_flowcontrol_dispatched_requests_total", n, priority_level=name, flow_schema=fs,
                replica=replica)  # fmt: skip
        rejected = 0
        for (name, fs, reason), n in facts.rejected_by_flow.items():
            add(t, "apiserver_flowcontrol_rejected_requests_total", n, priority_level=name, flow_schema=fs,
                reason=reason, replica=replica)  # fmt: skip
            rejected += n
        add(t, "apiserver_longrunning_requests", self.cluster.open_watches(i), verb="WATCH", replica=replica)
        if len(self.cluster.servers) > 1:
            add(t, "simapf_client_connections", self.cluster.balancer.connections[i], replica=replica)
        return snap.up and snap.state == "up", rejected

    def _killed(self, death: Death) -> None:
        if death.rss_bytes is not None and death.demand_bytes is not None:  # an OOM kill
            self.rss_at_oom_kill = max(self.rss_at_oom_kill or 0.0, death.rss_bytes)
            self.oom_demand = max(self.oom_demand or 0.0, death.demand_bytes)

    def recovery_s(self, from_s: float) -> float | None:
        """Seconds from `from_s` until the first healthy scrape (up, caches ready, network up,
        every informer watching, no rejection in the interval); None if never."""
        for t, healthy in self.health:
            if t > from_s and healthy:
                return t - from_s
        return None


# ---------------------------------------------------------------------- lean observation


def scraped_peak(trace: "Sequence[float]", trace_every_s: float, scrape_every_s: float | None) -> float:
    """The highest reading of a scraper that samples every `scrape_every_s`, averaged over the
    phase of its scrapes: the peak a dashboard shows, in expectation over when its scrapes fall,
    from a trace sampled every `trace_every_s`. Without a scrape interval (or one no longer than
    the trace's step), the trace's own maximum."""
    if not len(trace):
        return 0.0
    m = int(round(scrape_every_s / trace_every_s)) if scrape_every_s else 1
    if m <= 1:
        return float(max(trace))
    phases = min(m, len(trace))
    return sum(float(max(trace[k::m])) for k in range(phases)) / phases


@dataclass(frozen=True)
class Reading:
    """One lean scrape: the apiserver's figures an experiment's dashboard would read."""

    t_s: float
    rss_bytes: float  # the highest replica's
    heap_inuse_bytes: float  # the highest replica's
    cpu_seconds_total: float  # every replica's process CPU
    client_cpu_seconds_total: float  # co-located clients' CPU
    ok_total: int  # answered 200, every replica
    rejected_total: int  # answered 429
    due_total: int  # client requests due so far: sent, or held back by max_in_flight
    pending: int  # requests queued or executing in the apiserver


@dataclass(frozen=True)
class Readings:
    """What a lean run read (`Simulation(..., lean=True)`): a `Reading` per scrape from the
    scenario's `run.steady_from_s` on, and a few totals of the whole run. No per-request table,
    no series, no pandas: what a calibration needs of a run, at the cost of the run alone."""

    scrape_interval_s: float
    scrapes: list[Reading]
    requests_total: int  # every answer, of the whole run
    ok_total: int
    rejected_total: int
    failed_total: int
    due_total: int
    oom_kills: int

    def scraped_peak_rss(self, scrape_every_s: float | None) -> float:
        """The peak RSS a dashboard scraping every `scrape_every_s` would show (`scraped_peak`)."""
        return scraped_peak([r.rss_bytes for r in self.scrapes], self.scrape_interval_s, scrape_every_s)

    @property
    def window(self) -> tuple[Reading, Reading] | None:
        """The first and the last reading, if they span some time."""
        if len(self.scrapes) < 2 or self.scrapes[-1].t_s <= self.scrapes[0].t_s:
            return None
        return self.scrapes[0], self.scrapes[-1]


class Dashboard:
    """The lean observer: at every scrape from `steady_from_s` on, one `Reading`; nothing per
    request (the cluster has no observer) and no series."""

    def __init__(self, cluster: "Cluster", groups: list["ClientGroup"], scrape_interval_s: float,
                 steady_from_s: float = 0.0) -> None:  # fmt: skip
        self.cluster = cluster
        self.groups = groups
        self.scrape_interval_s = scrape_interval_s
        self.steady_from_s = steady_from_s
        self.scrapes: list[Reading] = []

    def scrape(self) -> None:
        cluster = self.cluster
        t = cluster.clock.now / NS_PER_S
        if t < self.steady_from_s:
            return
        rss = heap = cpu = client = 0.0
        ok = rejected = pending = 0
        for server in cluster.servers:
            facts = server.snapshot()
            snap = facts.resources
            rss = max(rss, round(snap.rss_bytes))  # in whole bytes, as a full run's scrape reads it
            heap = max(heap, round(snap.heap_inuse_bytes))
            cpu += snap.cpu_seconds_total
            client += snap.client_cpu_seconds_total
            ok += facts.completed[OK]
            rejected += facts.completed[REJECTED]
            pending += facts.pending
        self.scrapes.append(Reading(t, rss, heap, cpu, client, ok, rejected, self._due(), pending))

    def mark(self) -> None:
        """A window starts now: the lean readings are those of the scrapes, evenly spaced."""

    def finish(self) -> None:
        """The run is over: nothing is left to read."""

    def _due(self) -> int:
        return sum(g.stats.attempts + len(g.held) for g in self.groups)

    def readings(self) -> Readings:
        snaps = [server.snapshot() for server in self.cluster.servers]
        return Readings(
            scrape_interval_s=self.scrape_interval_s,
            scrapes=self.scrapes,
            requests_total=sum(sum(s.completed.values()) for s in snaps),
            ok_total=sum(s.completed[OK] for s in snaps),
            rejected_total=sum(s.completed[REJECTED] for s in snaps),
            failed_total=sum(s.completed[FAILED] for s in snaps),
            due_total=self._due(),
            oom_kills=sum(s.oom_kills for s in snaps),
        )
