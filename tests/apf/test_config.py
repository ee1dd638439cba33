"""Loading, defaulting and validating APF objects; the bootstrap set; the effective configuration.

Expected values come from the reference (§1.1–§1.4) and upstream validation rules.
"""

import copy
import logging
from pathlib import Path

import pytest
import yaml

from simapf.apf.objects import APFObjects
from simapf.apf.config import (
    bootstrap_objects,
    build_effective_config,
    load_objects,
    mandatory_objects,
    objects_from_data,
    parse_objects,
)
from simapf.errors import ConfigError, SimapfError

DATA = Path(__file__).parent.parent / "data" / "apf"
API = "flowcontrol.apiserver.k8s.io/v1"


def limited_pl(name="foo", queues=64, hand_size=6, queue_length_limit=50, shares=10):
    return {
        "apiVersion": API,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {
                        "queues": queues,
                        "handSize": hand_size,
                        "queueLengthLimit": queue_length_limit,
                    },
                },
            },
        },
    }


def flow_schema(name="foo", priority_level="global-default", precedence=5000):
    return {
        "apiVersion": API,
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": priority_level},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": "alice"}}],
                    "resourceRules": [
                        {
                            "verbs": ["get"],
                            "apiGroups": [""],
                            "resources": ["pods"],
                            "namespaces": ["default"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
                }
            ],
        },
    }


def kube_list(*items):
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": list(items),
            "metadata": {"resourceVersion": ""},
        }
    )


def error_of(obj) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_objects(kube_list(obj))
    return str(caught.value)


# --- the bootstrap configuration --------------------------------------------------------------

# Reference §1.3: name -> (type, NCS, lendable %, limitResponse, queues, handSize, queueLengthLimit)
BOOTSTRAP_LEVELS = {
    "exempt": ("Exempt", 0, 0, None, None, None, None),
    "catch-all": ("Limited", 5, 0, "Reject", None, None, None),
    "system": ("Limited", 30, 33, "Queue", 64, 6, 50),
    "node-high": ("Limited", 40, 25, "Queue", 64, 6, 50),
    "leader-election": ("Limited", 10, 0, "Queue", 16, 4, 50),
    "workload-high": ("Limited", 40, 50, "Queue", 128, 6, 50),
    "workload-low": ("Limited", 100, 90, "Queue", 128, 6, 50),
    "global-default": ("Limited", 20, 50, "Queue", 128, 6, 50),
}

# Reference §1.4, in matching order: (name, precedence, priority level, distinguisher)
BOOTSTRAP_SCHEMAS = [
    ("exempt", 1, "exempt", None),
    ("probes", 2, "exempt", None),
    ("system-leader-election", 100, "leader-election", "ByUser"),
    ("system-node-high", 400, "node-high", "ByUser"),
    ("system-nodes", 500, "system", "ByUser"),
    ("kube-controller-manager", 800, "workload-high", "ByNamespace"),
    ("kube-scheduler", 800, "workload-high", "ByNamespace"),
    ("kube-system-service-accounts", 900, "workload-high", "ByNamespace"),
    ("service-accounts", 9000, "workload-low", "ByUser"),
    ("global-default", 9900, "global-default", "ByUser"),
    ("catch-all", 10000, "catch-all", "ByUser"),
]


def test_bootstrap_priority_levels_match_reference_table():
    levels = {pl.name: pl for pl in bootstrap_objects().priority_levels}
    assert set(levels) == set(BOOTSTRAP_LEVELS)
    for name, (kind, shares, lendable, response, queues, hand, qll) in BOOTSTRAP_LEVELS.items():
        pl = levels[name]
        assert pl.spec.type == kind, name
        assert pl.nominal_concurrency_shares == shares, name
        assert pl.lendable_percent == lendable, name
        assert pl.borrowing_limit_percent is None, name  # none sets it: unlimited borrowing
        if response is None:
            assert pl.is_exempt and pl.spec.limited is None
            continue
        assert pl.spec.limited.limit_response.type == response, name
        if queues is None:
            assert pl.queuing is None, name
        else:
            assert (pl.queuing.queues, pl.queuing.hand_size, pl.queuing.queue_length_limit) == (
                queues,
                hand,
                qll,
            )
    assert sum(pl.nominal_concurrency_shares for pl in levels.values()) == 245


def test_bootstrap_flow_schemas_match_reference_table_in_matching_order():
    config = build_effective_config(bootstrap_objects())
    got = [
        (fs.name, fs.matching_precedence, fs.priority_level_name, fs.distinguisher_type)
        for fs in config.flow_schemas
    ]
    assert got == BOOTSTRAP_SCHEMAS
    assert config.dangling == () and config.inserted == () and config.warnings == ()


def test_bootstrap_objects_carry_autoupdate_annotation():
    boot = bootstrap_objects()
    for obj in boot.flow_schemas + boot.priority_levels:
        assert obj.metadata.annotations.get("apf.kubernetes.io/autoupdate-spec") == "true", obj.name


def test_bootstrap_leader_election_rule_is_namespaced_leases_only():
    fs = next(fs for fs in bootstrap_objects().flow_schemas if fs.name == "system-leader-election")
    (rule,) = fs.spec.rules
    (resource_rule,) = rule.resource_rules
    assert resource_rule.resources == ("leases",)
    assert resource_rule.api_groups == ("coordination.k8s.io",)
    assert resource_rule.verbs == ("get", "create", "update")
    assert resource_rule.cluster_scope is False


def test_bootstrap_file_is_a_kubectl_style_list():
    text = (Path(__file__).parent.parent.parent / "simapf" / "apf" / "bootstrap.yaml").read_text()
    raw = yaml.safe_load(text)
    assert raw["apiVersion"] == "v1" and raw["kind"] == "List"
    kinds = [item["kind"] for item in raw["items"]]
    # kubectl prints the flowschemas first, then the priority levels, each sorted by name.
    assert kinds == ["FlowSchema"] * 11 + ["PriorityLevelConfiguration"] * 8
    fs_names = [item["metadata"]["name"] for item in raw["items"][:11]]
    assert fs_names == sorted(fs_names)
    assert all("status" in item and "uid" in item["metadata"] for item in raw["items"])


def test_mandatory_objects():
    mandatory = mandatory_objects()
    assert sorted(fs.name for fs in mandatory.flow_schemas) == ["catch-all", "exempt"]
    assert sorted(pl.name for pl in mandatory.priority_levels) == ["catch-all", "exempt"]


# --- accepted shapes ---------------------------------------------------------------------------


def test_cluster_output_with_managed_fields_and_status():
    objects = load_objects(DATA / "cluster-objects.yaml")
    (fs,) = objects.flow_schemas
    (pl,) = objects.priority_levels
    assert fs.name == "batch-jobs" and fs.priority_level_name == "batch"
    assert fs.matching_precedence == 1500 and fs.distinguisher_type == "ByNamespace"
    assert fs.spec.rules[0].resource_rules[0].resources == ("jobs", "jobs/status")
    assert fs.spec.rules[0].subjects[0].service_account.namespace == "ci"
    assert pl.borrowing_limit_percent == 150 and pl.lendable_percent == 10
    assert pl.queuing.queues == 32


def test_load_objects_accepts_path_as_str_and_text():
    path = DATA / "cluster-objects.yaml"
    assert load_objects(str(path)) == load_objects(path)
    assert load_objects(path.read_text()) == load_objects(path)


def test_multi_document_and_single_object_forms():
    text = "---\n".join(yaml.safe_dump(obj) for obj in (limited_pl("a"), flow_schema("f", "a")))
    objects = parse_objects(text)
    assert [pl.name for pl in objects.priority_levels] == ["a"]
    assert [fs.name for fs in objects.flow_schemas] == ["f"]

    single = parse_objects(yaml.safe_dump(limited_pl("only")))
    assert [pl.name for pl in single.priority_levels] == ["only"] and single.flow_schemas == ()


def test_multi_document_of_lists_and_bare_sequence():
    text = (
        kube_list(limited_pl("a"))
        + "---\n"
        + yaml.safe_dump([limited_pl("b"), flow_schema("f", "b")])
    )
    objects = parse_objects(text)
    assert [pl.name for pl in objects.priority_levels] == ["a", "b"]
    assert [fs.name for fs in objects.flow_schemas] == ["f"]


def test_typed_list_kinds_are_lists_too():
    text = yaml.safe_dump(
        {"apiVersion": API, "kind": "FlowSchemaList", "items": [flow_schema("x")]}
    )
    assert [fs.name for fs in parse_objects(text).flow_schemas] == ["x"]


def test_empty_documents_are_skipped():
    assert parse_objects("---\n---\n") == APFObjects()


def test_objects_from_data_for_embedded_configuration():
    objects = objects_from_data(
        [limited_pl("a"), flow_schema("f", "a")], source_name="scenario.yaml"
    )
    assert [pl.name for pl in objects.priority_levels] == ["a"]
    with pytest.raises(
        ConfigError, match=r"^scenario\.yaml: \[0\] \(PriorityLevelConfiguration \"bad\"\)"
    ):
        objects_from_data([limited_pl("bad", hand_size=99)], source_name="scenario.yaml")


# --- defaults ----------------------------------------------------------------------------------


def test_limited_defaults():
    obj = limited_pl()
    obj["spec"]["limited"] = {"limitResponse": {"type": "Queue", "queuing": {}}}
    (pl,) = parse_objects(kube_list(obj)).priority_levels
    assert pl.nominal_concurrency_shares == 30
    assert pl.lendable_percent == 0
    assert pl.borrowing_limit_percent is None
    assert (pl.queuing.queues, pl.queuing.hand_size, pl.queuing.queue_length_limit) == (64, 8, 50)


def test_zero_queuing_values_mean_default_but_zero_shares_is_kept():
    obj = limited_pl(queues=0, hand_size=0, queue_length_limit=0, shares=0)
    (pl,) = parse_objects(kube_list(obj)).priority_levels
    assert (pl.queuing.queues, pl.queuing.hand_size, pl.queuing.queue_length_limit) == (64, 8, 50)
    assert pl.nominal_concurrency_shares == 0


def test_null_means_absent():
    obj = limited_pl()
    obj["spec"]["limited"]["nominalConcurrencyShares"] = None
    obj["spec"]["limited"]["borrowingLimitPercent"] = None
    (pl,) = parse_objects(kube_list(obj)).priority_levels
    assert pl.nominal_concurrency_shares == 30 and pl.borrowing_limit_percent is None


def test_exempt_defaults():
    obj = {
        "apiVersion": API,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "exempt"},
        "spec": {"type": "Exempt"},
    }
    (pl,) = parse_objects(kube_list(obj)).priority_levels
    assert pl.is_exempt and pl.nominal_concurrency_shares == 0 and pl.lendable_percent == 0
    assert pl.queuing is None


@pytest.mark.parametrize("given", [None, 0, "absent"])
def test_matching_precedence_default(given):
    obj = flow_schema()
    if given == "absent":
        del obj["spec"]["matchingPrecedence"]
    else:
        obj["spec"]["matchingPrecedence"] = given
    (fs,) = parse_objects(kube_list(obj)).flow_schemas
    assert fs.matching_precedence == 1000


def test_absent_distinguisher_method_is_none():
    obj = flow_schema()
    del obj["spec"]["distinguisherMethod"]
    (fs,) = parse_objects(kube_list(obj)).flow_schemas
    assert fs.distinguisher_type is None


# --- validation --------------------------------------------------------------------------------

QUEUING = "spec.limited.limitResponse.queuing"


def _set(path, value):
    def mutate(obj):
        *parents, last = path
        target = obj
        for key in parents:
            target = target[key]
        target[last] = value

    return mutate


def _delete(path):
    def mutate(obj):
        *parents, last = path
        target = obj
        for key in parents:
            target = target[key]
        del target[last]

    return mutate


LIM = ("spec", "limited")
Q = ("spec", "limited", "limitResponse", "queuing")

PL_CASES = [
    (
        "hand bigger than deck",
        _set(Q + ("handSize",), 65),
        f"{QUEUING}.handSize: must be <= queues (64)",
    ),
    (
        "entropy 512x8",
        lambda o: o["spec"]["limited"]["limitResponse"].update(
            queuing={"queues": 512, "handSize": 8}
        ),
        f"{QUEUING}.handSize",
    ),
    (
        "entropy 64x11",
        _set(Q + ("handSize",), 11),
        f"{QUEUING}.handSize: deck size 64 and hand size 11 need 66 bits",
    ),
    ("negative queues", _set(Q + ("queues",), -1), f"{QUEUING}.queues: must be positive"),
    (
        "too many queues",
        _set(Q + ("queues",), 10_000_001),
        f"{QUEUING}.queues: must be at most 10000000",
    ),
    ("negative hand", _set(Q + ("handSize",), -2), f"{QUEUING}.handSize: must be positive"),
    (
        "negative queue length",
        _set(Q + ("queueLengthLimit",), -1),
        f"{QUEUING}.queueLengthLimit: must be positive",
    ),
    ("queues as string", _set(Q + ("queues",), "64"), f"{QUEUING}.queues:"),
    ("typo in queuing", _set(Q + ("handsize",), 4), f"{QUEUING}.handsize: unknown field"),
    (
        "Queue without queuing",
        _delete(Q),
        f"{QUEUING}: is required when limitResponse.type is Queue",
    ),
    (
        "Reject with queuing",
        _set(LIM + ("limitResponse", "type"), "Reject"),
        f"{QUEUING}: must not be set",
    ),
    (
        "unknown response",
        _set(LIM + ("limitResponse", "type"), "Drop"),
        "spec.limited.limitResponse.type:",
    ),
    (
        "lendable over 100",
        _set(LIM + ("lendablePercent",), 101),
        "spec.limited.lendablePercent: must be between 0 and 100",
    ),
    (
        "lendable negative",
        _set(LIM + ("lendablePercent",), -1),
        "spec.limited.lendablePercent: must be between 0 and 100",
    ),
    (
        "negative borrowing limit",
        _set(LIM + ("borrowingLimitPercent",), -1),
        "spec.limited.borrowingLimitPercent: must not be negative",
    ),
    (
        "negative shares",
        _set(LIM + ("nominalConcurrencyShares",), -1),
        "spec.limited.nominalConcurrencyShares: must not be negative",
    ),
    (
        "Exempt type for other name",
        _set(("spec", "type"), "Exempt"),
        "spec.type: must be Exempt if and only if",
    ),
    ("Limited without limited", _delete(LIM), "spec.limited: is required when type is Limited"),
    (
        "Limited with exempt block",
        _set(("spec", "exempt"), {"nominalConcurrencyShares": 1}),
        "spec.exempt: must not be set",
    ),
    ("unknown type", _set(("spec", "type"), "Unlimited"), "spec.type:"),
    ("missing name", _delete(("metadata", "name")), "metadata.name: required field missing"),
    ("bad name", _set(("metadata", "name"), "Not_A_Name"), "metadata.name:"),
    ("missing spec", _delete(("spec",)), "spec: required field missing"),
]


@pytest.mark.parametrize(
    "mutate, expected", [case[1:] for case in PL_CASES], ids=[case[0] for case in PL_CASES]
)
def test_priority_level_validation(mutate, expected):
    obj = limited_pl()
    mutate(obj)
    message = error_of(obj)
    assert expected in message
    assert "\n" not in message


def test_entropy_rule_message_names_the_bits():
    obj = limited_pl(queues=512, hand_size=8)
    assert "72 bits" in error_of(obj)
    obj = limited_pl(queues=128, hand_size=10)
    assert "70 bits" in error_of(obj)


def test_entropy_rule_allows_exactly_60_bits():
    # log2(64) * 10 = 60 bits: the largest hand a 64-queue level may have.
    (pl,) = parse_objects(kube_list(limited_pl(queues=64, hand_size=10))).priority_levels
    assert pl.queuing.hand_size == 10


def test_exempt_level_rules():
    def exempt(spec):
        return {
            "apiVersion": API,
            "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "exempt"},
            "spec": spec,
        }

    assert "spec.type: must be Exempt" in error_of(
        exempt({"type": "Limited", "limited": {"limitResponse": {"type": "Reject"}}})
    )
    assert "spec.exempt.nominalConcurrencyShares: must not be negative" in error_of(
        exempt({"type": "Exempt", "exempt": {"nominalConcurrencyShares": -1}})
    )
    assert "spec.exempt.lendablePercent: must be between 0 and 100" in error_of(
        exempt({"type": "Exempt", "exempt": {"lendablePercent": 101}})
    )
    assert "spec.limited: must not be set when type is Exempt" in error_of(
        exempt({"type": "Exempt", "limited": {"limitResponse": {"type": "Reject"}}})
    )


R0 = ("spec", "rules", 0)
RR = R0 + ("resourceRules", 0)
NR = R0 + ("nonResourceRules", 0)
S0 = R0 + ("subjects", 0)
RULE = "spec.rules[0]"

FS_CASES = [
    (
        "precedence too big",
        _set(("spec", "matchingPrecedence"), 10001),
        "spec.matchingPrecedence: must be at most 10000",
    ),
    (
        "precedence negative",
        _set(("spec", "matchingPrecedence"), -5),
        "spec.matchingPrecedence: must be positive",
    ),
    (
        "precedence 1 reserved",
        _set(("spec", "matchingPrecedence"), 1),
        "spec.matchingPrecedence: only the FlowSchema named 'exempt'",
    ),
    (
        "no priority level",
        _delete(("spec", "priorityLevelConfiguration")),
        "spec.priorityLevelConfiguration: required field missing",
    ),
    (
        "empty priority level",
        _set(("spec", "priorityLevelConfiguration", "name"), ""),
        "spec.priorityLevelConfiguration.name: must name",
    ),
    (
        "bad distinguisher",
        _set(("spec", "distinguisherMethod", "type"), "ByGroup"),
        "spec.distinguisherMethod.type:",
    ),
    ("unknown subject kind", _set(S0 + ("kind",), "Robot"), f"{RULE}.subjects[0].kind:"),
    (
        "User without user",
        _delete(S0 + ("user",)),
        f"{RULE}.subjects[0].user: is required when kind is User",
    ),
    (
        "User with group too",
        _set(S0 + ("group",), {"name": "g"}),
        f"{RULE}.subjects[0].group: must not be set",
    ),
    (
        "empty user name",
        _set(S0 + ("user",), {"name": ""}),
        f"{RULE}.subjects[0].user.name: is required",
    ),
    (
        "SA without namespace",
        _set(S0, {"kind": "ServiceAccount", "serviceAccount": {"name": "x"}}),
        f"{RULE}.subjects[0].serviceAccount.namespace: is required",
    ),
    (
        "SA without name",
        _set(S0, {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ns"}}),
        f"{RULE}.subjects[0].serviceAccount.name: is required",
    ),
    ("Group without group", _set(S0, {"kind": "Group"}), f"{RULE}.subjects[0].group: is required"),
    (
        "no subjects",
        _set(R0 + ("subjects",), []),
        f"{RULE}.subjects: must contain at least one subject",
    ),
    (
        "no rules at all",
        lambda o: o["spec"]["rules"][0].update(resourceRules=[], nonResourceRules=[]),
        f"{RULE}: needs at least one of resourceRules and nonResourceRules",
    ),
    (
        "no verbs",
        _set(RR + ("verbs",), []),
        f"{RULE}.resourceRules[0].verbs: must contain at least one verb",
    ),
    (
        "wildcard verb mixed",
        _set(RR + ("verbs",), ["*", "get"]),
        f"{RULE}.resourceRules[0].verbs: '*' must be the only verb",
    ),
    (
        "unsupported verb",
        _set(RR + ("verbs",), ["frobnicate"]),
        f"{RULE}.resourceRules[0].verbs: unsupported verb 'frobnicate'",
    ),
    (
        "no api groups",
        _set(RR + ("apiGroups",), []),
        f"{RULE}.resourceRules[0].apiGroups: must contain at least one",
    ),
    (
        "wildcard group mixed",
        _set(RR + ("apiGroups",), ["*", "apps"]),
        f"{RULE}.resourceRules[0].apiGroups: '*' must be the only",
    ),
    (
        "no resources",
        _set(RR + ("resources",), []),
        f"{RULE}.resourceRules[0].resources: must contain at least one",
    ),
    (
        "wildcard resource mixed",
        _set(RR + ("resources",), ["pods", "*"]),
        f"{RULE}.resourceRules[0].resources: '*' must be the only",
    ),
    (
        "no namespaces, not cluster",
        _set(RR + ("namespaces",), []),
        f"{RULE}.resourceRules[0].namespaces: must contain at least one",
    ),
    (
        "wildcard namespace mixed",
        _set(RR + ("namespaces",), ["*", "default"]),
        f"{RULE}.resourceRules[0].namespaces: '*' must be the only",
    ),
    (
        "bad namespace",
        _set(RR + ("namespaces",), ["Bad_NS"]),
        f"{RULE}.resourceRules[0].namespaces[0]:",
    ),
    (
        "clusterScope as string",
        _set(RR + ("clusterScope",), "yes"),
        f"{RULE}.resourceRules[0].clusterScope:",
    ),
    (
        "non-resource no verbs",
        _set(NR + ("verbs",), []),
        f"{RULE}.nonResourceRules[0].verbs: must contain at least one verb",
    ),
    (
        "non-resource no URLs",
        _set(NR + ("nonResourceURLs",), []),
        f"{RULE}.nonResourceRules[0].nonResourceURLs: must contain",
    ),
    (
        "URL without slash",
        _set(NR + ("nonResourceURLs",), ["healthz"]),
        f"{RULE}.nonResourceRules[0].nonResourceURLs[0]: 'healthz' must start",
    ),
    (
        "URL inner wildcard",
        _set(NR + ("nonResourceURLs",), ["/a/*/b"]),
        f"{RULE}.nonResourceRules[0].nonResourceURLs[0]:",
    ),
    (
        "URL double slash",
        _set(NR + ("nonResourceURLs",), ["/a//b"]),
        f"{RULE}.nonResourceRules[0].nonResourceURLs[0]:",
    ),
    (
        "typo in rule",
        _set(RR + ("namespace",), ["x"]),
        f"{RULE}.resourceRules[0].namespace: unknown field",
    ),
]


@pytest.mark.parametrize(
    "mutate, expected", [case[1:] for case in FS_CASES], ids=[case[0] for case in FS_CASES]
)
def test_flow_schema_validation(mutate, expected):
    obj = flow_schema()
    mutate(obj)
    message = error_of(obj)
    assert expected in message
    assert "\n" not in message


def test_valid_url_forms_are_accepted():
    obj = flow_schema()
    obj["spec"]["rules"][0]["nonResourceRules"][0]["nonResourceURLs"] = ["/", "/healthz", "/apis/*"]
    parse_objects(kube_list(obj))


def test_cluster_scope_rule_needs_no_namespaces():
    obj = flow_schema()
    rule = obj["spec"]["rules"][0]["resourceRules"][0]
    rule["namespaces"] = []
    rule["clusterScope"] = True
    parse_objects(kube_list(obj))


# --- error messages ----------------------------------------------------------------------------


def test_error_names_file_item_object_and_field(tmp_path):
    path = tmp_path / "objects.yaml"
    items = [
        limited_pl("a"),
        limited_pl("b"),
        flow_schema("f", "a"),
        limited_pl("foo", hand_size=65),
    ]
    path.write_text(kube_list(*items))
    with pytest.raises(ConfigError) as caught:
        load_objects(path)
    assert str(caught.value).startswith(
        f'{path}: items[3] (PriorityLevelConfiguration "foo"): '
        f"spec.limited.limitResponse.queuing.handSize: must be <= queues (64)"
    )


def test_error_in_second_document_names_it():
    text = (
        yaml.safe_dump(limited_pl("a"))
        + "---\n"
        + yaml.safe_dump(flow_schema("bad", "a", precedence=0.5))
    )
    with pytest.raises(
        ConfigError, match=r'^documents\[1\] \(FlowSchema "bad"\): spec\.matchingPrecedence:'
    ):
        parse_objects(text)


def test_document_index_counts_empty_documents():
    text = (
        yaml.safe_dump(limited_pl("a"))
        + "---\n---\n"
        + yaml.safe_dump(limited_pl("b", hand_size=99))
    )
    with pytest.raises(ConfigError, match=r'^documents\[2\] \(PriorityLevelConfiguration "b"\)'):
        parse_objects(text)


def test_malformed_yaml_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: v1\nitems:\n- kind: FlowSchema\n  metadata: [unclosed\n")
    with pytest.raises(ConfigError) as caught:
        load_objects(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: invalid YAML at line ")
    assert "\n" not in message


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_objects(tmp_path / "nope.yaml")


def test_config_error_is_a_user_error():
    assert issubclass(ConfigError, SimapfError)


def test_unknown_kind_in_list():
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    with pytest.raises(
        ConfigError,
        match=r"^items\[1\] \(object \"cm\"\): kind: 'ConfigMap'; expected FlowSchema or Prior",
    ):
        parse_objects(kube_list(limited_pl("a"), config_map))


def test_wrong_api_version():
    obj = limited_pl()
    obj["apiVersion"] = "flowcontrol.apiserver.k8s.io/v1beta3"
    assert "apiVersion: must be flowcontrol.apiserver.k8s.io/v1" in error_of(obj)


def test_non_mapping_item():
    with pytest.raises(ConfigError, match=r"items\[0\]: expected an API object"):
        parse_objects(kube_list("just a string"))


def test_duplicate_names_are_rejected():
    with pytest.raises(
        ConfigError,
        match=r'items\[1\] \(PriorityLevelConfiguration "a"\): metadata.name: duplicate',
    ):
        parse_objects(kube_list(limited_pl("a"), limited_pl("a")))
    # The same name in different kinds is fine (bootstrap does it all the time).
    parse_objects(kube_list(limited_pl("a"), flow_schema("a", "a")))


def test_several_problems_are_counted_in_one_line():
    obj = limited_pl()
    obj["spec"]["limited"]["lendablePercent"] = 200
    obj["spec"]["limited"]["borrowingLimitPercent"] = -1
    message = error_of(obj)
    assert "spec.limited.lendablePercent" in message and "(and 1 more problem)" in message


# --- effective configuration -------------------------------------------------------------------


def test_dangling_flow_schema_is_dropped_with_warning(caplog):
    objects = bootstrap_objects().overlay(
        parse_objects(kube_list(flow_schema("orphan", "no-such-level")))
    )
    with caplog.at_level(logging.WARNING, logger="simapf.apf.config"):
        config = build_effective_config(objects)
    assert "orphan" not in [fs.name for fs in config.flow_schemas]
    assert config.dangling == ("orphan",)
    assert any("orphan" in w and "no-such-level" in w for w in config.warnings)
    assert any("orphan" in record.getMessage() for record in caplog.records)


def test_mandatory_objects_are_inserted_when_missing():
    objects = parse_objects(kube_list(limited_pl("mine"), flow_schema("mine", "mine")))
    config = build_effective_config(objects)
    assert [fs.name for fs in config.flow_schemas] == ["exempt", "mine", "catch-all"]
    assert set(config.priority_levels) == {"exempt", "catch-all", "mine"}
    assert set(config.inserted) == {
        "FlowSchema/exempt",
        "FlowSchema/catch-all",
        "PriorityLevelConfiguration/exempt",
        "PriorityLevelConfiguration/catch-all",
    }
    # The inserted ones are the built-in mandatory objects, unchanged.
    assert (
        config.priority_levels["catch-all"].spec
        == next(pl for pl in mandatory_objects().priority_levels if pl.name == "catch-all").spec
    )


def test_flow_schema_naming_a_mandatory_level_is_not_dangling_when_that_level_is_supplied():
    objects = parse_objects(kube_list(flow_schema("to-exempt", "exempt", precedence=50)))
    config = build_effective_config(objects)
    assert config.dangling == ()
    assert "to-exempt" in [fs.name for fs in config.flow_schemas]


def test_precedence_ties_are_broken_by_name():
    objects = parse_objects(
        kube_list(
            flow_schema("zeta", "global-default", 700),
            flow_schema("alpha", "global-default", 700),
            flow_schema("mid", "global-default", 600),
        )
    )
    config = build_effective_config(bootstrap_objects().overlay(objects))
    names = [fs.name for fs in config.flow_schemas]
    assert (
        names.index("mid")
        < names.index("alpha")
        < names.index("zeta")
        < names.index("kube-controller-manager")
    )


def test_changed_mandatory_object_is_kept_with_warning():
    catch_all = limited_pl("catch-all", shares=50)
    config = build_effective_config(parse_objects(kube_list(catch_all)))
    assert config.priority_levels["catch-all"].nominal_concurrency_shares == 50
    assert any("catch-all" in w and "mandatory" in w for w in config.warnings)


def test_exempt_shares_may_be_tuned_without_warning():
    exempt = {
        "apiVersion": API,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "exempt"},
        "spec": {
            "type": "Exempt",
            "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 20},
        },
    }
    config = build_effective_config(parse_objects(kube_list(exempt)))
    assert config.priority_levels["exempt"].nominal_concurrency_shares == 10
    assert config.warnings == ()


def test_overlay_replaces_by_kind_and_name():
    boot = bootstrap_objects()
    bigger = copy.deepcopy(limited_pl("global-default", queues=256, hand_size=7))
    merged = boot.overlay(parse_objects(kube_list(bigger)))
    levels = {pl.name: pl for pl in merged.priority_levels}
    assert len(levels) == len(boot.priority_levels)
    assert levels["global-default"].queuing.queues == 256
    assert len(merged.flow_schemas) == len(boot.flow_schemas)
