"""The reference trace produced by upstream's own queueset (apf-mechanics §6.13).

Level: CL 4, 4 queues, queue length limit 2, hand size 1, so a flow with hash h always goes
to queue h mod 4. Nine requests arrive at t = 0 in a fixed order; the expected dispatch times,
releases, rejections and values of the progress meter R are those the real code printed.
"""

from simapf.engine.clock import EventLoop, Phase
from simapf.apf.queueset import QueueSet, Request

MS = 1_000_000
UNITS_PER_SEAT_SECOND = 100_000_000

# name, queue (= flow hash), initial seats, final seats, additional latency, service time
TRACE = [
    ("A1", 0, 1, 0, 0, 10 * MS),
    ("A2", 0, 1, 0, 0, 20 * MS),
    ("B1", 1, 2, 0, 0, 30 * MS),
    ("A3", 0, 1, 0, 0, 105 * MS),
    ("C1", 2, 5, 0, 0, 5 * MS),
    ("B2", 1, 2, 0, 0, 25 * MS),
    ("A4", 0, 1, 0, 0, 110 * MS),
    ("A5", 0, 1, 0, 0, 10 * MS),
    ("D1", 3, 1, 3, 20 * MS, 10 * MS),
]


class Trace:
    """Runs the trace and records R and every queue's nextDispatchR after each event."""

    def __init__(self) -> None:
        self.loop = EventLoop()
        self.events: list[tuple[int, str, str, int]] = []  # (t_ns, event, request, R)
        self.qs = QueueSet("ref", self.loop, self, concurrency_limit=4, queues=4, hand_size=1,
                           queue_length_limit=2)
        self.service = {}
        self.requests = {}
        for seq, (name, flow, initial, final, latency, service) in enumerate(TRACE):
            req = Request(seq, flow, initial, final, latency, payload=name)
            self.service[name] = service
            self.requests[name] = req
            self.loop.at(0, self.qs.arrive, req, Phase.ARRIVAL)
        self.loop.run()

    def _note(self, event: str, req: Request) -> None:
        self.events.append((self.loop.now, event, req.payload, self.qs.r))

    def dispatched(self, req: Request) -> None:
        self._note("dispatch", req)
        self.loop.at(self.loop.now + self.service[req.payload], self._finish, req, Phase.FINISH)

    def _finish(self, req: Request) -> None:
        self.qs.finish(req)
        self._note("finish", req)

    def rejected(self, req: Request, reason: str) -> None:
        self._note(f"reject:{reason}", req)

    def released(self, req: Request) -> None:
        self._note("release", req)


def units(seat_seconds: float) -> int:
    return round(seat_seconds * UNITS_PER_SEAT_SECOND)


def test_dispatch_and_release_times_match_upstream() -> None:
    t = Trace()
    dispatch = {name: t.requests[name].dispatch_ns for name, *_ in TRACE}
    assert dispatch == {
        "A1": 0, "A2": 0, "B1": 0, "B2": 20 * MS, "C1": 45 * MS, "A3": 50 * MS,
        "A4": 50 * MS, "D1": 155 * MS, "A5": -1,
    }
    release = {name: t.requests[name].release_ns for name, *_ in TRACE}
    assert release == {
        "A1": 10 * MS, "A2": 20 * MS, "B1": 30 * MS, "B2": 45 * MS, "C1": 50 * MS,
        "A3": 155 * MS, "A4": 160 * MS, "D1": 185 * MS, "A5": -1,
    }
    assert t.requests["A5"].reject_reason == "queue-full"


def test_dispatch_order_and_head_of_line_blocking() -> None:
    t = Trace()
    order = [name for _, event, name, _ in t.events if event == "dispatch"]
    # At 10 ms B2 (2 seats) is the best head and does not fit: A3 must not jump ahead.
    # At 30 ms C1 (5 seats > CL) is best and waits until nothing executes (45 ms).
    assert order == ["A1", "A2", "B1", "B2", "C1", "A3", "A4", "D1"]


def test_progress_meter_values() -> None:
    t = Trace()
    r_at_finish = {name: r for when, event, name, r in t.events if event == "finish"}
    assert r_at_finish["A1"] == units(0.010)  # ratio min(16, 4) / 4 = 1
    assert r_at_finish["A2"] == units(0.020)
    assert r_at_finish["B1"] == units(0.030)
    assert r_at_finish["B2"] == units(0.045)
    assert r_at_finish["C1"] == 5_166_667  # 0.045 + 5 ms at min(10, 4) / 3, Go-rounded
    assert r_at_finish["A3"] == 26_166_667  # + 105 ms at min(5, 4) / 2
    assert r_at_finish["A4"] == 27_166_667
    assert r_at_finish["D1"] == 28_666_667  # + 5 ms at 3 / 1: D1's queue still active
    r_at_release = {name: r for when, event, name, r in t.events if event == "release"}
    assert r_at_release["D1"] == 28_666_667  # no active queue while D1 lingers: R stands still


def test_next_dispatch_r_of_queues_at_the_end() -> None:
    t = Trace()
    q0, q1, q2, q3 = t.qs.queues
    assert q0.next_dispatch_r == units(0.245)
    assert q1.next_dispatch_r == units(0.110)
    assert q2.next_dispatch_r == units(0.025)
    assert q3.next_dispatch_r == units(0.070)  # 0.063 charged at dispatch, + 1 seat x 7 ms
    assert t.qs.seats_in_use == 0 and t.qs.is_idle()
    assert t.qs.no_accommodation_total >= 3  # the three blocked passes described above
