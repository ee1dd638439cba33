"""Helpers of the workload tests: small scenarios, built as dicts, and a probe that sees every attempt.

The scenario builders are tests/builders.py's, shared with the other tests. `Probe` wraps
`Cluster.send`, so it sees every attempt a client makes, including those the network refuses
(which never reach the apiserver and so are not in the request records).
"""

from __future__ import annotations

from dataclasses import dataclass

from simapf.apf.types import NS_PER_S
from simapf.simulation.result import Result
from simapf.simulation.runner import Simulation
from simapf.scenario.load import load_scenario

from builders import (  # noqa: F401 (the workload tests' builders)
    CONFIGMAPS, USER, closed_loop, discovery, get_request, informer, mutator, open_loop, outage, scenario,
)


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
