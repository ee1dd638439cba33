"""A scenario measured: binaries built (or given), the plan checked, replications run, written.

    from simapf.bench import measure
    m = measure("scenarios/bench/list-etcd.yaml", replications=3)
    m.results[0].typed.memory.peak_rss_bytes; m.spread()["peak_rss_bytes"]

`--out DIR` holds what `simapf run --out` writes (summary.json, series, tables, overview figure),
plus the heap profile taken nearest the peak (heap-peak.pb.gz, for `go tool pprof`), each
client's attempts (attempts/CLIENT.csv) and the processes' logs (logs/). With replications,
DIR/rep-1 ... DIR/rep-R each hold that, and DIR/replications.json every headline figure's
values, median and range over them.
"""

from __future__ import annotations

import csv
import re
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from simapf.bench import build, cgroups
from simapf.bench.measure import Readings, measure_once
from simapf.bench.observe import result
from simapf.bench.plan import BenchPlan, BenchUnsupported, bench_plan, settable_gates
from simapf.files import json_text, output_directory
from simapf.outputs.rundir import write_run_files
from simapf.scenario.load import LoadedScenario
from simapf.simulation.result import Result
from simapf.uncertainty.figures import figure_values


@dataclass
class Measurement:
    loaded: LoadedScenario
    results: list[Result]
    readings: list[Readings]

    def spread(self) -> dict[str, dict[str, Any]]:
        """Each headline figure over the replications: values, median, min, max, and max/min."""
        values: dict[str, list[float]] = {}
        for s in (r.typed for r in self.results):
            for key, value in figure_values(s).items():
                values.setdefault(key, []).append(value)
            if s.bench is not None:
                values.setdefault("base_rss_bytes", []).append(float(s.bench.base_rss_bytes))
        return {key: {"values": v, "median": statistics.median(v), "min": min(v), "max": max(v),
                      "max_over_min": (max(v) / min(v)) if min(v) > 0 else None}  # fmt: skip
                for key, v in values.items() if len(v) == len(self.results)}


def release_for(loaded: LoadedScenario, release: str | None) -> str:
    """The release to measure: the one given, else the pinned one if the scenario's version is its."""
    if release is not None:
        return build.release_text(release)
    pinned = build.DEFAULT_RELEASE
    version = loaded.scenario.kubernetes.version.strip().removeprefix("v")
    if re.match(rf"^{re.escape('.'.join(pinned.split('.')[:2]))}(\.|$)", version):
        return pinned
    raise BenchUnsupported(f"kubernetes.version: {version}: the bench builds {pinned} unless told another release; "
                           f"give --kubernetes-release {version}.N")  # fmt: skip


def precheck(loaded: LoadedScenario, release: str | None) -> None:
    """What can be refused before a build that takes minutes: the release, the machine's limits,
    and every field but the gates (checked once the binary can say which it takes)."""
    release_for(loaded, release)
    why = cgroups.available()
    if why:
        raise cgroups.CgroupError(why)
    bench_plan(loaded, None)


def plan_for(loaded: LoadedScenario, binaries: build.Binaries) -> BenchPlan:
    help_text = subprocess.run([str(binaries.kube_apiserver), "--help"], capture_output=True, text=True, timeout=60)
    return bench_plan(loaded, settable_gates(help_text.stdout + help_text.stderr))


def measure(loaded: LoadedScenario, replications: int = 1, release: str | None = None,
            kube_apiserver: str | Path | None = None, etcd: str | Path | None = None,
            say: Callable[[str], None] = lambda _: None,
            on_package: Callable[[int, int], None] | None = None) -> Measurement:  # fmt: skip
    """Measure `loaded` `replications` times, each from a fresh etcd and kube-apiserver."""
    precheck(loaded, release)
    rel = release_for(loaded, release)
    binaries = build.binaries(rel, kube_apiserver, etcd, progress=lambda m: say(f"build: {m}"), on_package=on_package)
    plan = plan_for(loaded, binaries)
    results, readings = [], []
    for k in range(1, replications + 1):
        prefix = f"replication {k}/{replications}: " if replications > 1 else ""
        one = measure_once(plan, binaries, lambda m: say(prefix + m))
        readings.append(one)
        results.append(result(one, loaded, replication=k))
    return Measurement(loaded, results, readings)


def _write_replication(result_: Result, readings: Readings, folder: Path) -> None:
    write_run_files(result_, folder)
    if readings.samples.profile is not None:
        (folder / "heap-peak.pb.gz").write_bytes(readings.samples.profile)
    attempts = folder / "attempts"
    attempts.mkdir()
    for name, rows in readings.attempts.items():
        if rows:
            with open(attempts / f"{name}.csv", "w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
    logs = folder / "logs"
    logs.mkdir()
    for name, text in readings.logs.items():
        (logs / name).write_bytes(text)


def write(m: Measurement, out: str | Path, force: bool = False) -> Path:
    """Write a measurement as `simapf run --out` writes a run (see the module's docstring)."""
    out = Path(out)
    if len(m.results) == 1:
        with output_directory(out, "run", force) as tmp:
            _write_replication(m.results[0], m.readings[0], tmp)
        return out
    with output_directory(out, "measure", force) as tmp:
        for k, (r, readings) in enumerate(zip(m.results, m.readings), start=1):
            with output_directory(tmp / f"rep-{k}", "run") as rep:
                _write_replication(r, readings, rep)
        (tmp / "replications.json").write_text(json_text({"scenario": m.loaded.scenario.name, "source": m.loaded.source,
                                                          "replications": len(m.results), "figures": m.spread()},
                                                         indent=1) + "\n")  # fmt: skip
    return out


__all__ = ["Measurement", "measure", "write"]
