"""Whether the apiserver process is up, and the hooks the runtime hangs on its deaths and restarts.

States: UP (serving, watch caches ready), DOWN (killed, waiting for its restart), REFILLING
(serving again, watch caches being refilled from etcd). `ResourceModel` drives the transitions;
the runtime registers callbacks:

- `on_death(now_ns)`: the process just died (an OOM kill, or `ResourceModel.kill`). Every request
  started before is lost: no `on_done` will come for it; the runtime fails them and whatever it
  had queued. `last_down_reason` says why ("oom" or the reason given to `kill`).
- `on_restart(now_ns)`: the new process is up after `restart_s`, its watch caches empty.
- `on_ready(now_ns)`: every registered watch cache is filled again.
"""

from __future__ import annotations

import enum
from typing import Callable

Hook = Callable[[int], None]


class ProcessState(enum.Enum):
    UP = "up"
    DOWN = "down"
    REFILLING = "refilling"


class ServerProcessState:
    __slots__ = (
        "state", "on_death", "on_restart", "on_ready", "oom_kills", "kills", "restarts",
        "last_down_ns", "last_down_reason", "down_ns_total", "epoch",
    )

    def __init__(self) -> None:
        self.state = ProcessState.UP
        self.on_death: list[Hook] = []
        self.on_restart: list[Hook] = []
        self.on_ready: list[Hook] = []
        self.oom_kills = 0
        self.kills = 0
        self.restarts = 0
        self.last_down_ns: int | None = None
        self.last_down_reason: str | None = None
        self.down_ns_total = 0
        self.epoch = 0  # one per process incarnation

    @property
    def up(self) -> bool:
        """Serving requests (UP or REFILLING)."""
        return self.state is not ProcessState.DOWN

    def went_down(self, now_ns: int, reason: str) -> None:
        self.state = ProcessState.DOWN
        self.kills += 1
        if reason == "oom":
            self.oom_kills += 1
        self.last_down_ns = now_ns
        self.last_down_reason = reason
        self.epoch += 1
        for hook in list(self.on_death):
            hook(now_ns)

    def came_back(self, now_ns: int, refilling: bool) -> None:
        if self.last_down_ns is not None:
            self.down_ns_total += now_ns - self.last_down_ns
        self.restarts += 1
        self.state = ProcessState.REFILLING if refilling else ProcessState.UP
        for hook in list(self.on_restart):
            hook(now_ns)

    def down_ns_until(self, now_ns: int) -> int:
        """Time spent down up to `now_ns`, a downtime still open then included."""
        if self.state is ProcessState.DOWN and self.last_down_ns is not None:
            return self.down_ns_total + now_ns - self.last_down_ns
        return self.down_ns_total

    def became_ready(self, now_ns: int) -> None:
        self.state = ProcessState.UP
        for hook in list(self.on_ready):
            hook(now_ns)
