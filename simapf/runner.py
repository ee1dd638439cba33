"""One scenario, run: build the apiserver, its cluster and its clients, run, and measure.

    from simapf import load_scenario, run
    result = run(load_scenario("scenarios/relist-storm.yaml"))
    result.summary["memory"]["peak_rss_bytes"]; result.series; result.latency

`run` is deterministic: the same scenario and seed give the same summary and series.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable

import numpy as np
import simpy

from simapf import __version__
from simapf.apf.controller import MAX_WAIT_LIMIT_NS, FeatureGates
from simapf.apf.types import NS_PER_S
from simapf.cycles import fewer_full_collections
from simapf.observe import Recorder
from simapf.errors import ConfigError
from simapf.scenario.load import (
    LoadedScenario, apf_objects, load_scenario, server_params, user_policies, work_estimator,
)
from simapf.scenario.schema import Scenario
from simapf.server.etcd import EtcdModel
from simapf.server.process import ProcessState
from simapf.server.params import ServerParams
from simapf.server.runtime import SimulatedAPIServer
from simapf.server.webhooks import Admission, WebhookSpec
from simapf.workload.clientgo import Timers
from simapf.workload.balancer import LoadBalancer
from simapf.workload.clients import ClientGroup, Context, stream
from simapf.workload.cluster import Cluster
from simapf.workload.events import EventRunner
from simapf.workload.inventory import Inventory


class Simulation:
    """Everything one run is made of, wired together and ready to `run`."""

    def __init__(self, loaded: LoadedScenario) -> None:
        self.loaded = loaded
        sc = self.scenario = loaded.scenario
        seed = sc.run.seed
        # The user's policy modules are imported here, when a run starts (never while a scenario
        # is only validated): every one of them, so a broken one fails before any time is simulated.
        for spec, where in user_policies(sc):
            try:
                work_estimator(spec, where)
            except ConfigError as err:
                raise ConfigError(f"{loaded.source}: {err}") from err
        self.env = env = simpy.Environment()
        gates = sc.kubernetes.feature_gates
        self.inventory = Inventory(sc.resources, stream(seed, "inventory", 0, "sizes"))
        api = sc.apiserver
        params = server_params(loaded)
        admission = _admission(sc, env, seed)  # one webhook service, called by every replica
        etcd = EtcdModel(env, params.etcd)  # one etcd, read by every replica
        # Every replica is a whole apiserver: its own APF with the full limits (as upstream), its
        # own watch caches, memory, GC and OOM kills, its own stream of work variation; they
        # share etcd.
        self.servers = [
            SimulatedAPIServer(
                env,
                apf_objects=apf_objects(sc.apf.config, sc.apf.priority_levels, loaded.base_dir, "apf"),
                server_concurrency=api.server_concurrency,
                params=params,
                estimator=work_estimator(sc.apf.estimator, "apf.estimator"),
                gates=FeatureGates(
                    size_based_list_cost_estimate=gates.SizeBasedListCostEstimate,
                    watch_list=gates.WatchList,
                    etcd_supports_progress_notify=gates.ConsistentListFromCache,
                ),
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
            server.model.set_watch_cache(self.inventory.cached_resources())
        for group in sc.crds_at_start():
            self.inventory.install_crds(group, group.count)
            for server in self.servers:
                server.model.set_crds(group.count * crd_bytes(params, group))
                server.model.openapi.crds_changed(group.count * crd_openapi_bytes(params, group), rebuild=False)
        self._cache_versions = [0] * api.replicas
        lb = api.load_balancer
        self.balancer = LoadBalancer(self.servers, lb.policy, lb.health_check_s, api.goaway_chance,
                                     stream(seed, "load-balancer", 0, "connections"))  # fmt: skip
        self.cluster = Cluster(env, self.servers, self.inventory, self.balancer)
        self.timers = Timers(self.server.scheduler)
        self.ctx = Context(self.cluster, self.timers, seed, gates.WatchListClient)
        resolve = self.inventory.get
        self.groups = {c.name: ClientGroup(c, self.ctx, resolve) for c in sc.clients}
        self.recorder = Recorder(self.cluster, list(self.groups.values()), sc.run.request_records,
                                 steady_from_s=sc.run.steady_from_s)  # fmt: skip
        self.cluster.observer = self.recorder.completed
        base_dir = loaded.base_dir
        self.events = EventRunner(
            self.ctx, self.groups,
            build_estimator=work_estimator,
            build_apf_objects=lambda config, pls, where: apf_objects(config, pls, base_dir, where),
            crds={g.name: g for g in sc.crds}, crd_bytes=crd_bytes,
        )  # fmt: skip

    def run(self, progress: bool = False) -> "Result":
        from simapf.result import Result

        sc = self.scenario
        env = self.env
        step_ns = int(sc.run.scrape_interval_s * NS_PER_S)
        end_ns = int(sc.run.duration_s * NS_PER_S)
        for g in self.groups.values():
            g.start()
        self.events.schedule(sc.events)
        wall0 = time.perf_counter()
        bar = _progress_bar(sc.run.duration_s, sc.name) if progress else None
        t = 0
        self.recorder.scrape()
        with fewer_full_collections():
            while t < end_ns:
                t = min(t + step_ns, end_ns)
                env.run(until=t)
                self._refresh_watch_cache()
                self.recorder.scrape()
                if bar is not None:
                    bar.update(round(t / NS_PER_S - bar.n, 6))
        if bar is not None:
            bar.close()
        return Result.from_simulation(self, wall_s=time.perf_counter() - wall0)

    def _refresh_watch_cache(self) -> None:
        # Writes change what the watch caches hold; the model follows once per scrape.
        version = sum(o.version for o in self.inventory.by_key.values())
        for i, server in enumerate(self.servers):
            model = server.model
            # A refilling cache is filled from etcd as it is then; apply changes once it is up.
            if version != self._cache_versions[i] and model.state is ProcessState.UP:
                self._cache_versions[i] = version
                model.set_watch_cache(self.inventory.cached_resources())


def _admission(sc: Scenario, env: simpy.Environment, seed: int) -> Admission | None:
    """The scenario's admission webhooks, each with its own service-time stream."""
    if not sc.admission_webhooks:
        return None
    specs = [
        WebhookSpec(w.name, frozenset(w.verbs), frozenset(w.resources), w.type == "mutating", w.failure_policy,
                    w.timeout_s, w.replicas, w.concurrency, w.service_time.mean_s, w.service_time.distribution,
                    w.service_time.sigma)  # fmt: skip
        for w in sc.admission_webhooks
    ]

    def call_at(delay_ns: int, fn) -> None:
        env.timeout(delay_ns).callbacks.append(lambda _event: fn())

    return Admission(specs, stream(seed, "webhooks", 0, "service"), call_at)


def _progress_bar(total_s: float, name: str):
    from simapf.progress import progress_bar

    return progress_bar(total_s, name, "sim s", leave=False,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} sim s [{elapsed}<{remaining}]")  # fmt: skip


def run(
    scenario: Scenario | LoadedScenario | str | Path | dict,
    overrides: Iterable[str] | dict = (),
    progress: bool = False,
) -> "Result":
    """Run a scenario (a loaded one, a Scenario, a dict or a file path) and return its Result."""
    if not isinstance(scenario, LoadedScenario) or overrides:
        src = scenario.scenario if isinstance(scenario, LoadedScenario) else scenario
        base = scenario.base_dir if isinstance(scenario, LoadedScenario) else None
        scenario = load_scenario(src, overrides, base_dir=base)
    return Simulation(scenario).run(progress=progress)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def crd_bytes(params: ServerParams, group) -> float:
    """Live heap one CRD of `group` (a schema.CrdGroup) costs: each served version's."""
    return group.served_versions * params.crds.version_bytes(group.schema_bytes)


def crd_openapi_bytes(params: ServerParams, group) -> float:
    """Bytes one CRD of `group` adds to the OpenAPI v2 document: each served version's."""
    return group.served_versions * params.crds.openapi_bytes(group.schema_bytes)
