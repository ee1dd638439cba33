"""The Retry-After a 429 carries: per priority level, from the recent rate of rejections.

Upstream (k8s.io/apiserver flowcontrol dropped_requests_tracker.go, apf-mechanics.md §6.9)
starts every level at 1 s. Rejections are counted per wall-clock second; when the first
rejection of a new second arrives, the previous `retry_after` seconds are looked at: at least
3 x retry_after rejections, and retry_after seconds since the last increase, double it (at most
32 s); fewer than retry_after rejections lower it by one.
"""

from __future__ import annotations

from collections import deque

from simapf.apf.types import NS_PER_S

MAX_RETRY_AFTER_S = 32


class _LevelDrops:
    __slots__ = ("history", "current_s", "current_count", "retry_after", "last_increase_s")

    def __init__(self) -> None:
        self.history: deque[tuple[int, int]] = deque()  # (second, rejections) before the current one
        self.current_s = 0
        self.current_count = 0
        self.retry_after = 1
        self.last_increase_s = 0  # "we can bump at any time after the first rejection"

    def record(self, second: int) -> None:
        if second == self.current_s:
            self.current_count += 1
            return
        history = self.history
        history.append((self.current_s, self.current_count))
        while history and self.current_s - history[0][0] > MAX_RETRY_AFTER_S:
            history.popleft()
        self.current_s = second
        self.current_count = 1
        self._update(second)

    def _update(self, now_s: int) -> None:
        retry_after = self.retry_after
        dropped = 0
        for t, n in reversed(self.history):
            if now_s - t > retry_after:
                break
            if t < now_s:
                dropped += n
        if now_s - self.last_increase_s >= retry_after and dropped >= 3 * retry_after:
            self.retry_after = min(retry_after * 2, MAX_RETRY_AFTER_S)
            self.last_increase_s = now_s
        elif dropped < retry_after and retry_after > 1:
            self.retry_after = retry_after - 1


class DroppedRequestsTracker:
    """Rejections per priority level, and the Retry-After to send with the next one."""

    __slots__ = ("_levels",)

    def __init__(self) -> None:
        self._levels: dict[str, _LevelDrops] = {}

    def record(self, level: str, now_ns: int) -> None:
        stats = self._levels.get(level)
        if stats is None:
            stats = self._levels[level] = _LevelDrops()
        stats.record(now_ns // NS_PER_S)

    def retry_after_s(self, level: str) -> int:
        stats = self._levels.get(level)
        return 1 if stats is None else stats.retry_after
