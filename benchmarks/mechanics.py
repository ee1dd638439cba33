"""What the LIST experiment's processor sharing and event loop cost alone, against a bare SimPy queue.

    .venv/bin/python benchmarks/mechanics.py [--runs 5] [--customers 200000]

`benchmarks/engine.py` compares the whole of `simapf.run` on the shipped LIST experiment with the
bare SimPy M/M/16 queue. This benchmark asks how much of that comparison the model's timing
mechanics take by themselves. It runs the experiment once and records, in order, the work of
every processor-sharing job it starts (each LIST's etcd range, the decoding of that range on the
apiserver's cores, and the handler's CPU, with the GC assists the memory model added) and the
time each response took to write to the client. It then drives the same jobs through simapf's own
`ProcessorSharing` (an etcd and an apiserver instance, as the scenario has them) and event loop,
with nothing else: Poisson arrivals at the experiment's rate, a LIST's range and its decoding side
by side, then its handler's CPU and the response's write side by side (it is streamed). No APF,
memory, client or observation runs.

The ratio printed is what simapf would reach if every other part of a request cost nothing. The
engine benchmark's ratio, divided by it, is the share of the time the mechanics take. It measures
pure Python only: the recording wraps `ProcessorSharing.add`, which the compiled core does not let
a script replace.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from pathlib import Path

import numpy as np

from engine import mm16

# Time computed runs: none is read from the result cache (simapf.simulation.cache).
os.environ["SIMAPF_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parents[1]


def record_jobs() -> dict:
    """Run the LIST experiment once and keep its processor-sharing jobs and response writes."""
    import simapf
    from simapf.engine.environment import RunClock
    from simapf.server.cpu import ProcessorSharing

    instances: dict[int, tuple[float, float]] = {}  # id -> (cores, procs)
    jobs: list[tuple[int, str, float]] = []  # (instance, callback's name, work)
    writes: list[int] = []  # ns
    add, at = ProcessorSharing.add, RunClock.at

    def recording_add(self, work, callback, arg=None, foreign=False):  # type: ignore[no-untyped-def]
        instances[id(self)] = (self.cores, self.procs)
        jobs.append((id(self), callback.__name__, work))
        return add(self, work, callback, arg, foreign)

    def recording_at(self, when_ns, callback, arg, phase):  # type: ignore[no-untyped-def]
        if getattr(callback, "__name__", "") == "_done":  # a response written on its link
            writes.append(when_ns - self.now)
        return at(self, when_ns, callback, arg, phase)

    ProcessorSharing.add, RunClock.at = recording_add, recording_at  # type: ignore[method-assign]
    try:
        loaded = simapf.load_scenario(ROOT / "scenarios" / "list-experiment.yaml")
        result = simapf.run(loaded)
    finally:
        ProcessorSharing.add, RunClock.at = add, at  # type: ignore[method-assign]
    if len(instances) != 2 or set(name for _i, name, _w in jobs) != {"_after_etcd", "_finish"}:
        raise SystemExit("the LIST experiment no longer runs one etcd and one apiserver processor sharing "
                         "with a range, its decoding and a handler per LIST: this benchmark needs updating")  # fmt: skip
    etcd = min(instances, key=lambda i: instances[i][0])  # etcd has the fewer cores
    api = next(i for i in instances if i != etcd)
    return {
        "etcd": instances[etcd], "api": instances[api],
        "range": [w for i, name, w in jobs if i == etcd],
        "decode": [w for i, name, w in jobs if i == api and name == "_after_etcd"],
        "handler": [w for i, name, w in jobs if i == api and name == "_finish"],
        "writes": writes,
        "duration_s": float(loaded.scenario.run.duration_s),
        "requests": result.typed.requests.total,
    }  # fmt: skip


def mechanics(jobs: dict, seed: int = 1) -> tuple[int, float]:
    """Drive the recorded jobs through processor sharing and the event loop alone.
    Returns the requests delivered and the wall seconds it took."""
    from simapf.engine.clock import Phase
    from simapf.engine.environment import Environment
    from simapf.server.cpu import NS, ProcessorSharing

    n = min(len(jobs[k]) for k in ("range", "decode", "handler", "writes"))
    ranges, decodes, handlers, writes = (jobs[k][:n] for k in ("range", "decode", "handler", "writes"))
    rate = jobs["requests"] / jobs["duration_s"]
    gaps = np.maximum(1, np.rint(np.random.default_rng(seed).exponential(NS / rate, n))).astype(int).tolist()
    env = Environment()
    clock = env.clock
    api = ProcessorSharing(clock, *jobs["api"])
    etcd = ProcessorSharing(clock, *jobs["etcd"])
    delivered = 0

    class Request:
        __slots__ = ("i", "pending")

        def __init__(self, i: int) -> None:
            self.i = i
            self.pending = 2

    def sent(req: Request) -> None:
        nonlocal delivered
        req.pending -= 1
        if not req.pending:
            delivered += 1

    def range_ended(req: Request) -> None:
        req.pending -= 1
        if not req.pending:
            req.pending = 2
            api.add(handlers[req.i], sent, req)
            clock.at(clock.now + writes[req.i], sent, req, Phase.FINISH)

    def arrive(i: int) -> None:
        req = Request(i)
        api.add(decodes[i], range_ended, req)
        etcd.add(ranges[i], range_ended, req)
        if i + 1 < n:
            clock.at(clock.now + gaps[i + 1], arrive, i + 1, Phase.FINISH)

    clock.at(clock.now + gaps[0], arrive, 0, Phase.FINISH)
    started = time.perf_counter()
    env.run_until(int(jobs["duration_s"] * NS) * 2)
    return delivered, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--customers", type=int, default=200_000)
    args = ap.parse_args()
    from simapf.compiled_core import compiled

    if compiled() != "pure":
        raise SystemExit("benchmarks/mechanics.py measures pure Python: `simapf compile --clean` first")
    jobs = record_jobs()
    bare, ours, delivered = [], [], 0
    for _ in range(args.runs):
        gc.collect()
        bare.append(args.customers / mm16(args.customers))
        gc.collect()
        delivered, wall = mechanics(jobs)
        ours.append(delivered / wall)
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"bare SimPy M/M/16: {max(bare):,.0f} customers per wall second (best of {args.runs})")
    print(f"processor sharing and the event loop alone, the LIST experiment's jobs ({delivered:,} requests): "
          f"{max(ours):,.0f} requests per wall second")  # fmt: skip
    print(f"ratio: {max(ours) / max(bare):.3f}")


if __name__ == "__main__":
    main()
