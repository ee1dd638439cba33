"""Reconstructing one measured cell as a simulation run, exactly as the experiment ran it.

The experiment (kubernetes/kubernetes#132233, `calibration/README.md`): a single-node Kind
cluster whose apiserver had 16 cores and server concurrency 800 (bootstrap APF, so an ordinary
user's LISTs land in `global-default`), patched so that every LIST took a fixed 1, 10 or 100
seats; one resource of `object_count` objects totalling `response_bytes`, listed whole at a
steady QPS, served from etcd or from the watch cache, JSON, not streamed. Peak memory and CPU
were read off a dashboard.

`ExperimentSetup` holds what belongs to that set-up rather than to the apiserver: how the load
generator sent its requests (a ramp, then evenly paced; at most so many outstanding; gzip
accepted) and what it cost on the same node, how long the load ran before and while the
dashboard was read, and how often the dashboard scraped. The apiserver's own parameters are
`ServerParams`; `run_params` puts the two together for a run. Which of these were fitted and
which chosen, and why, is in docs/validation.md. The cell as a scenario, and its run, are
`simapf.calibrate.scenario`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from simapf.calibrate.data import Cell
from simapf.server.costs import RequestPlan, compute_plan
from simapf.server.params import ClientParams, ServerParams, _Params, fitted, fitted_value
from simapf.server.paths import Encoding, RequestCost, ResponseShape, ServingPath


MIN_WINDOW_S = 5.0
# A fast row's warm-up is never shorter than this, nor than the ramp plus SETTLE_S: the ramp and
# APF's first borrowing adjustment (at 10 s) are behind it, with time for the queues to settle.
MIN_WARMUP_S = 15.0
SETTLE_S = 5.0


class ExperimentSetup(_Params):
    """The experiment's environment and how its figures were read."""

    cores: float = Field(16.0, gt=0, description="The apiserver's cores (as reported).")
    server_concurrency: int = Field(800, ge=1, description="--max-requests-inflight + --max-mutating-requests-inflight (as reported).")
    warmup_s: float = Field(
        30.0,
        ge=0,
        description=(
            "Load before the dashboard is read: long enough for APF's borrowing (adjusted every 10 s) "
            "to settle and for the GC pacer to learn the allocation rate; the ramp-up transient is not "
            "what the experiment reported."
        ),
    )
    ramp_s: float = Field(
        default_factory=fitted("experiment.ramp_s"), ge=0, description="The load rises linearly to its QPS over this time at the start of the warm-up (a load generator's ramp)."
    )
    arrivals: Literal["poisson", "paced"] = Field(
        "paced",
        description=(
            "How the load generator spaced its requests: paced = evenly at 1/QPS (a client-side rate "
            "limiter with enough workers); poisson = independent arrivals at that mean rate."
        ),
    )
    streaming_encoding: bool = Field(
        True,
        description=(
            "Whether the JSON list responses were encoded item by item (KEP-5116's "
            "StreamingCollectionEncodingToJSON, beta and on by default from 1.33) rather than whole."
        ),
    )
    warmup_requests: int | None = Field(
        27_000,
        ge=1,
        description=(
            "Fast rows warm up for at most this many requests (but never less than 15 s, nor than the "
            "ramp plus 5 s): at thousands of LISTs a second the GC pacer and the queues settle within "
            "seconds, and their peak memory and CPU after 15 s are those after 30 s within 0.6 %. "
            "null = always `warmup_s`."
        ),
    )
    window_s: float = Field(30.0, gt=0, description="How long the dashboard was watched for the peak, after the warm-up.")
    window_requests: int | None = Field(
        60_000,
        ge=1,
        description=(
            "Fast rows are watched for at most this many requests (but never less than 5 s): at thousands "
            "of LISTs a second the peak settles within seconds, over dozens of GC cycles, and more "
            "simulated time only costs. null = always `window_s`."
        ),
    )
    trace_every_s: float = Field(0.5, gt=0, description="RSS is traced this often in the simulation.")
    scrape_every_s: float = Field(
        15.0,
        gt=0,
        description=(
            "The dashboard's scrape interval: the peak is the highest of readings this far apart, "
            "averaged over where the readings fall (Prometheus' usual 15 s)."
        ),
    )
    client_max_in_flight: float | None = Field(
        None,
        ge=1,
        description=(
            "The load generator keeps at most this many LISTs outstanding (a worker pool, or HTTP/2's "
            "stream limit); a request due beyond it waits at the client. null = no limit."
        ),
    )
    client: ClientParams = Field(
        default_factory=lambda: ClientParams.model_validate(fitted_value("experiment.client")), description="The load generator on the same node: CPU it spends reading each response."
    )
    seed: int = Field(20250624, description="Base of every cell's random seed (arrivals).")

    def warmup_for(self, qps: float) -> float:
        """The warm-up of a row at `qps` (see `warmup_requests`)."""
        if self.warmup_requests is None:
            return self.warmup_s
        shortest = max(MIN_WARMUP_S, self.ramp_s + SETTLE_S)
        return min(self.warmup_s, max(shortest, self.warmup_requests / qps))

    def window_for(self, qps: float) -> float:
        """The measurement window of a row at `qps` (see `window_requests`)."""
        if self.window_requests is None:
            return self.window_s
        return min(self.window_s, max(MIN_WINDOW_S, self.window_requests / qps))

    def run_longer(self, factor: float) -> "ExperimentSetup":
        """The same set-up with its warm-up and its window `factor` times as long: how long the
        experiment ran is not reported, and this is how the report checks the choice."""
        return self.model_copy(update={"warmup_s": self.warmup_s * factor, "window_s": self.window_s * factor})

    def requests_for(self, qps: float) -> float:
        """About how many requests a row at `qps` simulates (for scheduling)."""
        return qps * (self.warmup_for(qps) - self.ramp_s / 2 + self.window_for(qps))


@dataclass(frozen=True)
class CellResult:
    """What the simulation predicts for one cell, in the experiment's units."""

    row: int
    seats: int
    mem_mb: float  # peak RSS in MB (1e6 bytes)
    cpu_percent: float  # apiserver CPU, percent of one core
    rejected_fraction: float  # not served (429, or held by the client) of those due in the window
    rejected_429_fraction: float  # rejected by APF, of those sent in the window
    oom_kills: int
    peak_pending: int
    client_cores: float
    requests: int


def cell_seed(setup: ExperimentSetup, cell: Cell, draw: int = 0) -> int:
    """The run seed of a cell, the same whatever the parameters: common random numbers, so a
    fit's finite differences see the parameters' effect, not new random streams. `draw` > 0:
    another draw of the streams (the requests' work variation, Poisson arrivals)."""
    return int(np.random.SeedSequence([setup.seed, cell.row.index, cell.seats, draw]).generate_state(1)[0])


def run_params(params: ServerParams, setup: ExperimentSetup) -> ServerParams:
    """The apiserver's parameters on the experiment's node: its cores, its co-located client, and
    its mid-2025 build's streamed JSON encoder, which copied every item afresh (kubernetes#139617
    came after)."""
    memory = params.request_memory.model_copy(update={"streaming_encoder_reuses_buffer": False})
    return params.model_copy(
        update={"cpu": params.cpu.model_copy(update={"cores": setup.cores}), "client": setup.client,
                "request_memory": memory}  # fmt: skip
    )


def cell_path(cell: Cell) -> ServingPath:
    """The path that serves the cell's LISTs (the data's `source`)."""
    return ServingPath.ETCD if cell.row.source == "etcd" else ServingPath.CACHE


def list_cost(path: ServingPath, response_bytes: float, object_count: int, streaming: bool = False) -> RequestCost:
    """What each of a cell's LISTs asks of the server: one resource, whole, as JSON."""
    return RequestCost(path, ResponseShape(response_bytes, object_count, Encoding.JSON), streaming=streaming)


def cell_plan(cell: Cell, params: ServerParams, setup: ExperimentSetup) -> RequestPlan:
    """What the server makes of each of the cell's LISTs (before its work factors)."""
    row = cell.row
    cost = list_cost(cell_path(cell), row.response_bytes, row.object_count, setup.streaming_encoding)
    return compute_plan(run_params(params, setup), cost)
