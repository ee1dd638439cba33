"""APF's API objects: FlowSchemas and PriorityLevelConfigurations as pydantic models.

The models read `flowcontrol.apiserver.k8s.io/v1` objects exactly as `kubectl get flowschemas,
prioritylevelconfigurations -o yaml` prints them (metadata and status are accepted and
ignored) and fill in the API defaults (reference §1). `simapf.apf.validation` checks them as the
apiserver does; `simapf.apf.config` reads them and digests them as the APF controller does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic.alias_generators import to_camel

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
