"""What every client does the way client-go does it: a token bucket, 429 retries, backoff.

- `TokenBucket`: client-go's flowcontrol rate limiter (golang.org/x/time/rate): tokens refill at
  `qps` up to `burst`; a request takes one, waiting until it is available (reservations queue).
- `Requester.do`: one logical request. Each attempt waits for a token, then goes to the cluster.
  A 429 is retried after its Retry-After, at most `max_retries` times (client-go's default 10);
  anything else is returned to the caller.
- `Backoff`: wait.NewExponentialBackoffManager, as the reflector uses it: 0.8 s doubling to 30 s,
  each wait stretched by up to 100 % jitter, starting over after 2 minutes without a backoff.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from simapf.apf.clock import ARRIVAL
from simapf.apf.types import NS_PER_S, RequestAttributes
from simapf.scenario.schema import Backoff as BackoffSpec
from simapf.scenario.schema import RateLimit, RetryPolicy
from simapf.server.runtime import REJECTED, ServerRequest
from simapf.workload.cluster import Cluster


class ClientStats:
    """Counters of one client (all its instances)."""

    __slots__ = ("attempts", "outcomes", "retries", "lists", "relists", "watch_breaks", "gone",
                 "throttle_wait_ns", "runs", "run_durations_ns")  # fmt: skip

    def __init__(self) -> None:
        self.attempts = 0
        self.outcomes: dict[str, int] = {}
        self.retries = 0
        self.lists = 0  # full lists (initial + relists), informers only
        self.relists = 0
        self.watch_breaks = 0
        self.gone = 0
        self.throttle_wait_ns = 0
        self.runs = 0  # discovery runs completed
        self.run_durations_ns: list[int] = []

    def outcome(self, name: str) -> None:
        self.outcomes[name] = self.outcomes.get(name, 0) + 1


class Timers:
    """Callbacks at a delay on the simulation clock."""

    __slots__ = ("scheduler",)

    def __init__(self, scheduler) -> None:
        self.scheduler = scheduler

    def now(self) -> int:
        return self.scheduler.env._now

    def after(self, delay_ns: int, fn: Callable, arg: object = None) -> None:
        s = self.scheduler
        s.call_at(s.env._now + max(0, int(delay_ns)), ARRIVAL, 0, fn, arg)


class TokenBucket:
    __slots__ = ("qps", "burst", "tokens", "last_ns")

    def __init__(self, spec: RateLimit) -> None:
        self.qps = spec.qps
        self.burst = float(spec.burst)
        self.tokens = float(spec.burst)
        self.last_ns = 0

    def reserve(self, now_ns: int) -> int:
        """Take a token; returns how long to wait for it (ns)."""
        self.tokens = min(self.burst, self.tokens + (now_ns - self.last_ns) * self.qps / NS_PER_S)
        self.last_ns = now_ns
        self.tokens -= 1.0
        if self.tokens >= 0:
            return 0
        return int(-self.tokens / self.qps * NS_PER_S + 0.999999)


class Backoff:
    __slots__ = ("spec", "rng", "duration_s", "last_start_ns", "started")

    def __init__(self, spec: BackoffSpec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self.duration_s = spec.initial_s
        self.last_start_ns = 0
        self.started = False

    def next_ns(self, now_ns: int) -> int:
        spec = self.spec
        if not self.started or now_ns - self.last_start_ns > spec.reset_s * NS_PER_S:
            self.duration_s = spec.initial_s
        self.started = True
        self.last_start_ns = now_ns
        d = self.duration_s
        self.duration_s = min(d * spec.factor, spec.max_s)
        if spec.jitter > 0:
            d += self.rng.random() * spec.jitter * d
        return int(d * NS_PER_S)


class _Call:
    __slots__ = ("attrs", "encoding", "on_result", "kw", "retries")

    def __init__(self, attrs, encoding, on_result, kw) -> None:
        self.attrs = attrs
        self.encoding = encoding
        self.on_result = on_result
        self.kw = kw
        self.retries = 0


class Requester:
    """A client-go REST client of one client instance."""

    __slots__ = ("cluster", "timers", "retry", "bucket", "stats", "active", "client")

    def __init__(self, cluster: Cluster, timers: Timers, retry: RetryPolicy, rate_limit: RateLimit | None,
                 stats: ClientStats, client: str = "") -> None:  # fmt: skip
        self.client = client  # the scenario client's name, for request records
        self.cluster = cluster
        self.timers = timers
        self.retry = retry
        self.bucket = TokenBucket(rate_limit) if rate_limit is not None else None
        self.stats = stats
        self.active = True

    def do(self, attrs: RequestAttributes, encoding: str, on_result: Callable[[ServerRequest], None],
           **kw) -> None:  # fmt: skip
        self._attempt(_Call(attrs, encoding, on_result, kw))

    def _attempt(self, call: _Call) -> None:
        if not self.active:
            return
        if self.bucket is not None:
            wait = self.bucket.reserve(self.timers.now())
            if wait:
                self.stats.throttle_wait_ns += wait
                self.timers.after(wait, self._send, call)
                return
        self._send(call)

    def _send(self, call: _Call) -> None:
        if not self.active:
            return
        self.stats.attempts += 1
        # The tag says whose attempt this is and which one (0 = first, k = k-th retry after a 429).
        self.cluster.send(call.attrs, call.encoding, lambda rec: self._answered(call, rec),
                          tag=(self.client, call.retries), **call.kw)  # fmt: skip

    def _answered(self, call: _Call, rec: ServerRequest) -> None:
        if not self.active:
            return
        if rec.outcome == REJECTED and call.retries < self.retry.max_retries:
            call.retries += 1
            self.stats.retries += 1
            wait_s = rec.retry_after_s if self.retry.honour_retry_after else self.retry.fallback_wait_s
            self.timers.after(int(wait_s * NS_PER_S), self._attempt, call)
            return
        self.stats.outcome(rec.outcome)
        call.on_result(rec)
