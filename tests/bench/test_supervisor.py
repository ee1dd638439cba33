"""Whatever the bench starts, it stops: on return, on an exception, on SIGTERM, and when simapf
itself is killed (the kernel's PR_SET_PDEATHSIG); container groups go with their processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from simapf.bench import cgroups
from simapf.bench.supervisor import Supervisor


def gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie of ours counts as gone once reaped; of another parent's, as its state says
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_leaving_by_an_exception_stops_every_process(tmp_path):
    with pytest.raises(RuntimeError):
        with Supervisor() as sup:
            procs = [sup.start(f"sleeper {i}", ["sleep", "1000"], tmp_path / f"{i}.log") for i in range(3)]
            assert all(p.alive() for p in procs)
            raise RuntimeError("the bench failed")
    assert all(gone(p.pid) for p in procs)
    assert not sup.processes


def test_a_process_that_ignores_sigterm_is_killed(tmp_path):
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(1000)"
    with Supervisor() as sup:
        proc = sup.start("stubborn", [sys.executable, "-c", script], tmp_path / "log")
        for _ in range(100):
            if (tmp_path / "log").read_text().strip() == "up":
                break
            time.sleep(0.05)
        status = sup.stop(proc, wait_s=0.5)
    assert status == -signal.SIGKILL and gone(proc.pid)


_PARENT = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from simapf.bench.supervisor import Supervisor
    with Supervisor() as sup:
        p = sup.start("sleeper", ["sleep", "1000"], Path(sys.argv[1]))
        print(p.pid, flush=True)
        time.sleep(1000)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_when_simapf_itself_is_stopped_its_processes_die_with_it(tmp_path, sig):
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path / "log")], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert not gone(child, within_s=0.2)
    parent.send_signal(sig)
    parent.wait(30)
    assert gone(child), f"the child outlived simapf after {signal.Signals(sig).name}"


@pytest.mark.skipif(cgroups.available() is not None, reason=f"no cgroups to set limits with here: {cgroups.available()}")
def test_a_container_is_its_processes_groups_and_goes_with_them(tmp_path):
    container = cgroups.Container("test", memory_limit_bytes=64 * 2**20, cpu_cores=0.5)
    with Supervisor() as sup:
        proc = sup.start("contained", ["sleep", "1000"], tmp_path / "log", container=container)
        memory, cpu = container.memory_group, container.cpu_group
        assert str(proc.pid) in (memory / "cgroup.procs").read_text().split()
        assert str(proc.pid) in (cpu / "cgroup.procs").read_text().split()
        assert int((memory / "memory.limit_in_bytes").read_text()) == 64 * 2**20
        assert int((cpu / "cpu.cfs_quota_us").read_text()) == 50_000
    assert gone(proc.pid) and not memory.exists() and not cpu.exists()


@pytest.mark.skipif(cgroups.available() is not None, reason=f"no cgroups to set limits with here: {cgroups.available()}")
def test_the_kernel_kills_at_a_containers_memory_limit_and_says_so(tmp_path):
    hog = "b = bytearray(256 * 2**20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(30)"
    container = cgroups.Container("hog", memory_limit_bytes=64 * 2**20)
    with Supervisor() as sup:
        proc = sup.start("hog", [sys.executable, "-c", hog], tmp_path / "log", container=container)
        status = proc.popen.wait(30)
        assert status == -signal.SIGKILL and proc.killed_by_oom() and container.oom_kills() == 1
