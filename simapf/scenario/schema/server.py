"""The scenario's server side: the Kubernetes behaviour it assumes (version, feature gates), the
apiserver (cores, concurrency, memory, resource-model parameters, replicas behind a load
balancer), how APF is configured, and the admission webhooks writes pass through."""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from simapf.apf.estimators.registry import DEFAULT_LIST_POLICY, shipped_policy_names
from simapf.scenario.schema.base import MAX_LIST_ITEMS, MAX_NAME_LENGTH, Integer, Number, NumberAsText, Seconds, StrictModel
from simapf.server.params import FeatureGates, GogcSpelling, parameter_default, parameter_type


# --------------------------------------------------------------------------------------------
# Shorthands: scenario fields that set one resource-model parameter each. `ServerParams` declares
# each one's type, rule and default; the scenario field takes them from there, and the loader
# puts its value in the parameters by this table (simapf.scenario.load). The same parameter may be
# written under `apiserver.params` instead; two different values for it are an error.

SHORTHANDS: Final = {
    ("apiserver", "cores"): "cpu.cores",
    ("apiserver", "memory_limit_bytes"): "process.memory_limit_bytes",
    ("apiserver", "gogc"): "gc.gogc",
    ("apiserver", "gomemlimit_bytes"): "gc.gomemlimit_bytes",
    ("apiserver", "gomaxprocs"): "cpu.gomaxprocs",
    ("apiserver", "restart_s"): "process.restart_s",  # null: the parameter's own default
    ("etcd", "cores"): "etcd.concurrency",
    ("etcd", "members"): "etcd.members",
    ("etcd", "member_round_trip_s"): "etcd.member_round_trip_s",
    ("etcd", "embedded"): "etcd.embedded",
}
ApiserverCores = parameter_type("cpu.cores")
MemoryLimit = parameter_type("process.memory_limit_bytes")
GoMemLimit = parameter_type("gc.gomemlimit_bytes")
GoMaxProcs = parameter_type("cpu.gomaxprocs")
RestartTime = parameter_type("process.restart_s") | None
EtcdCores = parameter_type("etcd.concurrency")
EtcdMembers = parameter_type("etcd.members")
MemberRoundTrip = parameter_type("etcd.member_round_trip_s")


# --------------------------------------------------------------------------------------------
# Kubernetes behaviour


# The releases simapf models: from the first whose apiservers run APF by default (flowcontrol
# v1beta1, on from 1.20) to the one after its 1.37 defaults, then in development.
OLDEST_RELEASE = (1, 20)
NEWEST_RELEASE = (1, 38)
# "1.33", "v1.33.4", "1.33.4-gke.1200": major.minor, a patch, and what vendors and pre-releases add.
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+][0-9A-Za-z.+-]*)?")


def _release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version simapf models; None for anything else."""
    match = _VERSION_RE.fullmatch(version.strip())
    release = (int(match[1]), int(match[2])) if match else None
    return release if release is not None and OLDEST_RELEASE <= release <= NEWEST_RELEASE else None


def _supported_version(value: str) -> str:
    if _release(value) is None:
        oldest, newest = (".".join(map(str, r)) for r in (OLDEST_RELEASE, NEWEST_RELEASE))
        what = "not a release simapf models" if _VERSION_RE.fullmatch(value.strip()) else "not a Kubernetes version"
        raise ValueError(f'{value!r} is {what}: give one from {oldest} to {newest}, like "1.33" or "v1.33.4"')
    return value


def _version_text(value: Any) -> Any:
    # YAML and --set read 1.28 as a number, which says 1.28 again, but 1.30 as 1.3: a release that
    # ends in 0 cannot be told from the one before simapf's range, so only it must be quoted.
    if isinstance(value, float) and re.fullmatch(r"\d+\.\d", repr(value)) and _release(f"{value}0") is not None:
        raise ValueError(
            f"read as the number {value!r}, which drops a trailing zero (1.30 becomes 1.3): write the "
            f'version in quotes, e.g. "{value}0"'
        )
    return value


class Kubernetes(StrictModel):
    version: Annotated[str, NumberAsText, BeforeValidator(_version_text), AfterValidator(_supported_version)] = Field(
        "1.37",
        description=(
            "The Kubernetes version the defaults describe, in quotes (YAML reads 1.30 as 1.3): a release from 1.20 "
            "(the first whose apiservers run APF by default) to 1.38, with or without a leading v, a patch and a "
            "vendor's suffix (v1.33.4-gke.1200). What changed "
            "between releases follows it where the scenario does not say: EtcdRangeStream (from 1.37), kubectl's "
            "discovery cache syncs (before 1.25), what a CRD costs the heap (before 1.25 and 1.28), how the Go "
            "runtime releases pages (before 1.21) and grows encode buffers (before 1.25), the watch cache's sort "
            "of a LIST (1.27-1.31) and of a WatchList's initial events (1.30-1.31), its watchers partitioned by "
            "namespace and name (from 1.27) and a watch's initial events read from the named object's key (from 1.31)."
        ),
    )
    feature_gates: FeatureGates = Field(default_factory=FeatureGates, description="Each is named as upstream names it.")


# --------------------------------------------------------------------------------------------
# The apiserver

# The most queues simapf holds in one apiserver, all priority levels together (each is an object
# of its own; upstream accepts up to 10,000,000 per level).
MAX_QUEUES_HELD = 1_000_000


class LoadBalancer(StrictModel):
    """How client connections reach the replicas when there are several (apiserver.replicas > 1).
    A client instance keeps one HTTP/2 connection, so all its requests and watches go to the replica
    that connection reached, until that replica dies (or sends a GOAWAY) and the client reconnects."""

    policy: Literal["round-robin", "least-connections", "random"] = Field(
        "round-robin",
        description=(
            "Which replica a new connection goes to, among those the health checks see serving: in turn "
            "(round-robin), the one with the fewest open connections (least-connections), or at random "
            "(a flow hash, as network load balancers do)."
        ),
    )
    health_check_s: Seconds = Field(
        10.0, ge=0,
        description=(
            "How long the balancer takes to notice that a replica died or came back; until then it sends "
            "new connections by what it saw last (to a dead one they are refused). Default: two failed "
            "checks 5 s apart, the defaults of Google Cloud health checks (checkIntervalSec 5, "
            "unhealthyThreshold 2)."
        ),
    )


class Apiserver(StrictModel):
    """The kube-apiserver, and how many replicas of it there are. Its cores, memory limit, restart
    time and Go runtime settings are shorthands for resource-model parameters (`params`): the same
    one written in both places must say the same. Every replica has all of them (its own cores,
    memory limit and APF with the full concurrency limits, as upstream does)."""

    replicas: Integer = Field(
        1, ge=1, le=16,
        description=(
            "Apiserver replicas behind one load balancer, all reading the same etcd. Each has its own "
            "APF, watch caches, memory, GC and OOM kills."
        ),
    )
    load_balancer: LoadBalancer = Field(LoadBalancer(), description="How connections are spread over the replicas.")
    goaway_chance: Number = Field(
        0.0, ge=0, le=0.02,
        description=(
            "--goaway-chance: the share of requests (watches excepted) after which the replica closes the "
            "client's connection with an HTTP/2 GOAWAY, so that the client reconnects through the load "
            "balancer. Upstream: 0 (off) to 0.02; 0.001 recommended as a start."
        ),
    )

    cores: ApiserverCores = Field(
        parameter_default("cpu.cores"),
        description=(
            "CPU cores of the apiserver (container limit or machine): a number, or millicores as Kubernetes writes "
            "them (8000m). From 1m, the smallest CPU quantity Kubernetes gives, to 4096 (simapf holds a processor-sharing slot per core)."
        ),
    )
    max_requests_inflight: Integer = Field(
        400, ge=0,
        description=(
            "--max-requests-inflight: the limit on read-only requests in flight. APF's server concurrency"
            " is the sum of this and max_mutating_requests_inflight."
        ),
    )
    max_mutating_requests_inflight: Integer = Field(
        200, ge=0,
        description=(
            "--max-mutating-requests-inflight: the limit on mutating requests in flight. APF's server "
            "concurrency is the sum of the two."
        ),
    )
    memory_limit_bytes: MemoryLimit = Field(
        parameter_default("process.memory_limit_bytes"), description="Container memory limit (bytes or a quantity like 8Gi); RSS above it is an OOM kill. null = no limit."
    )
    gogc: GogcSpelling = Field(
        parameter_default("gc.gogc"),
        description=(
            "GOGC: a GC cycle starts when the heap has grown this many percent over the live heap the "
            "last cycle left; off = no such goal, "
            "only GOMEMLIMIT triggers GC."
        ),
    )
    gomemlimit_bytes: GoMemLimit = Field(
        parameter_default("gc.gomemlimit_bytes"),
        description=(
            "GOMEMLIMIT: the Go runtime's soft memory limit, near which it collects more often (bytes or "
            "a quantity); null = none."
        ),
    )
    gomaxprocs: GoMaxProcs = Field(
        parameter_default("cpu.gomaxprocs"),
        description="GOMAXPROCS: how many threads run Go code at once (at most 4096); null = ceil(cores).",
    )
    restart_s: RestartTime = Field(
        None, description="Seconds from a kill until the new process serves again; null = the resource-model default."
    )
    request_timeout_s: Seconds = Field(
        60.0, gt=0, description="--request-timeout: APF's queue wait limit is a quarter of it, at most 60 s."
    )
    params_file: str | None = Field(
        None, description="A YAML file of resource-model parameters (as written by `simapf calibrate`), relative to the scenario file."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Resource-model parameters (see docs/resource-model.md), applied over params_file; e.g. {gc: {cpu_sharing: shared}}.",
    )

    @model_validator(mode="after")
    def _concurrency(self) -> "Apiserver":
        if self.server_concurrency <= 0:
            raise ValueError("max_requests_inflight + max_mutating_requests_inflight must be > 0")
        return self

    @property
    def server_concurrency(self) -> int:
        return self.max_requests_inflight + self.max_mutating_requests_inflight


# --------------------------------------------------------------------------------------------
# etcd

class Etcd(StrictModel):
    """The etcd cluster every apiserver replica reads, as deployed: its members and the cores each
    serves range reads with. The defaults are the deployment simapf's etcd rates were fitted on,
    the calibration's kind node: one etcd member sharing the apiserver's node, which served range
    reads as one core does. A production control plane runs 3 or 5 members with 2 to 16 cores
    each (etcd's hardware guide), on the apiserver's nodes (kubeadm's stacked topology) or their
    own: say so here. Fields here override the same ones of `apiserver.params.etcd` (`cores` is
    its `concurrency`)."""

    cores: EtcdCores = Field(
        parameter_default("etcd.concurrency"),
        description=(
            "Cores each member serves range reads with: one range runs on one core, and up to this many run side by "
            "side, each at the fitted per-core rates (apiserver.params.etcd: bytes_per_s, objects_per_s, "
            "requests_per_s), so LISTs from etcd go as fast as this many cores allow. Default 1: the calibration's kind "
            "node, where etcd shared the apiserver's 16 cores and served ranges as one core does (docs/validation.md). "
            "etcd's hardware guide: typical clusters 2 to 4 cores, heavily loaded ones 8 to 16 dedicated cores. At most "
            "4096."
        ),
    )
    members: EtcdMembers = Field(
        parameter_default("etcd.members"),
        description=(
            "Voting members of the etcd cluster (at most 16; etcd recommends 3 or 5). The apiserver's etcd client sends "
            "each call to the next member in turn, and that member serves the range with its own `cores`. With more "
            "than one, every range the apiserver reads (a LIST from etcd, a watch cache's fill) first waits for a "
            "ReadIndex round: one `member_round_trip_s` on the leader, two on a follower, which asks the leader. Reads "
            "served from the watch cache do not reach etcd. Default 1: the calibration's kind node."
        ),
    )
    member_round_trip_s: MemberRoundTrip = Field(
        parameter_default("etcd.member_round_trip_s"),
        description=(
            "Network round trip between two members (with `members` above 1): a ReadIndex round's heartbeat and its "
            "acks. Default 0.5 ms: \"several hundred microseconds\" within a data center (etcd's performance guide); "
            "members in several zones are further apart. At most 5 s (etcd's longest election timeout is 50 s, and it "
            "must be ten round trips)."
        ),
    )
    embedded: bool = Field(
        parameter_default("etcd.embedded"),
        description=(
            "etcd runs inside the apiserver's process, as upstream's storage tests and benchmarks run it "
            "(k8s.io/apiserver storage/etcd3/testserver, embed.StartEtcd): its ranges run on the apiserver's own "
            "cores and count as its CPU; `cores` does not apply. One member, and one apiserver replica."
        ),
    )

    @model_validator(mode="after")
    def _one_member_embedded(self) -> "Etcd":
        if self.embedded and self.members > 1:
            raise ValueError(f"an embedded etcd is one member in the apiserver's process; members is {self.members}, not 1")
        return self


# --------------------------------------------------------------------------------------------
# APF


class PriorityLevelOverride(StrictModel):
    """Changes to one priority level of the APF configuration (null keeps its value)."""

    nominal_concurrency_shares: Integer | None = Field(
        None, ge=0,
        description="nominalConcurrencyShares: the level's share of the server concurrency (against all levels' sum).",
    )
    lendable_percent: Integer | None = Field(
        None, ge=0, le=100,
        description="lendablePercent: the part of the level's nominal concurrency other levels may borrow.",
    )
    borrowing_limit_percent: Integer | None = Field(
        None, ge=0,
        description="borrowingLimitPercent: the most the level may borrow, in percent of its nominal concurrency.",
    )
    queues: Integer | None = Field(
        None, ge=1, le=MAX_QUEUES_HELD,
        description=(
            "limitResponse.queuing.queues: how many queues the level has (at most 1,000,000, and as many in all "
            "levels together: simapf holds each queue)."
        ),
    )
    hand_size: Integer | None = Field(
        None, ge=1,
        description="limitResponse.queuing.handSize: how many queues a flow is shuffle-sharded over.",
    )
    queue_length_limit: Integer | None = Field(
        None, ge=1,
        description="limitResponse.queuing.queueLengthLimit: requests one queue may hold; more are rejected.",
    )


class Estimator(StrictModel):
    """APF's work estimator."""

    list_policy: str = Field(
        DEFAULT_LIST_POLICY,
        description=(
            f"How LIST (and WatchList initialisation) seats are computed: {', '.join(shipped_policy_names())}, "
            "or 'package.module:Class' for your own. "
            "Your own class is Python code that runs with your rights: a scenario file that names one is "
            "trusted input, like a conftest.py. The module is imported when a run starts, never while a scenario is "
            "only read or checked, and never on a Dask worker unless the sweep allows it (--allow-user-code)."
        ),
    )
    list_params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the LIST policy, e.g. {seats: 10} for constant.")
    mutating_enabled: bool = Field(True, description="Charge writes extra seats for the watches they notify (upstream's mutating estimator).")


class APF(StrictModel):
    config: str = Field(
        "bootstrap",
        description=(
            "'bootstrap' (the objects a fresh 1.37 apiserver creates), or a path (relative to the scenario "
            "file) to FlowSchema and PriorityLevelConfiguration YAML as `kubectl get -o yaml` prints it."
        ),
    )
    priority_levels: dict[str, PriorityLevelOverride] = Field(
        default_factory=dict, description="Changes to named priority levels of that configuration."
    )
    estimator: Estimator = Field(Estimator(), description="It decides how many seats each request occupies.")


# --------------------------------------------------------------------------------------------
# Admission webhooks


class WebhookServiceTime(StrictModel):
    mean_s: Seconds = Field(..., gt=0, le=3600, description="Mean time one call takes at the webhook's server.")
    distribution: Literal["constant", "exponential", "lognormal"] = Field("exponential", description="constant, exponential, or lognormal with `sigma`.")
    sigma: Number = Field(0.5, gt=0, le=5, description="lognormal: the standard deviation of the log.")


class AdmissionWebhook(StrictModel):
    """An admission webhook the apiserver calls for matching requests, while they hold their
    APF seats (simapf.server.webhooks): mutating ones first, then validating ones."""

    name: str = Field(
        ..., min_length=1, max_length=MAX_NAME_LENGTH,
        description="The webhook's name (metrics and the summary use it; at most 253 characters).",
    )
    type: Literal["mutating", "validating"] = Field("validating", description="MutatingWebhookConfiguration or ValidatingWebhookConfiguration.")
    verbs: list[Literal["create", "update", "patch", "delete", "deletecollection"]] = Field(
        ["create", "update", "patch"], min_length=1,
        description="The requests it sees (upstream's operations CREATE, UPDATE (update and patch), DELETE).",
    )
    resources: list[str] = Field(
        default_factory=list, max_length=MAX_LIST_ITEMS, description="Resource names it sees (at most 1,000); empty: all."
    )
    failure_policy: Literal["Fail", "Ignore"] = Field(
        "Fail", description="A call that times out fails the request (Fail, upstream's default) or is skipped (Ignore)."
    )
    timeout_s: Seconds = Field(10.0, gt=0, le=30, description="timeoutSeconds: default 10, at most 30 (upstream).")
    replicas: Integer = Field(1, ge=1, le=10_000, description="Pods serving the webhook.")
    concurrency: Integer = Field(1, ge=1, le=10_000, description="Calls one replica serves at once; more wait, first come first served.")
    service_time: WebhookServiceTime = Field(..., description="How long one call takes at a free server.")
