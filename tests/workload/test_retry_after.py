"""The Retry-After of APF's 429s against upstream's rules (k8s.io/apiserver
pkg/util/flowcontrol/dropped_requests_tracker.go; apf-mechanics.md §6.9):

- every priority level starts at 1 s;
- rejections are counted per wall-clock second; the value changes only when the first rejection
  of a new second arrives, and it then looks at the rejections of the `retryAfter` seconds
  before that second (the current one excluded);
- at least 3 x retryAfter of them, and at least retryAfter seconds since the last increase:
  double, at most 32;
- fewer than retryAfter of them (and retryAfter > 1): minus one.

The expected values below are worked out from those rules by hand, not read off the code.
"""

from simapf.apf.retry_after import DroppedRequestsTracker
from simapf.apf.types import NS_PER_S

PL = "workload-low"


def drop(t: DroppedRequestsTracker, second: float, n: int = 1, level: str = PL) -> int:
    """`n` rejections at `second`; the Retry-After the last of them carries."""
    for _ in range(n):
        t.record(level, int(second * NS_PER_S))
    return t.retry_after_s(level)


def test_every_level_starts_at_one_second():
    t = DroppedRequestsTracker()
    assert t.retry_after_s(PL) == 1  # never rejected anything
    assert drop(t, 0.2) == 1
    assert t.retry_after_s("other") == 1


def test_rejections_of_the_current_second_do_not_count_yet():
    t = DroppedRequestsTracker()
    # 100 rejections within second 5: the window is always the seconds *before* the current one.
    for k in range(100):
        assert drop(t, 5 + k / 100) == 1


def test_sustained_rejection_doubles_at_most_every_retry_after_seconds_up_to_32():
    t = DroppedRequestsTracker()
    seen = {}
    for second in range(0, 120):
        seen[second] = drop(t, second + 0.5, n=100)
    # 100 per second is always >= 3 x retryAfter (96 at 32), so every increase happens as soon as
    # the previous one is retryAfter seconds old: 1 at 0, 2 from 1, 4 from 3, 8 from 7, 16 from
    # 15, 32 from 31, and never more.
    def expected(s):
        for start, value in ((31, 32), (15, 16), (7, 8), (3, 4), (1, 2)):
            if s >= start:
                return value
        return 1

    assert seen == {s: expected(s) for s in seen}


def test_three_times_retry_after_is_the_threshold():
    t = DroppedRequestsTracker()
    drop(t, 10.1, n=2)
    assert drop(t, 11.1) == 1  # 2 < 3 x 1 in [10, 11)
    t = DroppedRequestsTracker()
    drop(t, 10.1, n=3)
    assert drop(t, 11.1) == 2  # 3 >= 3 x 1
    # Now retryAfter = 2: second 12 is too early (one second after the increase, need two) ...
    drop(t, 11.2, n=10)
    assert drop(t, 12.1) == 2
    # ... second 13 looks at [11, 13): 11 (second 11) + 1 (second 12) = 12 >= 6: double.
    assert drop(t, 13.1) == 4


def _after_a_storm() -> DroppedRequestsTracker:
    t = DroppedRequestsTracker()
    for second in range(0, 40):
        drop(t, second, n=100)
    assert t.retry_after_s(PL) == 32
    return t


def test_sparse_rejections_lower_it_by_one_each_down_to_one():
    t = _after_a_storm()
    # One rejection every other second, long after the storm: a window of r seconds holds
    # about r/2 < r of them, so each new second with a rejection lowers the value by one.
    values = [drop(t, 100 + 2 * k) for k in range(40)]
    assert values == [max(1, 31 - k) for k in range(40)]


def test_one_rejection_per_second_holds_it_where_the_window_fills():
    t = _after_a_storm()
    # One per second from second 100: at second 100 + k the window [100 + k - r, 100 + k) holds
    # min(k, r) rejections. It falls (31, 30, ...) while k < r, i.e. until k = r = 16, where
    # the window holds exactly r: not fewer, so it stays at 16.
    values = [drop(t, 100 + k) for k in range(40)]
    assert values == [31 - k for k in range(16)] + [16] * 24


def test_between_the_thresholds_it_holds():
    t = DroppedRequestsTracker()
    drop(t, 0.5, n=3)
    assert drop(t, 1.5) == 2  # doubled at second 1
    drop(t, 1.6, n=3)  # second 1: 4 in all
    drop(t, 2.5, n=0)
    # Second 3 looks at [1, 3): 4 rejections: not < 2, not >= 6: stays 2.
    assert drop(t, 3.5) == 2


def test_levels_are_independent():
    t = DroppedRequestsTracker()
    for second in range(0, 10):
        drop(t, second, n=50, level="a")
    drop(t, 9.5, level="b")
    assert t.retry_after_s("a") == 8  # 2 from 1, 4 from 3, 8 from 7
    assert t.retry_after_s("b") == 1
