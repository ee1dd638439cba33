"""Closed-loop clients driving one QueueSet under the fake clock, as upstream's
`uniformScenario` harness does (k8s.io/apiserver .../fairqueuing/queueset/queueset_test.go).

A scenario is a set of "uniform clients". Each client is one flow (a fixed flow hash) with
`n_threads` threads; each thread makes `n_calls` synchronous calls, one after another, all with
the same work estimate. How a thread behaves, following upstream's thread loop step by step:

* thread j of client i makes its first call at (90*j + 20*i) ns, so no two threads start
  at the same instant. A `split` client starts its upper half of threads (j >= n/2) half an
  evaluation period later, and those threads make only n_calls/2 calls;
* a call starts the request. If the level rejects it (at once, or later by a time-out while
  it waits) the thread counts a failure and stops: it makes no further calls;
* when the request is dispatched its execution begins at once, at the dispatch instant, and
  the thread schedules its next call for dispatch + exec + think (think may be negative: the
  next call then comes before the current one has returned);
* the execution ends exec later: the client's execution-seat integrator drops by the
  initial seats and the level is told the request finished. The additional latency (`pad`)
  that follows holds the request's seats inside the level, but it does not delay the client
  and is not counted in its execution seats, exactly as upstream.

Each client's "execution seats" (initial seats while executing) are integrated over time. At
the end of the evaluation period (and in the middle of it, for a split scenario) every client's
average is compared with the expected value: upstream's explicit `expectedAverages`, else the
max-min fair allocation of the concurrency limit over the clients' demands,
demand = threads x initial seats x exec / (exec + think).

Upstream runs every callback due at one instant as its own goroutine, in no fixed order, and
its fake clock does not move on until all of them are blocked again. Here callbacks due at one
instant run in EventLoop's fixed order: seat releases, then execution ends, then time-outs, then
calls (among calls, in the order they were scheduled). `call_phase=CALLS_FIRST` moves the calls
ahead of everything else at their instant, the other extreme of what the goroutines may do; the
tests run every scenario both ways. Upstream's scenarios are built so that their results do not
depend on that order (threads start at distinct nanoseconds, think times of 1 s - 1 ns keep calls
off the instants where executions end), and indeed both orders give the same numbers.

Integrals are kept exactly, as integers of seat-nanoseconds; an average is one division.

Upstream's other checks are kept too: the level's own seat-demand integrator (seats in use plus
seats waiting) must agree with the clients' account of it (max seats from call to end of pad,
or to rejection) in duration, average and deviation within 1e-10; all requests succeed, or some
fail and all for the expected reason; at the end nothing waits or executes; and the progress
meter R goes as far as upstream's expected count of epoch advances implies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from simapf.engine.clock import EventLoop, Phase
from simapf.apf.integrator import Integrator, IntegratorResults
from simapf.apf.queueset import EXECUTING, REJECTED, WAITING, QueueSet, Request

MS = 1_000_000
S = 1_000_000_000

# The scenarios use a context without a deadline: no request ever times out unless a scenario
# sets a wait limit. This is far beyond any evaluation period (TestSeatSecondsRollover runs
# about 1e17 ns).
NO_WAIT_LIMIT_NS = 1 << 62


def fair_alloc(demands: list[float], capacity: float) -> list[float]:
    """Max-min fair division of `capacity` among `demands` (water filling).

    Visit the demands from smallest to largest. While giving every remaining claimant as much as
    the current one asks for still fits, grant it in full; at the first that does not fit, the
    remaining claimants share what is left equally on top of the last full grant.
    """
    order = sorted(range(len(demands)), key=lambda k: demands[k])
    alloc = [0.0] * len(demands)
    granted = 0.0  # what every claimant still in the running has been given so far
    left = capacity
    pos = 0
    while pos < len(order):
        k = order[pos]
        want = demands[k]
        if want > 0:
            bite = (len(order) - pos) * (want - granted)
            if bite > left:
                break
            granted = want
            alloc[k] = want
            left -= bite
        pos += 1
    for k in order[pos:]:
        alloc[k] = granted + left / (len(order) - pos)
    return alloc


@dataclass(frozen=True)
class UniformClient:
    """One flow and its closed-loop threads (upstream's `uniformClient`)."""

    hash: int
    n_threads: int
    n_calls: int
    exec_ns: int
    think_ns: int
    pad_ns: int = 0  # additional latency: seats held after the client got its reply
    split: bool = False
    initial_seats: int = 1
    # As upstream's newUniformClient. Even with no pad the final seats count through
    # MaxSeats = max(initial, final), which is what the level reserves.
    final_seats: int = 1

    def set_split(self) -> UniformClient:
        return replace(self, split=True)

    def set_init_width(self, seats: int) -> UniformClient:
        return replace(self, initial_seats=seats)

    def pad(self, final_seats: int, duration_ns: int) -> UniformClient:
        return replace(self, final_seats=final_seats, pad_ns=duration_ns)

    @property
    def max_seats(self) -> int:
        return max(self.initial_seats, self.final_seats)


@dataclass(frozen=True)
class Level:
    """The level under test: a queued level, a Reject level (queues == 0) or exempt."""

    concurrency_limit: int
    queues: int = 0
    hand_size: int = 1
    queue_length_limit: int = 1
    exempt: bool = False
    wait_limit_ns: int = NO_WAIT_LIMIT_NS


@dataclass
class Evaluation:
    """One evaluation point: every client's measured and expected average seats."""

    at_ns: int
    last: bool
    demands: list[float]
    averages: list[float]
    expected: list[float]
    seat_demand_subject: IntegratorResults
    seat_demand_check: IntegratorResults

    def rel_diffs(self) -> list[float]:
        return [
            (avg - exp) / exp if exp > 0 else avg
            for avg, exp in zip(self.averages, self.expected)
        ]

    def fair_flags(self, margin: float) -> list[bool]:
        """Upstream's per-client test: |relative difference| <= margin (absolute when the
        expected average is 0)."""
        return [abs(d) <= margin for d in self.rel_diffs()]

    def describe(self) -> str:
        rows = [
            f"client {i}: average {a:.9g} expected {e:.9g} (rel diff {d:+.4%})"
            for i, (a, e, d) in enumerate(zip(self.averages, self.expected, self.rel_diffs()))
        ]
        return f"at {self.at_ns / S:g} s: " + "; ".join(rows)


@dataclass
class Outcome:
    evaluations: list[Evaluation]
    qs: QueueSet
    executions: list[int]
    rejects: list[int]
    reject_reasons: dict[str, int]
    failed: int
    failures: list[tuple[int, int, int, int]]  # (client, thread, call, ns) of each failed call
    found_after_arrival: bool  # every admitted call was waiting or executing right after arrival
    idle_violations: int  # calls admitted while the level reported idle
    end_ns: int


class _ExecSeats:
    """Exact time integral of one client's executing initial seats."""

    __slots__ = ("value", "since_ns", "last_ns", "integral")

    def __init__(self) -> None:
        self.value = 0
        self.since_ns = 0
        self.last_ns = 0
        self.integral = 0  # seat-nanoseconds

    def add(self, now: int, delta: int) -> None:
        self.integral += self.value * (now - self.last_ns)
        self.last_ns = now
        self.value += delta

    def reset(self, now: int) -> float:
        self.add(now, 0)
        avg = self.integral / (now - self.since_ns)
        self.integral = 0
        self.since_ns = now
        return avg


class _Thread:
    __slots__ = ("run", "i", "j", "client", "n_calls")

    def __init__(self, run: _Run, i: int, j: int, client: UniformClient, n_calls: int) -> None:
        self.run = run
        self.i = i
        self.j = j
        self.client = client
        self.n_calls = n_calls

    def call(self, k: int) -> None:
        if k >= self.n_calls:
            return
        run = self.run
        c = self.client
        now = run.loop.now
        run.demand_check_add(now, c.max_seats)
        run.request_seq += 1
        req = Request(
            run.request_seq, c.hash, c.initial_seats, c.final_seats, c.pad_ns,
            payload=(self, k),
        )  # fmt: skip
        run.qs.arrive(req)
        if req.state != REJECTED:
            # Upstream checks that an admitted call is found in the level's dump (waiting or
            # executing) and that the level does not call itself idle.
            if req.state not in (WAITING, EXECUTING):
                run.found_after_arrival = False
            if run.qs.is_idle():
                run.idle_violations += 1

    def executing(self, req: Request, k: int) -> None:
        run = self.run
        c = self.client
        loop = run.loop
        now = loop.now
        run.executions[self.i] += 1
        run.exec_seats[self.i].add(now, c.initial_seats)
        run.schedule(now + c.exec_ns + c.think_ns, run.call_phase, self.call, k + 1)
        run.schedule(now + c.exec_ns, Phase.FINISH, self.end_exec, req)

    def end_exec(self, req: Request) -> None:
        run = self.run
        c = self.client
        now = run.loop.now
        run.exec_seats[self.i].add(now, -c.initial_seats)
        # The client's own account of seat demand ends after the pad, whatever the level does.
        if c.pad_ns:
            run.schedule(now + c.pad_ns, Phase.RELEASE, run.demand_check_return, c.max_seats)
        else:
            run.demand_check_add(now, -c.max_seats)
        run.qs.finish(req)

    def failed(self, k: int) -> None:
        run = self.run
        now = run.loop.now
        run.failed += 1
        run.rejects[self.i] += 1
        run.failures.append((self.i, self.j, k, now))
        run.demand_check_add(now, -self.client.max_seats)


class _Run:
    """Listener of the level and owner of the clock for one scenario run."""

    def __init__(
        self,
        name: str,
        level: Level,
        clients: list[UniformClient],
        call_phase: int,
        qs_class: type[QueueSet],
    ) -> None:
        self.loop = EventLoop(0)
        self.call_phase = call_phase
        self.clients = clients
        self.qs = qs_class(
            name,
            self.loop,
            self,
            concurrency_limit=level.concurrency_limit,
            queues=level.queues,
            hand_size=level.hand_size,
            queue_length_limit=level.queue_length_limit,
            wait_limit_ns=level.wait_limit_ns,
            exempt=level.exempt,
            integrator=Integrator(0),  # the level's own seat-demand signal, as upstream's subject
        )
        self.exec_seats = [_ExecSeats() for _ in clients]
        self.demand_check = Integrator(0)
        self._demand = 0
        self.executions = [0] * len(clients)
        self.rejects = [0] * len(clients)
        self.reject_reasons: dict[str, int] = {}
        self.failed = 0
        self.failures: list[tuple[int, int, int, int]] = []  # (client, thread, call, when)
        self.request_seq = 0
        self.found_after_arrival = True
        self.idle_violations = 0

    # -- clock helpers
    def schedule(self, when: int, phase: int, fn, arg) -> None:
        self.loop.at(when, fn, arg, phase)

    def demand_check_add(self, now: int, delta: int) -> None:
        self._demand += delta
        self.demand_check.set(now, self._demand)

    def demand_check_return(self, seats: int) -> None:
        self.demand_check_add(self.loop.now, -seats)

    # -- the level's listener protocol
    def dispatched(self, req: Request) -> None:
        thread, k = req.payload
        thread.executing(req, k)

    def rejected(self, req: Request, reason: str) -> None:
        self.reject_reasons[reason] = self.reject_reasons.get(reason, 0) + 1
        thread, k = req.payload
        thread.failed(k)

    def released(self, req: Request) -> None:
        pass


# Phase of a client's call among the callbacks due at one instant. By default calls come last
# (after seat releases, execution ends and time-outs); CALLS_FIRST puts them before everything,
# the other extreme of the orders upstream's goroutines may take.
CALLS_LAST = Phase.ARRIVAL
CALLS_FIRST = Phase.RELEASE - 1


def run_scenario(
    name: str,
    level: Level,
    clients: list[UniformClient],
    eval_ns: int,
    expected_averages: list[float] | None = None,
    call_phase: int = CALLS_LAST,
    thread_offsets_ns: tuple[int, int] = (90, 20),
    qs_class: type[QueueSet] = QueueSet,
) -> Outcome:
    """Run the scenario: evaluate at eval_ns (and at eval_ns/2 first if a client is split),
    then let every thread finish its calls. Thread j of client i starts at
    j * thread_offsets_ns[0] + i * thread_offsets_ns[1] (upstream's current harness uses
    90 and 20 ns; the one TestTimeout last ran in used 11 and 2)."""
    run = _Run(name, level, clients, call_phase, qs_class)
    do_split = any(c.split for c in clients)
    per_thread, per_client = thread_offsets_ns
    for i, c in enumerate(clients):
        for j in range(c.n_threads):
            delay = per_thread * j + per_client * i
            n_calls = c.n_calls
            if c.split and j >= c.n_threads // 2:
                delay += eval_ns // 2
                n_calls //= 2
            thread = _Thread(run, i, j, c, n_calls)
            run.schedule(delay, call_phase, thread.call, 0)

    def evaluate(lim: int, last: bool) -> Evaluation:
        run.loop.run(until_ns=lim)  # everything due at or before lim, as upstream's Run(&lim)
        demands, averages = [], []
        for i, c in enumerate(clients):
            n = c.n_threads // 2 if (c.split and not last) else c.n_threads
            demands.append(n * c.initial_seats * c.exec_ns / (c.think_ns + c.exec_ns))
            averages.append(run.exec_seats[i].reset(lim))
        expected = (
            list(expected_averages)
            if expected_averages is not None
            else fair_alloc(demands, float(level.concurrency_limit))
        )
        return Evaluation(
            lim, last, demands, averages, expected,
            run.qs.integrator.get_results(lim), run.demand_check.get_results(lim),
        )  # fmt: skip

    evaluations = []
    if do_split:
        evaluations.append(evaluate(eval_ns // 2, False))
    evaluations.append(evaluate(eval_ns, True))
    # Let every thread finish. The level's wait-limit timer may still be pending at the end
    # (far in the future when there is no limit); it finds nothing left to time out.
    run.loop.run()
    return Outcome(
        evaluations=evaluations,
        qs=run.qs,
        executions=run.executions,
        rejects=run.rejects,
        reject_reasons=run.reject_reasons,
        failed=run.failed,
        failures=run.failures,
        found_after_arrival=run.found_after_arrival,
        idle_violations=run.idle_violations,
        end_ns=run.loop.now,
    )


# Upstream keeps R in a uint64 of 1e-8 seat-seconds. Whenever R reaches HIGH_R it winds R, and
# every reading taken from it (queues' nextDispatchR, requests' arrivalR), back by R_DECREMENT: an
# "epoch advance" (metric apiserver_flowcontrol_epoch_advance_total). Every comparison the
# queueset makes is between readings of the same epoch, so this is invisible to dispatching.
# simapf keeps R as an unbounded Python int and never winds it back; how many advances upstream
# would have made follows from how far R went (no single step of R comes near R_DECREMENT in
# these scenarios, so each crossing of a threshold is one advance).
MAX_SEAT_SECONDS = (1 << 64) - 1
R_DECREMENT = MAX_SEAT_SECONDS // 2
HIGH_R = R_DECREMENT + R_DECREMENT // 2


def upstream_epoch_advances(r: int) -> int:
    """How many epoch advances upstream's queueset makes while R goes from 0 to r."""
    return 0 if r < HIGH_R else (r - HIGH_R) // R_DECREMENT + 1


def float64_close(x: float, y: float) -> bool:
    """Upstream's float64close: equal within 1e-10 relative, NaN read as 0."""
    x0 = 0.0 if math.isnan(x) else x
    y0 = 0.0 if math.isnan(y) else y
    den = max(abs(x0), abs(y0))
    return den == 0 or abs(x0 - y0) / den < 1e-10


def check_outcome(
    out: Outcome,
    expected_fair: list[bool],
    margins: list[float],
    expect_all_requests: bool,
    reject_reason: str = "",
    check_seat_demand: bool = True,
    expected_epoch_advances: int = 0,
) -> None:
    """Upstream's evalTo and finalReview checks, with messages that carry the numbers."""
    problems: list[str] = []
    for n, ev in enumerate(out.evaluations):
        fair = expected_fair[min(n, len(expected_fair) - 1)]
        margin = margins[min(n, len(margins) - 1)]
        for i, got in enumerate(ev.fair_flags(margin)):
            if got != fair:
                problems.append(
                    f"client {i} at {ev.at_ns / S:g} s: expected fair={fair} within {margin}, "
                    f"got average {ev.averages[i]!r} vs expected {ev.expected[i]!r}"
                )
        if check_seat_demand:
            subj, chk = ev.seat_demand_subject, ev.seat_demand_check
            for what, a, b in (
                ("duration", subj.duration_s, chk.duration_s),
                ("average", subj.average, chk.average),
                ("deviation", subj.deviation, chk.deviation),
            ):
                if not float64_close(a, b):
                    problems.append(
                        f"seat demand {what} at {ev.at_ns / S:g} s: level says {a!r}, "
                        f"clients say {b!r}"
                    )
    if expect_all_requests and out.failed:
        problems.append(f"expected all requests to succeed, {out.failed} failed")
    if not expect_all_requests and not out.failed:
        problems.append("expected some requests to fail, all succeeded")
    if out.failed:
        if set(out.reject_reasons) != {reject_reason}:
            problems.append(f"reject reasons {out.reject_reasons}, expected only {reject_reason!r}")
        if sum(out.reject_reasons.values()) != out.failed:
            problems.append(f"level rejected {out.reject_reasons}, clients saw {out.failed} fail")
    qs = out.qs
    # inqueue and executing metrics all back to zero at the end
    if qs.reqs_waiting or qs.seats_waiting or qs.reqs_executing or qs.seats_in_use:
        problems.append(
            f"level not drained: waiting {qs.reqs_waiting} ({qs.seats_waiting} seats), "
            f"executing {qs.reqs_executing}, seats in use {qs.seats_in_use}"
        )
    advances = upstream_epoch_advances(qs.r)
    if advances != expected_epoch_advances:
        problems.append(
            f"R reached {qs.r}: upstream would advance its epoch {advances} times, "
            f"expected {expected_epoch_advances}"
        )
    if not out.found_after_arrival:
        problems.append("a sampled request was not found in the level right after its arrival")
    if out.idle_violations:
        problems.append(f"{out.idle_violations} admitted calls found the level idle")
    if problems:
        detail = "\n".join(ev.describe() for ev in out.evaluations)
        raise AssertionError("\n".join(problems) + "\n" + detail)
