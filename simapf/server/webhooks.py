"""Admission webhooks in a request's path, called while the request holds its APF seats.

kube-apiserver calls the mutating webhooks that match a write one after another, then the
validating ones (in parallel upstream; here one after another too, a bound on the wait), from
the handler: after APF has dispatched the request and before it reaches storage, so a slow or
overloaded webhook becomes seat occupancy, queueing and rejections for everything sharing the
priority level (k8s.io/apiserver admission; KEP-1040's "seats are held while the handler runs").

Each webhook is a service of `replicas` x `concurrency` servers with FIFO queueing and a random
service time: a call waits for the first free server, then takes its service time. A call that
would take longer than `timeout_s` ends at the timeout: with `failure_policy: Fail` the request
fails (the apiserver answers 500, "failed calling webhook"), with `Ignore` it goes on. The
webhook keeps serving a call the apiserver gave up on (its server stays busy until done), as a
real backend does. Server free times are a heap: O(log servers) a call, no process per call.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable

import numpy as np

from simapf.apf.types import NS_PER_S
from simapf.engine.clock import FINISH, Clock


@dataclass(frozen=True)
class WebhookSpec:
    name: str
    verbs: frozenset[str]
    resources: frozenset[str]  # empty: every resource
    mutating: bool
    failure_policy: str  # Fail | Ignore
    timeout_s: float
    replicas: int
    concurrency: int
    service_mean_s: float
    service_distribution: str  # constant | exponential | lognormal
    service_sigma: float = 0.5

    def matches(self, verb: str, resource: str) -> bool:
        return verb in self.verbs and (not self.resources or resource in self.resources)


class Webhook:
    """One webhook service: its servers' next free times and its service-time stream."""

    def __init__(self, spec: WebhookSpec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self.free_at = [0] * (spec.replicas * spec.concurrency)
        self.timeout_ns = int(round(spec.timeout_s * NS_PER_S))
        self.calls = 0
        self.timeouts = 0

    def _service_ns(self) -> int:
        s = self.spec
        if s.service_distribution == "constant":
            x = s.service_mean_s
        elif s.service_distribution == "exponential":
            x = self.rng.exponential(s.service_mean_s)
        else:  # lognormal with the given mean
            mu = np.log(s.service_mean_s) - s.service_sigma**2 / 2
            x = self.rng.lognormal(mu, s.service_sigma)
        return int(round(x * NS_PER_S))

    def call(self, now_ns: int) -> tuple[int, bool]:
        """A call made now: (ns until the apiserver has its answer, whether it timed out)."""
        self.calls += 1
        start = max(now_ns, self.free_at[0])
        end = start + self._service_ns()
        heapq.heapreplace(self.free_at, end)
        if end - now_ns > self.timeout_ns:
            self.timeouts += 1
            return self.timeout_ns, True
        return end - now_ns, False


class Admission:
    """The webhooks of one apiserver; `admit` runs a request through those that match."""

    def __init__(self, specs: list[WebhookSpec], rng: np.random.Generator, clock: Clock) -> None:
        # Mutating webhooks first, then validating: upstream's order.
        ordered = [s for s in specs if s.mutating] + [s for s in specs if not s.mutating]
        self.webhooks = [Webhook(s, rng) for s in ordered]
        self.clock = clock

    def matching(self, verb: str, resource: str) -> list[Webhook]:
        return [w for w in self.webhooks if w.spec.matches(verb, resource)]

    def admit(self, hooks: list[Webhook], now_ns: int, done: Callable[[str], None]) -> None:
        """Call `hooks` in turn; `done("")` when admitted, `done(reason)` when a Fail webhook
        timed out."""
        self._next(hooks, 0, now_ns, done)

    def _next(self, hooks: list[Webhook], i: int, now_ns: int, done: Callable[[str], None]) -> None:
        if i == len(hooks):
            done("")
            return
        hook = hooks[i]
        delay, timed_out = hook.call(now_ns)
        if timed_out and hook.spec.failure_policy == "Fail":
            self._after(delay, lambda _: done(f"webhook {hook.spec.name} timed out"))
            return
        self._after(delay, lambda _: self._next(hooks, i + 1, now_ns + delay, done))

    def _after(self, delay_ns: int, fn: Callable[[None], None]) -> None:
        """The webhook's answer, `delay_ns` from now: the resource model's work that ends."""
        clock = self.clock
        clock.at(clock.now + delay_ns, fn, None, FINISH)
