"""The bench data set: the LIST memory experiment's grid, measured on the real bench here.

kubernetes#132233 measured peak memory of a steady stream of LISTs by serving path, response
size, objects per response and concurrency (calibration/list-memory-experiments.csv). Each cell
here is `calibration/bench/base.yaml` with a few fields set, measured with `simapf measure` from
a fresh etcd and kube-apiserver `--replications` times:

* the core grid: serving path (etcd, watch cache) x response size (1, 10, 100 MB) x concurrent
  LISTs (1, 4, 10), JSON encoded item by item;
* the other object count at 4 LISTs: 10 times as many objects of a tenth the size;
* the other encodings at 4 LISTs: protobuf, and whole JSON (pretty=true: one MarshalIndent);
* informers relisting together, WatchList on and off;
* GOMEMLIMIT near the live heap.

    python -m simapf.calibrate.bench_cells [--replications 3] [--only NAME ...] [--out calibration/bench]

Every replication's figures go to `cells.csv` as soon as the cell is done (a cell already
there is not measured again), with the binaries' versions, the flags, the machine and simapf's
commit in `provenance.json`, and the heap profile at the peak of each cell's first replication
in `profiles/`. `spread.csv` gives each figure's median and range over a cell's replications.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simapf.schema.summary import ClientVerb, Summary

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "calibration" / "bench"
BASE = BENCH / "base.yaml"
MB = 1_000_000
# The figures kept per replication, each read from a measured summary by `figures`.
COLUMNS = ("peak_rss_bytes", "scraped_peak_rss_bytes", "peak_heap_inuse_bytes", "mean_rss_steady_bytes",
           "base_rss_bytes", "mean_cores", "mean_cores_steady", "etcd_busy_core_s", "lists_ok", "rejected_share",
           "oom_kills", "list_p50_s", "list_p99_s", "list_mean_s", "gc_cycles", "wall_s",
           "client_mean_cores", "gc_mean_cores", "base_heap_live_bytes")  # fmt: skip


@dataclass(frozen=True)
class Cell:
    name: str
    group: str  # the cells that differ only in concurrency: what leaving one group out leaves out
    overrides: dict[str, Any]


def _list_cell(path: str, size_mb: int, objects: int, concurrency: int, encoding: str = "json",
               extra: dict[str, Any] | None = None, tag: str = "") -> Cell:  # fmt: skip
    overrides: dict[str, Any] = {
        "resources.configmaps.count": objects,
        "resources.configmaps.object_size.mean_bytes": size_mb * MB // objects,
        "resources.configmaps.watch_cache": path == "cache",
        "clients.lister.count": concurrency,
        "clients.lister.request.encoding": "protobuf" if encoding == "protobuf" else "json",
        "clients.lister.request.options.pretty": encoding == "whole-json",
        **(extra or {}),
    }
    group = f"{path}-{size_mb}MB-{objects}obj-{encoding}{tag}"
    return Cell(f"{group}-c{concurrency}", group, overrides)


def _informer_cell(size_mb: int, objects: int, count: int, watchlist: bool) -> Cell:
    overrides = {
        "resources.configmaps.count": objects,
        "resources.configmaps.object_size.mean_bytes": size_mb * MB // objects,
        "resources.configmaps.watch_cache": True,
        "kubernetes.feature_gates.WatchListClient": watchlist,
        "clients": [{"name": "informers", "kind": "informer", "count": count, "identity": {"user": "bench-informer-{i}"},
                     "resource": "configmaps", "namespace": "ns-0", "encoding": "protobuf"}],
    }  # fmt: skip
    group = f"informers-{size_mb}MB-{'watchlist' if watchlist else 'list'}"
    return Cell(f"{group}-x{count}", group, overrides)


def cells() -> list[Cell]:
    out = []
    objects = {1: 10, 10: 100, 100: 100}  # objects per response in the core grid (100 kB, 100 kB, 1 MB each)
    for path in ("etcd", "cache"):
        for size in (1, 10, 100):
            for concurrency in (1, 4, 10):
                out.append(_list_cell(path, size, objects[size], concurrency))
            out.append(_list_cell(path, size, objects[size] * 10, 4))
            for encoding in ("protobuf", "whole-json"):
                out.append(_list_cell(path, size, objects[size], 4, encoding))
    for size, objs in ((10, 100), (100, 100)):
        for watchlist in (False, True):
            out.append(_informer_cell(size, objs, 10, watchlist))
    for path in ("etcd", "cache"):
        out.append(_list_cell(path, 100, 100, 4, extra={"apiserver.gomemlimit_bytes": "1Gi"}, tag="-gomemlimit1Gi"))
    return out


def list_figures(summary: Summary) -> ClientVerb | None:
    """The LISTs of the first client that sent any, as a summary counts them (None: none did)."""
    return next((client.by_verb["list"] for client in summary.clients if "list" in client.by_verb), None)


def figures(summary: Summary) -> dict[str, Any]:
    """One replication's row of `cells.csv` from its measured summary."""
    m, c, bench = summary.memory, summary.cpu, summary.bench
    assert bench is not None, "a measured summary says what made it"
    by_verb = list_figures(summary)
    return {
        "peak_rss_bytes": m.peak_rss_bytes, "scraped_peak_rss_bytes": m.scraped_peak_rss_bytes,
        "peak_heap_inuse_bytes": m.peak_heap_inuse_bytes, "mean_rss_steady_bytes": m.mean_rss_steady_bytes,
        "base_rss_bytes": bench.base_rss_bytes, "mean_cores": c.mean_cores,
        "mean_cores_steady": c.mean_cores_steady, "etcd_busy_core_s": summary.etcd.busy_core_s,
        "lists_ok": by_verb.ok if by_verb else 0, "rejected_share": summary.requests.rejected_share,
        "oom_kills": summary.process.oom_kills,
        "list_p50_s": by_verb.p50_s if by_verb else None, "list_p99_s": by_verb.p99_s if by_verb else None,
        "list_mean_s": by_verb.mean_s if by_verb else None, "gc_cycles": c.gc_cycles,
        "wall_s": summary.wall_s, "client_mean_cores": c.client_mean_cores,
        "gc_mean_cores": c.gc_mean_cores, "base_heap_live_bytes": bench.base_heap_live_bytes,
    }  # fmt: skip


def _done(table: Path) -> set[tuple[str, int]]:
    if not table.exists():
        return set()
    with open(table, newline="") as handle:
        return {(row["cell"], int(row["replication"])) for row in csv.DictReader(handle)}


def _append(table: Path, rows: list[dict[str, Any]]) -> None:
    new = not table.exists()
    fields = ["cell", "group", "replication", *COLUMNS]
    if not new:  # a table begun before a column was added keeps its columns
        with open(table, newline="") as handle:
            fields = next(csv.reader(handle))
    with open(table, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def spread(table: Path) -> list[dict[str, Any]]:
    """Per cell and figure: the median, min, max and max/min over its replications."""
    with open(table, newline="") as handle:
        rows = list(csv.DictReader(handle))
    by_cell: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_cell.setdefault(row["cell"], []).append(row)
    out = []
    for cell, reps in by_cell.items():
        for column in COLUMNS:
            values = [float(r[column]) for r in reps if r.get(column) not in (None, "", "None")]
            if not values:
                continue
            lo, hi = min(values), max(values)
            out.append({"cell": cell, "figure": column, "replications": len(values), "median": statistics.median(values),
                        "min": lo, "max": hi, "max_over_min": hi / lo if lo > 0 else ""})  # fmt: skip
    return out


def measure_cells(out: Path = BENCH, replications: int = 3, only: list[str] | None = None, say=print) -> None:
    from simapf.bench import measure
    from simapf.provenance import git_state
    from simapf.scenario import load_scenario

    table = out / "cells.csv"
    done = _done(table)
    record_path = out / "provenance.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {"cells": {}}
    (out / "profiles").mkdir(parents=True, exist_ok=True)
    own = out.resolve().relative_to(ROOT).as_posix() if out.resolve().is_relative_to(ROOT) else None
    chosen = [c for c in cells() if not only or c.name in only]
    for i, cell in enumerate(chosen, start=1):
        wanted = [k for k in range(1, replications + 1) if (cell.name, k) not in done]
        if not wanted:
            continue
        say(f"[{i}/{len(chosen)}] {cell.name}: {len(wanted)} replication(s)")
        loaded = load_scenario(BASE, cell.overrides)
        load_before = os.getloadavg()[0]  # other work on the machine shares its cores with the cell
        m = measure(loaded, len(wanted), say=lambda line: None)
        load_after = os.getloadavg()[0]
        rows = [{"cell": cell.name, "group": cell.group, "replication": k, **figures(r.typed)}
                for k, r in zip(wanted, m.results)]  # fmt: skip
        _append(table, rows)
        first = m.readings[0]
        if first.samples.profile is not None and 1 in wanted:
            (out / "profiles" / f"{cell.name}.pb.gz").write_bytes(first.samples.profile)
        commit, dirty = git_state(besides=own)  # the data set's own files are not the code's state
        bench = m.results[0].typed.bench
        assert bench is not None, "a measured summary says what made it"
        record["cells"][cell.name] = {
            "group": cell.group, "overrides": cell.overrides, "versions": bench.versions,
            "kube_apiserver_flags": [f for f in bench.kube_apiserver_flags if not f.startswith(
                ("--etcd-servers", "--secure-port", "--cert-dir", "--token-auth-file", "--service-account-"))],
            "kube_apiserver_env": bench.kube_apiserver_env, "machine": bench.machine,
            "simapf_commit": commit, "simapf_dirty": dirty,
            "load_average_1min": {"before": round(load_before, 2), "after": round(load_after, 2)},
        }  # fmt: skip
        record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    with open(out / "spread.csv", "w", newline="") as handle:
        rows = spread(table)
        writer = csv.DictWriter(handle, fieldnames=["cell", "figure", "replications", "median", "min", "max", "max_over_min"])
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="Measure only these cells (by name).")
    parser.add_argument("--out", type=Path, default=BENCH)
    parser.add_argument("--list", action="store_true", help="List the cells and exit.")
    args = parser.parse_args(argv)
    if args.list:
        for c in cells():
            print(c.name)
        return 0
    measure_cells(args.out, args.replications, args.only, say=lambda line: print(line, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
