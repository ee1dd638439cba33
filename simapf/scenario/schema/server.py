"""The scenario's server side: the Kubernetes behaviour it assumes (version, feature gates), the
apiserver (cores, concurrency, memory, resource-model parameters, replicas behind a load
balancer), how APF is configured, and the admission webhooks writes pass through."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from simapf.apf.estimators.registry import DEFAULT_LIST_POLICY
from simapf.scenario.schema.base import MAX_LIST_ITEMS, MAX_NAME_LENGTH, Cores, Integer, Number, NumberAsText, Seconds, StrictModel
from simapf.server.params import MAX_CORES, EtcdCores, EtcdMembers, EtcdParams, MemberRoundTrip, OptionalBytes


# --------------------------------------------------------------------------------------------
# Kubernetes behaviour


# The release whose apiserver reads etcd ranges as a RangeStream by default (EtcdRangeStream,
# beta in 1.37, with etcd 3.7): EtcdRangeStream's default follows kubernetes.version.
RANGE_STREAM_RELEASE = (1, 37)


class FeatureGates(StrictModel):
    """kube-apiserver and client-go feature gates that change what the simulation does
    (defaults are Kubernetes 1.37's)."""

    SizeBasedListCostEstimate: bool = Field(
        True, description="APF charges LISTs by response size (Beta, on in 1.37); off: by object count."
    )
    WatchList: bool = Field(
        True, description="The apiserver serves WATCH with sendInitialEvents (KEP-3157, on since 1.32); APF charges WATCH initialisation like a LIST."
    )
    WatchListClient: bool = Field(
        True,
        description="client-go informers stream their initial list with a WatchList instead of LISTing (client-go gate, on by default since 1.35). Needs WatchList on the server.",
    )
    StreamingCollectionEncodingToJSON: bool = Field(True, description="JSON LIST responses are encoded item by item (KEP-5116).")
    StreamingCollectionEncodingToProtobuf: bool = Field(True, description="Protobuf LIST responses are encoded item by item (KEP-5116).")
    ConsistentListFromCache: bool = Field(
        True, description="LISTs with resourceVersion unset are served from the watch cache (GA 1.34); off: from etcd."
    )
    ListFromCacheSnapshot: bool = Field(
        True, description="Paged LISTs (continue) and exact-resourceVersion LISTs are served from watch-cache snapshots; off: from etcd."
    )
    EtcdRangeStream: bool | None = Field(
        None,
        description=(
            "LISTs served from etcd (and a watch cache's fill) read their range as etcd 3.7's RangeStream, decoding "
            "each chunk as it arrives (Beta, on in 1.37). Off: one unary range per page, as before 1.37 or with an "
            "etcd older than 3.7 (the apiserver falls back to pages then). null: by kubernetes.version, on from 1.37."
        ),
    )


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
    feature_gates: FeatureGates = Field(FeatureGates(), description="Each is named as upstream names it.")


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
    """The kube-apiserver, and how many replicas of it there are. Fields here override the same
    ones of the resource-model parameters; every replica has all of them (its own cores, memory
    limit and APF with the full concurrency limits, as upstream does)."""

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

    cores: Cores = Field(
        16.0, gt=0,
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
    memory_limit_bytes: OptionalBytes = Field(
        None, description="Container memory limit (bytes or a quantity like 8Gi); RSS above it is an OOM kill. null = no limit."
    )
    gogc: Integer | None | Literal["off"] = Field(
        100,
        description=(
            "GOGC: a GC cycle starts when the heap has grown this many percent over the live heap the "
            "last cycle left; off = no such goal, "
            "only GOMEMLIMIT triggers GC."
        ),
    )
    gomemlimit_bytes: OptionalBytes = Field(
        None,
        description=(
            "GOMEMLIMIT: the Go runtime's soft memory limit, near which it collects more often (bytes or "
            "a quantity); null = none."
        ),
    )
    gomaxprocs: Integer | None = Field(
        None, ge=1, le=MAX_CORES,
        description="GOMAXPROCS: how many threads run Go code at once (at most 4096); null = ceil(cores).",
    )
    restart_s: Seconds | None = Field(
        None, ge=0, description="Seconds from a kill until the new process serves again; null = the resource-model default."
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

    @field_validator("memory_limit_bytes", "gomemlimit_bytes")
    @classmethod
    def _positive(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            raise ValueError("must be positive or null")
        return v

    @field_validator("gogc", mode="before")
    @classmethod
    def _gogc(cls, v: Any) -> Any:
        # YAML 1.1 reads a bare `off` as false; left alone, pydantic would make that GOGC=0
        # (collect all the time), the opposite of what was meant. `true` means nothing.
        if v is False or (isinstance(v, str) and v.strip().lower() == "off"):
            return "off"
        if isinstance(v, bool) or (isinstance(v, int) and v < 0) or (isinstance(v, str) and not v.strip().isdigit()):
            shown = str(v).lower() if isinstance(v, bool) else repr(v)
            raise ValueError(f"GOGC must be a percentage >= 0 or off, got {shown}")
        return int(v) if isinstance(v, str) else v  # GOGC=200 as the environment writes it

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

# The deployment the resource model's etcd rates were fitted on (docs/validation.md), the default.
_FITTED = EtcdParams()


class Etcd(StrictModel):
    """The etcd cluster every apiserver replica reads, as deployed: its members and the cores each
    serves range reads with. The defaults are the deployment simapf's etcd rates were fitted on,
    the calibration's kind node: one etcd member sharing the apiserver's node, which served range
    reads as one core does. A production control plane runs 3 or 5 members with 2 to 16 cores
    each (etcd's hardware guide), on the apiserver's nodes (kubeadm's stacked topology) or their
    own: say so here. Fields here override the same ones of `apiserver.params.etcd` (`cores` is
    its `concurrency`)."""

    cores: EtcdCores = Field(
        _FITTED.concurrency, ge=1,
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
        _FITTED.members, ge=1,
        description=(
            "Voting members of the etcd cluster (at most 16; etcd recommends 3 or 5). The apiserver's etcd client sends "
            "each call to the next member in turn, and that member serves the range with its own `cores`. With more "
            "than one, every range the apiserver reads (a LIST from etcd, a watch cache's fill) first waits for a "
            "ReadIndex round: one `member_round_trip_s` on the leader, two on a follower, which asks the leader. Reads "
            "served from the watch cache do not reach etcd. Default 1: the calibration's kind node."
        ),
    )
    member_round_trip_s: MemberRoundTrip = Field(
        _FITTED.member_round_trip_s, ge=0,
        description=(
            "Network round trip between two members (with `members` above 1): a ReadIndex round's heartbeat and its "
            "acks. Default 0.5 ms: \"several hundred microseconds\" within a data center (etcd's performance guide); "
            "members in several zones are further apart. At most 5 s (etcd's longest election timeout is 50 s, and it "
            "must be ten round trips)."
        ),
    )
    embedded: bool = Field(
        _FITTED.embedded,
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
            "How LIST (and WatchList initialisation) seats are computed: upstream, size-based, count-based, "
            "constant, etcd-uncapped, streamed-cache-cap, borrowing-aware, or 'package.module:Class' for your own. "
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
