"""What each metric family of a run's OpenMetrics export is: its type, unit and help text.

A family named after one of kube-apiserver's metrics carries the help text kube-apiserver v1.37
(the version simapf simulates by default) shows for it on `/metrics`, whatever
`kubernetes.version` a scenario sets, copied from where upstream registers it, so a dashboard
or a metadata lookup built for a real cluster reads a run the same way:

- k8s.io/apiserver: `pkg/util/flowcontrol/metrics/metrics.go` (`apiserver_flowcontrol_*`),
  `pkg/endpoints/metrics/metrics.go` (`apiserver_request_*`, `apiserver_longrunning_requests`),
  `pkg/storage/etcd3/metrics/metrics.go` (`apiserver_storage_objects`);
  k8s.io/kube-aggregator: `pkg/controllers/openapi/aggregator/metrics.go`. These are
  registered through k8s.io/component-base, which puts the metric's stability level (and its
  deprecation) in front of the help text on `/metrics`: `[BETA] Number of ...`.
- prometheus/client_golang v1.23 (the version component-base v0.37 uses), registered as they
  are: `process_*` (`prometheus/process_collector.go`), `go_memstats_*` and
  `go_gc_duration_seconds` (`prometheus/go_collector.go`), and the runtime/metrics families
  (component-base turns all of them on), whose help is Go's description of the runtime metric
  followed by "Sourced from <runtime metric>." (`prometheus/go_collector_latest.go`; the
  description from Go 1.26's `runtime/metrics/description.go`).

Families of simapf's own (`simapf_*`, and `up`, which Prometheus itself records for every
scrape target) have help texts that say what they count in the simulation.

The type is the one the export writes, which is upstream's except where OpenMetrics cannot
give it under upstream's sample name (see `aggregator_openapi_v2_regeneration_count`). The unit
is OpenMetrics' `# UNIT`: the base unit the family's name ends with, as Prometheus names go.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    type: str  # OpenMetrics type: counter, gauge, histogram, summary, unknown
    help: str  # the `# HELP` text
    unit: str = ""  # OpenMetrics unit; the family's name ends with `_<unit>`


def _kube(stability: str, help: str, deprecated_since: str | None = None) -> str:
    """A help text as k8s.io/component-base shows it on /metrics (`annotateStabilityLevel`,
    `markDeprecated`): `[STABILITY] (Deprecated since X) help`."""
    if deprecated_since:
        help = f"(Deprecated since {deprecated_since}) {help}"
    return f"[{stability}] {help}"


def _runtime(description: str, runtime_metric: str) -> str:
    """A runtime/metrics family's help as client_golang writes it (`attachOriginalName`)."""
    return f"{description} Sourced from {runtime_metric}."


# Keyed by the name a series (or a histogram) has in the run's tables: a counter's ends in
# `_total`, a summary's sample in `_count`, as Prometheus stores them.
FAMILIES: dict[str, Family] = {
    # k8s.io/apiserver pkg/util/flowcontrol/metrics/metrics.go
    "apiserver_flowcontrol_current_executing_requests": Family("gauge", _kube(
        "BETA", "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API "
        "Priority and Fairness subsystem")),
    "apiserver_flowcontrol_current_executing_seats": Family("gauge", _kube(
        "BETA", "Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any "
        "stage otherwise) requests in the API Priority and Fairness subsystem")),
    "apiserver_flowcontrol_current_inqueue_requests": Family("gauge", _kube(
        "BETA", "Number of requests currently pending in queues of the API Priority and Fairness subsystem")),
    "apiserver_flowcontrol_current_limit_seats": Family("gauge", _kube(
        "ALPHA", "current derived number of execution seats available to each priority level")),
    "apiserver_flowcontrol_nominal_limit_seats": Family("gauge", _kube(
        "BETA", "Nominal number of execution seats configured for each priority level")),
    "apiserver_flowcontrol_dispatched_requests_total": Family("counter", _kube(
        "BETA", "Number of requests executed by API Priority and Fairness subsystem")),
    "apiserver_flowcontrol_rejected_requests_total": Family("counter", _kube(
        "BETA", "Number of requests rejected by API Priority and Fairness subsystem")),
    "apiserver_flowcontrol_request_wait_duration_seconds": Family("histogram", _kube(
        "BETA", "Length of time a request spent waiting in its queue"), "seconds"),
    "apiserver_flowcontrol_request_execution_seconds": Family("histogram", _kube(
        "ALPHA", "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in "
        "the API Priority and Fairness subsystem"), "seconds"),
    # k8s.io/apiserver pkg/endpoints/metrics/metrics.go
    "apiserver_request_total": Family("counter", _kube(
        "STABLE", "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, "
        "scope, component, and HTTP response code.")),
    "apiserver_request_duration_seconds": Family("histogram", _kube(
        "STABLE", "Response latency distribution in seconds for each verb, dry run value, group, version, resource, "
        "subresource, scope and component."), "seconds"),
    "apiserver_longrunning_requests": Family("gauge", _kube(
        "STABLE", "Gauge of all active long-running apiserver requests broken out by verb, group, version, "
        "resource, scope and component. Not all requests are tracked this way.")),
    # k8s.io/apiserver pkg/storage/etcd3/metrics/metrics.go. Deprecated in 1.34 for
    # apiserver_resource_objects {group, resource}; a 1.37 apiserver hides it unless started with
    # --show-hidden-metrics-for-version=1.36, and then shows this text.
    "apiserver_storage_objects": Family("gauge", _kube(
        "STABLE", "[DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the "
        "time of last check split by kind. In case of a fetching error, the value will be -1.", "1.34.0")),
    # k8s.io/kube-aggregator pkg/controllers/openapi/aggregator/metrics.go: a counter upstream,
    # but one whose name does not end in _total. Prometheus scrapes it from the text format
    # under this very name; OpenMetrics would name a counter's sample `..._count_total`, so the
    # export writes it untyped to keep the name a dashboard queries.
    "aggregator_openapi_v2_regeneration_count": Family("unknown", _kube(
        "ALPHA", "Counter of OpenAPI v2 spec regeneration count broken down by causing APIService name and reason.")),
    # prometheus/client_golang prometheus/process_collector.go
    "process_resident_memory_bytes": Family("gauge", "Resident memory size in bytes.", "bytes"),
    "process_cpu_seconds_total": Family("counter", "Total user and system CPU time spent in seconds.", "seconds"),
    # prometheus/client_golang prometheus/go_collector.go
    "go_memstats_heap_inuse_bytes": Family("gauge", "Number of heap bytes that are in use. Equals to "
                                           "/memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes",
                                           "bytes"),  # fmt: skip
    "go_memstats_next_gc_bytes": Family("gauge", "Number of heap bytes when next garbage collection will take place. "
                                        "Equals to /gc/heap/goal:bytes.", "bytes"),  # fmt: skip
    # A summary upstream (quantiles of the pauses, _sum and _count); simapf counts the cycles only.
    "go_gc_duration_seconds_count": Family("summary", "A summary of the wall-time pause (stop-the-world) duration "
                                           "in garbage collection cycles.", "seconds"),  # fmt: skip
    # prometheus/client_golang prometheus/go_collector_latest.go, from Go's runtime/metrics
    "go_cpu_classes_gc_total_cpu_seconds_total": Family("counter", _runtime(
        "Estimated total CPU time spent performing GC tasks. This metric is an overestimate, and not directly "
        "comparable to system CPU time measurements. Compare only with other /cpu/classes metrics. Sum of all "
        "metrics in /cpu/classes/gc.", "/cpu/classes/gc/total:cpu-seconds"), "seconds"),
    "go_cpu_classes_gc_mark_assist_cpu_seconds_total": Family("counter", _runtime(
        "Estimated total CPU time goroutines spent performing GC tasks to assist the GC and prevent it from "
        "falling behind the application. This metric is an overestimate, and not directly comparable to system CPU "
        "time measurements. Compare only with other /cpu/classes metrics.",
        "/cpu/classes/gc/mark/assist:cpu-seconds"), "seconds"),
    "go_cpu_classes_gc_mark_dedicated_cpu_seconds_total": Family("counter", _runtime(
        "Estimated total CPU time spent performing GC tasks on processors (as defined by GOMAXPROCS) dedicated to "
        "those tasks. This includes time spent with the world stopped due to the GC. This metric is an "
        "overestimate, and not directly comparable to system CPU time measurements. Compare only with other "
        "/cpu/classes metrics.", "/cpu/classes/gc/mark/dedicated:cpu-seconds"), "seconds"),
    "go_cpu_classes_gc_mark_idle_cpu_seconds_total": Family("counter", _runtime(
        "Estimated total CPU time spent performing GC tasks on spare CPU resources that the Go scheduler could not "
        "otherwise find a use for. This should be subtracted from the total GC CPU time to obtain a measure of "
        "compulsory GC CPU time. This metric is an overestimate, and not directly comparable to system CPU time "
        "measurements. Compare only with other /cpu/classes metrics.", "/cpu/classes/gc/mark/idle:cpu-seconds"),
        "seconds"),
    # Prometheus records `up` for every target it scrapes; simapf writes it per apiserver replica.
    "up": Family("gauge", "simapf: 1 when the apiserver replica's process was running at the scrape, 0 while it "
                 "was down (killed, restarting); Prometheus records the same for every target it scrapes."),
    # simapf's own
    "simapf_live_bytes": Family("gauge", "simapf: bytes of the apiserver's Go heap that are reachable: the baseline, "
                                "the watch caches and what in-flight requests hold.", "bytes"),  # fmt: skip
    "simapf_inflight_live_bytes": Family("gauge", "simapf: bytes of the apiserver's Go heap that in-flight requests "
                                         "hold reachable (part of simapf_live_bytes).", "bytes"),  # fmt: skip
    "simapf_oom_kills_total": Family("counter", "simapf: times the apiserver replica's process was killed for "
                                     "exceeding its memory limit."),  # fmt: skip
    "simapf_watch_events_total": Family("counter", "simapf: watch events delivered to clients' watches, every "
                                        "replica together."),  # fmt: skip
    "simapf_client_connections": Family("gauge", "simapf: clients' connections the load balancer holds open to the "
                                        "apiserver replica."),  # fmt: skip
    "simapf_client_instances": Family("gauge", "simapf: running instances of the scenario's client (label client)."),
    "simapf_client_requests_total": Family("counter", "simapf: requests of the scenario's client by how they "
                                           "ended, after any retries (label code: ok, rejected, failed or gone)."),
    "simapf_client_retries_total": Family("counter", "simapf: attempts the scenario's client sent again after a 429, "
                                          "as client-go retries."),  # fmt: skip
    "simapf_informers_watching": Family("gauge", "simapf: informer instances of the scenario's client that have "
                                        "synced and are watching."),  # fmt: skip
    "simapf_informer_lists_total": Family("counter", "simapf: full LISTs (first lists and relists) the scenario's "
                                          "informers made."),  # fmt: skip
}  # fmt: skip


def family_of(series_name: str) -> Family | None:
    """The family a series (or histogram) of a run belongs to; None for a name simapf does not know."""
    return FAMILIES.get(series_name)


def family_name(series_name: str, family: Family) -> str:
    """The name of the family in the exposition: a counter's without `_total`, a summary's
    without the `_count` of its sample, as OpenMetrics names families."""
    if family.type == "counter":
        return series_name.removesuffix("_total")
    if family.type == "summary":
        return series_name.removesuffix("_count")
    return series_name
