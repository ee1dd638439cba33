"""The watch cache's indexes and trigger functions (simapf.server.cache_index).

A LIST from the watch cache by `spec.nodeName` reads the node's Pods from the index, not every Pod;
a field selector on a field no index covers still reads them all. A kubelet-style watch of its
node's Pods is handed its node's events only. Version gates: a watch's initial events from the
named object's key (1.31), watchers partitioned by namespace and name (1.27).
"""

from __future__ import annotations

import pytest

from simapf import load_scenario
from simapf.simulation.runner import Simulation
from simapf.server.cache_index import node_objects, watch_trigger
from simapf.server.costs import compute_plan
from simapf.server.paths import Encoding, ServingPath

PODS, NODES, POD_BYTES = 600, 20, 4096  # 30 Pods a node
ON_NODE = PODS // NODES
SHARE = ON_NODE / PODS  # what a selector for one node's Pods matches


def _resources(nodes: bool = True) -> list[dict]:
    out = [
        {"name": "pods", "count": PODS, "namespaces": 3, "converts": True, "decoded_size_multiplier": 3.0,
         "object_size": {"mean_bytes": POD_BYTES, "distribution": "constant"}},
        # A resource holding just one node's Pods, as the index does: the same objects otherwise.
        {"name": "pods", "group": "example.com", "count": ON_NODE, "namespaces": 1, "converts": True,
         "decoded_size_multiplier": 3.0, "object_size": {"mean_bytes": POD_BYTES, "distribution": "constant"}},
    ]  # fmt: skip
    if nodes:
        out.append({"name": "nodes", "namespaced": False, "count": NODES,
                    "object_size": {"mean_bytes": 8192, "distribution": "constant"}})  # fmt: skip
    return out


def _lister(name: str, resource: str, options: dict) -> dict:
    return {"name": name, "kind": "closed_loop", "count": 1, "identity": {"user": name},
            "think_time": {"mean_s": 1.0, "distribution": "constant"},
            "request": {"verb": "list", "resource": resource, "namespace": None, "encoding": "json",
                        "options": {"resource_version": "0", **options}}}  # fmt: skip


def _simulation(clients: list[dict], version: str = "1.37", nodes: bool = True, **gates) -> Simulation:
    sc = {"name": "indexes", "run": {"duration_s": 5, "seed": 1}, "resources": _resources(nodes),
          "clients": clients, "kubernetes": {"version": version, "feature_gates": gates}}  # fmt: skip
    return Simulation(load_scenario(sc))


def _costs(sim: Simulation, until_s: float = 3.0) -> dict:
    """The RequestCost of the last successful request of each client."""
    seen = {}
    sim.cluster.observers.append(lambda rec: seen.__setitem__(rec.attrs.user, rec.cost) if rec.outcome == "ok" else None)
    for group in sim.groups.values():
        group.start()
    sim.env.run(until=int(until_s * 1e9))
    return seen


BY_NODE = {"field_selector": "spec.nodeName=node-3", "selectivity": SHARE}


def test_a_list_by_node_from_the_cache_costs_what_the_nodes_pods_cost():
    sim = _simulation([_lister("by-node", "pods", BY_NODE), _lister("small", "pods.example.com", {})])
    costs = _costs(sim)
    by_node, small = costs["by-node"], costs["small"]
    assert by_node.path is small.path is ServingPath.CACHE
    assert by_node.shape.objects_returned == by_node.shape.n_read == ON_NODE
    assert by_node.shape.b_read == pytest.approx(ON_NODE * POD_BYTES)
    params = sim.servers[0].model.params
    indexed, just_those = compute_plan(params, by_node), compute_plan(params, small)
    assert indexed.cpu_core_s == pytest.approx(just_those.cpu_core_s)
    assert indexed.live_bytes == pytest.approx(just_those.live_bytes)
    assert indexed.alloc_bytes == pytest.approx(just_those.alloc_bytes)


def test_a_field_no_index_covers_still_scans_every_pod():
    other = {"field_selector": "status.phase=Running", "selectivity": SHARE}
    sim = _simulation([_lister("by-node", "pods", BY_NODE), _lister("by-phase", "pods", other)])
    costs = _costs(sim)
    scan = costs["by-phase"]
    assert scan.shape.objects_returned == ON_NODE and scan.shape.n_read == PODS
    params = sim.servers[0].model.params
    scanned, indexed = compute_plan(params, scan), compute_plan(params, costs["by-node"])
    extra = params.request_cpu.cache_core_s_per_object * (PODS - ON_NODE)
    assert scanned.cpu_core_s == pytest.approx(indexed.cpu_core_s + extra)


def test_the_index_serves_only_lists_from_the_caches_current_state():
    # From etcd (a consistent LIST with ConsistentListFromCache off) every Pod is read.
    sim = _simulation([_lister("by-node", "pods", {**BY_NODE, "resource_version": None})],
                      ConsistentListFromCache=False)  # fmt: skip
    cost = _costs(sim)["by-node"]
    assert cost.path is ServingPath.ETCD
    assert cost.shape.objects_returned == ON_NODE and cost.shape.n_read == PODS


def test_a_selector_for_a_node_matches_no_more_than_its_pods():
    # A node the cluster does not have holds none; without a selectivity, the node's Pods.
    sim = _simulation([_lister("absent", "pods", {"field_selector": "spec.nodeName=node-99"}),
                       _lister("whole", "pods", {"field_selector": "spec.nodeName=node-3"})])  # fmt: skip
    costs = _costs(sim)
    assert costs["absent"].shape.objects_returned == costs["absent"].shape.n_read == 0
    assert costs["whole"].shape.objects_returned == costs["whole"].shape.n_read == ON_NODE


def test_without_nodes_the_index_holds_what_the_selector_matches():
    sim = _simulation([_lister("by-node", "pods", {**BY_NODE, "selectivity": 0.1})], nodes=False)
    cost = _costs(sim)["by-node"]
    assert cost.shape.objects_returned == cost.shape.n_read == round(PODS * 0.1)


def test_pods_are_dealt_to_the_nodes_in_turn():
    assert [node_objects(7, f"node-{i}", 3) for i in range(3)] == [3, 2, 2]
    assert node_objects(7, "node-3", 3) == node_objects(7, "node-03", 3) == node_objects(7, "worker-1", 3) == 0


# ------------------------------------------------------------------------ watches


def _kubelets(selector: str, version: str = "1.37", selectivity: float = 1 / NODES) -> Simulation:
    """One informer per node on its Pods, listed (not WatchList) so that its buffers start empty."""
    informers = {"name": "kubelets", "kind": "informer", "count": NODES, "resource": "pods",
                 "identity": {"user": "system:node:node-{i}", "groups": ["system:nodes"]},
                 "field_selector": selector, "selectivity": selectivity, "encoding": "protobuf",
                 "list": {"mode": "rv0"}}  # fmt: skip
    sim = _simulation([informers], version)
    for group in sim.groups.values():
        group.start()
    sim.env.run(until=3 * 10**9)
    return sim


class _Charged:
    """Stands in for a replica's CPU: records the work each event adds."""

    def __init__(self) -> None:
        self.work: list[float] = []

    def add(self, work: float, _done) -> None:
        self.work.append(work)


def _events(sim: Simulation, count: int, namespace: str = "ns-0", resource: str = "pods") -> list[float]:
    """Send `count` Pod events; the CPU the replica was charged for each."""
    model = sim.servers[0].model
    cpu, model.cpu = model.cpu, _Charged()
    try:
        for _ in range(count):
            sim.cluster.fan_out(resource, namespace, 1000.0, Encoding.PROTOBUF)
        return model.cpu.work
    finally:
        model.cpu = cpu


def _buffers_grown(sim: Simulation) -> list[bool]:
    watches = [w for ws in sim.cluster._watches[0].values() for w in ws]
    assert len(watches) == NODES
    base = sim.servers[0].model.params.request_memory.watch_held_bytes
    return [w.held > base for w in sorted(watches, key=lambda w: int(w.trigger.split("-")[1]))]


def test_a_nodes_watcher_receives_its_nodes_events_only():
    sim = _kubelets("spec.nodeName=node-{i}")
    before = sim.cluster.watch_events_total
    charged = _events(sim, 5)
    # Five events, dealt to node-0 .. node-4: each is sent to one watcher, and only those five
    # watchers have encoded an event.
    assert sim.cluster.watch_events_total - before == pytest.approx(5)
    assert _buffers_grown(sim) == [i < 5 for i in range(NODES)]
    c = sim.servers[0].model.params.request_cpu
    one_receiver = (c.protobuf_encode_core_s_per_object + c.protobuf_encode_core_s_per_byte * 1000.0
                    + c.watch_event_core_s_per_object)  # fmt: skip
    assert charged == pytest.approx([one_receiver] * 5)


def test_a_watcher_without_a_trigger_filters_every_event():
    sim = _kubelets("status.phase=Running")
    assert all(w.trigger is None for ws in sim.cluster._watches[0].values() for w in ws)
    charged = _events(sim, 1)
    params = sim.servers[0].model.params
    c = params.request_cpu
    # Every watcher is handed the event: each sends its share of it and drops the rest.
    expected = (c.protobuf_encode_core_s_per_object + c.protobuf_encode_core_s_per_byte * 1000.0
                + c.watch_event_core_s_per_object * NODES * (1 / NODES)
                + c.watch_filter_core_s_per_event * NODES * (1 - 1 / NODES))  # fmt: skip
    assert charged == [pytest.approx(expected)]
    assert charged[0] > _events(_kubelets("spec.nodeName=node-{i}"), 1)[0]


# ------------------------------------------------------------------------ version gates


def _node_watchlists(version: str) -> int:
    """Nodes a kubelet's WatchList of its own Node reads for its initial events."""
    informer = {"name": "kubelet-node", "kind": "informer", "count": 1, "resource": "nodes",
                "identity": {"user": "system:node:node-{i}", "groups": ["system:nodes"]},
                "field_selector": "metadata.name=node-{i}", "selectivity": 1 / NODES,
                "list": {"mode": "watchlist"}}  # fmt: skip
    sim = _simulation([informer], version)
    cost = _costs(sim)["system:node:node-0"]
    assert cost.path is ServingPath.WATCHLIST_STREAM and cost.shape.objects_returned == 1
    return cost.shape.n_read


def test_initial_events_come_from_the_named_objects_key_from_1_31():
    assert _node_watchlists("1.30") == NODES
    assert _node_watchlists("1.31") == 1


def test_a_list_by_name_reads_its_key_at_every_version():
    for version in ("1.20", "1.37"):
        sim = _simulation([_lister("one", "nodes", {"field_selector": "metadata.name=node-4", "selectivity": 0.05})],
                          version)  # fmt: skip
        cost = _costs(sim)["one"]
        assert cost.shape.objects_returned == cost.shape.n_read == 1


def test_the_pod_index_and_trigger_predate_every_release_simapf_models():
    sim = _simulation([_lister("by-node", "pods", BY_NODE)], "1.20")
    assert _costs(sim)["by-node"].shape.n_read == ON_NODE
    assert watch_trigger("pods", "spec.nodeName=node-1", scope_partitioned=False) == (True, "node-1")


@pytest.mark.parametrize("version, partitioned", [("1.26", False), ("1.27", True)])
def test_watchers_are_partitioned_by_namespace_and_name_from_1_27(version, partitioned):
    # Before 1.27 a watcher of another namespace is handed the event and drops it; a Service
    # watched by name has no trigger then.
    assert (watch_trigger("services", "metadata.name=web", scope_partitioned=partitioned) is not None) == partitioned
    assert watch_trigger("secrets", "metadata.name=web", scope_partitioned=partitioned) == (False, "web")
    informers = {"name": "others", "kind": "informer", "count": 4, "resource": "pods", "namespace": "ns-1",
                 "identity": {"user": "u-{i}"}, "list": {"mode": "rv0"}}  # fmt: skip
    sim = _simulation([informers], version)
    for group in sim.groups.values():
        group.start()
    sim.env.run(until=3 * 10**9)
    charged = _events(sim, 1, namespace="ns-0")
    if partitioned:
        assert charged == []
    else:
        assert charged == [pytest.approx(4 * sim.servers[0].model.params.request_cpu.watch_filter_core_s_per_event)]
