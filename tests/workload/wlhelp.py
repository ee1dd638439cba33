"""Helpers of the workload tests: small scenarios, built as dicts, and a probe that sees every attempt.

`scenario(...)` is a short run on a default apiserver with one small resource (`configmaps`,
100 objects of 1 KiB in 4 namespaces); the client builders fill in what a test does not care
about. `Probe` wraps `Cluster.send`, so it sees every attempt a client makes, including those
the network refuses (which never reach the apiserver and so are not in the request records).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from simapf.apf.types import NS_PER_S
from simapf.result import Result
from simapf.runner import Simulation
from simapf.scenario.load import load_scenario

CONFIGMAPS = {"name": "configmaps", "count": 100, "namespaces": 4, "object_size": {"mean_bytes": 1024}}
USER = {"user": "user-{i}"}


def scenario(*clients: dict, duration_s: float = 10.0, seed: int = 1, resources=None, events=(),
             records: bool = True, **extra) -> dict:  # fmt: skip
    """A scenario of `clients`. Clients handle responses the moment they arrive unless they say
    otherwise (`processing`): these tests time the workload's own mechanisms exactly."""
    clients = tuple({"processing": None, **c} for c in clients)
    sc = {
        "name": "workload-test",
        "run": {"duration_s": duration_s, "seed": seed, "scrape_interval_s": 1.0, "request_records": records},
        "resources": copy.deepcopy(resources if resources is not None else [CONFIGMAPS]),
        "clients": [copy.deepcopy(c) for c in clients],
        "events": [copy.deepcopy(e) for e in events],
    }
    sc.update(copy.deepcopy(extra))
    return sc


def get_request(resource: str = "configmaps", namespace: str | None = "ns-0") -> dict:
    return {"verb": "get", "resource": resource, "namespace": namespace}


def open_loop(name: str = "open", rate_per_s: float = 10.0, arrivals: str = "poisson", count: int = 1,
              identity=USER, request=None, **kw) -> dict:  # fmt: skip
    return {"name": name, "kind": "open_loop", "count": count, "identity": identity, "rate_per_s": rate_per_s,
            "arrivals": arrivals, "request": request or get_request(), **kw}  # fmt: skip


def closed_loop(name: str = "users", count: int = 1, think_s: float = 1.0, think: str = "constant",
                identity=USER, request=None, **kw) -> dict:  # fmt: skip
    return {"name": name, "kind": "closed_loop", "count": count, "identity": identity,
            "think_time": {"mean_s": think_s, "distribution": think}, "request": request or get_request(), **kw}  # fmt: skip


def informer(name: str = "informers", count: int = 1, resource: str = "configmaps",
             identity=None, **kw) -> dict:  # fmt: skip
    return {"name": name, "kind": "informer", "count": count, "resource": resource,
            "identity": identity or {"service_account": "apps/controller-{i}"}, **kw}  # fmt: skip


def mutator(name: str = "writers", rate_per_s: float = 5.0, mix=None, resource: str = "configmaps",
            count: int = 1, identity=None, **kw) -> dict:  # fmt: skip
    return {"name": name, "kind": "mutator", "count": count, "resource": resource, "rate_per_s": rate_per_s,
            "mix": mix or {"update": 1.0}, "identity": identity or {"service_account": "apps/writer"}, **kw}  # fmt: skip


def discovery(name: str = "kubectl", count: int = 1, identity=USER, **kw) -> dict:
    return {"name": name, "kind": "discovery", "count": count, "identity": identity, **kw}


def outage(at_s: float, duration_s: float, relist: str = "auto") -> dict:
    return {"kind": "outage", "at_s": at_s, "duration_s": duration_s, "relist": relist}


def simulation(sc: dict, overrides=()) -> Simulation:
    return Simulation(load_scenario(sc, overrides))


def simulate(sc: dict, overrides=()) -> tuple[Simulation, Result]:
    sim = simulation(sc, overrides)
    return sim, sim.run()


# ---------------------------------------------------------------------------- probe


@dataclass
class Attempt:
    """One request a client put on the wire, and what came back."""

    sent_s: float
    user: str
    verb: str
    resource: str
    path: str
    namespace: str
    opts: object
    client: str = ""
    attempt: int = 0  # 0 = the first, k = the k-th retry after a 429
    outcome: str | None = None
    done_s: float | None = None
    retry_after_s: int = 0
    reason: str = ""


class Probe:
    """Records every attempt that goes through `sim.cluster.send`."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.attempts: list[Attempt] = []
        cluster = sim.cluster
        original = cluster.send

        def send(attrs, encoding, on_done, **kw):
            client, attempt = kw.get("tag") or ("", 0)
            a = Attempt(sim.env.now / NS_PER_S, attrs.user, attrs.verb, attrs.resource, attrs.path,
                        attrs.namespace, attrs.list_options, client, attempt)  # fmt: skip
            self.attempts.append(a)

            def done(rec):
                a.outcome = rec.outcome
                a.done_s = sim.env.now / NS_PER_S
                a.retry_after_s = rec.retry_after_s
                a.reason = rec.reason
                on_done(rec)

            original(attrs, encoding, done, **kw)

        cluster.send = send

    def by_user(self, verb: str | None = None) -> dict[str, list[Attempt]]:
        out: dict[str, list[Attempt]] = {}
        for a in self.attempts:
            if verb is None or a.verb == verb:
                out.setdefault(a.user, []).append(a)
        return out
