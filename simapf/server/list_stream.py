"""A steady stream of identical LISTs into one apiserver: the shape of the measured experiment.

The experiment behind `calibration/` data (kubernetes/kubernetes#132233) sent LISTs of one
resource at a fixed rate to an apiserver with 16 cores and server concurrency 800, every LIST
given a fixed number of seats, and read peak memory and CPU. `run_list_stream` does the same in
simulation and returns the figures a person watching the dashboard would read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from simapf.apf.clock import ARRIVAL
from simapf.apf.estimators import WorkEstimator
from simapf.apf.types import ListOptions, NS_PER_S, RequestAttributes
from simapf.server.model import ServerSnapshot
from simapf.server.params import ServerParams
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath
from simapf.server.runtime import OK, REJECTED, SimulatedAPIServer

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
    peak_rss_bytes: float
    peak_heap_bytes: float
    mean_cpu_cores: float  # process CPU (requests + GC) over the measurement window
    oom_kills: int
    wall_events: int  # SimPy events processed, for benchmarks

    @property
    def rejected_fraction(self) -> float:
        return self.rejected / self.requests if self.requests else 0.0


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
    seed: int = 1,
    poisson: bool = True,
    sample_every_s: float = 1.0,
) -> ListStreamResult:
    """Run `qps` LISTs per second of one resource for `duration_s` and read the peaks.

    `seats`: every LIST gets exactly this many (the `constant` policy, as the experiment's
    patched apiserver did); None keeps the default estimator. Peaks and mean CPU are read after
    `warmup_s`, sampled every `sample_every_s`, as a dashboard would."""
    env = simpy.Environment()
    estimator = WorkEstimator("constant", list_params={"seats": seats}) if seats else None
    params = params if params is not None else ServerParams(cpu={"cores": 16})
    server = SimulatedAPIServer(env, server_concurrency=server_concurrency, params=params,
                                estimator=estimator)  # fmt: skip
    cost = RequestCost(path, ResponseShape(response_bytes, object_count, Encoding.JSON))
    rng = np.random.default_rng(seed)
    end_ns = int(duration_s * NS_PER_S)
    mean_gap_ns = NS_PER_S / qps
    n = int(qps * duration_s * 1.2) + 16
    gaps = rng.exponential(mean_gap_ns, n) if poisson else np.full(n, mean_gap_ns)
    arrivals = np.cumsum(gaps).astype(np.int64)
    arrivals = arrivals[arrivals < end_ns].tolist()

    submit = server.submit
    scheduler = server.scheduler

    def arrive(i: int) -> None:
        submit(LIST_USER, cost)
        if i + 1 < len(arrivals):
            scheduler.call_at(arrivals[i + 1], ARRIVAL, i + 1, arrive, i + 1)

    if arrivals:
        scheduler.call_at(arrivals[0], ARRIVAL, 0, arrive, 0)

    samples: list[ServerSnapshot] = []
    warmup_ns = int(warmup_s * NS_PER_S)
    step_ns = int(sample_every_s * NS_PER_S)

    def sampler():
        while True:
            if env.now >= warmup_ns:
                samples.append(server.model.snapshot())
            yield env.timeout(step_ns)

    env.process(sampler())
    env.run(until=end_ns + 1)
    done = server.completed
    peak_rss = max((s.rss_bytes for s in samples), default=0.0)
    peak_heap = max((s.heap_inuse_bytes for s in samples), default=0.0)
    if len(samples) >= 2:
        span_s = (samples[-1].t_ns - samples[0].t_ns) / NS_PER_S
        cores = (samples[-1].cpu_seconds_total - samples[0].cpu_seconds_total) / span_s
    else:
        cores = 0.0
    return ListStreamResult(
        requests=len(arrivals), ok=done[OK], rejected=done[REJECTED], failed=done["failed"],
        peak_rss_bytes=peak_rss, peak_heap_bytes=peak_heap, mean_cpu_cores=cores,
        oom_kills=server.model.process.oom_kills, wall_events=env._eid,
    )  # fmt: skip
