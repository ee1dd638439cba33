"""The APF controller end to end: classification, estimation, levels and borrowing."""

import pytest

from simapf.engine.clock import EventLoop, Phase
from simapf.apf.config import bootstrap_objects, parse_objects
from simapf.apf.controller import APFController
from simapf.apf.integrator import Integrator
from simapf.apf.types import NS_PER_S, RequestAttributes

MS = 1_000_000


def borrowing_objects(lendable, borrowing):
    """Upstream's TestBorrowing configuration (k8s.io/apiserver pkg/util/flowcontrol/
    borrowing_test.go): two levels of 100 shares, 10 queues, hand 2, queue length 10, one
    FlowSchema per user; the mandatory objects are added by the controller."""
    docs = []
    for flow in (0, 1):
        docs.append(f"""
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {{name: test-pl{flow}}}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 100
    lendablePercent: {lendable[flow]}
    borrowingLimitPercent: {borrowing[flow]}
    limitResponse:
      type: Queue
      queuing: {{queues: 10, handSize: 2, queueLengthLimit: 10}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {{name: test-fs{flow}}}
spec:
  matchingPrecedence: 100
  priorityLevelConfiguration: {{name: test-pl{flow}}}
  distinguisherMethod: {{type: ByUser}}
  rules:
  - subjects: [{{kind: User, user: {{name: test-user{flow}}}}}]
    nonResourceRules: [{{verbs: ["*"], nonResourceURLs: ["*"]}}]
""")
    return parse_objects("---".join(docs))


class ClosedLoop:
    """Clients that each send a request, wait for it, and send the next at once; every
    request runs 250 ms. Counts each flow's executing requests over time."""

    def __init__(self, objects, clients_per_flow, server_concurrency):
        self.loop = EventLoop()
        self.apf = APFController(objects, self.loop, self, server_concurrency=server_concurrency)
        self.executing = {flow: Integrator(0) for flow in range(len(clients_per_flow))}
        self.count = {flow: 0 for flow in self.executing}
        self.seq = 0
        for flow, n in enumerate(clients_per_flow):
            for _ in range(n):
                self.loop.at(0, self.send, flow, Phase.ARRIVAL)
        self.apf.start_borrowing()

    def _next_seq(self):
        self.seq += 1
        return self.seq

    def send(self, flow):
        attrs = RequestAttributes(user=f"test-user{flow}", groups=("system:authenticated",),
                                  verb="get", is_resource_request=False, path="/foobar")
        self.apf.submit(attrs, self._next_seq(), payload=flow)

    def _change(self, flow, delta):
        self.count[flow] += delta
        self.executing[flow].set(self.loop.now, self.count[flow])

    def dispatched(self, req):
        self._change(req.payload, +1)
        self.loop.at(self.loop.now + 250 * MS, self._done, req, Phase.FINISH)

    def _done(self, req):
        self._change(req.payload, -1)
        self.apf.finish(req)
        self.send(req.payload)

    def rejected(self, req, reason):
        raise AssertionError(f"no request should be rejected here, got {reason}")

    def released(self, req):
        pass


@pytest.mark.parametrize("lendable, borrowing", [
    ((50, 33), (67, 50)),  # lendable-limited
    ((50, 67), (33, 50)),  # borrowing-limited
], ids=["lendable-limited", "borrowing-limited"])
def test_upstream_borrowing_scenario(lendable, borrowing):
    sim = ClosedLoop(borrowing_objects(lendable, borrowing), (24, 6), server_concurrency=24)
    sim.loop.run(until_ns=10 * NS_PER_S)  # warm-up: the adjuster senses the load
    for integrator in sim.executing.values():
        integrator.reset(sim.loop.now)
    sim.loop.run(until_ns=25 * NS_PER_S)
    flow0 = sim.executing[0].reset(sim.loop.now).average
    flow1 = sim.executing[1].reset(sim.loop.now).average
    # upstream's acceptance bands
    assert 15.5 <= flow0 <= 16.1
    assert 5.5 <= flow1 <= 6.1


def test_without_borrowing_the_busy_level_stays_at_its_idle_limit():
    """The same load with the adjuster never run after start-up: flow 0 is held to the idle
    CurrentCL (10), which shows the scenario above really depends on borrowing."""
    sim = ClosedLoop(borrowing_objects((50, 33), (67, 50)), (24, 6), server_concurrency=24)
    sim.loop.heap = [e for e in sim.loop.heap if e[1] != 4]  # drop the adjuster's timer
    sim.loop.run(until_ns=10 * NS_PER_S)
    sim.executing[0].reset(sim.loop.now)
    sim.loop.run(until_ns=20 * NS_PER_S)
    assert sim.executing[0].reset(sim.loop.now).average == pytest.approx(10, abs=0.01)


class Collect:
    def __init__(self):
        self.dispatched_reqs, self.rejections, self.releases = [], [], []

    def dispatched(self, req):
        self.dispatched_reqs.append(req)

    def rejected(self, req, reason):
        self.rejections.append((req, reason))

    def released(self, req):
        self.releases.append(req)


def user(who, *groups, **kw):
    return RequestAttributes(user=who, groups=groups or ("system:authenticated",), **kw)


def test_requests_land_on_the_level_their_flow_schema_names():
    loop, out = EventLoop(), Collect()
    apf = APFController(bootstrap_objects(), loop, out, server_concurrency=600)
    cases = {
        "global-default": user("alice", verb="list", resource="pods", namespace="default"),
        "exempt": user("admin", "system:masters", verb="delete", resource="pods", namespace="x"),
        "node-high": user("system:node:n1", "system:nodes", verb="patch", resource="nodes",
                          subresource="status", name="n1"),
        "workload-low": user("system:serviceaccount:apps:builder", "system:serviceaccounts",
                             verb="get", resource="configmaps", namespace="apps", name="c"),
    }
    for seq, (level, attrs) in enumerate(cases.items()):
        req = apf.submit(attrs, seq)
        assert req.level is apf.levels[level].queueset
        assert req.state == 1  # executing: every level is idle
    assert [r.flow_schema for r in out.dispatched_reqs] == [
        "global-default", "exempt", "system-node-high", "service-accounts"]


def test_exempt_requests_never_wait_and_reject_level_rejects_when_full():
    loop, out = EventLoop(), Collect()
    objects = parse_objects("""
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tiny}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: tiny}
spec:
  matchingPrecedence: 10
  priorityLevelConfiguration: {name: tiny}
  rules:
  - subjects: [{kind: Group, group: {name: "system:authenticated"}}]
    nonResourceRules: [{verbs: ["*"], nonResourceURLs: ["*"]}]
""")
    apf = APFController(objects, loop, out, server_concurrency=6)
    tiny = apf.levels["tiny"].queueset
    get = lambda: user("bob", verb="get", is_resource_request=False, path="/x")
    reqs = [apf.submit(get(), i) for i in range(tiny.cl + 1)]
    assert [r.state for r in reqs[:-1]] == [1] * tiny.cl
    assert out.rejections == [(reqs[-1], "concurrency-limit")]
    admins = [apf.submit(user("root", "system:masters", verb="get", is_resource_request=False,
                              path="/x"), 100 + i) for i in range(50)]
    assert all(r.state == 1 for r in admins)  # exempt: never queued, never rejected
    assert apf.levels["exempt"].queueset.seats_in_use == 50


def test_a_request_with_its_own_deadline_times_out_then():
    loop, out = EventLoop(), Collect()
    apf = APFController(bootstrap_objects(), loop, out, server_concurrency=600)
    level = apf.levels["global-default"].queueset
    attrs = user("carol", verb="get", resource="pods", namespace="a", name="p")
    for i in range(level.cl):  # fill the level
        apf.submit(attrs, i)
    late = apf.submit(attrs, 1000, deadline_ns=2 * NS_PER_S)  # e.g. a client ?timeout=8s
    default = apf.submit(attrs, 1001)
    loop.run(until_ns=3 * NS_PER_S)
    assert (late, "time-out") in out.rejections and late.state == 4
    assert default.state == 0  # still waiting: its deadline is 15 s
    loop.run(until_ns=16 * NS_PER_S)
    assert (default, "time-out") in out.rejections
    assert level.reqs_waiting == 0 and level.rejected_total["time-out"] == 2
