"""The calibration's driver: a steady stream of identical LISTs into one apiserver, the shape of
the measured experiment.

The experiment behind `calibration/` data (kubernetes/kubernetes#132233) sent LISTs of one
resource at a fixed rate to an apiserver with 16 cores and server concurrency 800, every LIST
given a fixed number of seats, and read peak memory and CPU. `run_list_stream` does the same in
simulation and returns the figures a person watching the dashboard would read: after a warm-up,
the highest sampled RSS and the mean CPU over the rest of the run. `simapf.calibrate.experiment`
turns a row of the data into a call of this function.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simapf.apf.clock import ARRIVAL
from simapf.apf.estimators import WorkEstimator
from simapf.apf.types import NS_PER_S, ListOptions, RequestAttributes
from simapf.cycles import fewer_collections
from simapf.environment import Environment
from simapf.server.model import CachedResource
from simapf.server.params import ServerParams
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath
from simapf.server.runtime import FAILED, OK, REJECTED, SimulatedAPIServer

# An ordinary authenticated user: the bootstrap FlowSchemas send its LISTs to global-default.
LIST_USER = RequestAttributes(
    user="lister", groups=("system:authenticated",), verb="list", resource="configmaps",
    namespace="bench", list_options=ListOptions(resource_version="0"),
)  # fmt: skip


@dataclass(frozen=True)
class ListStreamResult:
    requests: int
    ok: int
    rejected: int
    failed: int
    peak_rss_bytes: float  # highest sample after the warm-up
    peak_heap_bytes: float
    mean_cpu_cores: float  # process CPU (requests + GC) over the measurement window
    oom_kills: int
    wall_events: int  # SimPy events processed, for benchmarks
    window_requests: int = 0  # requests due in the measurement window (the target QPS)
    window_rejected: int = 0  # 429s answered in the window
    window_ok: int = 0  # responses served in the window
    mean_client_cores: float = 0.0  # a co-located client's CPU over the window (params.client)
    peak_pending: int = 0  # most requests queued or executing, at a sample
    scraped_peak_rss_bytes: float = 0.0  # see `scraped_peak`

    @property
    def rejected_fraction(self) -> float:
        """Share of the target rate not served in the window: 1 − responses served / requests
        due (rejected with 429, still queued, or never sent because the client had too many
        outstanding); of the whole run without a warm-up."""
        if self.window_requests:
            return min(1.0, max(0.0, 1.0 - self.window_ok / self.window_requests))
        return self.rejected / self.requests if self.requests else 0.0

    @property
    def rejected_429_fraction(self) -> float:
        """429s answered in the window per request due."""
        return self.window_rejected / self.window_requests if self.window_requests else 0.0


def list_cost(path: ServingPath, response_bytes: float, object_count: int, streaming: bool = False) -> RequestCost:
    """What each LIST of `run_list_stream` asks of the server: one resource, whole, as JSON."""
    return RequestCost(path, ResponseShape(response_bytes, object_count, Encoding.JSON), streaming=streaming)


def run_list_stream(
    path: ServingPath,
    response_bytes: float,
    object_count: int,
    qps: float,
    seats: int | None = None,
    duration_s: float = 60.0,
    warmup_s: float = 10.0,
    server_concurrency: int = 800,
    params: ServerParams | None = None,
    seed: int | Sequence[int] = 1,
    poisson: bool = True,
    sample_every_s: float = 1.0,
    cache_resource: bool = False,
    ramp_s: float = 0.0,
    streaming: bool = False,
    scrape_every_s: float | None = None,
    max_in_flight: int | None = None,
    work_rng: np.random.Generator | None = None,
) -> ListStreamResult:
    """Run `qps` LISTs per second of one resource for `duration_s` and read the peaks.

    `seats`: every LIST gets exactly this many (the `constant` policy, as the experiment's
    patched apiserver did); None keeps the default estimator. Peaks and mean CPU are read after
    `warmup_s`, sampled every `sample_every_s`, as a dashboard would. The response is JSON,
    encoded whole, or item by item with `streaming` (KEP-5116). `scrape_every_s`: also report
    `scraped_peak_rss_bytes`, the peak a dashboard scraping that often would show, averaged over
    where the scrapes fall (from the `sample_every_s` trace). `max_in_flight`: the client has
    at most this many requests outstanding (a worker pool, or HTTP/2 stream limits); a request due
    while that many are out waits at the client and is sent when one returns. `cache_resource`
    registers the listed resource with the watch cache (its decoded objects count in the
    baseline), as in a real apiserver whatever path serves the LIST. `ramp_s` raises the rate
    linearly from 0 to `qps` over that time, as a load generator that ramps up does, so that
    APF's borrowing (adjusted every 10 s) follows the demand instead of being overrun at once.
    `work_rng`: the stream that varies each request's work (`request_cpu.work_cv`); a fixed one
    when not given."""
    env = Environment()
    estimator = WorkEstimator("constant", list_params={"seats": seats}) if seats else None
    params = params if params is not None else ServerParams(cpu={"cores": 16})
    server = SimulatedAPIServer(env, server_concurrency=server_concurrency, params=params,
                                estimator=estimator, rng=work_rng)  # fmt: skip
    if cache_resource:
        server.model.set_watch_cache([CachedResource(LIST_USER.resource, object_count, response_bytes)])
    cost = list_cost(path, response_bytes, object_count, streaming)
    rng = np.random.default_rng(seed)
    end_ns = int(duration_s * NS_PER_S)
    warmup_ns = int(warmup_s * NS_PER_S)
    # Arrival k is where the cumulative intensity reaches the k-th point of a unit-rate process.
    n = int(qps * duration_s * 1.2) + 16
    unit = np.cumsum(rng.exponential(1.0, n) if poisson else np.full(n, 1.0))
    arrivals = (_invert_ramp(unit, qps, ramp_s) * NS_PER_S).astype(np.int64)
    arrivals = arrivals[arrivals < end_ns].tolist()
    n_warm = int(np.searchsorted(np.asarray(arrivals, dtype=np.int64), warmup_ns))

    submit = server.submit
    scheduler = server.scheduler
    held: deque[int] = deque()  # due but not sent: the client had max_in_flight outstanding
    out = [0]

    def send(i: int) -> None:
        out[0] += 1
        submit(LIST_USER, cost, returned if max_in_flight is not None else None)

    def returned(_rec) -> None:
        out[0] -= 1
        if held:
            # Sent from a fresh event, not from inside the server's callback.
            i = held.popleft()
            scheduler.call_at(env._now, ARRIVAL, i, send, i)

    def arrive(i: int) -> None:
        if max_in_flight is None or out[0] < max_in_flight:
            send(i)
        else:
            held.append(i)
        if i + 1 < len(arrivals):
            scheduler.call_at(arrivals[i + 1], ARRIVAL, i + 1, arrive, i + 1)

    if arrivals:
        scheduler.call_at(arrivals[0], ARRIVAL, 0, arrive, 0)

    step_ns = int(sample_every_s * NS_PER_S)
    model = server.model
    peak = {"rss": 0.0, "heap": 0.0, "pending": 0}
    first: list = []
    last: list = []
    rss_trace: list[float] = []

    def sampler():
        # From the end of the warm-up to the end of the run; the first sample starts the window.
        while env.now <= end_ns:
            s = model.snapshot()
            rss_trace.append(s.rss_bytes)
            if s.rss_bytes > peak["rss"]:
                peak["rss"] = s.rss_bytes
            if s.heap_inuse_bytes > peak["heap"]:
                peak["heap"] = s.heap_inuse_bytes
            pending = len(server._pending)  # queued or executing
            if pending > peak["pending"]:
                peak["pending"] = pending
            if not first:
                first.append((s, dict(server.completed)))
            last[:] = [(s, dict(server.completed))]
            yield env.timeout(step_ns)

    if warmup_ns == 0:
        env.process(sampler())
    else:
        env.timeout(warmup_ns).callbacks.append(lambda _e: env.process(sampler()))
    with fewer_collections():
        env.run(until=end_ns + 1)
    done = server.completed
    cores = client = 0.0
    window_ok = window_429 = 0
    if first and last and last[0][0].t_ns > first[0][0].t_ns:
        (a, done_a), (b, done_b) = first[0], last[0]
        span_s = (b.t_ns - a.t_ns) / NS_PER_S
        cores = (b.cpu_seconds_total - a.cpu_seconds_total) / span_s
        client = (b.client_cpu_seconds_total - a.client_cpu_seconds_total) / span_s
        # What the load generator saw in the window: responses served and 429s, against the
        # requests due (as achieved QPS against target QPS, whichever request each one was).
        window_ok = done_b[OK] - done_a[OK]
        window_429 = done_b[REJECTED] - done_a[REJECTED]
    return ListStreamResult(
        requests=len(arrivals), ok=done[OK], rejected=done[REJECTED], failed=done[FAILED],
        peak_rss_bytes=peak["rss"], peak_heap_bytes=peak["heap"], mean_cpu_cores=cores,
        oom_kills=model.process.oom_kills, wall_events=env._eid,
        window_requests=len(arrivals) - n_warm, window_rejected=window_429, window_ok=window_ok,
        mean_client_cores=client, peak_pending=peak["pending"],
        scraped_peak_rss_bytes=scraped_peak(rss_trace, sample_every_s, scrape_every_s),
    )  # fmt: skip


def scraped_peak(trace: list[float], trace_every_s: float, scrape_every_s: float | None) -> float:
    """The highest reading of a scraper that samples every `scrape_every_s`, averaged over the
    phase of its scrapes: the expected peak a dashboard shows. Without a scrape interval (or one
    no longer than the trace's step), the trace's own maximum."""
    if not trace:
        return 0.0
    m = int(round(scrape_every_s / trace_every_s)) if scrape_every_s else 1
    if m <= 1:
        return max(trace)
    return sum(max(trace[k::m]) for k in range(min(m, len(trace)))) / min(m, len(trace))


def _invert_ramp(points: np.ndarray, qps: float, ramp_s: float) -> np.ndarray:
    """Times (s) at which the intensity qps·min(1, t/ramp_s) has accumulated `points`."""
    if ramp_s <= 0.0:
        return points / qps
    ramp_area = qps * ramp_s / 2.0
    t_ramp = np.sqrt(2.0 * ramp_s * np.minimum(points, ramp_area) / qps)
    return np.where(points <= ramp_area, t_ramp, ramp_s + (points - ramp_area) / qps)
