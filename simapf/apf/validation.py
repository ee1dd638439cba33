"""The apiserver's validation rules for APF objects, as (field path, message) pairs.

A configuration simapf accepts is one a cluster would accept too: the rules of
kubernetes pkg/apis/flowcontrol/validation, reported in the order upstream reports them.
"""

from __future__ import annotations

import re

from simapf.apf.objects import (
    EXEMPT,
    ExemptPriorityLevelConfiguration,
    FlowSchema,
    NonResourcePolicyRule,
    PolicyRulesWithSubjects,
    PriorityLevelConfiguration,
    QueuingConfiguration,
    ResourcePolicyRule,
    ServiceAccountSubject,
    Subject,
)
from simapf.apf.shuffle import dealer_problem

# Validation limits (kubernetes pkg/apis/flowcontrol/validation).
MAX_MATCHING_PRECEDENCE = 10000
MAX_QUEUES = 10_000_000
SUPPORTED_RULE_VERBS = frozenset(
    {"get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy"}
)
WILDCARD = "*"

# Validation findings: (field path, message) pairs, in the order upstream would report them.
Problems = list[tuple[str, str]]

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")



# ---------------------------------------------------------------------------------------------
# Validation: the apiserver's rules for these objects, as (field path, message) pairs.


def validate_flow_schema(fs: FlowSchema) -> Problems:
    problems: Problems = []
    _check_object_name(fs.name, problems)
    spec = fs.spec
    precedence = spec.matching_precedence
    if precedence <= 0:
        problems.append(("spec.matchingPrecedence", f"must be positive, got {precedence}"))
    elif precedence > MAX_MATCHING_PRECEDENCE:
        problems.append(
            (
                "spec.matchingPrecedence",
                f"must be at most {MAX_MATCHING_PRECEDENCE}, got {precedence}",
            )
        )
    elif precedence == 1 and fs.name != EXEMPT:
        problems.append(
            (
                "spec.matchingPrecedence",
                f"only the FlowSchema named {EXEMPT!r} may have precedence 1",
            )
        )
    pl_name = spec.priority_level_configuration.name
    if not pl_name:
        problems.append(("spec.priorityLevelConfiguration.name", "must name a priority level"))
    elif not _is_dns_subdomain(pl_name):
        problems.append(
            ("spec.priorityLevelConfiguration.name", f"{pl_name!r} is not a valid object name")
        )
    for index, rule in enumerate(spec.rules):
        _check_policy_rules(rule, f"spec.rules[{index}]", problems)
    return problems


def _check_object_name(name: str, problems: Problems) -> None:
    if not _is_dns_subdomain(name):
        problems.append(
            ("metadata.name", f"{name!r} must be a lower-case DNS subdomain (a-z, 0-9, '-', '.')")
        )


def _is_dns_subdomain(value: str) -> bool:
    return len(value) <= 253 and _DNS_SUBDOMAIN_RE.fullmatch(value) is not None


def _check_policy_rules(rule: PolicyRulesWithSubjects, path: str, problems: Problems) -> None:
    if not rule.subjects:
        problems.append((f"{path}.subjects", "must contain at least one subject"))
    for index, subject in enumerate(rule.subjects):
        _check_subject(subject, f"{path}.subjects[{index}]", problems)
    if not rule.resource_rules and not rule.non_resource_rules:
        problems.append((path, "needs at least one of resourceRules and nonResourceRules"))
    for index, resource_rule in enumerate(rule.resource_rules):
        _check_resource_rule(resource_rule, f"{path}.resourceRules[{index}]", problems)
    for index, non_resource_rule in enumerate(rule.non_resource_rules):
        _check_non_resource_rule(non_resource_rule, f"{path}.nonResourceRules[{index}]", problems)


_SUBJECT_FIELDS = {"User": "user", "Group": "group", "ServiceAccount": "serviceAccount"}


def _check_subject(subject: Subject, path: str, problems: Problems) -> None:
    present = {
        "user": subject.user,
        "group": subject.group,
        "serviceAccount": subject.service_account,
    }
    wanted = _SUBJECT_FIELDS[subject.kind]
    for key, value in present.items():
        if key != wanted and value is not None:
            problems.append((f"{path}.{key}", f"must not be set when kind is {subject.kind}"))
    detail = present[wanted]
    if detail is None:
        problems.append((f"{path}.{wanted}", f"is required when kind is {subject.kind}"))
        return
    if isinstance(detail, ServiceAccountSubject):
        if not detail.name:
            problems.append((f"{path}.serviceAccount.name", "is required"))
        elif detail.name != WILDCARD and not _is_dns_subdomain(detail.name):
            problems.append(
                (
                    f"{path}.serviceAccount.name",
                    f"{detail.name!r} must be '*' or a valid service account name",
                )
            )
        if not detail.namespace:
            problems.append((f"{path}.serviceAccount.namespace", "is required"))
        elif not _is_dns_label(detail.namespace):
            problems.append(
                (
                    f"{path}.serviceAccount.namespace",
                    f"{detail.namespace!r} is not a valid namespace name",
                )
            )
    elif not detail.name:
        problems.append((f"{path}.{wanted}.name", "is required"))


def _is_dns_label(value: str) -> bool:
    return len(value) <= 63 and _DNS_LABEL_RE.fullmatch(value) is not None


def _check_verbs(verbs: tuple[str, ...], path: str, problems: Problems) -> None:
    if not verbs:
        problems.append((path, "must contain at least one verb"))
    elif WILDCARD in verbs:
        if len(verbs) > 1:
            problems.append((path, "'*' must be the only verb when present"))
    else:
        unsupported = sorted(set(verbs) - SUPPORTED_RULE_VERBS)
        if unsupported:
            problems.append(
                (
                    path,
                    (
                        f"unsupported verb {unsupported[0]!r}; "
                        f"use '*' or some of {sorted(SUPPORTED_RULE_VERBS)}"
                    ),
                )
            )


def _check_wildcard_alone(
    values: tuple[str, ...], path: str, what: str, problems: Problems
) -> None:
    # Matching treats '*' as "everything" only when it is the sole entry, so mixing is an error.
    if len(values) > 1 and WILDCARD in values:
        problems.append((path, f"'*' must be the only {what} when present"))


def _check_resource_rule(rule: ResourcePolicyRule, path: str, problems: Problems) -> None:
    _check_verbs(rule.verbs, f"{path}.verbs", problems)
    if not rule.api_groups:
        problems.append(
            (f"{path}.apiGroups", 'must contain at least one API group ("" is the core group)')
        )
    _check_wildcard_alone(rule.api_groups, f"{path}.apiGroups", "API group", problems)
    if not rule.resources:
        problems.append((f"{path}.resources", "must contain at least one resource"))
    _check_wildcard_alone(rule.resources, f"{path}.resources", "resource", problems)
    if not rule.namespaces and not rule.cluster_scope:
        problems.append(
            (
                f"{path}.namespaces",
                "must contain at least one namespace unless clusterScope is true",
            )
        )
    _check_wildcard_alone(rule.namespaces, f"{path}.namespaces", "namespace", problems)
    if WILDCARD not in rule.namespaces:
        for index, namespace in enumerate(rule.namespaces):
            if not _is_dns_label(namespace):
                problems.append(
                    (
                        f"{path}.namespaces[{index}]",
                        f"{namespace!r} must be '*' or a valid namespace name",
                    )
                )


def _check_non_resource_rule(rule: NonResourcePolicyRule, path: str, problems: Problems) -> None:
    _check_verbs(rule.verbs, f"{path}.verbs", problems)
    urls = rule.non_resource_urls
    if not urls:
        problems.append((f"{path}.nonResourceURLs", "must contain at least one URL path"))
        return
    _check_wildcard_alone(urls, f"{path}.nonResourceURLs", "URL", problems)
    if WILDCARD in urls:
        return
    for index, url in enumerate(urls):
        problem = _url_path_problem(url)
        if problem:
            problems.append((f"{path}.nonResourceURLs[{index}]", f"{url!r} {problem}"))


def _url_path_problem(url: str) -> str | None:
    if url == "/":
        return None
    if not url.startswith("/"):
        return "must start with '/'"
    if " " in url:
        return "must not contain spaces"
    if "//" in url:
        return "must not contain '//'"
    stars = url.count("*")
    if stars > 1 or (stars == 1 and not url.endswith("/*")):
        return "may only use '*' as a final '/*'"
    return None


def validate_priority_level(pl: PriorityLevelConfiguration) -> Problems:
    problems: Problems = []
    _check_object_name(pl.name, problems)
    spec = pl.spec
    if (pl.name == EXEMPT) != (spec.type == "Exempt"):
        problems.append(
            ("spec.type", f"must be Exempt if and only if the name is {EXEMPT!r} (got {spec.type})")
        )
    if spec.type == "Exempt":
        if spec.limited is not None:
            problems.append(("spec.limited", "must not be set when type is Exempt"))
        exempt = spec.exempt or ExemptPriorityLevelConfiguration()
        _check_shares_and_lending(
            exempt.nominal_concurrency_shares, exempt.lendable_percent, "spec.exempt", problems
        )
        return problems
    if spec.exempt is not None:
        problems.append(("spec.exempt", "must not be set when type is Limited"))
    limited = spec.limited
    if limited is None:
        problems.append(("spec.limited", "is required when type is Limited"))
        return problems
    _check_shares_and_lending(
        limited.nominal_concurrency_shares, limited.lendable_percent, "spec.limited", problems
    )
    if limited.borrowing_limit_percent is not None and limited.borrowing_limit_percent < 0:
        problems.append(
            (
                "spec.limited.borrowingLimitPercent",
                f"must not be negative, got {limited.borrowing_limit_percent}",
            )
        )
    response = limited.limit_response
    queuing_path = "spec.limited.limitResponse.queuing"
    if response.type == "Reject":
        if response.queuing is not None:
            problems.append((queuing_path, "must not be set when limitResponse.type is Reject"))
    elif response.queuing is None:
        problems.append((queuing_path, "is required when limitResponse.type is Queue"))
    else:
        _check_queuing(response.queuing, queuing_path, problems)
    return problems


def _check_shares_and_lending(
    shares: int, lendable_percent: int, path: str, problems: Problems
) -> None:
    if shares < 0:
        problems.append((f"{path}.nominalConcurrencyShares", f"must not be negative, got {shares}"))
    if not 0 <= lendable_percent <= 100:
        problems.append(
            (f"{path}.lendablePercent", f"must be between 0 and 100, got {lendable_percent}")
        )


def _check_queuing(queuing: QueuingConfiguration, path: str, problems: Problems) -> None:
    if queuing.queue_length_limit <= 0:
        problems.append(
            (f"{path}.queueLengthLimit", f"must be positive, got {queuing.queue_length_limit}")
        )
    queues, hand_size = queuing.queues, queuing.hand_size
    if queues <= 0:
        problems.append((f"{path}.queues", f"must be positive, got {queues}"))
    elif queues > MAX_QUEUES:
        problems.append((f"{path}.queues", f"must be at most {MAX_QUEUES}, got {queues}"))
    if hand_size <= 0:
        problems.append((f"{path}.handSize", f"must be positive, got {hand_size}"))
    elif queues > 0 and hand_size > queues:
        problems.append((f"{path}.handSize", f"must be <= queues ({queues}), got {hand_size}"))
    elif queues > 0:
        problem = dealer_problem(queues, hand_size)
        if problem is not None:
            problems.append((f"{path}.handSize", problem))
