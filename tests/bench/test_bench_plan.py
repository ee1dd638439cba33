"""How the bench reads a scenario: flags, limits and identities, and one line for a field it
cannot reproduce here, given before anything starts (no Go, no root needed)."""

from __future__ import annotations

import pytest

from simapf.bench.build import gomod_text, replaces_for
from simapf.bench.plan import ADMIN_GROUPS, BenchUnsupported, bench_plan, settable_gates
from simapf.scenario import load_scenario

SMOKE = "scenarios/bench/smoke.yaml"
HELP = """
      --feature-gates colonSeparatedMultimapStringString   Comma-separated list of ...
                                                           kube:APIResponseCompression=true|false (BETA - default=true)
                                                           kube:EtcdRangeStream=true|false (BETA - default=true)
                                                           kube:ListFromCacheSnapshot=true|false (BETA - default=true)
                                                           kube:SizeBasedListCostEstimate=true|false (BETA - default=true)
                                                           kube:WatchList=true|false (BETA - default=true)
                                                           kube:SomeAlpha=true|false (ALPHA - default=false)
"""


def plan(*overrides: str, machine_cores: int = 2):
    return bench_plan(load_scenario(SMOKE, list(overrides)), settable_gates(HELP), machine_cores=machine_cores)


def test_the_gates_a_binary_takes_are_read_off_its_help():
    gates = settable_gates(HELP)
    assert gates == {"APIResponseCompression": True, "EtcdRangeStream": True, "ListFromCacheSnapshot": True,
                     "SizeBasedListCostEstimate": True, "WatchList": True, "SomeAlpha": False}  # fmt: skip


def test_the_smoke_cell_becomes_flags_limits_and_identities():
    p = plan("apiserver.memory_limit_bytes=1Gi", "apiserver.gomemlimit_bytes=800Mi", "apiserver.gogc=50")
    assert "--watch-cache-sizes=configmaps#0" in p.apiserver_flags
    assert "--max-requests-inflight=400" in p.apiserver_flags
    gates = next(f for f in p.apiserver_flags if f.startswith("--feature-gates="))
    assert "WatchList=true" in gates and "EtcdRangeStream=true" in gates
    assert p.apiserver_env == {"GOMAXPROCS": "2", "GOGC": "50", "GOMEMLIMIT": str(800 * 2**20)}
    assert p.memory_limit_bytes == 2**30 and p.apiserver_cores == 1.5 and p.etcd_cores == 1
    assert p.inventory == [{"resource": "configmaps", "namespaces": ["ns-0"], "per_namespace": 20,
                            "object_bytes": 100000, "watch_cache": False}]  # fmt: skip
    (lister,) = p.clients
    assert [i.user for i in lister.identities] == ["bench-lister", "bench-lister"]
    assert len({i.token for i in p.identities}) == len(p.identities) == 3  # two listers and simapf's own
    assert p.admin.groups == ADMIN_GROUPS
    assert lister.plan["kind"] == "closed_loop" and lister.plan["request"]["namespaces"] == ["ns-0"]


def test_an_informers_watchlist_comes_from_the_client_gate():
    on = plan("clients=[{name: inf, kind: informer, identity: {user: u}, resource: configmaps}]",
              "kubernetes.feature_gates.WatchListClient=true")  # fmt: skip
    off = plan("clients=[{name: inf, kind: informer, identity: {user: u}, resource: configmaps}]",
               "kubernetes.feature_gates.WatchListClient=false")  # fmt: skip
    assert on.clients[0].env["KUBE_FEATURE_WatchListClient"] == "true"
    assert off.clients[0].env["KUBE_FEATURE_WatchListClient"] == "false"
    # a client gate is the client's: never on the apiserver's command line
    assert not any("WatchListClient" in f for f in on.apiserver_flags)


@pytest.mark.parametrize("overrides, field", [
    (["apiserver.replicas=3"], "apiserver.replicas"),
    (["apiserver.cores=16"], "apiserver.cores"),
    (["etcd.cores=4"], "etcd.cores"),
    (["etcd.members=3"], "etcd.members"),
    (["kubernetes.feature_gates.ConsistentListFromCache=false"], "kubernetes.feature_gates.ConsistentListFromCache"),
    (["kubernetes.feature_gates.StreamingCollectionEncodingToJSON=false"],
     "kubernetes.feature_gates.StreamingCollectionEncodingToJSON"),
    (["apf.estimator.list_policy=constant", "apf.estimator.list_params={seats: 1}"], "apf.estimator"),
    (["resources.0.group=example.com"], "resources[0].group"),
    (["resources.0.name=pods", "clients.lister.request.resource=pods"], "resources[0].name"),
    (["resources.0.object_size.distribution=lognormal"], "resources[0].object_size.distribution"),
    (["resources.0.object_size.mean_bytes=2Mi"], "resources[0].object_size.mean_bytes"),
    (["events=[{kind: outage, at_s: 5, duration_s: 2}]"], "events[0]"),
    (["clients.lister.network.rtt_s=0.01"], "clients[0].network"),
    (["clients.lister.processing={per_response_s: 0.001}"], "clients[0].processing"),
    (["clients.lister.request.encoding=cbor"], "clients[0].request.encoding"),
])  # fmt: skip
def test_a_field_the_bench_cannot_reproduce_is_named(overrides, field):
    with pytest.raises(BenchUnsupported) as err:
        plan(*overrides)
    assert str(err.value).startswith(f"{field}: ") and "\n" not in str(err.value)


def test_gates_are_checked_against_the_binary_only_once_it_is_built():
    # Before the build nobody knows which gates the release has: only the other fields are checked.
    loaded = load_scenario(SMOKE, ["kubernetes.feature_gates.StreamingCollectionEncodingToJSON=false"])
    assert bench_plan(loaded, None, machine_cores=2).gates["StreamingCollectionEncodingToJSON"] is False
    with pytest.raises(BenchUnsupported):
        bench_plan(loaded, settable_gates(HELP), machine_cores=2)


def test_a_releases_staging_modules_are_replaced_by_their_published_versions():
    gomod = """module k8s.io/kubernetes

go 1.26.0

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""
    assert replaces_for(gomod, "1.36.3") == [("k8s.io/api", "v0.36.3"), ("k8s.io/client-go", "v0.36.3")]
    text = gomod_text("1.36.3", gomod)
    assert "require k8s.io/kubernetes v1.36.3" in text and "\tk8s.io/api => k8s.io/api v0.36.3\n" in text
    assert text.startswith("module simapf.local/bench\n\ngo 1.26.0\n")


def test_the_shipped_module_pins_the_default_release():
    from pathlib import Path

    from simapf.bench.build import DEFAULT_RELEASE, GO_SOURCES, shipped_release

    assert shipped_release() == DEFAULT_RELEASE == "1.37.2"
    gomod = (GO_SOURCES / "go.mod").read_text()
    assert "k8s.io/apiserver => k8s.io/apiserver v0.37.2" in gomod
    # the etcd server at the release's pin: its client 3.7.0 speaks RangeStream to it
    assert "go.etcd.io/etcd/server/v3 v3.7.0" in gomod
    assert Path(GO_SOURCES / "go.sum").stat().st_size > 10_000
