"""An open watch keeps its encode buffers: as large as the largest object it has sent, two of
them for JSON (the object's and the event's), one for protobuf (its session's allocator)."""

from __future__ import annotations

import pytest

from simapf import load_scenario
from simapf.simulation.runner import Simulation
from simapf.server.params import ServerParams

WATCH_BYTES = ServerParams().request_memory.watch_held_bytes
OBJECT = 1_000_000


def _watchers(encoding: str, mode: str, writers: bool = False) -> Simulation:
    clients = [{"name": "informers", "kind": "informer", "count": 10, "resource": "secrets", "namespace": "ns-0",
                "encoding": encoding, "list": {"mode": mode}, "identity": {"user": "i-{i}"}}]
    if writers:
        clients.append({"name": "writers", "kind": "mutator", "count": 1, "resource": "secrets", "rate_per_s": 2,
                        "identity": {"user": "writer"}, "namespace": "ns-0"})
    sc = {
        "name": "watch-buffers",
        "run": {"duration_s": 30, "seed": 1},
        "kubernetes": {"feature_gates": {"WatchList": True, "WatchListClient": True}},
        "resources": [{"name": "secrets", "count": 40, "namespaces": 1,
                       "object_size": {"mean_bytes": OBJECT, "distribution": "constant"}}],
        "clients": clients,
    }  # fmt: skip
    sim = Simulation(load_scenario(sc))
    for group in sim.groups.values():
        group.start()
    sim.env.run(until=20 * 10**9)
    return sim


def _held(sim: Simulation) -> list[float]:
    return [w.held for ws in sim.cluster._watches[0].values() for w in ws]


@pytest.mark.parametrize("encoding, copies", [("json", 2), ("protobuf", 1)])
def test_a_watchlist_keeps_buffers_of_its_largest_object(encoding, copies):
    held = _held(_watchers(encoding, "watchlist"))
    assert len(held) == 10
    assert held == pytest.approx([WATCH_BYTES + copies * OBJECT] * 10)


def test_a_watch_after_a_list_grows_its_buffers_with_the_events_it_sends():
    quiet = _held(_watchers("json", "rv0"))
    assert quiet == pytest.approx([WATCH_BYTES] * 10)  # no event sent yet: empty buffers
    busy = _held(_watchers("json", "rv0", writers=True))
    assert busy == pytest.approx([WATCH_BYTES + 2 * OBJECT] * 10)  # updates of 1 MB objects
