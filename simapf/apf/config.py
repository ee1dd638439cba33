"""APF configuration objects: FlowSchemas and PriorityLevelConfigurations.

The models read `flowcontrol.apiserver.k8s.io/v1` objects exactly as `kubectl get flowschemas,
prioritylevelconfigurations -o yaml` prints them (metadata and status are accepted and
ignored), fill in the API defaults, and check the rules the apiserver's validation enforces,
so a configuration the simulator accepts is one a cluster would accept too (reference §1).

`build_effective_config` then does what the APF controller does with the objects it sees:
supply the mandatory ones, drop FlowSchemas whose priority level is missing, and put the rest in
matching order.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from simapf.apf.shuffle import dealer_problem
from simapf.errors import ConfigError
from simapf.files import MAX_YAML_DEPTH, check_yaml_size
from simapf.messages import describe

log = logging.getLogger(__name__)

API_VERSION = "flowcontrol.apiserver.k8s.io/v1"
FLOW_SCHEMA = "FlowSchema"
PRIORITY_LEVEL = "PriorityLevelConfiguration"
LIST_KINDS = frozenset({"List", "FlowSchemaList", "PriorityLevelConfigurationList"})

EXEMPT = "exempt"  # name of the mandatory exempt FlowSchema and priority level
CATCH_ALL = "catch-all"  # name of the mandatory catch-all FlowSchema and priority level

# API defaults (kubernetes pkg/apis/flowcontrol/v1/defaults.go, reference §1.2, §8).
DEFAULT_MATCHING_PRECEDENCE = 1000
DEFAULT_NOMINAL_CONCURRENCY_SHARES = 30
DEFAULT_QUEUES = 64
DEFAULT_HAND_SIZE = 8
DEFAULT_QUEUE_LENGTH_LIMIT = 50

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
# Models. Field names are snake_case; YAML keys are the API's camelCase.


class _Spec(BaseModel):
    """Part of a spec: unknown keys are typos, so they are errors."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    # API keys (aliases) whose zero value means "use the default", as in upstream defaulting.
    _zero_means_default: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _drop_unset(cls, data: Any) -> Any:
        # JSON null decodes to Go's nil/zero, which defaulting then fills in: treat it as absent.
        if not isinstance(data, dict):
            return data
        return {
            key: value
            for key, value in data.items()
            if value is not None
            and not (key in cls._zero_means_default and type(value) is int and value == 0)
        }


class _Lenient(_Spec):
    """Metadata and whole objects: keys we do not model (uid, managedFields, status) are ignored."""

    model_config = ConfigDict(extra="ignore")


class ObjectMeta(_Lenient):
    name: StrictStr
    annotations: dict[StrictStr, StrictStr] = Field(default_factory=dict)


class UserSubject(_Spec):
    name: StrictStr = ""


class GroupSubject(_Spec):
    name: StrictStr = ""


class ServiceAccountSubject(_Spec):
    namespace: StrictStr = ""
    name: StrictStr = ""


class Subject(_Spec):
    kind: Literal["User", "Group", "ServiceAccount"]
    user: UserSubject | None = None
    group: GroupSubject | None = None
    service_account: ServiceAccountSubject | None = None


class ResourcePolicyRule(_Spec):
    verbs: tuple[StrictStr, ...] = ()
    api_groups: tuple[StrictStr, ...] = Field(default=(), alias="apiGroups")
    resources: tuple[StrictStr, ...] = ()
    cluster_scope: StrictBool = False
    namespaces: tuple[StrictStr, ...] = ()


class NonResourcePolicyRule(_Spec):
    verbs: tuple[StrictStr, ...] = ()
    non_resource_urls: tuple[StrictStr, ...] = Field(default=(), alias="nonResourceURLs")


class PolicyRulesWithSubjects(_Spec):
    subjects: tuple[Subject, ...] = ()
    resource_rules: tuple[ResourcePolicyRule, ...] = ()
    non_resource_rules: tuple[NonResourcePolicyRule, ...] = ()


class FlowDistinguisherMethod(_Spec):
    type: Literal["ByUser", "ByNamespace"]


class PriorityLevelReference(_Spec):
    name: StrictStr = ""


class FlowSchemaSpec(_Spec):
    _zero_means_default = frozenset({"matchingPrecedence"})

    priority_level_configuration: PriorityLevelReference
    matching_precedence: StrictInt = DEFAULT_MATCHING_PRECEDENCE
    distinguisher_method: FlowDistinguisherMethod | None = None
    rules: tuple[PolicyRulesWithSubjects, ...] = ()


class QueuingConfiguration(_Spec):
    _zero_means_default = frozenset({"queues", "handSize", "queueLengthLimit"})

    queues: StrictInt = DEFAULT_QUEUES
    hand_size: StrictInt = DEFAULT_HAND_SIZE
    queue_length_limit: StrictInt = DEFAULT_QUEUE_LENGTH_LIMIT


class LimitResponse(_Spec):
    type: Literal["Queue", "Reject"]
    queuing: QueuingConfiguration | None = None


class LimitedPriorityLevelConfiguration(_Spec):
    # nil means 30; an explicit 0 is kept (a level with no nominal seats).
    nominal_concurrency_shares: StrictInt = DEFAULT_NOMINAL_CONCURRENCY_SHARES
    lendable_percent: StrictInt = 0
    borrowing_limit_percent: StrictInt | None = None  # None: no limit on borrowing
    limit_response: LimitResponse


class ExemptPriorityLevelConfiguration(_Spec):
    nominal_concurrency_shares: StrictInt = 0
    lendable_percent: StrictInt = 0


class PriorityLevelConfigurationSpec(_Spec):
    type: Literal["Exempt", "Limited"]
    limited: LimitedPriorityLevelConfiguration | None = None
    exempt: ExemptPriorityLevelConfiguration | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_exempt_block(cls, data: Any) -> Any:
        # The exempt level's settings all default to zero, so an absent block means zeros.
        if isinstance(data, dict) and data.get("type") == "Exempt" and data.get("exempt") is None:
            data = {**data, "exempt": {}}
        return data


class FlowSchema(_Lenient):
    api_version: Literal["flowcontrol.apiserver.k8s.io/v1"] = API_VERSION
    kind: Literal["FlowSchema"] = FLOW_SCHEMA
    metadata: ObjectMeta
    spec: FlowSchemaSpec

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def priority_level_name(self) -> str:
        return self.spec.priority_level_configuration.name

    @property
    def matching_precedence(self) -> int:
        return self.spec.matching_precedence

    @property
    def distinguisher_type(self) -> str | None:
        """ByUser, ByNamespace, or None (all requests of the schema form one flow)."""
        method = self.spec.distinguisher_method
        return None if method is None else method.type


class PriorityLevelConfiguration(_Lenient):
    api_version: Literal["flowcontrol.apiserver.k8s.io/v1"] = API_VERSION
    kind: Literal["PriorityLevelConfiguration"] = PRIORITY_LEVEL
    metadata: ObjectMeta
    spec: PriorityLevelConfigurationSpec

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def is_exempt(self) -> bool:
        return self.spec.type == "Exempt"

    @property
    def queuing(self) -> QueuingConfiguration | None:
        """The queuing settings, or None for Exempt levels and Limited levels that Reject."""
        limited = self.spec.limited
        return None if limited is None else limited.limit_response.queuing

    @property
    def nominal_concurrency_shares(self) -> int:
        settings = self.spec.limited if self.spec.limited is not None else self.spec.exempt
        return 0 if settings is None else settings.nominal_concurrency_shares

    @property
    def lendable_percent(self) -> int:
        settings = self.spec.limited if self.spec.limited is not None else self.spec.exempt
        return 0 if settings is None else settings.lendable_percent

    @property
    def borrowing_limit_percent(self) -> int | None:
        """None means no limit; exempt levels have no such field and count as unlimited."""
        return None if self.spec.limited is None else self.spec.limited.borrowing_limit_percent


@dataclass(frozen=True)
class APFObjects:
    """A set of FlowSchemas and priority levels, as found in the input (no order implied)."""

    flow_schemas: tuple[FlowSchema, ...] = ()
    priority_levels: tuple[PriorityLevelConfiguration, ...] = ()

    def overlay(self, other: APFObjects) -> APFObjects:
        """These objects with those of `other` added, replacing any of the same kind and name."""
        fs_names = {fs.name for fs in other.flow_schemas}
        pl_names = {pl.name for pl in other.priority_levels}
        return APFObjects(
            flow_schemas=tuple(fs for fs in self.flow_schemas if fs.name not in fs_names)
            + other.flow_schemas,
            priority_levels=tuple(pl for pl in self.priority_levels if pl.name not in pl_names)
            + other.priority_levels,
        )


# ---------------------------------------------------------------------------------------------
# Loading


def load_objects(source: str | os.PathLike[str]) -> APFObjects:
    """Read FlowSchemas and priority levels from a file path or from YAML text.

    A `Path` (or any path-like) is read from disk; a `str` is YAML text if it contains a
    newline and a file path otherwise. Accepted shapes: a `kind: List` with items (what kubectl
    prints), several YAML documents, single objects, or any mix of those.
    Raises ConfigError with a one-line message naming the file, the object and the field.
    """
    if isinstance(source, str) and "\n" in source:
        return parse_objects(source)
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read: {reason}") from None
    return parse_objects(text, source_name=str(path))


def parse_objects(text: str, source_name: str | None = None) -> APFObjects:
    """Parse YAML text holding APF objects; `source_name` prefixes error messages."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ConfigError(_prefix(source_name) + _describe_yaml_error(exc)) from None
    except RecursionError:
        raise ConfigError(f"{_prefix(source_name)}nested more than {MAX_YAML_DEPTH} levels deep") from None
    check_yaml_size(documents, source_name or "<APF objects>")
    return objects_from_data(documents, source_name=source_name, multi_document=True)


def objects_from_data(
    data: Any, source_name: str | None = None, *, multi_document: bool = False
) -> APFObjects:
    """Build APFObjects from already-parsed YAML/JSON data (a dict, or a list of them).

    With `multi_document`, `data` is the list of YAML documents of one file; otherwise a list is
    taken as a list of objects. Meant for scenario files that embed APF objects.
    """
    flow_schemas: list[FlowSchema] = []
    priority_levels: list[PriorityLevelConfiguration] = []
    seen: dict[tuple[str, str], str] = {}
    for where, item in _located_items(data, multi_document, _prefix(source_name)):
        obj = _parse_object(item, where, source_name)
        key = (obj.kind, obj.name)
        if key in seen:
            raise ConfigError(
                _prefix(source_name)
                + f"{_label(where, obj.kind, obj.name)}: metadata.name: "
                + f"duplicate {obj.kind} name (first seen at {seen[key] or 'the top level'})"
            )
        seen[key] = where
        problems = (
            validate_flow_schema(obj)
            if isinstance(obj, FlowSchema)
            else validate_priority_level(obj)
        )
        if problems:
            raise ConfigError(
                _prefix(source_name)
                + f"{_label(where, obj.kind, obj.name)}: "
                + _first_problem(problems)
            )
        if isinstance(obj, FlowSchema):
            flow_schemas.append(obj)
        else:
            priority_levels.append(obj)
    return APFObjects(tuple(flow_schemas), tuple(priority_levels))


def _located_items(data: Any, multi_document: bool, prefix: str) -> Iterator[tuple[str, Any]]:
    """Yield (where, raw object) for every object, `where` being a path like `items[3]`."""
    if multi_document:
        documents = data if isinstance(data, list) else [data]
        several = len(documents) > 1
        for index, document in enumerate(documents):
            where = f"documents[{index}]" if several else ""
            yield from _items_of_document(document, where, prefix)
    else:
        yield from _items_of_document(data, "", prefix)


def _items_of_document(document: Any, where: str, prefix: str) -> Iterator[tuple[str, Any]]:
    if document is None:  # an empty YAML document
        return
    if isinstance(document, list):
        # A bare YAML sequence of objects.
        for index, item in enumerate(document):
            yield f"{where}[{index}]", item
        return
    if isinstance(document, dict) and document.get("kind") in LIST_KINDS:
        items_path = f"{where}.items" if where else "items"
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ConfigError(f"{prefix}{items_path}: must be a list of objects")
        for index, item in enumerate(items):
            yield f"{items_path}[{index}]", item
        return
    yield where, document


def _parse_object(
    item: Any, where: str, source_name: str | None
) -> FlowSchema | PriorityLevelConfiguration:
    prefix = _prefix(source_name)
    place = where or "document"
    if not isinstance(item, dict):
        raise ConfigError(
            f"{prefix}{place}: expected an API object (a mapping), got {_type_name(item)}"
        )
    kind = item.get("kind")
    name = _name_of(item)
    model: type[FlowSchema | PriorityLevelConfiguration]
    if kind == FLOW_SCHEMA:
        model = FlowSchema
    elif kind == PRIORITY_LEVEL:
        model = PriorityLevelConfiguration
    else:
        shown = "missing" if kind is None else f"{kind!r}"
        raise ConfigError(
            f"{prefix}{_label(where, None, name)}: kind: {shown}; "
            f"expected {FLOW_SCHEMA} or {PRIORITY_LEVEL}"
        )
    api_version = item.get("apiVersion")
    if api_version != API_VERSION:
        raise ConfigError(
            f"{prefix}{_label(where, kind, name)}: apiVersion: must be {API_VERSION}, "
            f"got {api_version!r}"
        )
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        raise ConfigError(
            f"{prefix}{_label(where, kind, name)}: {describe(exc, model)}"
        ) from None


def _name_of(item: dict[str, Any]) -> str | None:
    metadata = item.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        return metadata["name"]
    return None


def _prefix(source_name: str | None) -> str:
    return f"{source_name}: " if source_name else ""


def _label(where: str, kind: str | None, name: str | None) -> str:
    what = kind or "object"
    if name is not None:
        what = f'{what} "{name}"'
    return f"{where} ({what})" if where else what


def _type_name(value: Any) -> str:
    names = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return names.get(type(value), type(value).__name__)


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"invalid YAML{where}: {problem}".split())


def _first_problem(problems: Problems) -> str:
    path, message = problems[0]
    text = f"{path}: {message}"
    if len(problems) > 1:
        extra = len(problems) - 1
        text += f" (and {extra} more problem{'s' if extra > 1 else ''})"
    return text


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


# ---------------------------------------------------------------------------------------------
# The built-in configuration


@functools.cache
def bootstrap_objects() -> APFObjects:
    """The v1.37 bootstrap configuration: mandatory and suggested objects (reference §1.3, §1.4).

    Read from the packaged `bootstrap.yaml`, which is written the way `kubectl get flowschemas,
    prioritylevelconfigurations -o yaml` prints these objects from a fresh cluster.
    """
    text = resources.files("simapf.apf").joinpath("bootstrap.yaml").read_text(encoding="utf-8")
    return parse_objects(text, source_name="simapf/apf/bootstrap.yaml")


def mandatory_objects() -> APFObjects:
    """The `exempt` and `catch-all` FlowSchemas and priority levels the apiserver always keeps."""
    boot = bootstrap_objects()
    return APFObjects(
        tuple(fs for fs in boot.flow_schemas if fs.name in (EXEMPT, CATCH_ALL)),
        tuple(pl for pl in boot.priority_levels if pl.name in (EXEMPT, CATCH_ALL)),
    )


# ---------------------------------------------------------------------------------------------
# The configuration the APF controller ends up using


@dataclass(frozen=True)
class EffectiveConfig:
    """What the APF controller works with after digesting a set of objects.

    `flow_schemas` are in matching order; `priority_levels` maps names to levels;
    `dangling` names the FlowSchemas ignored because their priority level does not exist;
    `inserted` names the mandatory objects supplied ("FlowSchema/exempt", ...);
    `warnings` are the messages also sent to the log.
    """

    flow_schemas: tuple[FlowSchema, ...]
    priority_levels: Mapping[str, PriorityLevelConfiguration]
    dangling: tuple[str, ...] = ()
    inserted: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def build_effective_config(objects: APFObjects) -> EffectiveConfig:
    """Digest objects the way the apiserver does (reference §1.1, §1.5).

    Missing mandatory objects are added first, as the apiserver's bootstrap ensurer creates
    them as real objects, so they take part in the dangling check and the sort like any other.
    FlowSchemas naming a missing priority level are ignored (upstream sets their Dangling
    condition); the rest are sorted by (matchingPrecedence, name). A mandatory object whose spec
    differs from the built-in one is kept, with a warning, since a real apiserver would refuse
    or overwrite it (except the exempt level's shares and lendable percent).
    """
    warnings: list[str] = []
    inserted: list[str] = []
    mandatory = mandatory_objects()
    flow_schemas = list(objects.flow_schemas)
    priority_levels = {pl.name: pl for pl in objects.priority_levels}

    for pl in mandatory.priority_levels:
        given = priority_levels.get(pl.name)
        if given is None:
            priority_levels[pl.name] = pl
            inserted.append(f"{PRIORITY_LEVEL}/{pl.name}")
        elif _differs_from_mandatory(given, pl):
            warnings.append(
                f"{PRIORITY_LEVEL} {pl.name!r} differs from the mandatory one; "
                "a real apiserver would not allow that"
            )
    present = {fs.name for fs in flow_schemas}
    for fs in mandatory.flow_schemas:
        if fs.name not in present:
            flow_schemas.append(fs)
            inserted.append(f"{FLOW_SCHEMA}/{fs.name}")
        elif next(f for f in flow_schemas if f.name == fs.name).spec != fs.spec:
            warnings.append(
                f"{FLOW_SCHEMA} {fs.name!r} differs from the mandatory one; "
                "a real apiserver would not allow that"
            )

    dangling: list[str] = []
    usable: list[FlowSchema] = []
    for fs in flow_schemas:
        if fs.priority_level_name in priority_levels:
            usable.append(fs)
        else:
            dangling.append(fs.name)
            warnings.append(
                f"FlowSchema {fs.name!r} is ignored: its priority level "
                f"{fs.priority_level_name!r} does not exist"
            )
    usable.sort(key=lambda fs: (fs.matching_precedence, fs.name))
    for message in warnings:
        log.warning("%s", message)
    return EffectiveConfig(
        flow_schemas=tuple(usable),
        priority_levels=dict(sorted(priority_levels.items())),
        dangling=tuple(dangling),
        inserted=tuple(inserted),
        warnings=tuple(warnings),
    )


def _differs_from_mandatory(
    given: PriorityLevelConfiguration, mandatory: PriorityLevelConfiguration
) -> bool:
    if given.name == EXEMPT:
        # Operators may tune the exempt level's shares and lendable percent.
        return given.spec.model_copy(update={"exempt": None}) != mandatory.spec.model_copy(
            update={"exempt": None}
        )
    return given.spec != mandatory.spec
