"""One scenario, run: build the apiserver, its cluster and its clients, run, and measure.

    from simapf import load_scenario, run
    result = run(load_scenario("scenarios/relist-storm.yaml"))
    result.typed.memory.peak_rss_bytes; result.series; result.latency

`run` is deterministic: the same scenario and seed give the same summary and series, so a run
already computed is read from the result cache (simapf.simulation.cache) instead.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable, Iterator

from simapf.apf.controller import MAX_WAIT_LIMIT_NS
from simapf.apf.types import NS_PER_S
from simapf.simulation.collect import collect
from simapf.engine.cycles import fewer_collections
from simapf.engine.environment import Environment, RunClock
from simapf.simulation.observe import Dashboard, Readings, Recorder
from simapf.simulation.result import Result
from simapf.scenario.load import LoadedScenario, load_scenario
from simapf.scenario.schema import Scenario
from simapf.server.etcd import EtcdModel
from simapf.server.runtime import SimulatedAPIServer
from simapf.server.webhooks import Admission, WebhookSpec
from simapf.workload.balancer import LoadBalancer
from simapf.workload.clients import ClientGroup
from simapf.workload.cluster import Cluster
from simapf.workload.events import EventRunner, install_crds
from simapf.workload.instance import Context, stream
from simapf.workload.inventory import Inventory
from simapf.workload.latencies import EXACT_UP_TO


class Simulation:
    """Everything one run is made of, wired together and ready to `run`.

    `lean`: observe as an experiment's dashboard would, and no more (`Dashboard`): `run` returns
    `Readings` instead of a `Result`, without per-request tables, series or pandas. The model is
    the same either way; only what is recorded of it differs."""

    def __init__(self, loaded: LoadedScenario, lean: bool = False) -> None:
        self.loaded = loaded
        self.lean = lean
        sc = self.scenario = loaded.scenario
        seed = sc.run.seed
        estimators = loaded.estimators()  # imports the user's policy modules: a run starts here
        self.env = env = Environment()
        self.inventory = Inventory(sc.resources, stream(seed, "inventory", 0, "sizes"))
        api = sc.apiserver
        params = loaded.params
        admission = _admission(sc, env.clock, seed)  # one webhook service, called by every replica
        # One etcd, read by every replica; an embedded one lives in its apiserver's process.
        etcd = None if params.etcd.embedded else EtcdModel(env.clock, params.etcd)
        # Every replica is a whole apiserver: its own APF with the full limits (as upstream), its
        # own watch caches, memory, GC and OOM kills, its own stream of work variation; they
        # share etcd.
        self.servers = [
            SimulatedAPIServer(
                env.clock,
                apf_objects=loaded.apf,
                server_concurrency=api.server_concurrency,
                params=params,
                estimator=estimators.start(),
                gates=loaded.gates,
                object_stats=self.inventory,
                wait_limit_ns=min(int(api.request_timeout_s * NS_PER_S / 4), MAX_WAIT_LIMIT_NS),
                rng=stream(seed, "apiserver", i, "work"),
                admission=admission,
                replica=i,
                etcd=etcd,
            )
            for i in range(api.replicas)
        ]
        self.server = self.servers[0]  # the only one unless apiserver.replicas > 1
        for server in self.servers:
            server.set_watch_cache(self.inventory.cached_resources())
            # From here each write reaches every replica's watch caches as it is committed.
            self.inventory.follow(server.watch_cache_event)
        for group in sc.crds_at_start():
            install_crds(self.inventory, self.servers, group, group.count, at_start=True)
        lb = api.load_balancer
        self.balancer = LoadBalancer(self.servers, lb.policy, lb.health_check_s, api.goaway_chance,
                                     stream(seed, "load-balancer", 0, "connections"))  # fmt: skip
        self.cluster = Cluster(env.clock, self.servers, self.inventory, self.balancer)
        self.ctx = Context(self.cluster, env.clock, seed, sc.kubernetes.feature_gates.WatchListClient)
        resolve = self.inventory.get
        # Latencies exact up to EXACT_UP_TO of a request class, sketched past that (memory flat in
        # a run's length), or exact however many (simapf.workload.latencies).
        exact_up_to = None if sc.run.exact_percentiles else EXACT_UP_TO
        self.groups = {c.name: ClientGroup(c, self.ctx, resolve, exact_up_to) for c in sc.clients}
        self.recorder: Recorder | Dashboard
        if lean:
            self.recorder = Dashboard(self.cluster, list(self.groups.values()), sc.run.scrape_interval_s,
                                      steady_from_s=sc.run.steady_from_s)  # fmt: skip
        else:
            self.recorder = Recorder(self.cluster, list(self.groups.values()), sc.run.request_records,
                                     steady_from_ns=_ns(sc.run.steady_from_s), exact_up_to=exact_up_to)  # fmt: skip
            self.cluster.observers.append(self.recorder.completed)
        self.events = EventRunner(self.ctx, self.groups, estimators.events, loaded.event_apf,
                                  {g.name: g for g in sc.crds})  # fmt: skip

    def start(self) -> None:
        """Start the clients and schedule the scenario's events: the run's first instant. `run`
        does this; so does a caller that runs the simulation step by step (`env.run_until`)."""
        for g in self.groups.values():
            g.start()
        self.events.schedule(self.scenario.events)

    def run(self, progress: bool = False) -> Result | Readings:
        """Run to the end: a `Result`, or `Readings` when lean. The loop stops at every scrape
        and at the starts of the windows the summary's peaks cover (the steady state, each
        event); what it does there only reads the model, and stopping keeps every event's order
        (see `Environment.run_until`), so how often a run is observed never changes it."""
        sc = self.scenario
        env = self.env
        end_ns = _ns(sc.run.duration_s)
        self.start()
        wall0 = time.perf_counter()
        bar = _progress_bar(sc.run.duration_s, sc.name) if progress else None
        marks = [_ns(sc.run.steady_from_s), *(_ns(e.at_s) for e in sc.events)]
        try:
            self.recorder.scrape()
            with fewer_collections():
                for t, mark, scrape in stops(_ns(sc.run.scrape_interval_s), end_ns, marks):
                    env.run_until(t)
                    if mark:
                        self.recorder.mark()
                    if scrape:
                        self.recorder.scrape()
                    if bar is not None:
                        bar.update(round(t / NS_PER_S - bar.n, 6))
            self.recorder.finish()
        finally:
            # Also when the run raises (the user's policy, an interruption): a bar left open
            # would stay on the terminal under the error line.
            if bar is not None:
                bar.close()
        if isinstance(self.recorder, Dashboard):
            return self.recorder.readings()
        return collect(self, wall_s=time.perf_counter() - wall0)


def stops(step_ns: int, end_ns: int, marks: Iterable[int]) -> Iterator[tuple[int, bool, bool]]:
    """Where a run stops, in order: (time, a window starts there, a scrape is due there). Scrapes
    every `step_ns` from the start and one at `end_ns`; marks strictly inside the run."""
    pending = sorted({m for m in marks if 0 < m < end_ns}, reverse=True)
    scrape = min(step_ns, end_ns)
    while True:
        t = min(scrape, pending[-1]) if pending else scrape
        mark = bool(pending) and pending[-1] == t
        if mark:
            pending.pop()
        yield t, mark, t == scrape
        if t == end_ns:
            return
        if t == scrape:
            scrape = min(scrape + step_ns, end_ns)


def _ns(seconds: float) -> int:
    """Seconds as the whole nanoseconds the run schedules them at."""
    return int(seconds * NS_PER_S)


def _admission(sc: Scenario, clock: RunClock, seed: int) -> Admission | None:
    """The scenario's admission webhooks, each with its own service-time stream."""
    if not sc.admission_webhooks:
        return None
    specs = [
        WebhookSpec(w.name, frozenset(w.verbs), frozenset(w.resources), w.type == "mutating", w.failure_policy,
                    w.timeout_s, w.replicas, w.concurrency, w.service_time.mean_s, w.service_time.distribution,
                    w.service_time.sigma)  # fmt: skip
        for w in sc.admission_webhooks
    ]

    return Admission(specs, stream(seed, "webhooks", 0, "service"), clock)


def _progress_bar(total_s: float, name: str):
    from simapf.progress import progress_bar

    return progress_bar(total_s, name, "sim s", leave=False,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} sim s [{elapsed}<{remaining}]")  # fmt: skip


def run(
    scenario: Scenario | LoadedScenario | str | Path | dict,
    overrides: Iterable[str] | dict = (),
    progress: bool = False,
    cache: bool = True,
) -> Result:
    """Run a scenario (a loaded one, a Scenario, a dict or a file path) and return its Result.
    (`simapf.run` is this with `uncertainty=N` besides: `simapf.sweeps.drawn_runs.run`.)

    `cache`: read the Result from the result cache when it holds this run, and keep it there
    when it does not (simapf.simulation.cache; off also with SIMAPF_NO_CACHE=1). A Result from the cache
    is the computed one, byte for byte; `Result.cached` says where it came from."""
    from simapf.simulation import cache as results

    loaded = load(scenario, overrides)

    def compute() -> Result:
        result = Simulation(loaded).run(progress=progress)
        assert isinstance(result, Result)
        return result

    return results.result(loaded, compute, cache)


def load(scenario: Scenario | LoadedScenario | str | Path | dict, overrides: Iterable[str] | dict = ()) -> LoadedScenario:
    """`scenario` loaded, with `overrides` applied (a LoadedScenario without them as it is)."""
    if isinstance(scenario, LoadedScenario) and not overrides:
        return scenario
    src = scenario.scenario if isinstance(scenario, LoadedScenario) else scenario
    base = scenario.base_dir if isinstance(scenario, LoadedScenario) else None
    return load_scenario(src, overrides, base_dir=base)


def run_lean(scenario: LoadedScenario) -> Readings:
    """Run a loaded scenario observed as an experiment's dashboard would (`Simulation`'s `lean`)."""
    readings = Simulation(scenario, lean=True).run()
    assert isinstance(readings, Readings)
    return readings
