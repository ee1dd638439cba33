"""A measured cell as a scenario file, for `simapf run`, `compare` and `sweep`.

`simapf.calibrate.experiment` reproduces a cell with a lean driver (`run_list_stream`) so that a
fit can afford to simulate the whole grid many times. `scenario_for` writes the same experiment
as an ordinary scenario: the apiserver with the cell's cores, concurrency and resource-model
parameters (the co-located load generator included), bootstrap APF with the `constant` policy
at the cell's seats, one resource, and an open-loop lister that ramps up and then sends at the
row's QPS. A user can then look at the cell with every series the runner records, or change
one thing (another policy, GOMEMLIMIT) and see what the experiment would have shown.

Two things differ: the ramp is a staircase of `RAMP_STEPS` instances rather than a line (a row
whose backlog keeps every LIST sent, as etcd 10 MB x10000 at 20/s with 1 seat, peaks 10-14 %
lower for it; without a ramp the two agree), and the summary's peak is the highest 1-s sample
over the whole run, not `ExperimentSetup`'s scrape-averaged peak after the warm-up (the series
hold what is needed to read it either way).
"""

from __future__ import annotations

from typing import Any

from simapf.calibrate.data import Cell
from simapf.calibrate.experiment import ExperimentSetup, run_params
from simapf.server.params import ServerParams

RESOURCE = "configmaps"  # a resource that does not convert, listed whole
RAMP_STEPS = 20  # the ramp is a staircase of this many instances


def scenario_for(cell: Cell, params: ServerParams | None = None, setup: ExperimentSetup | None = None) -> dict[str, Any]:
    """The scenario (as a dict for `simapf.load_scenario`) that runs `cell` as the experiment ran it."""
    params = params if params is not None else ServerParams()
    setup = setup if setup is not None else ExperimentSetup()
    row = cell.row
    server = run_params(params, setup).model_dump(mode="json")
    instances = RAMP_STEPS if setup.ramp_s > 0 else 1
    mutating = 200  # any split of the 800 works: only the total sets the levels' limits
    return {
        "name": f"list-experiment-{row.source}-{row.index}-{cell.seats}seats",
        "description": f"{row.label}, {cell.seats} seat(s) per LIST, reconstructed by simapf.calibrate.scenario.",
        "run": {"duration_s": setup.warmup_for(row.qps) + setup.window_for(row.qps), "seed": setup.seed, "scrape_interval_s": 1},
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
                "count": 1,  # the ramp adds the others
                "identity": {"user": "list-tester"},  # an ordinary user: global-default
                "rate_per_s": row.qps / instances,
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
        "events": (
            [{"at_s": 0, "kind": "ramp", "client": "lister", "to_count": instances, "over_s": setup.ramp_s}]
            if instances > 1
            else []
        ),
    }

