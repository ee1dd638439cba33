"""The summary's sections the apiserver writes from its replicas' snapshots: the process (kills,
restarts, downtime), the requests it answered, its etcd, its admission webhooks and each
replica's own counters. `simapf.simulation.collect` assembles them with the other owners'.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from simapf.apf.types import NS_PER_S
from simapf.server.params import ServerParams
from simapf.server.runtime import APIServerSnapshot, SimulatedAPIServer

# etcd is the bottleneck of a run when, over its steady state, etcd's cores were busy at least
# ETCD_BUSY of the time (a queue of ranges builds as its use nears 1) while the apiserver used at
# most APISERVER_IDLE of its cores (it had room to serve more).
ETCD_BUSY = 0.9
APISERVER_IDLE = 0.5
# The deployment simapf's etcd rates were fitted on (the calibration's kind node).
FITTED_ETCD = ServerParams().etcd


def summed(counts: Iterable[dict]) -> dict:
    """Per-replica counts added up, key by key, in the order keys first appear (zeros kept)."""
    total: dict = {}
    for c in counts:
        for k, n in c.items():
            total[k] = total.get(k, 0) + n
    return total


def process(snaps: Sequence[APIServerSnapshot]) -> dict[str, Any]:
    """Every replica's process: OOM kills, kills of any cause, restarts, seconds down."""
    return {
        "oom_kills": sum(s.oom_kills for s in snaps),
        "kills": sum(s.kills for s in snaps),
        "restarts": sum(s.restarts for s in snaps),
        "down_s": sum(s.down_ns for s in snaps) / NS_PER_S,
    }


def requests(snaps: Sequence[APIServerSnapshot]) -> dict[str, Any]:
    """The requests every replica answered, by outcome."""
    completed = summed(s.completed for s in snaps)
    total = sum(completed.values())
    return {"total": total, "by_outcome": completed, "rejected_share": completed.get("rejected", 0) / max(1, total)}


def replica(snap: APIServerSnapshot) -> dict[str, Any]:
    """One replica's own counters."""
    return {
        "oom_kills": snap.oom_kills, "kills": snap.kills, "restarts": snap.restarts,
        "down_s": snap.down_ns / NS_PER_S,
        "requests": snap.completed,
        "openapi_v2_rebuilds": snap.openapi_v2_rebuilds,
        "openapi_v2_rebuild_core_s": snap.openapi_v2_rebuild_core_s,
    }  # fmt: skip


def admission(server: SimulatedAPIServer) -> list[dict[str, Any]]:
    """Each admission webhook's calls and time-outs."""
    return [{"name": w.spec.name, "calls": w.calls, "timeouts": w.timeouts}
            for w in (server.admission.webhooks if server.admission is not None else [])]  # fmt: skip


def etcd(params: ServerParams, snap: APIServerSnapshot, busy_at_steady: float, cpu_steady: float,
         duration: float, steady: float) -> dict[str, Any]:  # fmt: skip
    """The etcd every replica read (`snap`: a replica's snapshot; one etcd serves them all, an
    embedded one the one replica), as deployed, and how busy it was: its ranges and the
    server-seconds they took (`busy_core_s`; `busy_at_steady` when the steady state started),
    and the share of its cores' time (every member's) they took over the run and over the
    steady state. An embedded etcd's ranges ran on the apiserver's cores, so it has no time of
    its own to be busy. `cpu_steady`: the share of its cores the apiserver used in the steady
    state (a replica's mean)."""
    p = params.etcd
    busy = snap.etcd_busy_core_s
    own = not p.embedded
    cores = p.members * p.concurrency  # every member's
    busy_steady = (busy - busy_at_steady) / (cores * (duration - steady)) if own else None
    return {
        "cores": p.concurrency, "members": p.members, "member_round_trip_s": p.member_round_trip_s,
        "embedded": p.embedded,
        "fitted_deployment": (p.concurrency, p.members, p.embedded) == (FITTED_ETCD.concurrency, FITTED_ETCD.members,
                                                                       FITTED_ETCD.embedded),
        "ranges": snap.etcd_ranges,
        "read_index_rounds": snap.etcd_read_index_rounds,
        "busy_core_s": busy,
        "busy_fraction": busy / (cores * duration) if own else None,
        "busy_fraction_steady": busy_steady,
        "apiserver_cores_fraction_steady": cpu_steady,
        "bottleneck": busy_steady is not None and busy_steady >= ETCD_BUSY and cpu_steady <= APISERVER_IDLE,
    }  # fmt: skip
