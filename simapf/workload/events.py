"""Scenario events: outages, restarts, ramps and configuration changes, at their times."""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from simapf.apf.estimators import WorkEstimator
from simapf.apf.objects import APFObjects
from simapf.apf.types import NS_PER_S
from simapf.engine.clock import ARRIVAL
from simapf.scenario import schema
from simapf.server.runtime import SimulatedAPIServer
from simapf.workload.clients import ClientGroup
from simapf.workload.instance import Context
from simapf.workload.inventory import Inventory


class EventRunner:
    """Fires a scenario's events; what they change to (estimators, APF objects) was resolved
    when the scenario was loaded, by the event's index."""

    def __init__(self, ctx: Context, groups: dict[str, ClientGroup],
                 estimators: Mapping[int, Callable[[], WorkEstimator]], apf_objects: Mapping[int, APFObjects],
                 crds: dict[str, schema.CrdGroup]) -> None:  # fmt: skip
        self.ctx = ctx
        self.groups = groups
        self.estimators = estimators
        self.apf_objects = apf_objects
        self.crds = crds

    def schedule(self, events: list) -> None:
        for i, e in enumerate(events):
            self.ctx.clock.at(self.ctx.clock.now + int(e.at_s * NS_PER_S), self._fire, (i, e), ARRIVAL)

    def _fire(self, item) -> None:
        i, e = item
        cluster = self.ctx.cluster
        if isinstance(e, schema.OutageEvent):
            end_ns = int((e.at_s + e.duration_s) * NS_PER_S)
            cluster.network_down(e.relist, end_ns)
            self.ctx.clock.at(max(self.ctx.clock.now, end_ns), lambda _: cluster.network_restored(), None, ARRIVAL)
        elif isinstance(e, schema.RestartEvent):
            cluster.servers[e.replica].kill("restart")
        elif isinstance(e, schema.RampEvent):
            self._ramp(self.groups[e.client], e)
        elif isinstance(e, schema.PolicyEvent):
            for server in cluster.servers:  # each replica its own (an estimator may keep state)
                server.set_estimator(self.estimators[i]())
        elif isinstance(e, schema.APFConfigEvent):
            # Every replica reads the same APF objects from etcd.
            for server in cluster.servers:
                server.reconfigure_apf(self.apf_objects[i])
        elif isinstance(e, schema.ClientGatesEvent):
            self.ctx.watch_list_client = e.WatchListClient
        elif isinstance(e, schema.CrdInstallEvent):
            self._install_crds(self.crds[e.crds], e)
        else:  # pragma: no cover - the schema admits no other kind
            raise TypeError(f"unknown event {e!r}")

    def _install_crds(self, crds: schema.CrdGroup, e: schema.CrdInstallEvent) -> None:
        cluster = self.ctx.cluster

        def create(_, n: int = 1) -> None:
            install_crds(cluster.inventory, cluster.servers, crds, n)

        if e.over_s <= 0:
            create(None, crds.count)
            return
        for k in range(1, crds.count + 1):
            self.ctx.clock.at(self.ctx.clock.now + int(e.over_s * NS_PER_S * k / crds.count), create, None, ARRIVAL)

    def _ramp(self, group: ClientGroup, e: schema.RampEvent) -> None:
        start = group.active_count
        steps = abs(e.to_count - start)
        if steps == 0:
            return
        if e.over_s <= 0:
            group.set_count(e.to_count)
            return
        direction = 1 if e.to_count > start else -1
        for k in range(1, steps + 1):
            delay = int(e.over_s * NS_PER_S * k / steps)
            clock = self.ctx.clock
            clock.at(clock.now + delay, lambda _, n=start + direction * k: group.set_count(n), None, ARRIVAL)


def install_crds(inventory: Inventory, servers: Sequence[SimulatedAPIServer], crds: schema.CrdGroup, count: int,
                 at_start: bool = False) -> None:  # fmt: skip
    """`count` CRDs of the group `crds` are created now: etcd holds them, and every replica
    serves them (`SimulatedAPIServer.install_crds`; `at_start`: before the run)."""
    inventory.install_crds(crds, count)
    for server in servers:
        server.install_crds(count, crds.served_versions, crds.schema_bytes, at_start)


def event_end_s(e) -> float:
    """When an event is over (an outage lasts; a ramp takes its time; the rest are instants)."""
    if isinstance(e, schema.OutageEvent):
        return e.at_s + e.duration_s
    if isinstance(e, (schema.RampEvent, schema.CrdInstallEvent)):
        return e.at_s + e.over_s
    return e.at_s
