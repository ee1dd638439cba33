"""An etcd embedded in the apiserver's process (`etcd.embedded`): its ranges take turns on the
process's cores and their CPU is the process's."""

from __future__ import annotations

import pytest

from simapf.engine.environment import Environment
from simapf.errors import ConfigError
from simapf.scenario import load_scenario
from simapf.server import ResourceModel, ServerParams, ServingPath
from simapf.server.cpu import ProcessorSharing
from simapf.server.etcd import EmbeddedEtcd
from simapf.server.params import EtcdParams

from srvhelp import cost

NS = 10**9


def test_a_range_shares_the_process_cores_with_requests():
    env = Environment()
    cpu = ProcessorSharing(env.clock, cores=1, procs=4)
    etcd = EmbeddedEtcd(EtcdParams(embedded=True), cpu)
    done: dict[str, float] = {}
    cpu.add(1.0, lambda _: done.setdefault("request", env.now / NS))
    etcd.read(1.0, lambda _: done.setdefault("range", env.now / NS))
    assert etcd.in_flight == 1
    env.run(until=10 * NS)
    # One core for both: each gets half of it, so both end at 2 s (an etcd of its own: 1 s).
    assert done == {"request": pytest.approx(2.0), "range": pytest.approx(2.0)}
    assert etcd.in_flight == 0
    assert etcd.busy_seconds() == pytest.approx(1.0)
    assert cpu.request_core_seconds() == pytest.approx(2.0)


def test_a_dead_process_s_ranges_never_answer():
    env = Environment()
    cpu = ProcessorSharing(env.clock, cores=2)
    etcd = EmbeddedEtcd(EtcdParams(embedded=True), cpu)
    answered = []
    etcd.read(1.0, answered.append, "first")
    env.run(until=int(0.5 * NS))
    cpu.clear()
    etcd.cancel(object())
    assert etcd.in_flight == 0
    env.run(until=10 * NS)
    assert answered == []


def _scenario(embedded: bool, replicas: int = 1) -> dict:
    return {
        "name": "embedded-etcd",
        "run": {"duration_s": 20, "seed": 1},
        "apiserver": {"replicas": replicas, "params": {"etcd": {"embedded": embedded}}},
        "resources": [{"name": "configmaps", "count": 2000, "watch_cache": False,
                       "object_size": {"mean_bytes": "10Ki"}}],
        "clients": [{"name": "lister", "kind": "closed_loop", "count": 1, "identity": {"user": "u"},
                     "think_time": {"mean_s": 1.0}, "request": {"verb": "list", "resource": "configmaps"}}],
    }  # fmt: skip


def test_the_process_cpu_counts_the_embedded_etcd_s_range():
    def served(embedded: bool):
        env = Environment()
        m = ResourceModel(env.clock, ServerParams(request_cpu={"work_cv": 0.0}, etcd={"embedded": embedded}))
        c = cost(ServingPath.ETCD, 20_000_000, 2000)
        done: list[int] = []
        m.start(c, done.append)
        assert m.snapshot().etcd_reads_in_flight == 1
        env.run(until=10 * NS)
        return m.plan(c), m.snapshot(), done

    plan, apart, done_apart = served(False)
    _, inside, done_inside = served(True)
    # Alone on idle cores, the LIST takes as long either way; the process's CPU now has the range's.
    assert done_inside == done_apart and len(done_apart) == 1
    assert plan.etcd_work > 0.05
    assert inside.cpu_seconds_total - apart.cpu_seconds_total == pytest.approx(plan.etcd_work, abs=1e-8)
    assert inside.etcd_reads_in_flight == 0


def test_an_embedded_etcd_belongs_to_one_replica():
    with pytest.raises(ConfigError, match=r"apiserver\.params\.etcd\.embedded: .*replicas is 2"):
        load_scenario(_scenario(True, replicas=2))
