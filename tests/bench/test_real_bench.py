"""The real bench end to end: the binaries built from upstream's modules (kept in the user's bench
cache between runs), one small cell measured as a user measures it, a real OOM kill at a
container limit, and nothing left running afterwards. Skipped, with the reason, where Go or
cgroup v1 limits are missing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simapf.bench import cgroups

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("go") is None, reason="the bench builds kube-apiserver and etcd with Go: no `go` on PATH"),
    pytest.mark.skipif(cgroups.available() is not None, reason=f"the bench sets container limits: {cgroups.available()}"),
]


def running(name: str) -> list[str]:
    found = subprocess.run(["pgrep", "-x", name], capture_output=True, text=True)
    return found.stdout.split()


def simapf(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simapf.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def built():
    """The binaries, built once (minutes the first time on a machine; seconds when cached)."""
    from simapf.bench import build

    return build.binaries()


def test_the_built_apiserver_is_the_pinned_release(built):
    assert built.versions["kube-apiserver"] == "v1.37.2" and built.versions["etcd"] == "3.7.0"


def test_a_small_cell_is_measured_and_written_as_a_run(built, tmp_path):
    before = running("kube-apiserver") + running("etcd")
    done = simapf("measure", "scenarios/bench/smoke.yaml", "--out", str(tmp_path / "out"), "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} >= {"summary.json", "series.parquet", "series.csv", "latency.csv",
                                               "priority_levels.csv", "client_latency.csv", "overview.png",
                                               "overview.svg", "heap-peak.pb.gz", "attempts", "logs"}  # fmt: skip
    s = json.loads((out / "summary.json").read_text())
    assert s["measured"] is True and s["bench"]["server_version"] == "v1.37.2"
    assert s["requests"]["by_outcome"]["ok"] > 50 and s["requests"]["rejected_share"] == 0
    assert 100e6 < s["bench"]["base_rss_bytes"] <= s["memory"]["peak_rss_bytes"] < 4e9
    assert s["scenario"]["name"] == "bench-smoke" and s["provenance"]["scenario_sha256"]
    (level,) = [row for row in s["latency"] if row["verb"] == "list"]
    assert level["priority_level"] == "global-default"  # named by the response's APF header
    assert (out / "heap-peak.pb.gz").read_bytes()[:2] == b"\x1f\x8b"  # a gzipped pprof profile
    assert running("kube-apiserver") + running("etcd") == before


def test_a_limit_below_the_peak_ends_in_a_real_oom_kill(built, tmp_path):
    done = simapf("measure", "scenarios/bench/oom.yaml", "--out", str(tmp_path / "out"), "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["process"]["oom_kills"] >= 1 and s["memory"]["oom_killed"]
    assert s["deaths"][0]["reason"] == "oom-killed"
    limit = s["memory"]["memory_limit_bytes"]
    assert 0.9 * limit <= s["memory"]["rss_at_oom_kill_bytes"] <= 1.01 * limit
    assert not running("kube-apiserver") and not running("etcd")


def test_a_field_the_bench_cannot_run_is_refused_before_anything_starts(tmp_path):
    done = simapf("measure", "scenarios/bench/smoke.yaml", "--set", "apiserver.replicas=2", "--out",
                  str(tmp_path / "out"), timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "apiserver.replicas" in done.stderr and not (tmp_path / "out").exists()
