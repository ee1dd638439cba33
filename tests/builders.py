"""Scenarios for tests, built as dicts: one place, so a test says only what it cares about.

`scenario(...)` is a short run on a default apiserver with one small resource (`configmaps`,
100 objects of 1 KiB in 4 namespaces); the client builders fill in what a test does not care
about. `small_lists(...)` is the small LIST workload the comparison and sweep tests run many
times (20 simulated seconds, four listers and a writer on 300 objects of ~20 KiB).
"""

from __future__ import annotations

import copy

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


def small_lists(name: str = "small-lists", duration_s: float = 20, list_rate_per_s: float = 5) -> dict:
    return {
        "name": name,
        "run": {"duration_s": duration_s, "seed": 3},
        "apiserver": {"cores": 4, "max_requests_inflight": 40, "max_mutating_requests_inflight": 20,
                      "memory_limit_bytes": "2Gi"},
        "resources": [{"name": "widgets", "count": 300,
                       "object_size": {"mean_bytes": "20Ki", "distribution": "lognormal", "sigma": 0.5}}],
        "clients": [
            {"name": "listers", "kind": "open_loop", "count": 4, "identity": {"user": "lister-{i}"},
             "rate_per_s": list_rate_per_s, "request": {"verb": "list", "resource": "widgets"}},
            {"name": "writers", "kind": "mutator", "identity": {"user": "writer"}, "resource": "widgets",
             "rate_per_s": 5},
        ],
    }  # fmt: skip
