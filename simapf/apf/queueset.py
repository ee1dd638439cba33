"""Fair queuing within one priority level: upstream's queueset, request by request.

Time is integer nanoseconds, work and the progress meter R are integer units of 1e-8
seat-seconds, exactly as kube-apiserver keeps them, so ties resolve the same way.

Per level state: the concurrency limit CL, queues, R, the round-robin index, the count of
enqueues (it rotates the start of each hand), seats in use and waiting. Per queue: a FIFO of
waiting requests with running sums, `next_dispatch_r`, the count of executing requests and the
seats its requests hold. The rules (numbers refer to `docs/apf-model.md`):

* R advances before every state change at min(seats demanded, CL) / active queues.
* An arrival picks the queue with least waiting work in its hand, is rejected if the level
  is full and that queue holds queue_length_limit requests, else it is queued, then a
  dispatch pass runs. Nothing is dispatched without passing through a queue.
* A dispatch pass repeatedly takes the head with the smallest virtual finish time (first in
  round-robin order on ties) and stops at the first head that does not fit.
* A finish corrects the queue's charge from the 3 ms guess to the real service time, then
  the seats are held for the additional latency, released, and a pass runs.
* A request still waiting at its deadline is removed and rejected (time-out); no pass runs.

The level reports to a listener: `dispatched(req)`, `rejected(req, reason)`,
`released(req)`; the caller reports `finish(req)` when the handler returns.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from typing import Any, Final, NamedTuple, Protocol

from simapf.engine.clock import RELEASE, TIMEOUT, Clock
from simapf.apf.gomath import go_round
from simapf.apf.integrator import Integrator
from simapf.apf.shuffle import deal_hand

# Fixed point: one unit of work or R is 1e-8 seat-seconds, i.e. 10 seat-nanoseconds.
NS_PER_WORK_UNIT: Final = 10.0
ESTIMATED_SERVICE_NS: Final = 3_000_000  # G: the service time assumed at dispatch, corrected at finish
G_WORK_PER_SEAT: Final = 300_000  # one seat for G, in work units

# Request states
WAITING: Final = 0
EXECUTING: Final = 1
LINGERING: Final = 2
DONE: Final = 3
REJECTED: Final = 4

# Reasons for rejection, named as upstream's metric label
QUEUE_FULL: Final = "queue-full"
TIME_OUT: Final = "time-out"
CONCURRENCY_LIMIT: Final = "concurrency-limit"


def seats_times_ns(seats: int, duration_ns: int) -> int:
    """Work of `seats` held for `duration_ns`, in work units, rounded as upstream."""
    return go_round(seats * duration_ns / NS_PER_WORK_UNIT)


class Listener(Protocol):
    def dispatched(self, req: Request) -> None: ...
    def rejected(self, req: Request, reason: str) -> None: ...
    def released(self, req: Request) -> None: ...


# A request's deadline when its caller gives none: its level's wait limit from its arrival.
NO_DEADLINE: Final = -1


class Request:
    """One request inside a level. `payload` is the caller's own object."""

    __slots__ = (
        "seq", "flow_hash", "initial_seats", "final_seats", "additional_latency_ns",
        "max_seats", "total_work", "final_work", "arrival_ns", "deadline_ns", "arrival_r",
        "queue", "state", "dispatch_ns", "finish_ns", "release_ns", "reject_reason",
        "queue_index", "level", "flow_schema", "payload", "ticket",
    )  # fmt: skip

    def __init__(
        self,
        seq: int,
        flow_hash: int,
        initial_seats: int,
        final_seats: int = 0,
        additional_latency_ns: int = 0,
        arrival_ns: int = 0,
        deadline_ns: int = NO_DEADLINE,
        payload: Any = None,
    ) -> None:
        self.seq = seq
        self.flow_hash = flow_hash
        self.initial_seats = initial_seats
        self.final_seats = final_seats
        self.additional_latency_ns = additional_latency_ns
        self.max_seats = initial_seats if initial_seats >= final_seats else final_seats
        # seats x G is a whole number of work units, so it needs no rounding
        self.final_work = seats_times_ns(final_seats, additional_latency_ns) if final_seats else 0
        self.total_work = initial_seats * G_WORK_PER_SEAT + self.final_work
        self.arrival_ns = arrival_ns
        self.deadline_ns = deadline_ns
        self.arrival_r = 0
        self.queue: Queue | None = None
        self.state = WAITING
        self.dispatch_ns = -1
        self.finish_ns = -1
        self.release_ns = -1
        self.reject_reason = ""
        self.queue_index = -1  # the queue shuffle sharding chose; -1 where none was
        self.level: QueueSet | None = None  # set on arrival
        self.flow_schema = ""
        self.payload = payload
        self.ticket = 0  # its arrival's place among callbacks that tie (Clock.ticket), set on arrival


class Queue:
    __slots__ = (
        "index", "fifo", "waiting_work", "waiting_max_seats", "next_dispatch_r",
        "executing", "seats_in_use", "version",
    )  # fmt: skip

    def __init__(self, index: int) -> None:
        self.index = index
        self.fifo: deque[Request] = deque()
        self.waiting_work = 0  # sum of total_work of waiting requests
        self.waiting_max_seats = 0  # sum of max_seats of waiting requests
        self.next_dispatch_r = 0
        self.executing = 0  # requests executing (not those lingering in additional latency)
        self.seats_in_use = 0  # seats held by this queue's requests, lingering included
        self.version = 0  # bumped whenever the queue's virtual finish time changes


class Gauges(NamedTuple):
    """A level's state as its gauges show it (`QueueSet.gauges`)."""

    executing_seats: int
    executing_requests: int
    waiting_requests: int
    concurrency_limit: int


class QueueSet:
    """One priority level's dispatcher: queued (fair queuing), Reject, or exempt."""

    def __init__(
        self,
        name: str,
        clock: Clock,
        listener: Listener,
        concurrency_limit: int,
        queues: int = 64,
        hand_size: int = 8,
        queue_length_limit: int = 50,
        wait_limit_ns: int = 15_000_000_000,
        exempt: bool = False,
        integrator: Integrator | None = None,
    ) -> None:
        self.name = name
        self.clock = clock
        self.listener = listener
        self.exempt = exempt
        self.cl = concurrency_limit
        self.queues: list[Queue] = []
        self.desired_queues = 0
        self.hand_size = 1
        self.queue_length_limit = 1
        self.wait_limit_ns = wait_limit_ns
        self._hands: dict[int, tuple[int, ...]] = {}
        self.r = 0
        self.last_ns = clock.now
        self.robin_index = -1
        self.enqueues = 0
        self.seats_in_use = 0
        # Two views of waiting seats. `seats_waiting` is upstream's level counter, which feeds
        # the demand signal; it drifts when a final-seats cut changes a request's MaxSeats at
        # dispatch (it is decremented by the new value). `_queued_seats` is the sum of the
        # queues' own FIFO sums, which R's rate uses, and never drifts.
        self.seats_waiting = 0
        self._queued_seats = 0
        self.reqs_waiting = 0
        self.reqs_executing = 0
        self._active_queues = 0  # queues with a waiting or an executing request
        # Queues with a waiting request, by (virtual finish time of the head, index). An
        # entry is current while its version is the queue's; older ones are skipped.
        self._finish_heap: list[tuple[int, int, int, Queue]] = []
        # The seat-demand integrator feeds borrowing; a lone level (replay) needs none.
        self.integrator = integrator
        # Requests whose deadline is arrival + the level's wait limit expire in arrival order,
        # so one timer over this FIFO serves them all (dispatched ones are skipped when met).
        # Requests that bring their own deadline get a timer each.
        self._expiries: deque[Request] = deque()
        self._expiry_timer_set = False
        # Counters for metrics
        self.dispatched_total = 0
        self.rejected_total = {QUEUE_FULL: 0, TIME_OUT: 0, CONCURRENCY_LIMIT: 0}
        self.no_accommodation_total = 0
        self.set_queuing(queues, hand_size, queue_length_limit)

    # ----------------------------------------------------------------- state

    def gauges(self) -> Gauges:
        """What the level's gauges read now (upstream's current_executing_seats and _requests,
        current_inqueue_requests, current_limit_seats)."""
        return Gauges(self.seats_in_use, self.reqs_executing, self.reqs_waiting, self.cl)

    # ----------------------------------------------------------------- configuration

    @property
    def is_reject(self) -> bool:
        return not self.exempt and self.desired_queues == 0

    def set_queuing(self, queues: int, hand_size: int, queue_length_limit: int) -> None:
        """Apply a queuing configuration. More queues appear at once; surplus queues are
        removed as they go empty. `queues == 0` makes a Reject level."""
        self.sync(self.clock.now)
        if queues > 0:
            if queues > len(self.queues):
                self.queues.extend(Queue(i) for i in range(len(self.queues), queues))
            self.hand_size = hand_size
            self.queue_length_limit = queue_length_limit
            self._hands.clear()
        self.desired_queues = queues
        self.dispatch_as_much_as_possible()

    def set_concurrency_limit(self, concurrency_limit: int) -> None:
        """A new CurrentCL from the borrowing adjuster: nothing is pre-empted, a pass runs."""
        self.sync(self.clock.now)
        self.cl = concurrency_limit
        self.dispatch_as_much_as_possible()

    # ----------------------------------------------------------------- progress meter

    def sync(self, now: int) -> None:
        """Advance R over the time since the last change, at the rate that state implied."""
        dt = now - self.last_ns
        if dt:
            self.last_ns = now
            active = self._active_queues
            if active:
                demand = self.seats_in_use + self._queued_seats
                cl = self.cl
                ratio = (demand if demand < cl else cl) / active
                x = ratio * dt / NS_PER_WORK_UNIT
                t = int(x)  # go_round for x >= 0, inlined: this runs at every event
                self.r += t + 1 if x - t >= 0.5 else t

    # ----------------------------------------------------------------- arrival

    def arrive(self, req: Request) -> None:
        """A classified, estimated request reaches this level."""
        now = self.clock.now
        self.sync(now)
        req.arrival_ns = now
        req.arrival_r = self.r
        req.level = self
        req.ticket = self.clock.ticket()
        if self.exempt:
            self._start(req, None, now)
            return
        if self.desired_queues == 0:
            m = req.max_seats
            if self.seats_in_use + m <= self.cl or (m > self.cl and self.reqs_executing == 0):
                self._start(req, None, now)
            else:
                self._reject(req, CONCURRENCY_LIMIT)
            return

        q = self._choose_queue(req.flow_hash)
        req.queue_index = q.index
        fifo = q.fifo
        if self.seats_in_use >= self.cl and len(fifo) >= self.queue_length_limit:
            self._reject(req, QUEUE_FULL)
            return
        first = not fifo
        if first and not q.executing:
            q.next_dispatch_r = self.r
            self._active_queues += 1
        fifo.append(req)
        req.queue = q
        m = req.max_seats
        q.waiting_work += req.total_work
        q.waiting_max_seats += m
        self._queued_seats += m
        self.seats_waiting += m
        self.reqs_waiting += 1
        if first:
            # A new head: apply anti-windup (the head's arrival R is now, so this is the
            # same as max(nextDispatchR, R)) and post the queue's finish time.
            if q.next_dispatch_r < req.arrival_r:
                q.next_dispatch_r = req.arrival_r
            self._post(q)
        if self.integrator is not None:
            self.integrator.set(now, self.seats_in_use + self.seats_waiting)
        self.dispatch_as_much_as_possible()
        if req.state == WAITING:
            if req.deadline_ns == NO_DEADLINE:
                req.deadline_ns = now + self.wait_limit_ns
                self._expiries.append(req)
                if not self._expiry_timer_set:
                    self._expiry_timer_set = True
                    self.clock.at_ticket(req.deadline_ns, self._expire, None, TIMEOUT, req.ticket)
            else:  # its own deadline, from server receipt: it may already have passed
                when = req.deadline_ns if req.deadline_ns > now else now
                self.clock.at_ticket(when, self._time_out, req, TIMEOUT, req.ticket)

    def _choose_queue(self, flow_hash: int) -> Queue:
        hand = self._hands.get(flow_hash)
        if hand is None:
            hand = self._hands[flow_hash] = deal_hand(flow_hash, self.desired_queues, self.hand_size)
        size = len(hand)
        offset = self.enqueues % size
        self.enqueues += 1
        queues = self.queues
        best = queues[hand[offset]]
        best_work = best.waiting_work
        for i in range(1, size):
            q = queues[hand[(offset + i) % size]]
            if q.waiting_work < best_work:
                best, best_work = q, q.waiting_work
        return best

    def _reject(self, req: Request, reason: str) -> None:
        req.state = REJECTED
        req.reject_reason = reason
        self.rejected_total[reason] += 1
        self.listener.rejected(req, reason)

    # ----------------------------------------------------------------- dispatch

    def _post(self, q: Queue) -> None:
        """(Re)post a waiting queue's virtual finish time; earlier posts become stale."""
        q.version += 1
        heappush(self._finish_heap, (q.next_dispatch_r + q.fifo[0].total_work, q.index, q.version, q))

    def _bound_and_post(self, q: Queue) -> None:
        """After a queue's head or nextDispatchR changed: anti-windup, then repost."""
        fifo = q.fifo
        if fifo:
            if q.next_dispatch_r < fifo[0].arrival_r:
                q.next_dispatch_r = fifo[0].arrival_r
            self._post(q)
        else:
            q.version += 1

    def _pick_queue(self) -> tuple[int, int, int, Queue]:
        """Pop the waiting queue with the smallest virtual finish time of its head; among
        equal times, the first in round-robin order after the last queue dispatched from
        (upstream scans every queue from robinIndex + 1 and keeps the first strict minimum)."""
        heap = self._finish_heap
        best = heappop(heap)
        while best[2] != best[3].version:
            best = heappop(heap)
        finish = best[0]
        tied = None
        while heap and heap[0][0] == finish:
            entry = heappop(heap)
            if entry[2] == entry[3].version:
                if tied is None:
                    tied = [best]
                tied.append(entry)
        if tied is not None:  # popped in index order
            start = self.robin_index + 1
            best = tied[0]
            for entry in tied:
                if entry[1] >= start:
                    best = entry
                    break
            for entry in tied:
                if entry is not best:
                    heappush(heap, entry)
        return best

    def dispatch_as_much_as_possible(self) -> None:
        cl = self.cl
        while self.reqs_waiting and self.seats_in_use < cl:
            entry = self._pick_queue()
            best = entry[3]
            fifo = best.fifo
            req = fifo[0]
            m = req.max_seats
            if not (self.seats_in_use + m <= cl or (m > cl and self.reqs_executing == 0)):
                heappush(self._finish_heap, entry)  # still current: nothing changed
                self.no_accommodation_total += 1
                return
            fifo.popleft()
            best.waiting_work -= req.total_work
            best.waiting_max_seats -= m
            self._queued_seats -= m
            if req.final_seats > cl:
                # The final phase may not hold more than the level's limit: keep its work,
                # stretch its duration. This can lower MaxSeats after it was counted waiting.
                req.additional_latency_ns = int(req.final_work / cl * NS_PER_WORK_UNIT)
                req.final_seats = cl
                req.max_seats = req.initial_seats if req.initial_seats >= cl else cl
            self.robin_index = best.index
            self.reqs_waiting -= 1
            self.seats_waiting -= req.max_seats
            best.next_dispatch_r += req.total_work
            self._bound_and_post(best)
            self._start(req, best, self.last_ns)

    def _start(self, req: Request, q: Queue | None, now: int) -> None:
        m = req.max_seats
        req.state = EXECUTING
        req.dispatch_ns = now
        self.reqs_executing += 1
        self.seats_in_use += m
        if q is not None:
            q.executing += 1
            q.seats_in_use += m
        self.dispatched_total += 1
        if self.integrator is not None:
            self.integrator.set(now, self.seats_in_use + self.seats_waiting)
        self.listener.dispatched(req)

    # ----------------------------------------------------------------- finish and release

    def finish(self, req: Request) -> None:
        """The request's handler returned: its seats stay for the additional latency."""
        now = self.clock.now
        self.sync(now)
        req.finish_ns = now
        self.reqs_executing -= 1
        q = req.queue
        if q is not None:
            q.executing -= 1
            # Replace the G guess with the real service time (initial seats only).
            q.next_dispatch_r -= go_round(
                req.initial_seats * (ESTIMATED_SERVICE_NS - (now - req.dispatch_ns))
                / NS_PER_WORK_UNIT
            )
            if q.fifo:
                self._bound_and_post(q)
            elif not q.executing:
                self._active_queues -= 1
        if req.additional_latency_ns <= 0:
            self._release(req, now)
        else:
            req.state = LINGERING
            self.clock.at_ticket(now + req.additional_latency_ns, self._release_after_latency, req, RELEASE, req.ticket)
        # A pass after every finish, lingering seats or not: one fewer executing request can
        # let a wide request run alone, and the corrected charge can change the best head.
        self.dispatch_as_much_as_possible()

    def _release_after_latency(self, req: Request) -> None:
        now = self.clock.now
        self.sync(now)
        self._release(req, now)
        self.dispatch_as_much_as_possible()

    def _release(self, req: Request, now: int) -> None:
        m = req.max_seats
        req.state = DONE
        req.release_ns = now
        self.seats_in_use -= m
        if self.integrator is not None:
            self.integrator.set(now, self.seats_in_use + self.seats_waiting)
        q = req.queue
        if q is not None:
            q.seats_in_use -= m
            if (len(self.queues) > self.desired_queues and not q.fifo and not q.executing
                    and q.index < len(self.queues) and self.queues[q.index] is q):
                # The identity check keeps a queue that went empty from being removed twice
                # when two of its requests release lingering seats one after the other.
                self._remove_queue(q)
        self.listener.released(req)

    def _remove_queue(self, q: Queue) -> None:
        """Drop a surplus queue once it is empty (after a configuration cut its count)."""
        del self.queues[q.index]
        for later in self.queues[q.index :]:
            later.index -= 1
        if self.robin_index >= q.index:
            self.robin_index -= 1
        self._finish_heap.clear()  # indexes shifted: post every waiting queue afresh
        for waiting in self.queues:
            if waiting.fifo:
                self._post(waiting)

    # ----------------------------------------------------------------- time-out

    def _expire(self, _: object) -> None:
        """Time out every request at the front of the FIFO whose deadline has come, then
        set the timer for the first one still waiting."""
        self._expiry_timer_set = False
        expiries = self._expiries
        now = self.clock.now
        while expiries:
            head = expiries[0]
            if head.state != WAITING:
                expiries.popleft()
            elif head.deadline_ns <= now:
                expiries.popleft()
                self._time_out(head)
            else:
                self._expiry_timer_set = True
                self.clock.at_ticket(head.deadline_ns, self._expire, None, TIMEOUT, head.ticket)
                return

    def _time_out(self, req: Request) -> None:
        if req.state != WAITING:
            return
        now = self.clock.now
        self.sync(now)
        q = req.queue
        assert q is not None
        fifo = q.fifo
        if fifo[0] is req:
            fifo.popleft()
        else:
            fifo.remove(req)
        m = req.max_seats
        q.waiting_work -= req.total_work
        q.waiting_max_seats -= m
        self._queued_seats -= m
        self.seats_waiting -= m
        self.reqs_waiting -= 1
        self._bound_and_post(q)
        if not fifo and not q.executing:
            self._active_queues -= 1
        if self.integrator is not None:
            self.integrator.set(now, self.seats_in_use + self.seats_waiting)
        self._reject(req, TIME_OUT)

    # ----------------------------------------------------------------- observation

    def is_idle(self) -> bool:
        return self.reqs_waiting == 0 and self.reqs_executing == 0

