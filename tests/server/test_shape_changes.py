"""Mechanisms the calibration added to the resource model: etcd's discipline and per-key and
large-range costs, co-located clients reading responses, gzip, and the usable-core fraction."""

from __future__ import annotations

import pytest

from simapf.engine.environment import Environment
from simapf.server import ResourceModel, ServerParams, ServingPath, compute_plan
from simapf.server.costs import fresh_buffer_bytes
from simapf.server.cpu import ProcessorSharing
from simapf.server.etcd import EtcdModel, range_work
from simapf.server.params import EtcdParams
from simapf.server.paths import RequestCost, ResponseShape

from srvhelp import S, cost


def test_usable_cores_follow_the_cores_unless_set():
    p = ServerParams(cpu={"cores": 4})
    assert p.cpu.usable == pytest.approx(4 * p.cpu.usable_fraction)
    assert p.cpu.effective_cores == pytest.approx(min(p.cpu.usable, 4))
    assert ServerParams(cpu={"cores": 4, "usable_cores": 3.5}).cpu.effective_cores == 3.5
    assert ServerParams(cpu={"cores": 16, "usable_fraction": 1.0}).cpu.effective_cores == 16


def test_range_work_per_byte_per_key_is_linear():
    linear = dict(bytes_per_s=1e8, requests_per_s=1000, objects_per_s=None)
    # The rates are one server's: more servers serve more ranges side by side, not one faster.
    p = EtcdParams(**linear, concurrency=2)
    assert range_work(p, 1e6) == pytest.approx(1e-3 + 1e-2)
    assert range_work(p, 1e6, 1000) == range_work(p, 1e6)  # no per-key cost unless set
    keyed = EtcdParams(**{**linear, "objects_per_s": 1e5}, concurrency=1)
    assert range_work(keyed, 1e6, 1000) == pytest.approx(1e-3 + 1e-2 + 1e-2)
    # Per byte, a 1 GB range costs what a 1 MB range does: nothing grows faster than its bytes.
    per_byte = [(range_work(p, b) - range_work(p, 0)) / b for b in (1e3, 1e6, 1e9)]
    assert per_byte == pytest.approx([1e-8] * 3)


def test_records_with_the_old_large_range_penalty_still_load(caplog):
    p = EtcdParams(bytes_per_s=1e8, large_range_bytes=1e7)
    assert "large_range_bytes" not in p.model_dump()
    assert "no longer a parameter" in caplog.text


def _ranges(discipline: str, n: int) -> list[int]:
    env = Environment()
    etcd = EtcdModel(env.clock, EtcdParams(bytes_per_s=1e8, requests_per_s=1e9, concurrency=1, discipline=discipline,
                                      objects_per_s=None))  # fmt: skip
    done: list[tuple[int, int]] = []
    for i in range(n):
        etcd.read(etcd.work(1e7), lambda i: done.append((i, env.now)), i)
    assert etcd.in_flight == n
    env.run()
    assert etcd.busy_seconds() == pytest.approx(n * 0.1, rel=1e-6)
    return [t for _i, t in sorted(done)]


def test_fifo_etcd_serves_ranges_one_after_another():
    # 0.1 s each on one server: in arrival order, 0.1 s apart.
    assert _ranges("fifo", 4) == pytest.approx([0.1 * S * k for k in (1, 2, 3, 4)], abs=10)


def test_ps_etcd_finishes_identical_ranges_together():
    ends = _ranges("ps", 4)
    assert max(ends) - min(ends) <= 4 and ends[0] == pytest.approx(0.4 * S, abs=10)


def test_fifo_etcd_forgets_its_queue_when_the_apiserver_dies():
    env = Environment()
    etcd = EtcdModel(env.clock, EtcdParams(concurrency=1, discipline="fifo"))
    done: list[int] = []
    for i in range(3):
        etcd.read(0.5, done.append, i)
    env.run(until=S // 4)
    etcd.clear()
    assert etcd.in_flight == 0
    etcd.read(0.5, done.append, 9)
    env.run(until=2 * S)
    assert done == [9]


def test_foreign_jobs_share_the_cores_but_not_the_process_cpu():
    env = Environment()
    ps = ProcessorSharing(env.clock, cores=2, procs=2)
    ends: dict[str, int] = {}
    ps.add(1.0, lambda a: ends.__setitem__(a, env.now), "req")
    ps.add(1.0, lambda a: ends.__setitem__(a, env.now), "client", foreign=True)
    ps.add(1.0, lambda a: ends.__setitem__(a, env.now), "req2")
    assert ps.jobs == 2 and ps.foreign_jobs == 1
    env.run()
    # Three threads on two cores: all finish at 1.5 s; the client's core-second is not ours.
    assert set(ends.values()) == {int(1.5 * S)}
    assert ps.request_core_seconds() == pytest.approx(2.0)
    assert ps.foreign_core_seconds() == pytest.approx(1.0)


def test_a_colocated_client_reads_the_response_holding_its_buffer():
    p = ServerParams.model_validate(
        {
            "client": {"colocated_core_s_per_byte": 1e-8, "response_latency_s": 0.05},
            "cpu": {"usable_fraction": 1.0},
            "request_cpu": {"work_cv": 0.0},  # exact timings
        }
    )
    env = Environment()
    m = ResourceModel(env.clock, p)
    c = cost(ServingPath.CACHE, 1e6, 100)
    plan = m.plan(c)
    assert plan.write_core_s == pytest.approx(0.01) and plan.write_delay_ns == int(0.05 * S)
    assert 0 < plan.write_live_bytes <= plan.live_bytes
    done: list[int] = []
    m.start(c, done.append)
    env.run(until=int((plan.cpu_core_s + 0.005) * S))
    snap = m.snapshot()
    assert snap.responses_writing == 1 and snap.requests_executing == 0
    # and its whole encode buffer, which goes back to its pool once written
    assert snap.inflight_live_bytes == pytest.approx(plan.write_live_bytes + fresh_buffer_bytes(plan))
    env.run(until=S)
    # Alone: its CPU, then the client's CPU, then the delivery delay.
    assert done[0] == pytest.approx((plan.cpu_core_s + 0.01 + 0.05) * S, abs=5)
    after = m.snapshot()
    assert after.inflight_live_bytes == pytest.approx(0.0, abs=1e-6) and after.responses_writing == 0
    assert after.client_cpu_seconds_total == pytest.approx(0.01)
    # Not the client's; the idle process's own CPU over the second it ran is.
    assert after.cpu_seconds_total == pytest.approx(plan.cpu_core_s + p.process.baseline_cores * 1.0, rel=1e-6)


def test_without_a_client_nothing_changes():
    plan = compute_plan(ServerParams(), cost(ServingPath.CACHE, 1e6, 100))
    assert plan.write_core_s == 0.0 and plan.write_delay_ns == 0
    # What it would keep while a client link writes its response: the response buffer and the rest.
    assert plan.write_live_bytes == pytest.approx(plan.live_bytes)


def test_gzip_costs_cpu_and_holds_a_compressor_above_the_threshold():
    plain = ServerParams()
    gz = ServerParams(client={"accept_gzip": True})
    big = RequestCost(ServingPath.CACHE, ResponseShape(1e6, 100))
    small = RequestCost(ServingPath.CACHE, ResponseShape(1e5, 10))
    a, b = compute_plan(plain, big), compute_plan(gz, big)
    assert b.cpu_core_s - a.cpu_core_s == pytest.approx(gz.request_cpu.compress_core_s_per_byte * 1e6)
    assert b.live_bytes - a.live_bytes == pytest.approx(gz.request_memory.compressor_bytes)
    assert compute_plan(gz, small) == compute_plan(plain, small)  # 100 kB < 128 KiB: not compressed
