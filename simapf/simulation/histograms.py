"""A run's latency histograms, as kube-apiserver exposes them: upstream's names, labels and
bucket boundaries, cumulative counts at every scrape.

- `apiserver_request_duration_seconds` {verb, resource, scope}: every answered request that is
  not a WATCH, from its arrival to its response (k8s.io/apiserver endpoints/metrics, STABLE).
- `apiserver_flowcontrol_request_wait_duration_seconds` {priority_level, flow_schema, execute}:
  APF's wait of every non-exempt request; `execute="false"` only for a request rejected when it
  arrived (one that timed out in its queue counts as `"true"`, as upstream records it).
- `apiserver_flowcontrol_request_execution_seconds` {priority_level, flow_schema, type}: from
  dispatch to the end of the handler (a WATCH: its initialisation), `type` regular or watch.

Buckets are those of k8s.io/apiserver v0.37 (`../shared/reference/apf-mechanics.md`
§metrics for APF's; endpoints/metrics/metrics.go for the request duration). Counts are kept per
label set as plain lists and copied at each scrape only when they changed, so a scrape costs
one tuple per label set that saw a request since the last one.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import pandas as pd

from simapf.apf.types import NS_PER_S


# eq=False: a spec is one of the module's three and compares (and hashes) by identity; the
# observations key their counts by it three times per request, and hashing 23 bounds each time
# was a tenth of a run's bookkeeping.
@dataclass(frozen=True, eq=False)
class HistogramSpec:
    name: str
    bounds: tuple[float, ...]  # upper bounds (le), +Inf implied
    labels: tuple[str, ...]


REQUEST_DURATION = HistogramSpec(
    "apiserver_request_duration_seconds",
    (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60),
    ("verb", "resource", "scope"),
)
_APF_BOUNDS = (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)
APF_WAIT = HistogramSpec(
    "apiserver_flowcontrol_request_wait_duration_seconds", _APF_BOUNDS, ("priority_level", "flow_schema", "execute")
)
APF_EXECUTION = HistogramSpec(
    "apiserver_flowcontrol_request_execution_seconds", _APF_BOUNDS, ("priority_level", "flow_schema", "type")
)
SPECS = (REQUEST_DURATION, APF_WAIT, APF_EXECUTION)
LABELS = ("verb", "resource", "scope", "priority_level", "flow_schema", "execute", "type")
# Upstream's verb label is the HTTP-level verb, upper case.
UPSTREAM_VERBS = {"list": "LIST", "get": "GET", "watch": "WATCH", "create": "POST", "update": "PUT",
                  "patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE"}  # fmt: skip


class _Histogram:
    __slots__ = ("bounds", "counts", "sum", "changed")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # per bucket, not cumulative; the last is (max bound, +Inf)
        self.sum = 0.0
        self.changed = True


class Histograms:
    """Observes answered requests and keeps every scrape's cumulative counts."""

    def __init__(self) -> None:
        self.live: dict[tuple[HistogramSpec, tuple[str, ...]], _Histogram] = {}
        # Per request class (what its labels follow from), the histograms its requests go to:
        # duration, wait (execute true), wait (execute false), execution; each found in `live` at
        # its first observation, so `live` keeps the order in which label sets were first seen.
        self._classes: dict[tuple, list[_Histogram | None]] = {}
        # (time_s, spec, label values, cumulative counts, sum): one per label set per scrape
        self.snapshots: list[tuple[float, HistogramSpec, tuple[str, ...], tuple[int, ...], float]] = []
        self._last: dict[tuple[HistogramSpec, tuple[str, ...]], tuple[tuple[int, ...], float]] = {}

    def observe(self, verb: str, resource: str, namespace: str, name: str, level: str, flow_schema: str,
                exempt: bool, received_ns: int, dispatch_ns: int, done_ns: int) -> None:  # fmt: skip
        """One answered request (dispatch_ns < 0: never dispatched; `exempt`: its level is)."""
        # Upstream's `scope` label: resource (one object by name), namespace, or cluster.
        where = "resource" if name else ("namespace" if namespace else "cluster")
        key = (verb, resource, where, level, flow_schema, exempt)
        hists = self._classes.get(key)
        if hists is None:
            hists = self._classes[key] = [None, None, None, None]
        if verb != "watch":
            self._add(hists, 0, (done_ns - received_ns) / NS_PER_S, key)
        if not level or exempt:
            return
        dispatched = dispatch_ns >= 0
        waited = (dispatch_ns if dispatched else done_ns) - received_ns
        # Rejected at arrival: no wait. A request that timed out waited; upstream records it as executed.
        self._add(hists, 1 if dispatched or waited > 0 else 2, waited / NS_PER_S, key)
        if dispatched:
            self._add(hists, 3, (done_ns - dispatch_ns) / NS_PER_S, key)

    def _add(self, hists: list[_Histogram | None], i: int, seconds: float, key: tuple) -> None:
        h = hists[i]
        if h is None:
            spec, labels = self._labels(i, key)
            h = hists[i] = self.live.get((spec, labels))
            if h is None:
                h = self.live[(spec, labels)] = _Histogram(spec.bounds)
        h.counts[bisect_left(h.bounds, seconds)] += 1
        h.sum += seconds
        h.changed = True

    @staticmethod
    def _labels(i: int, key: tuple) -> tuple[HistogramSpec, tuple[str, ...]]:
        """The histogram and label values of a request class's i-th observation (see _classes)."""
        verb, resource, where, level, flow_schema, _exempt = key
        if i == 0:
            return REQUEST_DURATION, (UPSTREAM_VERBS.get(verb, verb.upper()), resource, where)
        if i == 3:
            return APF_EXECUTION, (level, flow_schema, "watch" if verb == "watch" else "regular")
        return APF_WAIT, (level, flow_schema, "true" if i == 1 else "false")

    def scrape(self, t: float) -> None:
        snapshots = self.snapshots
        last = self._last
        for key, h in self.live.items():
            if h.changed:
                running, cumulative = 0, []
                for c in h.counts:
                    running += c
                    cumulative.append(running)
                last[key] = (tuple(cumulative), h.sum)
                h.changed = False
            counts, total = last[key]
            snapshots.append((t, key[0], key[1], counts, total))

    def frame(self) -> pd.DataFrame:
        """Long form: time_s, metric (`<name>_bucket`, `_sum`, `_count`), the labels, le, value."""
        rows: list[tuple] = []
        for t, spec, values, counts, total in self.snapshots:
            labels = dict(zip(spec.labels, values))
            cells = tuple(labels.get(k, "") for k in LABELS)
            for bound, c in zip((*spec.bounds, float("inf")), counts):
                rows.append((t, f"{spec.name}_bucket", *cells, _le(bound), float(c)))
            rows.append((t, f"{spec.name}_sum", *cells, "", total))
            rows.append((t, f"{spec.name}_count", *cells, "", float(counts[-1])))
        df = pd.DataFrame.from_records(rows, columns=["time_s", "metric", *LABELS, "le", "value"])
        for column in ("metric", *LABELS, "le"):
            df[column] = df[column].astype("string")
        return df


def _le(bound: float) -> str:
    """A bucket's `le` as Prometheus writes it."""
    if bound == float("inf"):
        return "+Inf"
    return repr(float(bound))


def quantile(q: float, bounds: list[float], cumulative: list[float]) -> float:
    """Prometheus's histogram_quantile: the q-quantile by linear interpolation inside its bucket
    (bounds ascending, +Inf last; the first bucket's lower bound is 0)."""
    total = cumulative[-1]
    if total <= 0:
        return float("nan")
    rank = q * total
    for i, c in enumerate(cumulative):
        if c >= rank:
            if bounds[i] == float("inf"):
                return bounds[i - 1] if i else 0.0
            lower = bounds[i - 1] if i else 0.0
            below = cumulative[i - 1] if i else 0.0
            inside = c - below
            return lower + (bounds[i] - lower) * ((rank - below) / inside if inside else 1.0)
    return bounds[-2]
