"""The one owner of every process the bench starts: whatever happens, it stops them.

Each process is started in a session of its own (a Ctrl-C at the terminal reaches simapf only,
which stops them in order), in its container's cgroups from its first instruction, and with
the kernel told to kill it if simapf dies first (PR_SET_PDEATHSIG), so that not even a SIGKILL
of simapf leaves an etcd or kube-apiserver behind. Leaving the supervisor's `with` block, by
return, exception or signal, stops every process still running (SIGTERM, then SIGKILL) and
removes the cgroups.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from simapf.bench.cgroups import Container

_PR_SET_PDEATHSIG = 1
_STOP_WAIT_S = 10.0


def _child_setup(procs_files: tuple[str, ...]):
    """What a child does between fork and exec: join its cgroups, die with its parent."""
    libc = ctypes.CDLL(None, use_errno=True)

    def setup() -> None:
        for path in procs_files:
            with open(path, "w") as handle:
                handle.write(str(os.getpid()))
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return setup


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    container: Container | None
    log: IO[bytes]
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def killed_by_oom(self) -> bool:
        return self.container is not None and self.container.oom_kills() > 0


class Supervisor:
    """Starts processes and stops them all on the way out of its `with` block."""

    def __init__(self) -> None:
        self.processes: list[Process] = []
        self._old_handlers: dict[int, object] = {}

    def __enter__(self) -> "Supervisor":
        # SIGTERM (a CI runner's timeout, `kill`) and SIGHUP unwind like Ctrl-C, through __exit__.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, _raise_interrupt)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop_all()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)  # type: ignore[arg-type]

    def start(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None,
              container: Container | None = None, cwd: Path | None = None) -> Process:  # fmt: skip
        if container is not None:
            container.create()
        procs = tuple(str(g / "cgroup.procs") for g in container.groups) if container is not None else ()
        log = open(log_path, "ab")
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"), **(env or {})}
        try:
            popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full_env,
                                     cwd=cwd, start_new_session=True, preexec_fn=_child_setup(procs))  # fmt: skip
        except BaseException:
            log.close()
            if container is not None:
                container.remove()
            raise
        proc = Process(name, popen, container, log)
        self.processes.append(proc)
        return proc

    def stop(self, proc: Process, wait_s: float = _STOP_WAIT_S) -> int | None:
        """Stop one process (SIGTERM, then SIGKILL after `wait_s`); its exit status."""
        if proc.alive():
            try:
                proc.popen.send_signal(signal.SIGTERM)
                proc.popen.wait(wait_s)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        status = proc.popen.returncode
        proc.log.close()
        if proc.container is not None:
            _remove_when_empty(proc.container)
        if proc in self.processes:
            self.processes.remove(proc)
        return status

    def stop_all(self) -> None:
        # The newest first: load generators, then the apiserver, then etcd.
        for proc in reversed(list(self.processes)):
            try:
                self.stop(proc)
            except KeyboardInterrupt:
                proc.popen.kill()  # a second Ctrl-C: no more waiting
                self.stop(proc, wait_s=_STOP_WAIT_S)


def _remove_when_empty(container: Container) -> None:
    # A killed process leaves its group a moment later than its exit status.
    for _ in range(50):
        if not container.remove():
            return
        time.sleep(0.1)


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
