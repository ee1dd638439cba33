"""A Dask backend ends as the other backends do: Ctrl-C on a local cluster (starting or running)
and a scheduler killed mid-sweep end in one line, with no worker's traceback and no process
left behind; the cluster's own machinery never swallows a Ctrl-C."""

from __future__ import annotations

import gc
import glob
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simapf.sweeps import backends

pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[2]
# Runs of a few seconds each: the sweep is still going when it is interrupted.
SWEEP = f"""
name: long
base: {ROOT}/scenarios/relist-storm.yaml
factors: {{run.duration_s: [300, 301, 302, 303, 304, 305, 306, 307]}}
replications: 2
"""


def _sigint_blocked() -> bool:
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _report_mask(queue) -> None:
    queue.put(_sigint_blocked())


def test_processes_started_for_a_local_cluster_never_take_ctrl_c():
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    with backends._ctrl_c_left_to_this_process():
        child = context.Process(target=_report_mask, args=(queue,))
        child.start()
        assert not _sigint_blocked()  # this process still takes it
    assert queue.get(timeout=60) is True
    child.join()
    later = context.Process(target=_report_mask, args=(queue,))
    later.start()
    assert queue.get(timeout=60) is False  # only within the block
    later.join()


def test_a_ctrl_c_while_the_cluster_starts_takes_effect_once_it_can_be_closed():
    with pytest.raises(KeyboardInterrupt):
        with backends._ctrl_c_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # delivered, and held
            reached = True
    assert reached


def test_the_local_cluster_leaves_no_callback_in_this_process_garbage_collector():
    # An exception in a gc callback is only printed: a Ctrl-C landing in distributed's would be lost.
    with backends.dask_client(backends.Backend("dask", 1)):
        assert not any("distributed" in getattr(cb, "__module__", "") for cb in gc.callbacks), gc.callbacks
    assert not any("distributed" in getattr(cb, "__module__", "") for cb in gc.callbacks)


def _interrupted(tmp_path: Path, args: list[str], stop) -> subprocess.CompletedProcess:
    """`simapf ARGS` in its own process group, `stop(process)` once its first run is written."""
    (tmp_path / "long.yaml").write_text(SWEEP)
    proc = subprocess.Popen([sys.executable, "-m", "simapf.cli", *args], cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "SIMAPF_NO_CACHE": "1"})  # fmt: skip
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not glob.glob(str(tmp_path / "out" / "run-*.parquet")):
        time.sleep(0.1)
    stop(proc)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"still running 120 s after it was stopped: {err[-2000:]}")
    deadline = time.monotonic() + 15  # the last helpers (multiprocessing's resource tracker) end on their own
    while (left := subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()) \
            and time.monotonic() < deadline:  # fmt: skip
        time.sleep(0.2)
    assert left == [], "processes left behind"
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@pytest.mark.slow
def test_ctrl_c_on_a_sweep_on_a_local_cluster_is_one_line(tmp_path):
    # A terminal's Ctrl-C goes to the whole process group: simapf and the cluster's workers.
    done = _interrupted(tmp_path, ["sweep", "long.yaml", "--out", "out", "--no-progress", "--backend", "dask",
                                   "--workers", "2"], lambda p: os.killpg(p.pid, signal.SIGINT))  # fmt: skip
    assert done.returncode == 130
    assert done.stderr == "simapf: interrupted; finished runs are in out: run the same command to resume\n", done.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_scheduler_killed_mid_sweep_is_one_line(tmp_path):
    port = _free_port()
    dask = Path(sys.executable).parent / "dask"
    scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    worker = subprocess.Popen([dask, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "1", "--nthreads", "1",
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)  # fmt: skip
    try:
        time.sleep(5)
        done = _interrupted(tmp_path, ["sweep", "long.yaml", "--out", "out", "--no-progress", "--dask",
                                       f"tcp://127.0.0.1:{port}"], lambda _p: scheduler.kill())  # fmt: skip
    finally:
        scheduler.kill()
        os.killpg(worker.pid, signal.SIGKILL)
        scheduler.wait()
        worker.wait()
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"simapf: error: lost the Dask scheduler at tcp://127.0.0.1:{port}")
    assert "the runs that finished are kept" in lines[0]

