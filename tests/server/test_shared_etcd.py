"""One etcd shared by several apiserver replicas: its capacity is shared, and a replica's death
takes only its own ranges with it."""

from __future__ import annotations

import pytest
import simpy

from simapf import run
from simapf.engine.environment import Environment
from simapf.server.etcd import EtcdModel
from simapf.server.params import EtcdParams

NS = 10**9


class Owner:
    """Stands for an apiserver: reads call back one of its methods."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.done: list[float] = []

    def answered(self, _arg) -> None:
        self.done.append(self.env.now / NS)


@pytest.mark.parametrize("discipline", ["ps", "fifo"])
def test_a_dead_owner_s_reads_go_and_the_others_finish(discipline):
    env = Environment()
    etcd = EtcdModel(env.clock, EtcdParams(concurrency=1, discipline=discipline))
    a, b = Owner(env), Owner(env)
    etcd.read(1.0, a.answered)
    etcd.read(1.0, b.answered)
    etcd.read(1.0, a.answered)
    env.run(until=int(0.5 * NS))
    etcd.cancel(a)
    env.run(until=10 * NS)
    if discipline == "ps":
        # Three shared one server for 0.5 s (b got 1/6 s of work), then b alone: 5/6 s more.
        assert a.done == []
        assert b.done == [pytest.approx(0.5 + 5 / 6)]
    else:
        # a's first range was being served: it finishes (the dead process's model ignores the
        # answer: its epoch is gone), then b's; a's queued second range is gone.
        assert a.done == [pytest.approx(1.0)]
        assert b.done == [pytest.approx(2.0)]
    assert etcd.in_flight == 0


def test_replicas_share_one_etcd():
    """LISTs served from etcd (watch cache off) at more than etcd can read: two replicas
    complete no more of them than one, because both read the same etcd."""

    def completed(replicas: int) -> int:
        sc = {
            "name": "shared-etcd",
            "run": {"duration_s": 30, "seed": 1},
            "apiserver": {"replicas": replicas},
            "resources": [{"name": "configmaps", "count": 5000, "watch_cache": False,
                           "object_size": {"mean_bytes": "20Ki"}}],
            "clients": [{"name": "listers", "kind": "closed_loop", "count": 40, "identity": {"user": "u-{i}"},
                         "think_time": {"mean_s": 0.01}, "request": {"verb": "list", "resource": "configmaps"}}],
        }  # fmt: skip
        return run(sc).summary["requests"]["by_outcome"]["ok"]

    one, two = completed(1), completed(2)
    # Two replicas with an etcd each would complete about twice as many.
    assert two <= 1.25 * one
