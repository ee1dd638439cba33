"""Scenario identities land in the FlowSchema a real 1.37 apiserver would pick for them.

The expectations come from the bootstrap configuration (apf-mechanics.md §1.4; k8s.io/apiserver
pkg/apis/flowcontrol/bootstrap/default.go). Since 1.34 (kubernetes PR #131215) there is no
`workload-leader-election` and no `endpoint-controller` FlowSchema, and `system-leader-election`
covers only Leases: a service account outside kube-system renewing its Lease is ordinary
service-account traffic, and Endpoints writes from kube-system are kube-system traffic.

The requests go through the workload layer (identity → user and groups → request) into the
simulated apiserver, and the FlowSchema and priority level are read from its request records.
"""

import pytest
from wlhelp import closed_loop, discovery, scenario, simulate

from simapf.apf.classify import Classifier
from simapf.apf.config import bootstrap_objects
from simapf.apf.types import RequestAttributes
from simapf.scenario.schema import Identity
from simapf.workload.instance import user_info

RESOURCES = [
    {"name": "pods", "count": 20, "namespaces": 2, "object_size": {"mean_bytes": 4096}},
    {"name": "configmaps", "count": 20, "namespaces": 2, "object_size": {"mean_bytes": 1024}},
    {"name": "endpoints", "count": 5, "object_size": {"mean_bytes": 1024}},
    {"name": "nodes", "namespaced": False, "count": 3, "object_size": {"mean_bytes": 8192}},
    {"name": "leases", "group": "coordination.k8s.io", "count": 5, "object_size": {"mean_bytes": 300}},
]

KUBELET = {"user": "system:node:node-{i}", "groups": ["system:nodes"]}
KCM = {"user": "system:kube-controller-manager"}
SCHEDULER = {"user": "system:kube-scheduler"}
RS_CONTROLLER = {"service_account": "kube-system/replicaset-controller"}
OPERATOR = {"service_account": "operators/widget-operator-{i}"}
ALICE = {"user": "alice", "groups": ["developers"]}
ADMIN = {"user": "kubernetes-admin", "groups": ["system:masters"]}
KUBE_PROXY = {"user": "system:kube-proxy"}


def req(verb, resource, namespace=None):
    return {"verb": verb, "resource": resource, "namespace": namespace}


# (client name, identity, request, FlowSchema, priority level)
CASES = [
    ("kubelet-pods", KUBELET, req("list", "pods", "ns-0"), "system-nodes", "system"),
    ("kubelet-node-status", KUBELET, req("update", "nodes"), "system-node-high", "node-high"),
    ("kubelet-lease", KUBELET, req("update", "leases", "kube-node-lease"), "system-node-high", "node-high"),
    ("kcm-pods", KCM, req("list", "pods"), "kube-controller-manager", "workload-high"),
    ("kcm-lease", KCM, req("update", "leases", "kube-system"), "system-leader-election", "leader-election"),
    ("kcm-lease-get", KCM, req("get", "leases", "kube-system"), "system-leader-election", "leader-election"),
    ("scheduler-pods", SCHEDULER, req("list", "pods"), "kube-scheduler", "workload-high"),
    ("scheduler-lease", SCHEDULER, req("update", "leases", "kube-system"), "system-leader-election", "leader-election"),
    ("rs-controller", RS_CONTROLLER, req("create", "pods", "ns-1"), "kube-system-service-accounts", "workload-high"),
    ("rs-controller-lease", RS_CONTROLLER, req("update", "leases", "kube-system"), "system-leader-election",
     "leader-election"),
    ("kube-system-endpoints", RS_CONTROLLER, req("update", "endpoints", "ns-0"), "kube-system-service-accounts",
     "workload-high"),
    ("operator", OPERATOR, req("list", "configmaps"), "service-accounts", "workload-low"),
    ("operator-lease", OPERATOR, req("update", "leases", "operators"), "service-accounts", "workload-low"),
    ("alice", ALICE, req("get", "configmaps", "ns-0"), "global-default", "global-default"),
    ("kube-proxy", KUBE_PROXY, req("list", "endpoints"), "global-default", "global-default"),
    ("admin", ADMIN, req("delete", "pods", "ns-0"), "exempt", "exempt"),
]


@pytest.fixture(scope="module")
def records():
    clients = [closed_loop(name, count=2, identity=ident, request=request, iterations=2)
               for name, ident, request, _fs, _pl in CASES]  # fmt: skip
    clients += [
        discovery("kubectl-alice", identity=ALICE, interval_s=1000),
        discovery("kubectl-kubelet", identity=KUBELET, interval_s=1000),
        discovery("kubectl-admin", identity=ADMIN, interval_s=1000),
    ]
    sim, result = simulate(scenario(*clients, duration_s=5.0, resources=RESOURCES))
    return result.requests


@pytest.mark.parametrize("name, identity, request_, flow_schema, level", CASES, ids=[c[0] for c in CASES])
def test_identity_lands_in_the_upstream_flow_schema(records, name, identity, request_, flow_schema, level):
    mine = records[records["client"] == name]
    assert len(mine) == 2  # both iterations arrived
    assert set(mine["flow_schema"]) == {flow_schema}
    assert set(mine["priority_level"]) == {level}


@pytest.mark.parametrize("name, flow_schema, level", [
    ("kubectl-alice", "global-default", "global-default"),
    ("kubectl-kubelet", "system-nodes", "system"),
    ("kubectl-admin", "exempt", "exempt"),
])  # fmt: skip
def test_discovery_requests_are_classified_by_who_sends_them(records, name, flow_schema, level):
    mine = records[records["client"] == name]
    assert set(mine["resource"]) >= {"/api", "/apis"}  # non-resource paths
    assert set(mine["flow_schema"]) == {flow_schema} and set(mine["priority_level"]) == {level}


def test_instances_have_their_own_user_names(records):
    kubelets = records[records["client"] == "kubelet-pods"]
    assert set(kubelets["user"]) == {"system:node:node-0", "system:node:node-1"}
    operators = records[records["client"] == "operator"]
    assert set(operators["user"]) == {"system:serviceaccount:operators:widget-operator-0",
                                      "system:serviceaccount:operators:widget-operator-1"}  # fmt: skip


def test_user_info_is_what_the_authenticator_sets():
    # serviceaccount.MakeGroupNames: system:serviceaccounts and system:serviceaccounts:<ns>;
    # every authenticated user is also in system:authenticated (once).
    assert user_info(Identity(service_account="kube-system/x-{i}"), 3) == (
        "system:serviceaccount:kube-system:x-3",
        ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"),
    )
    assert user_info(Identity(user="system:node:node-{i}", groups=["system:nodes", "system:authenticated"]), 7) == (
        "system:node:node-7", ("system:nodes", "system:authenticated"),
    )
    assert user_info(Identity(user="bob"), 0) == ("bob", ("system:authenticated",))


@pytest.mark.parametrize("identity, path, flow_schema", [
    (ALICE, "/healthz", "probes"),
    (KUBELET, "/readyz", "probes"),
    (OPERATOR, "/livez/etcd", "probes"),
    (ALICE, "/metrics", "global-default"),
    (OPERATOR, "/version", "service-accounts"),
])  # fmt: skip
def test_probe_paths_are_exempt_for_every_identity(identity, path, flow_schema):
    # No scenario client sends health checks; their identities go to the same classifier.
    user, groups = user_info(Identity(**identity), 0)
    got = Classifier(bootstrap_objects()).classify(
        RequestAttributes(user=user, groups=groups, verb="get", is_resource_request=False, path=path))
    assert got.flow_schema == flow_schema
