"""What every client does the way client-go does it: a token bucket, 429 retries, backoff.

- `TokenBucket`: client-go's flowcontrol rate limiter (golang.org/x/time/rate): tokens refill at
  `qps` up to `burst`; a request takes one, waiting until it is available (reservations queue).
- `Requester.do`: one logical request. Each attempt waits for a token, then goes to the cluster.
  A 429 is retried after its Retry-After, at most `max_retries` times (client-go's default 10);
  anything else is returned to the caller.
- `Backoff`: wait.NewExponentialBackoffManager, as the reflector uses it: 0.8 s doubling to 30 s,
  each wait stretched by up to 100 % jitter, starting over after 2 minutes without a backoff.
- `ResponseProcessor`: the client's own work on each response (decode, store, cache files) before
  it acts on it: `workers` at a time, first come first served, on the simulation clock.
- `RequestLog`: each logical request as its client saw it: from `do` (before the token bucket)
  to the final response, 429 retries and their waits included, and how it ended.
"""

from __future__ import annotations

import heapq
from array import array
from typing import Callable, Final

import numpy as np

from simapf.apf.queueset import TIME_OUT
from simapf.apf.types import NS_PER_S, RequestAttributes
from simapf.engine.clock import ARRIVAL
from simapf.engine.environment import RunClock
from simapf.scenario.schema import Backoff as BackoffSpec
from simapf.scenario.schema import ClientProcessing, RateLimit, RetryPolicy
from simapf.server.network import Link
from simapf.server.runtime import FAILED, OK, REJECTED, UNAVAILABLE, ServerRequest
from simapf.workload.balancer import Connection
from simapf.workload.cluster import GONE, Cluster, Position
from simapf.workload.latencies import EXACT_UP_TO, Sketch

# How a logical request ended, as its client saw it. `rejected`: a 429 (other than an APF queue
# time-out) after the retries ran out; `timed_out`: a 429 because it waited APF's queue wait limit
# (the last attempt's); `unavailable`: connection refused; `failed`: lost while being served;
# `gone`: a watch's 410.
CLIENT_OUTCOMES = ("ok", "rejected", "timed_out", "unavailable", "failed", "gone")
_OUTCOME_CODE = {OK: 0, REJECTED: 1, UNAVAILABLE: 3, FAILED: 4, GONE: 5}
_TIMED_OUT: Final = 2


class RequestLog:
    """The logical requests of one client and verb: latency (s) and outcome code (an index into
    CLIENT_OUTCOMES), 9 bytes a request up to `exact_up_to` of them (None: no limit); past that,
    sketches of every latency and of the successful ones, and the outcomes' counts
    (simapf.workload.latencies), of a fixed size."""

    __slots__ = ("latency_s", "outcome", "exact_up_to", "every", "ok", "outcomes")

    def __init__(self, exact_up_to: int | None = EXACT_UP_TO) -> None:
        self.latency_s = array("d")
        self.outcome = array("B")
        self.exact_up_to = exact_up_to
        self.every: Sketch | None = None  # once sketched: every latency, and the successful ones
        self.ok: Sketch | None = None
        self.outcomes = [0] * len(CLIENT_OUTCOMES)  # by code, once sketched

    def add(self, latency_s: float, code: int) -> None:
        every = self.every
        if every is not None:
            every.add(latency_s)
            self.outcomes[code] += 1
            if code == 0 and self.ok is not None:
                self.ok.add(latency_s)
            return
        self.latency_s.append(latency_s)
        self.outcome.append(code)
        if self.exact_up_to is not None and len(self.latency_s) >= self.exact_up_to:
            self._sketch()

    def _sketch(self) -> None:
        every, ok = Sketch(), Sketch()
        for x, code in zip(self.latency_s, self.outcome):
            every.add(x)
            self.outcomes[code] += 1
            if code == 0:
                ok.add(x)
        self.every, self.ok = every, ok
        self.latency_s, self.outcome = array("d"), array("B")

    def __len__(self) -> int:
        return self.every.n if self.every is not None else len(self.latency_s)


class Attempts:
    """What became of one client's attempts of one verb. Every attempt sent is, at any moment,
    exactly one of: answered with a final outcome (`outcomes`), a 429 the client retries
    (`retries`), dropped unread because its instance stopped (`abandoned`), or still in flight
    (`in_flight`: on its way, being served, coming back or being processed by the client)."""

    __slots__ = ("sent", "outcomes", "retries", "abandoned", "in_flight")

    def __init__(self) -> None:
        self.sent = 0
        self.outcomes = 0
        self.retries = 0
        self.abandoned = 0
        self.in_flight = 0


class ClientStats:
    """Counters of one client (all its instances)."""

    __slots__ = ("exact_up_to", "attempts", "outcomes", "retries", "lists", "relists", "watch_breaks", "gone",
                 "throttle_wait_ns", "runs", "run_durations_ns", "requests", "processing_ns", "by_verb")  # fmt: skip

    def __init__(self, exact_up_to: int | None = EXACT_UP_TO) -> None:
        self.exact_up_to = exact_up_to  # each request log's exact latencies (RequestLog)
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
        self.requests: dict[str, RequestLog] = {}  # by verb: each logical request, client side
        self.processing_ns = 0  # client-side processing of responses (worker time, all instances)
        self.by_verb: dict[str, Attempts] = {}  # by verb: what became of each attempt

    def attempts_of(self, verb: str) -> Attempts:
        counts = self.by_verb.get(verb)
        if counts is None:
            counts = self.by_verb[verb] = Attempts()
        return counts

    def outcome(self, name: str) -> None:
        self.outcomes[name] = self.outcomes.get(name, 0) + 1

    def finished(self, verb: str, latency_ns: int, rec: ServerRequest) -> None:
        """A logical request ended with `rec`, `latency_ns` after its first attempt was asked for."""
        log = self.requests.get(verb)
        if log is None:
            log = self.requests[verb] = RequestLog(self.exact_up_to)
        if rec.outcome == REJECTED and rec.reason == TIME_OUT:
            log.add(latency_ns / NS_PER_S, _TIMED_OUT)
        else:
            log.add(latency_ns / NS_PER_S, _OUTCOME_CODE.get(rec.outcome, 4))


def token_bucket(spec: RateLimit | None) -> "TokenBucket | None":
    """The token bucket `spec` asks for; None for none (null, `disabled`, qps <= 0)."""
    return TokenBucket(spec) if spec is not None and spec.enabled else None


class TokenBucket:
    __slots__ = ("qps", "burst", "tokens", "last_ns")

    def __init__(self, spec: RateLimit) -> None:
        if spec.burst is None:  # the schema requires one wherever qps > 0
            raise ValueError("a token bucket needs a burst")
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


class ResponseProcessor:
    """What one client instance does with its responses before acting on them (ClientProcessing):
    each response waits for the first of `workers` to be free, in order of arrival, and holds it
    for per_response + per_object x objects + per_byte x bytes (objects and bytes only of a
    successful response). Worker free times are a heap: no process per response.

    Before that, a successful response may first be written to a disk cache one at a time
    (`serial_s` each: kubectl's discovery cache, written and synced under one lock). The wait
    for that lock holds no worker: a goroutine blocked on a mutex or a sync takes no core.

    Instances of one program (`shared_cores`) also share its cores: `cores`, one heap of free
    times for all of them; a response then waits for its own worker and for a core."""

    __slots__ = ("per_response_ns", "per_object_ns", "per_byte_ns", "free_at", "serial_ns", "serial_free_at",
                 "cores")  # fmt: skip

    def __init__(self, spec: ClientProcessing | None, serial_s: float = 0.0,
                 cores: list[int] | None = None) -> None:  # fmt: skip
        """`spec`: a client's processing as loading resolved it (every field set); None for none.
        `cores`: the free times of the cores its program shares with other instances (a heap)."""
        self.cores = cores
        per_response_s, per_object_s, per_byte_s, workers = 0.0, 0.0, 0.0, 1
        if spec is not None:
            if spec.per_response_s is None or spec.per_object_s is None or spec.per_byte_s is None or spec.workers is None:
                raise ValueError(f"client processing not resolved: {spec}")
            per_response_s, per_object_s, per_byte_s, workers = (
                spec.per_response_s, spec.per_object_s, spec.per_byte_s, spec.workers)  # fmt: skip
        self.per_response_ns = per_response_s * NS_PER_S
        self.per_object_ns = per_object_s * NS_PER_S
        self.per_byte_ns = per_byte_s * NS_PER_S
        self.free_at = [0] * workers  # a heap: when each worker is next free (ns)
        self.serial_ns = int(round(serial_s * NS_PER_S))
        self.serial_free_at = 0

    def take(self, rec: ServerRequest, now_ns: int) -> tuple[int, int]:
        """A response arrives now: (ns until it has been processed, ns of work it takes).
        (0, 0) when it takes no time: it is handled at once, whatever is queued."""
        ready = now_ns
        work_ns = self.per_response_ns
        if rec.outcome == OK:
            if self.serial_ns:
                ready = max(now_ns, self.serial_free_at) + self.serial_ns
                self.serial_free_at = ready
            if rec.cost is not None:
                shape = rec.cost.shape
                work_ns += self.per_object_ns * shape.objects_returned + self.per_byte_ns * shape.response_bytes
        work = int(work_ns)
        if work <= 0:
            return ready - now_ns, 0
        start = max(ready, self.free_at[0])
        cores = self.cores
        if cores is not None:
            if cores[0] > start:
                start = cores[0]
            heapq.heapreplace(cores, start + work)
        end = start + work
        heapq.heapreplace(self.free_at, end)
        return end - now_ns, work


def response_processor(spec: ClientProcessing | None, serial_s: float = 0.0,
                       cores: list[int] | None = None) -> ResponseProcessor | None:  # fmt: skip
    """None when responses take no time (no processing, or all zero, and no disk cache to write):
    they are handled as they arrive."""
    if (spec is None or spec.zero) and not serial_s:
        return None
    return ResponseProcessor(spec if spec is not None and not spec.zero else None, serial_s, cores)


class _Call:
    """One logical request of a Requester: what to send, and what became of its attempts."""

    __slots__ = ("attrs", "encoding", "on_result", "selectivity", "page", "object_bytes", "since", "retries",
                 "start_ns", "on_arrived", "counts")  # fmt: skip

    def __init__(self, attrs: RequestAttributes, encoding: str, on_result: Callable[[ServerRequest], None],
                 selectivity: float, page: int, object_bytes: float, since: Position | None,
                 start_ns: int, counts: Attempts,
                 on_arrived: Callable[[ServerRequest], None] | None = None) -> None:  # fmt: skip
        self.attrs = attrs
        self.counts = counts  # its client's attempts of its verb
        self.encoding = encoding
        self.on_result = on_result
        self.on_arrived = on_arrived
        self.selectivity = selectivity
        self.page = page
        self.object_bytes = object_bytes
        self.since = since
        self.retries = 0
        self.start_ns = start_ns  # when the caller asked: before the token bucket's wait


class Requester:
    """A client-go REST client of one client instance."""

    __slots__ = ("cluster", "clock", "retry", "bucket", "stats", "active", "client", "processor", "link",
                 "half_rtt_ns", "conn")  # fmt: skip

    def __init__(self, cluster: Cluster, clock: RunClock, retry: RetryPolicy, rate_limit: RateLimit | None,
                 stats: ClientStats, client: str = "", processing: ClientProcessing | None = None,
                 link: Link | None = None, rtt_s: float = 0.0, cache_write_s: float = 0.0,
                 cores: list[int] | None = None) -> None:  # fmt: skip
        self.client = client  # the scenario client's name, for request records
        self.cluster = cluster
        self.clock = clock
        self.retry = retry
        self.bucket = token_bucket(rate_limit)
        self.stats = stats
        self.active = True
        self.processor = response_processor(processing, cache_write_s, cores)
        self.link = link  # the way responses come back (simapf.server.network); None: at once
        self.half_rtt_ns = int(round(rtt_s * NS_PER_S / 2))  # each way of a round trip
        self.conn = Connection()  # its HTTP/2 connection to an apiserver replica

    def do(self, attrs: RequestAttributes, encoding: str, on_result: Callable[[ServerRequest], None], *,
           selectivity: float = 1.0, page: int = -1, object_bytes: float = 0.0,
           since: Position | None = None, on_arrived: Callable[[ServerRequest], None] | None = None) -> None:  # fmt: skip
        """Send a request (Cluster.send's options), retrying 429s as client-go does;
        `on_result(request)` once, with its final outcome, after the client has processed it;
        `on_arrived(request)` as a successful response arrives, before that."""
        self._attempt(_Call(attrs, encoding, on_result, selectivity, page, object_bytes, since, self.clock.now,
                            self.stats.attempts_of(attrs.verb), on_arrived))  # fmt: skip

    def _attempt(self, call: _Call) -> None:
        if not self.active:
            return
        if self.bucket is not None:
            wait = self.bucket.reserve(self.clock.now)
            if wait:
                self.stats.throttle_wait_ns += wait
                self.clock.at(self.clock.now + wait + self.half_rtt_ns, self._send, call, ARRIVAL)
                return
        if self.half_rtt_ns:
            self.clock.at(self.clock.now + self.half_rtt_ns, self._send, call, ARRIVAL)  # on its way to the server
            return
        self._send(call)

    def _send(self, call: _Call) -> None:
        if not self.active:
            return
        self.stats.attempts += 1
        counts = call.counts
        counts.sent += 1
        counts.in_flight += 1
        # The tag says whose attempt this is and which one (0 = first, k = k-th retry after a 429).
        self.cluster.send(call.attrs, call.encoding, lambda rec: self._answered(call, rec),
                          selectivity=call.selectivity, page=call.page, object_bytes=call.object_bytes,
                          since=call.since, tag=(self.client, call.retries), link=self.link, conn=self.conn)  # fmt: skip

    def _answered(self, call: _Call, rec: ServerRequest) -> None:
        if not self.active:
            _abandon(call)
            return
        if self.half_rtt_ns:
            self.clock.at(self.clock.now + self.half_rtt_ns, self._arrived, (call, rec), ARRIVAL)  # on its way back
            return
        self._arrived((call, rec))

    def _arrived(self, arg: tuple[_Call, ServerRequest]) -> None:
        call, rec = arg
        if not self.active:
            _abandon(call)
            return
        now = self.clock.now
        if call.on_arrived is not None and rec.outcome == OK:
            call.on_arrived(rec)
        if self.processor is not None:
            # The client decodes and handles the response first; only then does it act on it.
            delay, work = self.processor.take(rec, now)
            if delay:
                self.stats.processing_ns += work
                self.clock.at(self.clock.now + delay, self._processed, (call, rec, now), ARRIVAL)
                return
        self._act(call, rec, now)

    def _processed(self, arg: tuple) -> None:
        if self.active:
            self._act(*arg)
        else:
            _abandon(arg[0])

    def _act(self, call: _Call, rec: ServerRequest, arrived_ns: int) -> None:
        counts = call.counts
        counts.in_flight -= 1
        if rec.outcome == REJECTED and call.retries < self.retry.max_retries:
            call.retries += 1
            counts.retries += 1
            self.stats.retries += 1
            wait_s = rec.retry_after_s if self.retry.honour_retry_after else self.retry.fallback_wait_s
            self.clock.at(self.clock.now + int(wait_s * NS_PER_S), self._attempt, call, ARRIVAL)
            return
        counts.outcomes += 1
        self.stats.outcome(rec.outcome)
        # Latency up to the response's arrival: the client's processing of it comes after.
        self.stats.finished(call.attrs.verb, arrived_ns - call.start_ns, rec)
        call.on_result(rec)


def _abandon(call: _Call) -> None:
    """The attempt's answer came to an instance that has stopped: nobody reads it."""
    counts = call.counts
    counts.in_flight -= 1
    counts.abandoned += 1
