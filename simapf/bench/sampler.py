"""What the bench reads off the running apiserver: its RSS often, its /metrics at the scenario's
scrape interval, and a heap profile near its peak.

RSS is read from /proc every `RSS_INTERVAL_S` (cheap) for the peaks between scrapes; the true
peak over the load is the kernel's VmHWM, reset when the load starts. /metrics is scraped as
Prometheus would, and every sample of the families the run's series use is kept under its
upstream name. A heap profile (`/debug/pprof/heap`) is taken whenever RSS passes its highest so
far by a margin, at most every `PROFILE_GAP_S`, and the last one is the profile at the peak.
"""

from __future__ import annotations

import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

RSS_INTERVAL_S = 0.05
PROFILE_GAP_S = 2.0
PROFILE_MARGIN = 1.05  # a new profile once RSS is 5 % over the last profiled peak
# The families kept: those simapf's own series use, and the runtime's and APF's state.
KEEP_PREFIXES = ("process_", "go_memstats_", "go_gc_", "go_cpu_classes_", "go_goroutines", "go_sched_gomaxprocs",
                 "apiserver_flowcontrol_", "apiserver_request_total", "apiserver_longrunning_requests",
                 "apiserver_storage_", "apiserver_cache_list_", "apiserver_watch_cache_", "apiserver_current_inflight")  # fmt: skip


def read_rss(pid: int) -> tuple[int, int] | None:
    """(VmRSS, VmHWM) of a process, in bytes; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    if "VmRSS" not in values:
        return None  # a zombie
    return values["VmRSS"], values.get("VmHWM", values["VmRSS"])


def reset_peak(pid: int) -> None:
    """Start the kernel's peak RSS (VmHWM) over from now (clear_refs 5)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds the process has used (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Apiserver:
    """HTTPS to the apiserver as simapf's own exempt identity."""

    def __init__(self, url: str, token: str, ca_file: Path) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.ca_file = ca_file
        self._context: ssl.SSLContext | None = None

    @property
    def context(self) -> ssl.SSLContext:
        # The apiserver writes its self-signed certificate when it starts.
        if self._context is None:
            context = ssl.create_default_context(cafile=str(self.ca_file))
            context.check_hostname = False  # the certificate names localhost, not 127.0.0.1
            self._context = context
        return self._context

    def get(self, path: str, timeout: float = 30.0, accept: str = "application/json") -> bytes:
        request = urllib.request.Request(self.url + path, headers={
            "Authorization": f"Bearer {self.token}", "Accept": accept, "User-Agent": "simapf-bench/1 (linux) client-go"})  # fmt: skip
        with urllib.request.urlopen(request, timeout=timeout, context=self.context) as response:
            return response.read()

    def ready(self) -> bool:
        if not self.ca_file.exists():
            return False
        try:
            return self.get("/readyz", timeout=2.0).strip() == b"ok"
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False


@dataclass
class Samples:
    """What the sampler saw; times in seconds from the run's start."""

    rss: list[tuple[float, int]] = field(default_factory=list)
    cpu: list[tuple[float, int, float]] = field(default_factory=list)  # (time, pid, its CPU seconds so far)
    metrics: list[tuple[float, str, dict[str, str], float]] = field(default_factory=list)
    scrape_times: list[float] = field(default_factory=list)
    scrape_errors: int = 0
    profile: bytes | None = None  # the heap profile nearest the peak
    profile_at_s: float | None = None
    profile_rss_bytes: int | None = None


def parse_metrics(text: str, at_s: float) -> list[tuple[float, str, dict[str, str], float]]:
    """The kept samples of one /metrics scrape: gauges and counters, and a summary's count and sum
    (GC cycles are go_gc_duration_seconds_count); histograms' buckets are left out."""
    rows = []
    for family in text_string_to_metric_families(text):
        if family.type in ("histogram", "gaugehistogram") or not family.name.startswith(KEEP_PREFIXES):
            continue
        for sample in family.samples:
            if sample.name.endswith(("_created", "_bucket")) or "quantile" in sample.labels:
                continue
            rows.append((at_s, sample.name, dict(sample.labels), float(sample.value)))
    return rows


class Sampler(threading.Thread):
    """Samples one apiserver process until `stop()`; `zero` is the run's start (monotonic)."""

    def __init__(self, api: Apiserver, pid: Callable[[], int | None], zero: float, scrape_interval_s: float) -> None:
        """`pid()`: the apiserver's process now, or None while there is none."""
        super().__init__(name="simapf-bench-sampler", daemon=True)
        self.api = api
        self.pid = pid
        self.zero = zero
        self.scrape_interval_s = scrape_interval_s
        self.samples = Samples()
        self._halt = threading.Event()
        self._profiled_rss = 0
        self._last_profile = -1e9

    def stop(self) -> Samples:
        self._halt.set()
        self.join()
        return self.samples

    def scrape(self, now_s: float) -> None:
        try:
            text = self.api.get("/metrics", timeout=max(5.0, 2 * self.scrape_interval_s)).decode()
        except (urllib.error.URLError, OSError, ssl.SSLError, ValueError):
            self.samples.scrape_errors += 1
            self.samples.metrics.append((now_s, "up", {}, 0.0))
            return
        self.samples.scrape_times.append(now_s)
        self.samples.metrics.append((now_s, "up", {}, 1.0))
        self.samples.metrics.extend(parse_metrics(text, now_s))

    def _profile(self, now_s: float, rss: int) -> None:
        try:
            data = self.api.get("/debug/pprof/heap", timeout=30.0, accept="*/*")
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return
        self.samples.profile, self.samples.profile_at_s, self.samples.profile_rss_bytes = data, now_s, rss
        self._profiled_rss = rss

    def run(self) -> None:
        next_scrape = 0.0
        while not self._halt.is_set():
            now_s = time.monotonic() - self.zero
            pid = self.pid()
            reading = read_rss(pid) if pid is not None else None
            if reading is not None and pid is not None:
                rss = reading[0]
                self.samples.rss.append((now_s, rss))
                used = cpu_seconds(pid)
                if used is not None:
                    self.samples.cpu.append((now_s, pid, used))
                if rss > self._profiled_rss * PROFILE_MARGIN and now_s - self._last_profile >= PROFILE_GAP_S:
                    self._last_profile = now_s
                    self._profile(now_s, rss)
            if now_s >= next_scrape:
                self.scrape(now_s)
                next_scrape += self.scrape_interval_s
                while next_scrape <= time.monotonic() - self.zero:
                    next_scrape += self.scrape_interval_s  # a slow scrape: skip, as Prometheus does
            self._halt.wait(RSS_INTERVAL_S)
