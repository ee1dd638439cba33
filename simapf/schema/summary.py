"""The schema of a run's summary (summary.json), one model per section.

A simulated run's summary (simapf.simulation.collect) and a measured one (simapf.bench.observe)
are both instances of `Summary`: the same sections, the same fields, the same units (bytes are
whole numbers of bytes, times seconds, CPU cores). A measured run leaves out what the bench
cannot read (None) and adds `measured` and `bench`. `--uncertainty` adds an `<field>_interval`
beside each headline figure (simapf.uncertainty.figures) and the `uncertainty` section.

Every section forbids fields it does not declare, so a summary with a field this schema does not
know fails validation: adding a field to a summary means adding it here (and to docs/summary.md).
`validate(summary)` returns the typed summary or raises pydantic's ValidationError naming the
field's path.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict, model_validator


class ModelErrorBand(BaseModel):
    """How far measurements fell from predictions of one kind (simapf.uncertainty.model_error.Band)."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    lo: float  # the residual quantiles
    hi: float
    level: float
    rows: int
    sources: int
    regime: str
    residual: str  # what a residual is: ln(predicted/measured) or predicted - measured


class NoModelErrorBand(BaseModel):
    """Why a kind of figure has no model-error band: its interval is the parameters' alone."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    none: str


class ParameterSpread(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lo: float | None
    hi: float | None
    runs: int


class IntervalParts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    parameters: ParameterSpread
    model_error: ModelErrorBand | NoModelErrorBand


class Interval(BaseModel):
    """A headline figure's interval (simapf.uncertainty.intervals.Interval.as_dict)."""

    model_config = ConfigDict(extra="forbid")
    lo: float | None
    hi: float | None
    level: float
    parts: IntervalParts

    @property
    def parameters_only(self) -> bool:
        """Whether the model's own error is unknown here, so the interval is the parameters' alone."""
        return isinstance(self.parts.model_error, NoModelErrorBand)


class Section(BaseModel):
    """A section: its declared fields, an interval beside any of them (`<field>_interval`), and
    counts keyed by what happened (`<COUNTED_BY>_<reason>`) where a section declares them."""

    model_config = ConfigDict(extra="allow")
    COUNTED_BY: ClassVar[str | None] = None

    @model_validator(mode="after")
    def _only_intervals_and_counts(self) -> Section:
        extra = self.__pydantic_extra__ or {}
        for name, value in extra.items():
            field = name.removesuffix("_interval")
            if field != name and field in type(self).model_fields:
                extra[name] = Interval.model_validate(value)
            elif not self._is_count(name, value):
                raise ValueError(f"unknown field {name!r}")
        return self

    def interval(self, field: str) -> Interval | None:
        """The interval `--uncertainty` gave a figure (`<field>_interval`), or None."""
        return (self.model_extra or {}).get(field + "_interval")

    def counts(self) -> dict[str, int]:
        """The section's counts by what happened (`<COUNTED_BY>_<reason>`), in the order written."""
        return {k: v for k, v in (self.model_extra or {}).items() if self._is_count(k, v)}

    def _is_count(self, name: str, value: Any) -> bool:
        return self.COUNTED_BY is not None and name.startswith(f"{self.COUNTED_BY}_") and type(value) is int


class Memory(Section):
    peak_rss_bytes: int
    peak_heap_inuse_bytes: int | None
    scraped_peak_rss_bytes: int | None
    scraped_peak_heap_inuse_bytes: int | None
    memory_limit_bytes: int | None
    steady_state_from_s: float
    peak_rss_steady_bytes: int | None
    scraped_peak_rss_steady_bytes: int | None
    oom_killed: bool
    rss_at_oom_kill_bytes: int | None
    oom_demand_bytes: int | None
    mean_rss_steady_bytes: int | None
    peak_heap_steady_bytes: int | None
    scraped_peak_heap_steady_bytes: int | None


class Cpu(Section):
    mean_cores: float
    peak_cores: float
    cores: float
    mean_cores_steady: float
    # The Go GC's CPU by class (a measured run reads its total and cycles only).
    gc_mean_cores: float | None
    gc_peak_cores: float | None = None
    gc_dedicated_mean_cores: float | None = None
    gc_assist_mean_cores: float | None = None
    gc_idle_mark_mean_cores: float | None = None
    gc_compulsory_peak_cores: float | None = None
    gc_cpu_fraction: float | None = None
    gc_cycles: int | None
    client_mean_cores: float


class Etcd(Section):
    cores: int
    members: int
    member_round_trip_s: float | None
    embedded: bool
    fitted_deployment: bool
    ranges: int | None
    read_index_rounds: int | None = None
    busy_core_s: float
    busy_fraction: float | None
    busy_fraction_steady: float | None
    apiserver_cores_fraction_steady: float | None
    bottleneck: bool


class Webhook(Section):
    name: str
    calls: int
    timeouts: int


class Process(Section):
    oom_kills: int
    kills: int
    restarts: int
    down_s: float


class ReplicaRequests(Section):
    ok: int
    rejected: int
    unavailable: int
    failed: int


class Replica(Section):
    replica: int
    peak_rss_bytes: int
    peak_rss_steady_bytes: int | None
    scraped_peak_rss_bytes: int | None
    scraped_peak_rss_steady_bytes: int | None
    mean_cores: float
    oom_kills: int
    kills: int
    restarts: int
    down_s: float
    requests: ReplicaRequests
    openapi_v2_rebuilds: int | None = None
    openapi_v2_rebuild_core_s: float | None = None
    connections_at_end: int | None = None
    open_watches_at_end: int | None = None


class Death(Section):
    replica: int
    at_s: float
    reason: str
    rss_bytes: int | None
    connections: int | None
    open_watches: int | None


class Requests(Section):
    total: int
    by_outcome: dict[str, int]
    rejected_share: float


class ListsOnPath(Section):
    requests: int
    bytes: int


class Lists(Section):
    by_path: dict[str, ListsOnPath]


class PriorityLevel(Section):
    COUNTED_BY = "rejected"  # rejected_<reason>: its rejections by reason (queue_full, time_out, ...)
    priority_level: str
    requests: int
    dispatched: int
    rejected: int
    rejection_rate: float | None = None


class Latency(Section):
    priority_level: str
    verb: str
    count: int
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None


class ClientVerb(Section):
    """A client's logical requests of one verb, as it saw them (client_latency.csv's row)."""

    requests: int
    ok: int
    rejected: int
    unavailable: int
    failed: int
    timed_out: int
    gone: int
    error_rate: float
    min_s: float | None
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p95_s: float | None
    p99_s: float | None
    max_s: float | None
    p99_ok_s: float | None  # null: never 99 % of them succeeded


class VerbAttempts(Section):
    attempts: int
    outcomes: int
    abandoned: int
    retries_after_429: int
    in_flight_at_end: int


class Client(Section):
    client: str
    kind: str
    instances: int
    attempts: int
    outcomes: dict[str, int]
    retries_after_429: int
    in_flight_at_end: int
    by_verb: dict[str, ClientVerb]
    attempts_by_verb: dict[str, VerbAttempts] | None = None  # a measured run counts attempts per client only
    # By kind: informers, discovery clients; throttled or processing clients.
    lists: int | None = None
    relists: int | None = None
    watch_breaks: int | None = None
    gone_410: int | None = None
    runs: int | None = None
    run_p50_s: float | None = None
    run_max_s: float | None = None
    mean_throttle_wait_s: float | None = None
    processing_busy_s: float | None = None


class Event(Section):
    index: int
    kind: str
    at_s: float
    end_s: float
    recovery_s: float | None
    peak_rss_bytes_until_next_event: int | None
    scraped_peak_rss_bytes_until_next_event: int | None
    oom_kills_until_next_event: int


class Watches(Section):
    open_at_end: int
    events_delivered: float | None


class LoadBalancer(Section):
    policy: str
    goaways: int


class HeapProfile(Section):
    file: str
    at_s: float | None
    rss_bytes: int | None


class Bench(Section):
    """What made a measured run (simapf.bench.observe.bench_record)."""

    release: str
    versions: dict[str, str]
    server_version: str
    kube_apiserver_flags: list[str]
    kube_apiserver_env: dict[str, str]
    gates: dict[str, bool]
    cpu_quota_cores: float
    etcd_cpu_quota_cores: float
    machine: dict[str, Any]
    base_rss_bytes: int
    base_heap_live_bytes: float | None  # runtime/metrics' live heap at the first scrape
    scrapes: int
    scrape_errors: int
    rss_samples: int
    heap_profile: HeapProfile | None
    notes: list[str]


class Regime(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    size: str
    overloaded: bool


class DrawnParameters(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prior_sd: float
    drawn: list[str]


class Uncertainty(BaseModel):
    """What a run's intervals rest on (simapf.uncertainty.intervals.attach)."""

    model_config = ConfigDict(extra="forbid")
    draws: int
    level: float
    regime: Regime
    parameters: DrawnParameters
    model_error: dict[str, ModelErrorBand | NoModelErrorBand]  # by kind of figure


class Summary(Section):
    simapf_version: str
    scenario_name: str
    seed: int
    source: str | None
    duration_s: float
    wall_s: float
    memory: Memory
    cpu: Cpu
    etcd: Etcd
    admission_webhooks: list[Webhook]
    process: Process
    replicas: list[Replica]
    deaths: list[Death]
    requests: Requests
    lists: Lists | None = None
    priority_levels: list[PriorityLevel]
    latency: list[Latency]
    clients: list[Client]
    events: list[Event]
    watches: Watches
    load_balancer: LoadBalancer
    extrapolation: list[str]
    provenance: dict[str, Any]
    scenario: dict[str, Any]
    # A measured run's (simapf measure): that it was, and what made it.
    measured: bool = False
    bench: Bench | None = None
    # `--uncertainty N`: what the intervals rest on.
    uncertainty: Uncertainty | None = None


def validate(summary: Mapping[str, Any]) -> Summary:
    """The typed summary; pydantic's ValidationError names the path of a field that does not fit."""
    return Summary.model_validate(summary)


def typed(summary: Summary | Mapping[str, Any]) -> Summary:
    """`summary` as the model: itself if it is one, else validated. Readers take either, so a
    caller holding the typed summary does not pay for validating it again."""
    return summary if isinstance(summary, Summary) else validate(summary)
