"""How much a run will hold and how long it will take, estimated before anything is built.

A scenario whose parts each pass their own bound can still be too large together: 100,000
instances of each of a thousand clients, a thousand resources of 50 million objects, a scrape
every millisecond of a day. `check` refuses, in one line with the estimate and the bound, a run
that cannot fit; `notice` is the line the command line prints before a run that is allowed but
long, so that a large run does not sit silent while it is built.

The costs per unit are what a run of simapf holds and spends for each instance, object,
namespace, queue, series sample and request, rounded up: an estimate, not a promise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simapf.errors import ConfigError
from simapf.scenario.schema.base import MAX_INSTANCES
from simapf.scenario.schema.inventory import MAX_OBJECTS
from simapf.scenario.schema.scenario import EXACT_LATENCIES
from simapf.scenario.schema.server import MAX_QUEUES_HELD

if TYPE_CHECKING:
    from simapf.apf.objects import APFObjects

# Bytes held and seconds spent per unit. An open-loop client's or writer's instance draws its
# arrivals ahead, in blocks; the other kinds hold only their state.
BYTES_PER_INSTANCE = {"open_loop": 48e3, "mutator": 48e3}
BYTES_PER_OTHER_INSTANCE = 10e3
SECONDS_PER_INSTANCE = 1e-3
BYTES_PER_OBJECT = 10.0
SECONDS_PER_OBJECT = 1e-7
BYTES_PER_NAMESPACE = 200.0
SECONDS_PER_NAMESPACE = 1e-5
BYTES_PER_QUEUE = 1000.0
SECONDS_PER_QUEUE = 1e-5
BYTES_PER_SAMPLE = 500.0  # one value of one series at one scrape, until the run's tables are written
SECONDS_PER_SAMPLE = 5e-6
BYTES_PER_REQUEST = 16.0  # its latency, kept for the percentiles (up to EXACT_LATENCIES of a class)
BYTES_PER_RECORD = 600.0  # run.request_records: one row per request
SECONDS_PER_REQUEST = 2e-4
BYTES_PER_RUN = 150e6  # the interpreter, the libraries and the model, before any of the above

# Series every scrape samples: per replica its process and runtime gauges, and per priority level
# five APF gauges; per FlowSchema a dispatch counter; the request counters by verb and code.
SERIES_PER_REPLICA = 11
SERIES_PER_LEVEL = 5
SERIES_PER_CLIENT = 5
REQUEST_COUNTER_SERIES = 8

# What a run may need: series samples (the run's tables are built from them in memory) and
# memory in all. Past MAX_RUN_BYTES a run would not fit a laptop; past NOTICE_* it is announced
# before it starts.
MAX_SAMPLES = 10_000_000
MAX_RUN_BYTES = 8 * 2**30
NOTICE_BYTES = 2 * 2**30
NOTICE_SECONDS = 60.0


@dataclass(frozen=True)
class Work:
    """What one run of a scenario holds and does."""

    instances: dict[str, int]  # client instances at their peak, by client kind
    objects: int  # objects at the start, all resources
    namespaces: int
    queues: int  # APF queues of one apiserver, all levels, in the largest configuration of the run
    samples: float  # series samples: scrapes x series
    requests: float  # what the rate-driven clients send (Scenario.expected_requests)
    records: bool  # run.request_records
    replicas: int
    exact_latencies: bool = False  # run.exact_percentiles
    latency_classes: int = 1  # request classes whose latencies are kept: about two per client (its, the server's)

    @property
    def instance_count(self) -> int:
        return sum(self.instances.values())

    def memory_bytes(self) -> float:
        instances = sum(n * BYTES_PER_INSTANCE.get(kind, BYTES_PER_OTHER_INSTANCE) for kind, n in self.instances.items())
        # Past EXACT_LATENCIES of a class its latencies are a sketch of fixed size, unless asked exact.
        timed = self.requests if self.exact_latencies else min(self.requests, EXACT_LATENCIES * self.latency_classes)
        return (BYTES_PER_RUN + instances + self.objects * BYTES_PER_OBJECT + self.namespaces * BYTES_PER_NAMESPACE
                + self.replicas * self.queues * BYTES_PER_QUEUE + self.samples * BYTES_PER_SAMPLE
                + timed * BYTES_PER_REQUEST + (self.requests * BYTES_PER_RECORD if self.records else 0.0))  # fmt: skip

    def seconds(self) -> float:
        return (self.instance_count * SECONDS_PER_INSTANCE + self.objects * SECONDS_PER_OBJECT
                + self.namespaces * SECONDS_PER_NAMESPACE + self.replicas * self.queues * SECONDS_PER_QUEUE
                + self.samples * SECONDS_PER_SAMPLE + self.requests * SECONDS_PER_REQUEST)  # fmt: skip

    def text(self) -> str:
        """The run's size as a user reads it."""
        return (f"~{self.requests:,.0f} requests, {self.instance_count:,} client instances, {self.objects:,} objects, "
                f"{self.samples:,.0f} series samples: ~{gib(self.memory_bytes())} and ~{duration(self.seconds())}")  # fmt: skip


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{math.ceil(seconds)} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def estimate(loaded: Any) -> Work:
    """The work of one run of `loaded`."""
    sc = loaded.scenario
    peak = {c.name: c.count for c in sc.clients}
    for e in sc.events:
        if e.kind == "ramp" and e.client in peak:
            peak[e.client] = max(peak[e.client], e.to_count)
    instances: dict[str, int] = {}
    for c in sc.clients:
        instances[c.kind] = instances.get(c.kind, 0) + peak[c.name]
    configurations = [loaded.apf, *loaded.event_apf.values()]
    series = (sc.apiserver.replicas * max(_series_per_replica(o) for o in configurations) + 1 + len(sc.resources)
              + SERIES_PER_CLIENT * len(sc.clients) + REQUEST_COUNTER_SERIES)  # fmt: skip
    scrapes = sc.run.duration_s / sc.run.scrape_interval_s + 1
    return Work(
        instances=instances,
        objects=sum(r.count for r in sc.resources),
        namespaces=sum(r.namespaces for r in sc.resources),
        queues=max(_queues(o) for o in configurations),
        samples=scrapes * series,
        requests=sc.expected_requests(),
        records=sc.run.request_records,
        replicas=sc.apiserver.replicas,
        exact_latencies=sc.run.exact_percentiles,
        latency_classes=2 * max(1, len(sc.clients)),
    )


def _queues(objects: "APFObjects") -> int:
    return sum(pl.queuing.queues for pl in objects.priority_levels if pl.queuing is not None)


def _series_per_replica(objects: "APFObjects") -> int:
    return SERIES_PER_REPLICA + SERIES_PER_LEVEL * len(objects.priority_levels) + len(objects.flow_schemas)


def check(loaded: Any) -> Work:
    """The run's work, or a `ConfigError` (one line, the estimate and the bound) if it cannot fit."""
    work = estimate(loaded)
    sc = loaded.scenario
    if work.instance_count > MAX_INSTANCES:
        raise ConfigError(f"clients: {work.instance_count:,} instances at their peak (ramps included), more than "
                          f"{MAX_INSTANCES:,} in all: simapf keeps each one's state and random streams")  # fmt: skip
    if work.objects > MAX_OBJECTS:
        raise ConfigError(f"resources: {work.objects:,} objects in all, more than {MAX_OBJECTS:,}: simapf keeps "
                          "each one's size")  # fmt: skip
    if work.queues > MAX_QUEUES_HELD:
        raise ConfigError(f"apf: the priority levels have {work.queues:,} queues in all, more than "
                          f"{MAX_QUEUES_HELD:,}: simapf holds each queue")  # fmt: skip
    if work.samples > MAX_SAMPLES:
        raise ConfigError(
            f"run: {work.samples:,.0f} series samples ({work.samples / (sc.run.duration_s / sc.run.scrape_interval_s + 1):,.0f} "
            f"series every {sc.run.scrape_interval_s:g} s for {sc.run.duration_s:g} s), more than {MAX_SAMPLES:,}: "
            "raise run.scrape_interval_s or shorten the run"
        )
    if work.memory_bytes() > MAX_RUN_BYTES:
        raise ConfigError(f"the run would need ~{gib(work.memory_bytes())} of memory, more than {gib(MAX_RUN_BYTES)} "
                          f"({work.text()}); make it smaller")  # fmt: skip
    return work


def notice(work: Work, runs: int = 1, workers: int = 1) -> str | None:
    """One line announcing a long or large piece of work (`runs` runs of `work`, on `workers`
    at once), or None if it is neither."""
    seconds = work.seconds() * math.ceil(runs / max(workers, 1))
    if seconds < NOTICE_SECONDS and work.memory_bytes() < NOTICE_BYTES:
        return None
    if runs == 1:
        return f"a large run: {work.text()}"
    return (f"{runs:,} runs of ~{duration(work.seconds())} each: ~{duration(seconds)} on {workers} worker"
            f"{'s' if workers != 1 else ''}, ~{gib(work.memory_bytes())} each ({work.text()})")  # fmt: skip
