"""A scenario as the bench runs it: the flags, limits, identities, inventory and clients.

`bench_plan` reads a loaded scenario and says how a real etcd and kube-apiserver reproduce it
on this machine, or, for the first field they cannot, why not, naming the field: before anything
starts. What the plan leaves to the resource model's parameters (`apiserver.params`) is the
model's, not the apiserver's: the real process has its own costs, which is what the bench is for.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from simapf.errors import SimapfError
from simapf.scenario.load import LoadedScenario
from simapf.scenario.schema import Scenario
from simapf.scenario.schema.clients import ClosedLoopClient, InformerClient, MutatorClient, OpenLoopClient
from simapf.server.params import FeatureGates

# The resources the bench can fill with objects of a given size: their bulk is one data value.
CREATABLE = ("configmaps", "secrets")
# An object the bench creates is a data value plus its metadata; the loader measures the
# metadata of one object as stored and sizes the value so that the whole object is the
# scenario's size. Objects larger than this cannot be stored (ConfigMaps and Secrets: 1 MiB of data).
MAX_OBJECT_BYTES = 1024 * 1024
# The identity simapf itself uses to set up and scrape: in system:masters, so APF exempts it and
# its requests take no seats from the scenario's levels.
ADMIN_USER = "simapf-bench-admin"
ADMIN_GROUPS = ("system:masters",)
# client-go gates, read by the load generator from its environment.
CLIENT_GATES = ("WatchListClient",)
ACCEPT_PROTOBUF = "protobuf"


class BenchUnsupported(SimapfError):
    """A scenario field the bench cannot reproduce on this machine: one line, naming it."""


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]
    token: str


@dataclass
class ClientPlan:
    """One scenario client: one load generator process."""

    name: str
    kind: str
    identities: list[Identity]
    plan: dict[str, Any]  # the load generator's plan, less what only the run knows
    env: dict[str, str]  # its client-go feature gates


@dataclass
class BenchPlan:
    """Everything the bench starts, and with what."""

    scenario: Scenario
    apiserver_flags: list[str]
    apiserver_env: dict[str, str]
    apiserver_cores: float
    memory_limit_bytes: int | None
    etcd_cores: float
    restart_s: float
    inventory: list[dict[str, Any]]
    clients: list[ClientPlan]
    admin: Identity
    gates: dict[str, bool]  # the apiserver's feature gates set on its command line
    notes: list[str] = field(default_factory=list)  # what the bench leaves to the real process

    @property
    def identities(self) -> list[Identity]:
        seen: dict[str, Identity] = {self.admin.token: self.admin}
        for c in self.clients:
            for i in c.identities:
                seen.setdefault(i.token, i)
        return list(seen.values())


def _refuse(path: str, why: str) -> BenchUnsupported:
    return BenchUnsupported(f"{path}: {why}")


def settable_gates(help_text: str) -> dict[str, bool]:
    """The feature gates a kube-apiserver binary takes on its command line, with their defaults,
    read from its `--help` (`kube:Name=true|false (BETA - default=true)`)."""
    found = {}
    for name, default in re.findall(r"(?:kube:)?([A-Z][A-Za-z0-9]+)=true\|false \([A-Z]+ - default=(true|false)\)", help_text):
        found[name] = default == "true"
    return found


def _gates(scenario: Scenario, gates: FeatureGates, settable: dict[str, bool] | None) -> tuple[dict[str, bool], dict[str, str]]:
    """(the apiserver's --feature-gates, the load generators' environment). Every gate the binary
    takes is set as the scenario resolves it. A gate it does not take is the release's own
    behaviour: the scenario may not write it false (the gates simapf models that a release drops
    were GA and locked on first, as ConsistentListFromCache and StreamingCollectionEncodingToJSON
    in 1.37); one the scenario leaves unwritten is not checked, since its default is the model's
    for that version. `settable` None: not known yet (no binary to ask); every gate passes."""
    written = scenario.kubernetes.feature_gates.model_dump(exclude_unset=True)
    server: dict[str, bool] = {}
    client: dict[str, str] = {}
    for name, value in gates.model_dump().items():
        if value is None:
            continue
        if name in CLIENT_GATES:
            client[f"KUBE_FEATURE_{name}"] = "true" if value else "false"
        elif settable is None or name in settable:
            server[name] = bool(value)
        elif name in written and not value:
            raise _refuse("kubernetes.feature_gates." + name,
                          f"false, but kube-apiserver {scenario.kubernetes.version} has no such gate to turn off "
                          "(GA and locked on, then removed); the bench runs the release as it is")  # fmt: skip
    return server, client


def _identity(spec: Any, index: int) -> tuple[str, tuple[str, ...]]:
    if spec.service_account is not None:
        namespace, name = spec.service_account.split("/", 1)
        user = f"system:serviceaccount:{namespace}:{name}".replace("{i}", str(index))
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    else:
        user = spec.user.replace("{i}", str(index))
        groups = tuple(g.replace("{i}", str(index)) for g in spec.groups)
    return user, groups


def _request(scenario: Scenario, where: str, template: Any) -> dict[str, Any]:
    resource = scenario.resource(template.resource)
    o = template.options
    if o.selectivity not in (0.0, 1.0) and (o.label_selector or o.field_selector):
        raise _refuse(f"{where}.options.selectivity", "the bench's objects all carry one label; a selector matches all or none of them")
    if template.encoding not in ("json", "protobuf"):
        raise _refuse(f"{where}.encoding", f"{template.encoding!r}: the bench's client asks for json or protobuf")
    return {
        "verb": template.verb, "resource": resource.name, "names": resource.count // resource.namespaces,
        "namespaces": _namespaces(resource, template.namespace),
        "options": {
            "resourceVersion": o.resource_version, "resourceVersionMatch": o.resource_version_match,
            "limit": o.limit, "paginate": o.paginate, "labelSelector": o.label_selector,
            "fieldSelector": o.field_selector, "sendInitialEvents": o.send_initial_events,
            "pretty": getattr(o, "pretty", False),
        },
        "protobuf": template.encoding == ACCEPT_PROTOBUF, "watch_duration_s": template.watch_duration_s,
    }  # fmt: skip


def _namespaces(resource: Any, namespace: str | None) -> list[str]:
    all_ns = [f"ns-{i}" for i in range(resource.namespaces)] if resource.namespaced else [""]
    if namespace is None:
        return [""]  # the whole collection
    if namespace == "random":
        return all_ns
    return [namespace]


def _client(scenario: Scenario, i: int, c: Any, gates_env: dict[str, str], accept_gzip: bool) -> ClientPlan:
    where = f"clients[{i}]"
    if not isinstance(c, (OpenLoopClient, ClosedLoopClient, InformerClient, MutatorClient)):
        raise _refuse(f"{where}.kind", f"{c.kind!r}: the bench drives open_loop, closed_loop, informer and mutator clients")
    if c.network.rtt_s or c.network.link_bytes_per_s is not None:
        raise _refuse(f"{where}.network", "the bench's clients share the apiserver's machine: no round trip or link to reproduce")
    if c.processing is not None and not c.processing.zero and not isinstance(c, InformerClient):
        raise _refuse(f"{where}.processing", "the bench's load generator reads each response and drops it; "
                                             "set processing to zeros (or null) to measure that")  # fmt: skip
    if c.retry.max_retries and not c.retry.honour_retry_after:
        raise _refuse(f"{where}.retry.honour_retry_after", "client-go always waits the Retry-After a 429 carries")
    if c.rate_limit is not None and c.rate_limit.enabled and isinstance(c, InformerClient):
        raise _refuse(f"{where}.rate_limit", "an informer's token bucket is not reproduced by the bench")
    identities = []
    for k in range(c.count):
        user, groups = _identity(c.identity, k)
        identities.append(Identity(user, groups, secrets.token_hex(16)))
    plan: dict[str, Any] = {
        "client": c.name, "kind": c.kind, "max_retries": c.retry.max_retries, "accept_gzip": accept_gzip,
        "qps": c.rate_limit.qps if c.rate_limit is not None and c.rate_limit.enabled else 0,
        "burst": c.rate_limit.burst if c.rate_limit is not None and c.rate_limit.enabled else 0,
    }  # fmt: skip
    if isinstance(c, OpenLoopClient):
        if c.ramp_up_s:
            raise _refuse(f"{where}.ramp_up_s", "the bench's open loop starts at its full rate")
        plan.update(rate_per_s=c.rate_per_s, poisson=c.arrivals == "poisson", max_in_flight=c.max_in_flight or 0,
                    request=_request(scenario, f"{where}.request", c.request))  # fmt: skip
    elif isinstance(c, ClosedLoopClient):
        plan.update(think_mean_s=c.think_time.mean_s, think_distribution=c.think_time.distribution,
                    iterations=c.iterations or 0, request=_request(scenario, f"{where}.request", c.request))  # fmt: skip
    elif isinstance(c, MutatorClient):
        resource = scenario.resource(c.resource)
        if resource.name not in CREATABLE:
            raise _refuse(f"{where}.resource", f"{resource.name!r}: the bench writes configmaps and secrets only")
        unknown = set(c.mix) - {"create", "update", "delete"}
        if unknown:
            raise _refuse(f"{where}.mix", f"{sorted(unknown)[0]!r}: the bench's writer creates, updates and deletes")
        plan.update(rate_per_s=c.rate_per_s, poisson=True, request={
            "verb": "write", "resource": resource.name, "names": resource.count // resource.namespaces,
            "namespaces": _namespaces(resource, c.namespace), "object_bytes": int(resource.object_size.mean_bytes),
            "mix_create": c.mix.get("create", 0.0), "mix_update": c.mix.get("update", 0.0),
            "mix_delete": c.mix.get("delete", 0.0), "options": {}, "protobuf": c.encoding == ACCEPT_PROTOBUF,
        })  # fmt: skip
    else:
        resource = scenario.resource(c.resource)
        if resource.name not in CREATABLE:
            raise _refuse(f"{where}.resource", f"{resource.name!r}: the bench's informers watch configmaps and secrets")
        if c.list.mode not in ("auto", "watchlist"):
            raise _refuse(f"{where}.list.mode", f"{c.list.mode!r}: the bench's informers are client-go's (auto, or watchlist)")
        env = dict(gates_env)
        if c.list.mode == "watchlist":
            env["KUBE_FEATURE_WatchListClient"] = "true"
        plan.update(request={
            "verb": "inform", "resource": resource.name, "namespaces": _namespaces(resource, c.namespace),
            "options": {"labelSelector": c.label_selector, "fieldSelector": c.field_selector},
            "protobuf": c.encoding == ACCEPT_PROTOBUF,
        })  # fmt: skip
        return ClientPlan(c.name, c.kind, identities, plan, env)
    return ClientPlan(c.name, c.kind, identities, plan, dict(gates_env))


def bench_plan(loaded: LoadedScenario, settable: dict[str, bool] | None, machine_cores: int | None = None) -> BenchPlan:
    """How the bench runs `loaded` here; BenchUnsupported names the first field it cannot.
    `settable`: the feature gates the kube-apiserver binary takes (None: not checked yet)."""
    sc = loaded.scenario
    params = loaded.params
    cores = machine_cores or os.cpu_count() or 1
    if sc.apiserver.replicas != 1:
        raise _refuse("apiserver.replicas", f"{sc.apiserver.replicas}: the bench runs one kube-apiserver")
    if params.cpu.cores > cores:
        raise _refuse("apiserver.cores", f"{params.cpu.cores:g} cores, more than this machine's {cores}")
    if sc.etcd.members != 1 or sc.etcd.embedded:
        raise _refuse("etcd.members" if sc.etcd.members != 1 else "etcd.embedded", "the bench runs one etcd member of its own")
    if params.etcd.concurrency > cores:
        raise _refuse("etcd.cores", f"{params.etcd.concurrency:g} cores, more than this machine's {cores}")
    if sc.events:
        raise _refuse("events[0]", f"{sc.events[0].kind!r}: the bench does not reproduce scenario events yet")
    if sc.admission_webhooks:
        raise _refuse("admission_webhooks[0]", "the bench runs no webhook servers")
    if sc.crds:
        raise _refuse("crds[0]", "the bench installs no CustomResourceDefinitions")
    if sc.apf.config != "bootstrap" or sc.apf.priority_levels:
        field_ = "apf.config" if sc.apf.config != "bootstrap" else "apf.priority_levels"
        raise _refuse(field_, "the bench runs the release's bootstrap APF configuration")
    if sc.apf.estimator.list_policy != "upstream" or sc.apf.estimator.list_params or not sc.apf.estimator.mutating_enabled:
        raise _refuse("apf.estimator", f"list_policy {sc.apf.estimator.list_policy!r}: the real apiserver estimates "
                                       "seats as upstream does; another policy needs a patched build")  # fmt: skip
    if sc.run.request_records:
        raise _refuse("run.request_records", "the bench keeps the load generator's attempts, not the model's records")
    inventory = []
    for i, r in enumerate(sc.resources):
        where = f"resources[{i}]"
        for name, bad in (("group", r.group != ""), ("version", r.version != "v1"), ("name", r.name not in CREATABLE)):
            if bad:
                raise _refuse(f"{where}.{name}", f"{r.key!r} ({r.group or 'core'}/{r.version}): the bench creates "
                                                 "configmaps and secrets (core/v1) only")  # fmt: skip
        if r.object_size.distribution != "constant":
            raise _refuse(f"{where}.object_size.distribution", "the bench creates objects of one size (constant)")
        if r.object_size.mean_bytes > MAX_OBJECT_BYTES:
            raise _refuse(f"{where}.object_size.mean_bytes", f"{r.object_size.mean_bytes:,.0f} bytes: a {r.name[:-1]} holds at most 1 MiB")
        if r.count % r.namespaces:
            raise _refuse(f"{where}.count", f"{r.count} objects do not spread evenly over {r.namespaces} namespaces")
        inventory.append({"resource": r.name, "namespaces": _namespaces(r, "random"), "per_namespace": r.count // r.namespaces,
                          "object_bytes": int(r.object_size.mean_bytes), "watch_cache": r.watch_cache})  # fmt: skip
    server_gates, client_env = _gates(sc, loaded.gates, settable)
    accept_gzip = params.client.accept_gzip
    clients = [_client(sc, i, c, client_env, accept_gzip) for i, c in enumerate(sc.clients)]

    flags = [
        f"--max-requests-inflight={sc.apiserver.max_requests_inflight}",
        f"--max-mutating-requests-inflight={sc.apiserver.max_mutating_requests_inflight}",
        f"--request-timeout={sc.apiserver.request_timeout_s:g}s",
    ]
    if server_gates:
        flags.append("--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(server_gates.items())))
    uncached = [f"{r['resource']}#0" for r in inventory if not r["watch_cache"]]
    if uncached:
        flags.append("--watch-cache-sizes=" + ",".join(uncached))
    env = {"GOMAXPROCS": str(params.cpu.gomaxprocs or max(1, math.ceil(params.cpu.cores)))}
    gogc = params.gc.gogc
    env["GOGC"] = "off" if gogc is None or gogc == "off" else str(int(gogc))
    if params.gc.gomemlimit_bytes is not None:
        env["GOMEMLIMIT"] = str(int(params.gc.gomemlimit_bytes))
    limit = params.process.memory_limit_bytes
    notes = ["the resource model's parameters (apiserver.params) are the model's: the real process has its own costs"]
    return BenchPlan(
        scenario=sc, apiserver_flags=flags, apiserver_env=env, apiserver_cores=float(params.cpu.cores),
        memory_limit_bytes=None if limit is None else int(limit), etcd_cores=float(params.etcd.concurrency),
        restart_s=float(params.process.restart_s), inventory=inventory, clients=clients,
        admin=Identity(ADMIN_USER, ADMIN_GROUPS, secrets.token_hex(16)), gates=server_gates, notes=notes,
    )  # fmt: skip
