"""A measured cell as a scenario: what the calibration runs, and what a user can run.

`scenario_for` writes the experiment of one cell as an ordinary scenario: the apiserver with the
cell's cores, concurrency and resource-model parameters (the co-located load generator
included), bootstrap APF with the `constant` policy at the cell's seats, one resource, and an
open-loop lister whose rate ramps up linearly and then stays at the row's QPS. Its steady state
starts where the experiment's dashboard was read (after the warm-up) and it scrapes as often as
the calibration traces RSS. The calibration runs exactly this scenario
(`simapf.calibrate.experiment.run_cell`, observed lean); a user can run it with every series
the runner records, or change one thing (another policy, GOMEMLIMIT) and see what the
experiment would have shown. The summary's `peak_rss_bytes` is the run's own; the dashboard's
peak is the scrape-averaged one after the warm-up (`simapf.simulation.observe.scraped_peak` of the RSS
series from `run.steady_state_from_s`, scraped every `ExperimentSetup.scrape_every_s`).
"""

from __future__ import annotations

from typing import Any

from simapf.calibrate.data import Cell
from simapf.calibrate.experiment import CellResult, ExperimentSetup, cell_seed, run_params
from simapf.simulation.observe import Readings
from simapf.simulation.runner import run_lean
from simapf.scenario import load_scenario
from simapf.server.params import ServerParams

RESOURCE = "configmaps"  # a resource that does not convert, listed whole


def scenario_for(cell: Cell, params: ServerParams | None = None, setup: ExperimentSetup | None = None,
                 draw: int = 0) -> dict[str, Any]:  # fmt: skip
    """The scenario (as a dict for `simapf.load_scenario`) that runs `cell` as the experiment ran it.
    `draw`: another draw of its random streams (the requests' work variation, Poisson arrivals)."""
    params = params if params is not None else ServerParams()
    setup = setup if setup is not None else ExperimentSetup()
    row = cell.row
    server = run_params(params, setup).model_dump(mode="json")
    mutating = 200  # any split of the 800 works: only the total sets the levels' limits
    warmup = setup.warmup_for(row.qps)
    return {
        "name": f"list-experiment-{row.source}-{row.index}-{cell.seats}seats",
        "description": f"{row.label}, {cell.seats} seat(s) per LIST, reconstructed by simapf.calibrate.scenario.",
        "run": {"duration_s": warmup + setup.window_for(row.qps), "seed": cell_seed(setup, cell, draw),
                "steady_state_from_s": warmup, "scrape_interval_s": setup.trace_every_s},  # fmt: skip
        "kubernetes": {
            "feature_gates": {
                # Off, so resourceVersion unset reads etcd and "0" reads the watch cache.
                "ConsistentListFromCache": False,
                "StreamingCollectionEncodingToJSON": setup.streaming_encoding,
                # The mid-2025 build read etcd ranges unary (RangeStream came with 1.37).
                "EtcdRangeStream": False,
            }
        },
        "apiserver": {
            "cores": setup.cores,
            "max_requests_inflight": setup.server_concurrency - mutating,
            "max_mutating_requests_inflight": mutating,
            "memory_limit_bytes": None,
            "params": server,
        },
        # The experiment's etcd: one member on the same Kind node, serving ranges as the fitted
        # number of cores does (the parameters' own, said where a reader looks for it).
        "etcd": {"cores": params.etcd.concurrency, "members": params.etcd.members, "embedded": params.etcd.embedded},
        "apf": {"config": "bootstrap", "estimator": {"list_policy": "constant", "list_params": {"seats": cell.seats}}},
        "resources": [
            {
                "name": RESOURCE,
                "count": row.object_count,
                "namespaces": 1,
                "object_size": {"mean_bytes": row.response_bytes / row.object_count, "distribution": "constant"},
                # The source does not say which resource it listed; the reconstruction decodes it
                # as typed objects (the resource model's default), and the fitted etcd decoded
                # bytes are per stored byte of those, whatever name the scenario gives it.
                "decoded_size_multiplier": params.watch_cache.decoded_size_multiplier,
            }
        ],
        "clients": [
            {
                "name": "lister",
                "kind": "open_loop",
                "count": 1,
                "identity": {"user": "list-tester"},  # an ordinary user: global-default
                "rate_per_s": row.qps,
                "ramp_up_s": setup.ramp_s,
                "arrivals": "constant" if setup.arrivals == "paced" else "poisson",
                "max_in_flight": None if setup.client_max_in_flight is None else int(setup.client_max_in_flight),
                "retry": {"max_retries": 0},  # a load generator counts a 429 and moves on
                # The load generator's own CPU is part of the server's parameters (it ran on the
                # same node): it takes no client-side time per response here.
                "processing": {"per_response_s": 0, "per_object_s": 0, "per_byte_s": 0},
                # Its reading of the responses is there too (params.client), not a network link.
                "network": {"stream_bytes_per_s": None},
                "request": {
                    "verb": "list",
                    "resource": RESOURCE,
                    "namespace": None,
                    "options": {"resource_version": "0" if row.source == "cache" else None, "limit": 0},
                    "encoding": "json",
                },
            }
        ],
    }


def run_cell(cell: Cell, params: ServerParams, setup: ExperimentSetup, draw: int = 0) -> CellResult:
    """Simulate one cell as the experiment ran it (its scenario, observed lean) and read it as
    the experiment did. `draw` > 0: another draw of its random streams (`scenario_for`); every
    cell of a grid keeps draw 0 otherwise, so that parameters, not draws, make the differences a
    fit sees."""
    return read_cell(cell, setup, run_lean(load_scenario(scenario_for(cell, params, setup, draw))))


def read_cell(cell: Cell, setup: ExperimentSetup, readings: Readings) -> CellResult:
    """A cell's figures as the experiment read them: the dashboard's scrape-averaged peak RSS
    after the warm-up, the mean CPU over the window, and of the requests due in the window (sent,
    or held back by the load generator's cap), the share not served and the share answered 429."""
    cores = client = 0.0
    window_ok = window_429 = window_due = 0
    window = readings.window
    if window is not None:
        a, b = window
        span_s = b.t_s - a.t_s
        cores = (b.cpu_seconds_total - a.cpu_seconds_total) / span_s
        client = (b.client_cpu_seconds_total - a.client_cpu_seconds_total) / span_s
        window_ok, window_429 = b.ok_total - a.ok_total, b.rejected_total - a.rejected_total
        window_due = readings.due_total - a.due_total
    if window_due:
        rejected = min(1.0, max(0.0, 1.0 - window_ok / window_due))
    else:
        rejected = readings.rejected_total / readings.requests_total if readings.requests_total else 0.0
    return CellResult(
        row=cell.row.index,
        seats=cell.seats,
        mem_mb=readings.scraped_peak_rss(setup.scrape_every_s) / 1e6,
        cpu_percent=cores * 100.0,
        rejected_fraction=rejected,
        rejected_429_fraction=window_429 / window_due if window_due else 0.0,
        oom_kills=readings.oom_kills,
        peak_pending=max((r.pending for r in readings.scrapes), default=0),
        client_cores=client,
        requests=readings.due_total,
    )
