"""The shipped specs, run as a user would on a machine with no pace yet: each command's estimate
is within 2x of what it measured, and a budget stops it within max(10 %, 30 s) past its end,
keeping what it did (simapf.jobs.estimate, simapf.jobs.budget).

Each command runs under a budget of BUDGET_S. One that finishes within it is measured whole:
its first line's estimate against its wall time. One that the budget stops is measured on
what it did: the first estimate against the time it ran plus what its stop says is left (the
same model, at the pace its runs took). Every command starts from an empty state (its pace a
reference run's) and an empty result cache (on: figures and calibrate stop inside a unit
only where the cache keeps its runs).
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

import pytest

from simapf.jobs.budget import BUDGET_EXIT, OVERRUN_FRACTION, OVERRUN_MIN_S

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUDGET_S = 90.0
WITHIN = 2.0  # how far an estimate may be from what was measured, either way


def seconds_of(text: str) -> float:
    """Seconds of a duration as the lines print it ("45 s", "3 min", "1.5 h")."""
    number, unit = text.split()
    return float(number) * {"s": 1, "min": 60, "h": 3600, "days": 86400}[unit]


def run(args: list[str], cwd: Path) -> tuple[int, str, float]:
    import subprocess

    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "simapf.cli", *args, "--budget", f"{BUDGET_S:g}s"], cwd=cwd,
                          capture_output=True, text=True, timeout=3600)  # fmt: skip
    return done.returncode, done.stderr, time.monotonic() - began


COMMANDS = {
    "sweep gomemlimit-squeeze": ["sweep", str(ROOT / "sweeps/gomemlimit-squeeze.yaml"), "--out", "gomemlimit"],
    "sweep policies-size-qps": ["sweep", str(ROOT / "sweeps/policies-size-qps.yaml"), "--out", "psq"],
    "optimize optimize-relist-storm": ["optimize", str(ROOT / "sweeps/optimize-relist-storm.yaml"), "--out", "opt"],
    "figures docs": ["figures", str(ROOT / "figures/docs.yaml"), "--out", "figures"],
    "calibrate": ["calibrate", "--out", "params.yaml"],
}  # fmt: skip


@pytest.mark.parametrize("what", list(COMMANDS))
def test_a_shipped_spec_is_estimated_within_2x_and_stops_in_time(what, tmp_path, monkeypatch):
    pytest.importorskip("optuna")
    monkeypatch.setenv("SIMAPF_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SIMAPF_NO_CACHE", "0")
    monkeypatch.setenv("SIMAPF_CACHE_DIR", str(tmp_path / "cache"))
    code, stderr, took = run(COMMANDS[what], tmp_path)
    lines = stderr.splitlines()
    first = next(line for line in lines if line.startswith(f"simapf: {what}: "))
    estimated = seconds_of(re.search(r", (?:at most )?~([^,]+?) on \d+ workers? \(", first).group(1))
    assert code in (0, BUDGET_EXIT), stderr
    assert took <= BUDGET_S + max(OVERRUN_FRACTION * BUDGET_S, OVERRUN_MIN_S), (took, stderr)
    if code == 0:
        measured = took
    else:
        stop = next(line for line in lines if " budget of 90s spent " in line)
        left = re.search(r" left \(~([^)]+)\)", stop)
        assert left, stop
        measured = took + seconds_of(left.group(1))
        goes_on = next(line for line in lines if line.startswith("simapf: continue with: simapf "))
        assert "--budget" not in shlex.split(goes_on)
    print(f"{what}: estimated {estimated:.0f} s, measured {measured:.0f} s (ran {took:.0f} s, exit {code})")
    assert measured / WITHIN <= estimated <= measured * WITHIN, (first, measured, stderr)
