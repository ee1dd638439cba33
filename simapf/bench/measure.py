"""`simapf measure`: a scenario run for real, on kube-apiserver and etcd built from upstream.

One replication: a fresh etcd and kube-apiserver with the scenario's flags and container limits,
the inventory created through the API, the apiserver given a moment to settle (its RSS then is
the replication's base), the clients started together, the apiserver sampled until the run's
duration is over, a heap profile kept from near its peak. An OOM kill is the kernel's, at the
cgroup's limit, and the apiserver is started again after `restart_s`, as a kubelet would. The
replication's readings become a `Result` (simapf.bench.observe) written like a simulated run's.
"""

from __future__ import annotations

import csv
import json
import platform
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from simapf.bench.build import Binaries
from simapf.bench.cgroups import Container
from simapf.bench.plan import BenchPlan, Identity
from simapf.bench.sampler import Apiserver, Sampler, Samples, cpu_seconds, read_rss, reset_peak
from simapf.bench.supervisor import Process, Supervisor
from simapf.errors import SimapfError

READY_TIMEOUT_S = 120.0
SETTLE_S = 5.0  # after the inventory: the watch cache has every object, the GC has run
START_DELAY_S = 1.0  # the clients' common start, after their processes are up
STOP_GRACE_S = 15.0  # for a load generator to finish its last requests after the run's end
ETCD_QUOTA_BYTES = 8 * 1024**3
ETCD_MAX_REQUEST_BYTES = 3 * 1024**2
LOG_BYTES = 4 * 1024**2  # of each process's log, the end kept with the output


class BenchFailed(SimapfError):
    """A replication could not run: one line, and where the process logs are."""


@dataclass
class Death:
    at_s: float
    reason: str  # oom-killed, or the exit status
    rss_bytes: int | None
    restarted_at_s: float | None = None


@dataclass
class Readings:
    """Everything one replication read, for simapf.bench.observe."""

    plan: BenchPlan
    binaries: Binaries
    duration_s: float
    wall_s: float
    base_rss_bytes: int
    peak_rss_bytes: int  # VmHWM over the load, or the highest RSS seen when the process died
    etcd_cpu_core_s: float
    client_cpu_core_s: float  # the load generators', on the same machine as the apiserver
    samples: Samples
    deaths: list[Death]
    attempts: dict[str, list[dict[str, str]]]  # per client, the load generator's rows
    uid_names: dict[str, str]  # APF objects' UIDs to names
    flags: list[str]
    env: dict[str, str]
    machine: dict[str, Any]
    server_version: str  # what the apiserver's /version said (gitVersion)
    logs: dict[str, bytes] = field(default_factory=dict)  # each process's log (its last LOG_BYTES)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine() -> dict[str, Any]:
    """The machine a replication ran on, as docs/benchmarks.md records one."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        memory = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        memory = None
    import os

    return {"cpu": model, "cores": os.cpu_count(), "memory_bytes": memory, "kernel": platform.release(),
            "python": platform.python_version()}  # fmt: skip


def _last_line(log: Path) -> str:
    """A process's last words, for an error line (its log goes with the working folder)."""
    try:
        lines = [line for line in _tail(log).decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1].strip()[:400] if lines else "(an empty log)"


def _wait_for(check: Callable[[], bool], proc: Process, what: str, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if not proc.alive():
            raise BenchFailed(f"{what} exited (status {proc.popen.returncode}) before it was ready: {_last_line(log)}")
        time.sleep(0.2)
    raise BenchFailed(f"{what} was not ready within {timeout_s:.0f} s: {_last_line(log)}")


def _etcd_healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return b'"health":"true"' in r.read()
    except OSError:
        return False


class Replication:
    """One fresh etcd + kube-apiserver run of a plan, inside a supervisor."""

    def __init__(self, plan: BenchPlan, binaries: Binaries, work: Path, sup: Supervisor,
                 progress: Callable[[str], None]) -> None:  # fmt: skip
        self.plan = plan
        self.bin = binaries
        self.work = work
        self.sup = sup
        self.progress = progress
        self.logs = {name: work / f"{name}.log" for name in ("etcd", "kube-apiserver", "inventory")}
        self.etcd_port, self.peer_port, self.secure_port = free_port(), free_port(), free_port()
        self.apiserver: Process | None = None
        self.container: Container | None = None
        self.api = Apiserver(f"https://127.0.0.1:{self.secure_port}", plan.admin.token, work / "certs" / "apiserver.crt")

    # ------------------------------------------------------------------ processes

    def _keys_and_tokens(self) -> None:
        (self.work / "certs").mkdir()
        subprocess.run([str(self.bin.loadgen), "-keygen", str(self.work)], check=True, capture_output=True, timeout=60)
        with open(self.work / "tokens.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            for i, who in enumerate(self.plan.identities):
                writer.writerow([who.token, who.user, f"uid-{i}", ",".join(who.groups)])

    def start_etcd(self) -> Process:
        data = self.work / "etcd-data"
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        argv = [str(self.bin.etcd), "--name=bench", f"--data-dir={data}", f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}", f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=bench={peer}",
                f"--quota-backend-bytes={ETCD_QUOTA_BYTES}", f"--max-request-bytes={ETCD_MAX_REQUEST_BYTES}",
                "--log-level=warn"]  # fmt: skip
        proc = self.sup.start("etcd", argv, self.logs["etcd"], container=Container("etcd", cpu_cores=self.plan.etcd_cores))
        _wait_for(lambda: _etcd_healthy(self.etcd_port), proc, "etcd", READY_TIMEOUT_S, self.logs["etcd"])
        return proc

    def apiserver_argv(self) -> list[str]:
        w = self.work
        return [str(self.bin.kube_apiserver), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1", f"--secure-port={self.secure_port}", f"--cert-dir={w / 'certs'}",
                "--authorization-mode=AlwaysAllow", f"--token-auth-file={w / 'tokens.csv'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={w / 'sa.pub'}", f"--service-account-signing-key-file={w / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24", "--profiling=true", *self.plan.apiserver_flags]  # fmt: skip

    def start_apiserver(self, wait: bool = True) -> Process:
        """Start kube-apiserver in its container; with `wait`, until /readyz says ok."""
        self.container = Container("kube-apiserver", memory_limit_bytes=self.plan.memory_limit_bytes,
                                   cpu_cores=self.plan.apiserver_cores)  # fmt: skip
        proc = self.sup.start("kube-apiserver", self.apiserver_argv(), self.logs["kube-apiserver"],
                              env=self.plan.apiserver_env, container=self.container)  # fmt: skip
        self.apiserver = proc
        if wait:
            _wait_for(self.api.ready, proc, "kube-apiserver", READY_TIMEOUT_S, self.logs["kube-apiserver"])
        return proc

    def _loadgen_plan(self, extra: dict[str, Any], identities: list[Identity], zero_unix_ns: int) -> dict[str, Any]:
        return {"server": self.api.url, "ca_file": str(self.work / "certs" / "apiserver.crt"),
                "zero_unix_ns": zero_unix_ns, "duration_s": self.plan.scenario.run.duration_s,
                "seed": self.plan.scenario.run.seed,
                "instances": [{"token": who.token, "start_s": 0.0} for who in identities], **extra}  # fmt: skip

    def create_inventory(self) -> None:
        if not self.plan.inventory:
            return
        spec = self._loadgen_plan({"client": "inventory", "kind": "inventory", "inventory": self.plan.inventory,
                                   "create_workers": 8}, [self.plan.admin], time.time_ns())  # fmt: skip
        path = self.work / "inventory.json"
        path.write_text(json.dumps(spec))
        proc = self.sup.start("inventory", [str(self.bin.loadgen), "-plan", str(path), "-create"], self.logs["inventory"])
        status = proc.popen.wait()
        self.sup.stop(proc)
        if status != 0:
            raise BenchFailed(f"creating the inventory failed: {_last_line(self.logs['inventory'])}")

    def start_clients(self, zero_unix_ns: int) -> list[tuple[str, Process, Path]]:
        started = []
        for i, c in enumerate(self.plan.clients):
            spec = self._loadgen_plan(c.plan, c.identities, zero_unix_ns)
            start = self.plan.scenario.clients[i].start
            rng = np.random.default_rng([self.plan.scenario.run.seed, i])
            for k, inst in enumerate(spec["instances"]):
                inst["start_s"] = start.at_s + (float(rng.uniform(0, start.spread_s)) if start.spread_s else 0.0)
            path = self.work / f"client-{i}.json"
            path.write_text(json.dumps(spec))
            out = self.work / f"client-{i}.attempts.csv"
            log = self.work / f"client-{i}.log"
            self.logs[f"client-{c.name}"] = log
            proc = self.sup.start(f"client {c.name}", [str(self.bin.loadgen), "-plan", str(path), "-out", str(out)], log,
                                  env=c.env)  # fmt: skip
            started.append((c.name, proc, out))
        return started

    def uid_names(self) -> dict[str, str]:
        names = {}
        for kind in ("prioritylevelconfigurations", "flowschemas"):
            try:
                doc = json.loads(self.api.get(f"/apis/flowcontrol.apiserver.k8s.io/v1/{kind}"))
            except (OSError, ValueError):
                continue
            for item in doc.get("items", []):
                names[item["metadata"]["uid"]] = item["metadata"]["name"]
        return names

    # ------------------------------------------------------------------ the run

    def run(self) -> Readings:
        plan = self.plan
        sc = plan.scenario
        began = time.monotonic()
        self._keys_and_tokens()
        self.progress("starting etcd")
        etcd = self.start_etcd()
        self.progress("starting kube-apiserver")
        first = self.start_apiserver()
        self.progress("creating the inventory")
        self.create_inventory()
        names = self.uid_names()
        server_version = json.loads(self.api.get("/version")).get("gitVersion", "")
        time.sleep(SETTLE_S)
        base = read_rss(first.pid)
        if base is None:
            raise BenchFailed(f"kube-apiserver died while it settled: {_last_line(self.logs['kube-apiserver'])}")
        zero_unix_ns = time.time_ns() + int(START_DELAY_S * 1e9)
        zero = time.monotonic() + START_DELAY_S
        clients = self.start_clients(zero_unix_ns)
        reset_peak(first.pid)
        etcd_cpu0 = cpu_seconds(etcd.pid) or 0.0
        client_cpu0 = {name: cpu_seconds(proc.pid) or 0.0 for name, proc, _out in clients}
        sampler = Sampler(self.api, self._serving_pid, zero, sc.run.scrape_interval_s)
        time.sleep(max(0.0, zero - time.monotonic()))
        sampler.start()
        self.progress(f"running the load for {sc.run.duration_s:g} s")
        deaths: list[Death] = []
        peak = 0
        end = zero + sc.run.duration_s
        restart_at: float | None = None
        try:
            while time.monotonic() < end:
                proc = self.apiserver
                if proc is not None and not proc.alive():
                    # Killed, at its limit or otherwise: started again after restart_s, as a
                    # kubelet restarts a container, however often that takes.
                    deaths.append(self._died(proc, zero, sampler.samples))
                    peak = max(peak, deaths[-1].rss_bytes or 0)
                    self.apiserver = None
                    restart_at = time.monotonic() + plan.restart_s
                elif proc is None and restart_at is not None and time.monotonic() >= restart_at:
                    self.progress(f"starting kube-apiserver again ({len(deaths)} death(s) so far)")
                    self.start_apiserver(wait=False)
                    restart_at = None
                elif proc is not None and deaths and deaths[-1].restarted_at_s is None and self.api.ready():
                    deaths[-1].restarted_at_s = time.monotonic() - zero  # serving again
                time.sleep(0.1)
            if self.apiserver is not None and self.apiserver.alive():
                reading = read_rss(self.apiserver.pid)
                peak = max(peak, reading[1] if reading else 0)
            etcd_cpu = (cpu_seconds(etcd.pid) or etcd_cpu0) - etcd_cpu0
            # A client that has exited has no counter left: its CPU until then is not counted.
            client_cpu = sum((cpu_seconds(proc.pid) or client_cpu0[name]) - client_cpu0[name]
                             for name, proc, _out in clients)  # fmt: skip
        finally:
            samples = sampler.stop()
        self.progress("stopping the clients")
        attempts = {}
        for name, proc, out in clients:
            try:
                proc.popen.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            self.sup.stop(proc)
            attempts[name] = _read_attempts(out)
        if not peak and samples.rss:
            peak = max(r for _, r in samples.rss)
        return Readings(plan, self.bin, sc.run.duration_s, time.monotonic() - began, base[0], peak, etcd_cpu,
                        client_cpu, samples, deaths, attempts, names, self.apiserver_argv()[1:], dict(plan.apiserver_env),
                        machine(), server_version)  # fmt: skip

    def _serving_pid(self) -> int | None:
        proc = self.apiserver
        return proc.pid if proc is not None and proc.alive() else None

    def _died(self, proc: Process, zero: float, samples: Samples) -> Death:
        at = time.monotonic() - zero
        status = proc.popen.wait()
        oom = proc.killed_by_oom()
        rss = max((r for t, r in samples.rss if t >= at - 5.0), default=None)
        if oom and self.container is not None:
            rss = self.container.max_usage_bytes() or rss
        self.sup.stop(proc)
        return Death(at, "oom-killed" if oom else f"exited with status {status}", rss)


def _read_attempts(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="") as handle:
            return list(csv.DictReader(handle))
    except FileNotFoundError:
        return []


def _tail(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - LOG_BYTES))
        return handle.read()


def measure_once(plan: BenchPlan, binaries: Binaries, progress: Callable[[str], None] = lambda _: None) -> Readings:
    """Run one replication of `plan`; every process it starts is stopped before this returns,
    and its working folder (etcd's data, keys, tokens) is removed."""
    work = Path(tempfile.mkdtemp(prefix="simapf-bench-"))
    try:
        with Supervisor() as sup:
            replication = Replication(plan, binaries, work, sup, progress)
            readings = replication.run()
        readings.logs = {path.name: _tail(path) for path in replication.logs.values() if path.exists()}
        return readings
    finally:
        shutil.rmtree(work, ignore_errors=True)
