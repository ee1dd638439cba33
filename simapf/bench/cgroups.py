"""A container's limits for a bench process: cgroup v1 memory and cpu groups.

A kubelet runs kube-apiserver in a container whose memory limit the kernel enforces (an OOM
kill at the limit) and whose CPU limit is a CFS quota. The bench gives each process it starts a
group of its own in each controller, below the group simapf itself runs in, so that the limits
of whatever contains simapf still hold. Groups are removed when the process is gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from simapf.errors import SimapfError

ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000  # the kernel's default period, as a kubelet uses


class CgroupError(SimapfError):
    """A limit the bench cannot set on this machine."""


def _own_group(controller: str) -> Path:
    """The group of `controller` this process runs in (cgroup v1's /proc/self/cgroup)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return ROOT / controller / path.lstrip("/")
    return ROOT / controller


def available() -> str | None:
    """None if memory and cpu limits can be set here; otherwise why not, in one line."""
    for controller, probe in (("memory", "memory.limit_in_bytes"), ("cpu", "cpu.cfs_quota_us")):
        base = _own_group(controller)
        if not (base / probe).exists():
            return f"no cgroup v1 {controller} controller at {base} (the bench needs it for container limits)"
        if not os.access(base, os.W_OK):
            return f"cannot create cgroups under {base}: the bench needs root for container limits"
    return None


@dataclass
class Container:
    """One process's groups: a memory limit (None: none) and a CPU quota in cores (None: none)."""

    name: str
    memory_limit_bytes: int | None = None
    cpu_cores: float | None = None
    memory_group: Path | None = None
    cpu_group: Path | None = None

    def create(self) -> None:
        why = available()
        if why:
            raise CgroupError(why)
        tag = f"simapf-bench-{os.getpid()}-{self.name}"
        memory = self.memory_group = _own_group("memory") / tag
        memory.mkdir(exist_ok=True)
        cpu = self.cpu_group = _own_group("cpu") / tag
        cpu.mkdir(exist_ok=True)
        if self.memory_limit_bytes is not None:
            (memory / "memory.limit_in_bytes").write_text(str(int(self.memory_limit_bytes)))
        if self.cpu_cores is not None:
            (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text(str(max(1000, round(self.cpu_cores * CFS_PERIOD_US))))

    @property
    def groups(self) -> list[Path]:
        return [g for g in (self.memory_group, self.cpu_group) if g is not None]

    def add(self, pid: int) -> None:
        for group in self.groups:
            (group / "cgroup.procs").write_text(str(pid))

    def oom_kills(self) -> int:
        """Processes the kernel killed in this group at its memory limit."""
        group = self.memory_group
        if group is None:
            return 0
        for line in (group / "memory.oom_control").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def max_usage_bytes(self) -> int | None:
        group = self.memory_group
        return int((group / "memory.max_usage_in_bytes").read_text()) if group is not None else None

    def remove(self) -> list[Path]:
        """Remove the groups once their processes are gone; returns those still busy."""
        left = []
        for group in self.groups:
            try:
                group.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                left.append(group)
        self.memory_group = self.memory_group if self.memory_group in left else None
        self.cpu_group = self.cpu_group if self.cpu_group in left else None
        return left
