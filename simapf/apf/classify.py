"""Classification: which FlowSchema, priority level and flow a request belongs to.

Follows upstream's rule.go and `startRequest` (reference §1.1): FlowSchemas are tried in
(matchingPrecedence, name) order and the first whose rules match wins; a schema matches when
one of its rules has a matching subject and, for resource requests, a matching resource rule
(non-resource requests: a matching non-resource rule). If nothing matches, the catch-all schema
is used. The flow distinguisher and hash are computed only for Limited levels with more than
one queue; everywhere else they are "" and 0, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass

from simapf.apf.config import EffectiveConfig, build_effective_config, mandatory_objects
from simapf.apf.objects import (
    CATCH_ALL,
    APFObjects,
    FlowSchema,
    NonResourcePolicyRule,
    PolicyRulesWithSubjects,
    PriorityLevelConfiguration,
    ResourcePolicyRule,
)
from simapf.apf.validation import WILDCARD
from simapf.apf.shuffle import flow_hash
from simapf.apf.types import RequestAttributes

SERVICE_ACCOUNT_USER_PREFIX = "system:serviceaccount:"

# Distinct request shapes remembered before the cache starts over; enough for any realistic
# client population, small enough to bound memory.
_CACHE_LIMIT = 1 << 16


@dataclass(frozen=True, slots=True)
class Classification:
    """Where one request goes.

    `distinguisher` and `flow_hash` are already "" and 0 when the level does not use them
    (exempt levels, Reject levels, and levels with a single queue).
    """

    flow_schema: str
    priority_level: str
    distinguisher: str
    flow_hash: int
    fell_back_to_catch_all: bool = False


def level_uses_flow_hash(pl: PriorityLevelConfiguration) -> bool:
    """Whether requests to this level get a distinguisher and hash: Limited, queuing, > 1 queue."""
    queuing = pl.queuing
    return queuing is not None and queuing.queues > 1


def _any_or_set(values: tuple[str, ...]) -> frozenset[str] | None:
    """None stands for "matches everything": '*' counts only as the sole entry, as upstream."""
    if len(values) == 1 and values[0] == WILDCARD:
        return None
    return frozenset(values)


class _SubjectMatcher:
    __slots__ = ("any_user", "users", "groups", "sa_users", "sa_prefixes")

    def __init__(self, rule: PolicyRulesWithSubjects) -> None:
        self.any_user = False
        self.users: set[str] = set()
        self.groups: set[str] = set()
        self.sa_users: set[str] = set()
        self.sa_prefixes: list[str] = []
        for subject in rule.subjects:
            if subject.kind == "User" and subject.user is not None:
                if subject.user.name == WILDCARD:
                    self.any_user = True
                self.users.add(subject.user.name)
            elif subject.kind == "Group" and subject.group is not None:
                if subject.group.name == WILDCARD:
                    self.any_user = True  # '*' matches even a user without groups
                self.groups.add(subject.group.name)
            elif subject.kind == "ServiceAccount" and subject.service_account is not None:
                account = subject.service_account
                namespace_prefix = f"{SERVICE_ACCOUNT_USER_PREFIX}{account.namespace}:"
                if account.name == WILDCARD:
                    self.sa_prefixes.append(namespace_prefix)
                else:
                    self.sa_users.add(namespace_prefix + account.name)

    def matches(self, user: str, groups: tuple[str, ...]) -> bool:
        if self.any_user or user in self.users or user in self.sa_users:
            return True
        if self.groups and not self.groups.isdisjoint(groups):
            return True
        return any(user.startswith(prefix) for prefix in self.sa_prefixes)


class _ResourceMatcher:
    __slots__ = ("verbs", "api_groups", "resources", "namespaces", "cluster_scope")

    def __init__(self, rule: ResourcePolicyRule) -> None:
        self.verbs = _any_or_set(rule.verbs)
        self.api_groups = _any_or_set(rule.api_groups)
        self.resources = _any_or_set(rule.resources)
        self.namespaces = _any_or_set(rule.namespaces)
        self.cluster_scope = rule.cluster_scope

    def matches(self, attrs: RequestAttributes) -> bool:
        if self.verbs is not None and attrs.verb not in self.verbs:
            return False
        if self.resources is not None:
            resource = attrs.resource
            if attrs.subresource:
                resource = f"{resource}/{attrs.subresource}"
            if resource not in self.resources:
                return False
        if self.api_groups is not None and attrs.api_group not in self.api_groups:
            return False
        if not attrs.namespace:
            # Cluster-scoped requests (and all-namespace lists) match only cluster-scope rules.
            return self.cluster_scope
        return self.namespaces is None or attrs.namespace in self.namespaces


class _NonResourceMatcher:
    __slots__ = ("verbs", "any_path", "paths", "prefixes")

    def __init__(self, rule: NonResourcePolicyRule) -> None:
        self.verbs = _any_or_set(rule.verbs)
        self.any_path = WILDCARD in rule.non_resource_urls
        self.paths = frozenset(rule.non_resource_urls)
        # Upstream: a rule path matches itself exactly, and, with any trailing '*' removed and a
        # '/' ensured at the end, every path that starts with it. So "/healthz" also matches
        # "/healthz/etcd", but "/x/*" does not match "/x" itself.
        prefixes = []
        for url in rule.non_resource_urls:
            prefix = url.removesuffix("*")
            if not prefix.endswith("/"):
                prefix += "/"
            prefixes.append(prefix)
        self.prefixes = tuple(prefixes)

    def matches(self, attrs: RequestAttributes) -> bool:
        if self.verbs is not None and attrs.verb not in self.verbs:
            return False
        path = attrs.path
        if self.any_path or path in self.paths:
            return True
        return path.startswith(self.prefixes)


class _RuleMatcher:
    __slots__ = ("subjects", "resource_rules", "non_resource_rules")

    def __init__(self, rule: PolicyRulesWithSubjects) -> None:
        self.subjects = _SubjectMatcher(rule)
        self.resource_rules = tuple(_ResourceMatcher(r) for r in rule.resource_rules)
        self.non_resource_rules = tuple(_NonResourceMatcher(r) for r in rule.non_resource_rules)

    def matches(self, attrs: RequestAttributes) -> bool:
        if not self.subjects.matches(attrs.user, attrs.groups):
            return False
        rules = self.resource_rules if attrs.is_resource_request else self.non_resource_rules
        return any(rule.matches(attrs) for rule in rules)


class _CompiledSchema:
    __slots__ = ("name", "priority_level", "distinguisher_type", "uses_flow_hash", "rules")

    def __init__(self, fs: FlowSchema, uses_flow_hash: bool) -> None:
        self.name = fs.name
        self.priority_level = fs.priority_level_name
        self.distinguisher_type = fs.distinguisher_type
        self.uses_flow_hash = uses_flow_hash
        self.rules = tuple(_RuleMatcher(rule) for rule in fs.spec.rules)

    def matches(self, attrs: RequestAttributes) -> bool:
        return any(rule.matches(attrs) for rule in self.rules)


class Classifier:
    """Classifies requests against one configuration.

    Accepts raw `APFObjects` (digested with `build_effective_config`) or an `EffectiveConfig`.
    Build a new Classifier when the configuration changes. Results are cached per request
    shape (user, groups, verb, target, namespace, path), since a simulation sends the same
    shapes over and over.
    """

    def __init__(self, config: APFObjects | EffectiveConfig) -> None:
        if isinstance(config, APFObjects):
            config = build_effective_config(config)
        self.config = config
        levels = config.priority_levels
        self._schemas = tuple(
            _CompiledSchema(fs, level_uses_flow_hash(levels[fs.priority_level_name]))
            for fs in config.flow_schemas
        )
        catch_all = next((s for s in self._schemas if s.name == CATCH_ALL), None)
        if catch_all is None:
            # Unreachable with an EffectiveConfig built by build_effective_config; kept so a
            # hand-made one still has upstream's fallback.
            builtin = next(fs for fs in mandatory_objects().flow_schemas if fs.name == CATCH_ALL)
            catch_all = _CompiledSchema(builtin, level_uses_flow_hash(levels[CATCH_ALL]))
        self._catch_all = catch_all
        self._cache: dict[tuple, Classification] = {}

    def uses_flow_hash(self, priority_level: str) -> bool:
        """Whether requests to the named level get a distinguisher and hash."""
        return level_uses_flow_hash(self.config.priority_levels[priority_level])

    def classify(self, attrs: RequestAttributes) -> Classification:
        key = (
            attrs.user,
            attrs.groups,
            attrs.verb,
            attrs.is_resource_request,
            attrs.api_group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.path,
        )
        found = self._cache.get(key)
        if found is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            found = self._cache[key] = self._classify_uncached(attrs)
        return found

    def _classify_uncached(self, attrs: RequestAttributes) -> Classification:
        fell_back = False
        for schema in self._schemas:
            if schema.matches(attrs):
                break
        else:
            # Upstream logs a warning and uses catch-all; with the mandatory catch-all present
            # this needs a user outside both system:authenticated and system:unauthenticated.
            schema = self._catch_all
            fell_back = True
        distinguisher = ""
        hash_value = 0
        if schema.uses_flow_hash:
            if schema.distinguisher_type == "ByUser":
                distinguisher = attrs.user
            elif schema.distinguisher_type == "ByNamespace":
                distinguisher = attrs.namespace
            hash_value = flow_hash(schema.name, distinguisher)
        return Classification(
            flow_schema=schema.name,
            priority_level=schema.priority_level,
            distinguisher=distinguisher,
            flow_hash=hash_value,
            fell_back_to_catch_all=fell_back,
        )
