"""Edge cases of the queueset found in review, each pinned to upstream's behaviour."""

from simapf.engine.clock import EventLoop, Phase
from simapf.apf.queueset import DONE, QueueSet, Request

MS = 1_000_000


class Driver:
    """Runs requests with fixed service times through one level."""

    def __init__(self, **level):
        self.loop = EventLoop()
        self.qs = QueueSet("edge", self.loop, self, **level)
        self.service = {}
        self.timeouts = []

    def add(self, req, at_ns, service_ns):
        self.service[req.seq] = service_ns
        self.loop.at(at_ns, self.qs.arrive, req, Phase.ARRIVAL)
        return req

    def dispatched(self, req):
        self.loop.at(self.loop.now + self.service[req.seq], self.qs.finish, req, Phase.FINISH)

    def rejected(self, req, reason):
        self.timeouts.append((req.seq, reason, self.loop.now))

    def released(self, req):
        pass


def test_a_finish_with_lingering_seats_still_runs_a_dispatch_pass():
    """Upstream runs a pass after every finish. R1 (1 seat, 20 ms additional latency) ends
    at 10 ms; then nothing executes, so R2 (3 seats > CL 2) may run alone at once, even though
    R1's seat is still held."""
    d = Driver(concurrency_limit=2, queues=1, hand_size=1, queue_length_limit=10)
    d.add(Request(1, 0, 1, 1, 20 * MS), 0, 10 * MS)
    wide = d.add(Request(2, 0, 3), 0, 5 * MS)
    d.loop.run()
    assert wide.dispatch_ns == 10 * MS
    assert wide.state == DONE


def test_a_deadline_already_past_at_arrival_times_out_at_once():
    d = Driver(concurrency_limit=1, queues=1, hand_size=1, queue_length_limit=10)
    d.add(Request(1, 0, 1), 0, 100 * MS)  # fills the level
    late = Request(2, 0, 1, deadline_ns=0)  # its wait budget was spent before APF
    d.add(late, 5 * MS, 1 * MS)
    d.loop.run()
    assert d.timeouts == [(2, "time-out", 5 * MS)]


def test_a_surplus_queue_is_removed_once_even_with_two_lingering_requests():
    d = Driver(concurrency_limit=4, queues=2, hand_size=1, queue_length_limit=10)
    # Two requests of flow 1 (queue 1) with lingering seats, released 1 ms apart.
    a = d.add(Request(1, 1, 1, 1, 10 * MS), 0, 1 * MS)
    b = d.add(Request(2, 1, 1, 1, 11 * MS), 0, 1 * MS)
    d.loop.run(until_ns=2 * MS)  # both finished, both lingering
    d.qs.set_queuing(1, 1, 10)  # queue 1 becomes surplus
    d.loop.run()
    assert [q.index for q in d.qs.queues] == [0]
    assert a.state == b.state == DONE and d.qs.seats_in_use == 0
