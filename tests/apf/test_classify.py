"""Classification against the bootstrap configuration (reference §1.1, §1.4) and rule.go."""

import pytest
import yaml

from simapf.apf.classify import Classifier, level_uses_flow_hash
from simapf.apf.config import bootstrap_objects, build_effective_config, parse_objects
from simapf.apf.shuffle import flow_hash
from simapf.apf.types import RequestAttributes

AUTH = "system:authenticated"
UNAUTH = "system:unauthenticated"
NODES = ("system:nodes", AUTH)
KCM = "system:kube-controller-manager"
SCHED = "system:kube-scheduler"
API = "flowcontrol.apiserver.k8s.io/v1"


@pytest.fixture(scope="module")
def classifier():
    return Classifier(bootstrap_objects())


def resource(
    user, groups=(AUTH,), verb="get", group="", resource="pods", subresource="", namespace="default"
):
    return RequestAttributes(
        user=user,
        groups=groups,
        verb=verb,
        api_group=group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
    )


def non_resource(user, groups=(AUTH,), verb="get", path="/version"):
    return RequestAttributes(
        user=user, groups=groups, verb=verb, is_resource_request=False, path=path
    )


def sa(namespace, name):
    user = f"system:serviceaccount:{namespace}:{name}"
    return user, ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTH)


# (description, request, expected FlowSchema, expected priority level)
BOOTSTRAP_CASES = [
    (
        "cluster admin",
        resource("admin", ("system:masters", AUTH), verb="delete"),
        "exempt",
        "exempt",
    ),
    (
        "cluster admin non-resource",
        non_resource("admin", ("system:masters", AUTH), verb="post", path="/x"),
        "exempt",
        "exempt",
    ),
    (
        "unauthenticated /healthz",
        non_resource("system:anonymous", (UNAUTH,), path="/healthz"),
        "probes",
        "exempt",
    ),
    ("authenticated /readyz", non_resource("bob", (AUTH,), path="/readyz"), "probes", "exempt"),
    (
        "/livez sub-check",
        non_resource("system:anonymous", (UNAUTH,), path="/livez/etcd"),
        "probes",
        "exempt",
    ),
    (
        "probe path with other verb",
        non_resource("system:anonymous", (UNAUTH,), verb="post", path="/healthz"),
        "global-default",
        "global-default",
    ),
    (
        "probe-like prefix is not a probe",
        non_resource("bob", (AUTH,), path="/healthzfoo"),
        "global-default",
        "global-default",
    ),
    (
        "controller-manager leader lease",
        resource(
            KCM,
            (AUTH,),
            verb="update",
            group="coordination.k8s.io",
            resource="leases",
            namespace="kube-system",
        ),
        "system-leader-election",
        "leader-election",
    ),
    (
        "scheduler leader lease",
        resource(
            SCHED,
            (AUTH,),
            verb="get",
            group="coordination.k8s.io",
            resource="leases",
            namespace="kube-system",
        ),
        "system-leader-election",
        "leader-election",
    ),
    (
        "kube-system SA leader lease",
        resource(
            *sa("kube-system", "cloud-controller"),
            verb="create",
            group="coordination.k8s.io",
            resource="leases",
            namespace="kube-system",
        ),
        "system-leader-election",
        "leader-election",
    ),
    (
        "cluster-scoped lease is not leader election",
        resource(
            KCM, (AUTH,), verb="get", group="coordination.k8s.io", resource="leases", namespace=""
        ),
        "kube-controller-manager",
        "workload-high",
    ),
    (
        "lease watch is not leader election",
        resource(
            KCM,
            (AUTH,),
            verb="watch",
            group="coordination.k8s.io",
            resource="leases",
            namespace="kube-system",
        ),
        "kube-controller-manager",
        "workload-high",
    ),
    (
        "kubelet node status",
        resource(
            "system:node:n1",
            NODES,
            verb="patch",
            resource="nodes",
            subresource="status",
            namespace="",
        ),
        "system-node-high",
        "node-high",
    ),
    (
        "kubelet get node",
        resource("system:node:n1", NODES, verb="get", resource="nodes", namespace=""),
        "system-node-high",
        "node-high",
    ),
    (
        "kubelet node lease",
        resource(
            "system:node:n1",
            NODES,
            verb="update",
            group="coordination.k8s.io",
            resource="leases",
            namespace="kube-node-lease",
        ),
        "system-node-high",
        "node-high",
    ),
    (
        "kubelet lists pods",
        resource("system:node:n1", NODES, verb="list", resource="pods", namespace=""),
        "system-nodes",
        "system",
    ),
    (
        "kubelet gets a secret",
        resource("system:node:n1", NODES, verb="get", resource="secrets"),
        "system-nodes",
        "system",
    ),
    (
        "kubelet nodes/proxy",
        resource(
            "system:node:n1", NODES, verb="get", resource="nodes", subresource="proxy", namespace=""
        ),
        "system-nodes",
        "system",
    ),
    (
        "kubelet non-resource",
        non_resource("system:node:n1", NODES, path="/api"),
        "system-nodes",
        "system",
    ),
    (
        "controller-manager lists pods",
        resource(KCM, (AUTH,), verb="list", namespace=""),
        "kube-controller-manager",
        "workload-high",
    ),
    (
        "scheduler binds a pod",
        resource(SCHED, (AUTH,), verb="create", resource="pods", subresource="binding"),
        "kube-scheduler",
        "workload-high",
    ),
    (
        "kube-system SA",
        resource(
            *sa("kube-system", "replicaset-controller"),
            verb="update",
            group="apps",
            resource="replicasets",
        ),
        "kube-system-service-accounts",
        "workload-high",
    ),
    (
        "other SA",
        resource(*sa("default", "default"), verb="list"),
        "service-accounts",
        "workload-low",
    ),
    (
        "kube-system-ish namespace SA",
        resource(*sa("kube-system2", "x"), verb="list"),
        "service-accounts",
        "workload-low",
    ),
    (
        "plain user",
        resource("alice", (AUTH,), verb="list", resource="configmaps"),
        "global-default",
        "global-default",
    ),
    (
        "anonymous API call",
        resource("system:anonymous", (UNAUTH,), verb="get"),
        "global-default",
        "global-default",
    ),
]


@pytest.mark.parametrize(
    "attrs, fs_name, pl_name",
    [case[1:] for case in BOOTSTRAP_CASES],
    ids=[case[0] for case in BOOTSTRAP_CASES],
)
def test_bootstrap_schemas_reach_their_clients(classifier, attrs, fs_name, pl_name):
    result = classifier.classify(attrs)
    assert (result.flow_schema, result.priority_level) == (fs_name, pl_name)
    assert not result.fell_back_to_catch_all


def test_plain_user_flow_is_by_user_with_upstream_hash(classifier):
    result = classifier.classify(resource("alice", (AUTH,), verb="list", resource="configmaps"))
    assert result.distinguisher == "alice"
    # Reference §6.5 test vector for (global-default, alice).
    assert result.flow_hash == 17644606172554983095


def test_by_namespace_distinguisher(classifier):
    result = classifier.classify(resource(KCM, (AUTH,), verb="list", namespace="kube-system"))
    assert result.flow_schema == "kube-controller-manager"
    assert result.distinguisher == "kube-system"
    assert result.flow_hash == 1951360281921618776  # reference §6.5
    cluster_wide = classifier.classify(resource(KCM, (AUTH,), verb="list", namespace=""))
    assert cluster_wide.distinguisher == ""
    assert cluster_wide.flow_hash == flow_hash("kube-controller-manager", "")


def test_exempt_level_gets_no_distinguisher_or_hash(classifier):
    result = classifier.classify(resource("admin", ("system:masters", AUTH)))
    assert (result.distinguisher, result.flow_hash) == ("", 0)


def test_reject_level_gets_no_distinguisher_or_hash():
    # Only catch-all is left to match, and it Rejects: no queues, so no flow identity, even
    # though its distinguisher method is ByUser.
    objects = bootstrap_objects()
    remaining = parse_objects(
        yaml.safe_dump([pl.model_dump(by_alias=True) for pl in objects.priority_levels])
    )
    classifier = Classifier(remaining)
    result = classifier.classify(resource("alice"))
    assert result.flow_schema == "catch-all" and result.priority_level == "catch-all"
    assert (result.distinguisher, result.flow_hash) == ("", 0)
    assert not classifier.uses_flow_hash("catch-all")


def _objects(*items):
    return parse_objects(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))


def _pl(name, queues, hand_size=1):
    return {
        "apiVersion": API,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": queues, "handSize": hand_size},
                }
            },
        },
    }


def _fs(name, pl, precedence, rule, distinguisher="ByUser"):
    spec = {
        "priorityLevelConfiguration": {"name": pl},
        "matchingPrecedence": precedence,
        "rules": [rule],
    }
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    return {"apiVersion": API, "kind": "FlowSchema", "metadata": {"name": name}, "spec": spec}


def _users_rule(*subjects, resource_rules=None, non_resource_rules=None):
    rule = {"subjects": list(subjects)}
    rule["resourceRules"] = (
        resource_rules
        if resource_rules is not None
        else [
            {
                "verbs": ["*"],
                "apiGroups": ["*"],
                "resources": ["*"],
                "namespaces": ["*"],
                "clusterScope": True,
            }
        ]
    )
    if non_resource_rules is not None:
        rule["nonResourceRules"] = non_resource_rules
    return rule


def _user(name):
    return {"kind": "User", "user": {"name": name}}


def test_single_queue_level_gets_no_distinguisher_or_hash():
    objects = _objects(
        _pl("one-queue", queues=1), _fs("solo", "one-queue", 100, _users_rule(_user("alice")))
    )
    classifier = Classifier(objects)
    result = classifier.classify(resource("alice"))
    assert result.flow_schema == "solo"
    assert (result.distinguisher, result.flow_hash) == ("", 0)
    assert not classifier.uses_flow_hash("one-queue")


def test_level_uses_flow_hash_rule():
    levels = {pl.name: pl for pl in bootstrap_objects().priority_levels}
    assert level_uses_flow_hash(levels["global-default"])
    assert level_uses_flow_hash(levels["leader-election"])
    assert not level_uses_flow_hash(levels["exempt"])
    assert not level_uses_flow_hash(levels["catch-all"])


def test_precedence_ties_are_broken_by_name():
    rule = _users_rule(_user("alice"))
    objects = _objects(
        _pl("q", 8, 2),
        _fs("zzz", "q", 100, rule),
        _fs("aaa", "q", 100, rule),
        _fs("later", "q", 50, _users_rule(_user("bob"))),
    )
    classifier = Classifier(objects)
    assert classifier.classify(resource("alice")).flow_schema == "aaa"
    assert classifier.classify(resource("bob")).flow_schema == "later"


def test_lower_precedence_number_wins_over_name():
    rule = _users_rule(_user("alice"))
    objects = _objects(_pl("q", 8, 2), _fs("aaa", "q", 200, rule), _fs("zzz", "q", 100, rule))
    assert Classifier(objects).classify(resource("alice")).flow_schema == "zzz"


def test_nothing_matches_falls_back_to_catch_all():
    # Without the suggested schemas, a user in neither system:authenticated nor
    # system:unauthenticated matches nothing, not even catch-all's own rules.
    objects = _objects(_pl("q", 8, 2))
    result = Classifier(objects).classify(resource("ghost", groups=()))
    assert result.flow_schema == "catch-all" and result.priority_level == "catch-all"
    assert result.fell_back_to_catch_all


def test_dangling_schema_is_never_chosen():
    objects = _objects(_pl("q", 8, 2), _fs("orphan", "missing", 100, _users_rule(_user("alice"))))
    assert Classifier(objects).classify(resource("alice")).flow_schema == "catch-all"


# --- rule semantics (upstream rule.go) ----------------------------------------------------------


def _classify_one(rule, attrs, distinguisher="ByUser"):
    objects = _objects(_pl("q", 8, 2), _fs("probe", "q", 100, rule, distinguisher))
    return Classifier(objects).classify(attrs)


def _matches(rule, attrs):
    return _classify_one(rule, attrs).flow_schema == "probe"


def test_user_and_group_wildcards():
    assert _matches(_users_rule(_user("*")), resource("anyone", groups=()))
    assert _matches(
        _users_rule({"kind": "Group", "group": {"name": "*"}}), resource("anyone", groups=())
    )
    assert _matches(
        _users_rule({"kind": "Group", "group": {"name": "team"}}), resource("x", groups=("team",))
    )
    assert not _matches(
        _users_rule({"kind": "Group", "group": {"name": "team"}}), resource("team", groups=())
    )


def test_service_account_subjects():
    exact = _users_rule(
        {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "runner"}}
    )
    any_in_ns = _users_rule(
        {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ci", "name": "*"}}
    )
    assert _matches(exact, resource("system:serviceaccount:ci:runner"))
    assert not _matches(exact, resource("system:serviceaccount:ci:other"))
    assert _matches(any_in_ns, resource("system:serviceaccount:ci:other"))
    assert not _matches(any_in_ns, resource("system:serviceaccount:ci2:other"))
    assert not _matches(any_in_ns, resource("ci:other"))


def _resource_rule(**fields):
    rule = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
    rule.update(fields)
    return _users_rule(_user("alice"), resource_rules=[rule])


def test_resource_rule_fields():
    pods_status = _resource_rule(resources=["pods/status"])
    assert _matches(pods_status, resource("alice", resource="pods", subresource="status"))
    assert not _matches(pods_status, resource("alice", resource="pods"))
    pods = _resource_rule(resources=["pods"])
    assert not _matches(pods, resource("alice", resource="pods", subresource="status"))

    apps = _resource_rule(apiGroups=["apps"])
    assert _matches(apps, resource("alice", group="apps", resource="deployments"))
    assert not _matches(apps, resource("alice", group="", resource="pods"))

    verbs = _resource_rule(verbs=["list", "watch"])
    assert _matches(verbs, resource("alice", verb="watch"))
    assert not _matches(verbs, resource("alice", verb="get"))


def test_namespace_and_cluster_scope():
    only_default = _resource_rule(namespaces=["default"])
    assert _matches(only_default, resource("alice", namespace="default"))
    assert not _matches(only_default, resource("alice", namespace="other"))
    assert not _matches(only_default, resource("alice", namespace=""))

    every_namespace = _resource_rule(namespaces=["*"])
    assert _matches(every_namespace, resource("alice", namespace="anything"))
    assert not _matches(every_namespace, resource("alice", namespace=""))  # clusterScope false

    cluster_only = _resource_rule(namespaces=[], clusterScope=True)
    assert _matches(cluster_only, resource("alice", namespace=""))
    assert not _matches(cluster_only, resource("alice", namespace="default"))


def test_resource_rules_do_not_match_non_resource_requests_and_vice_versa():
    only_resources = _resource_rule()
    assert not _matches(only_resources, non_resource("alice", path="/version"))
    only_paths = _users_rule(
        _user("alice"),
        resource_rules=[],
        non_resource_rules=[{"verbs": ["*"], "nonResourceURLs": ["*"]}],
    )
    assert not _matches(only_paths, resource("alice"))
    assert _matches(only_paths, non_resource("alice", path="/anything"))


@pytest.mark.parametrize(
    "rule_url, path, expected",
    [
        ("/metrics", "/metrics", True),
        ("/metrics", "/metrics/slis", True),  # a plain path also covers what is below it
        ("/metrics", "/metricsx", False),
        ("/apis/*", "/apis/apps", True),
        ("/apis/*", "/apis/", True),
        ("/apis/*", "/apis", False),  # upstream: the trimmed prefix "/apis/" does not match "/apis"
        ("/", "/anything/at/all", True),  # "/" is a prefix of every path
        ("*", "/whatever", True),
    ],
)
def test_non_resource_url_matching(rule_url, path, expected):
    rule = _users_rule(
        _user("alice"),
        resource_rules=[],
        non_resource_rules=[{"verbs": ["get"], "nonResourceURLs": [rule_url]}],
    )
    assert _matches(rule, non_resource("alice", path=path)) is expected


def test_non_resource_verb():
    rule = _users_rule(
        _user("alice"),
        resource_rules=[],
        non_resource_rules=[{"verbs": ["get"], "nonResourceURLs": ["*"]}],
    )
    assert _matches(rule, non_resource("alice", verb="get"))
    assert not _matches(rule, non_resource("alice", verb="post"))


def test_no_distinguisher_method_gives_one_flow():
    result = _classify_one(_users_rule(_user("alice")), resource("alice"), distinguisher=None)
    assert result.distinguisher == ""
    assert result.flow_hash == flow_hash("probe", "")


def test_cached_result_equals_fresh_result(classifier):
    attrs = resource("carol", verb="list", resource="secrets", namespace="team-a")
    first = classifier.classify(attrs)
    again = classifier.classify(
        RequestAttributes(**{f: getattr(attrs, f) for f in attrs.__slots__})
    )
    fresh = Classifier(build_effective_config(bootstrap_objects())).classify(attrs)
    assert first == again == fresh
