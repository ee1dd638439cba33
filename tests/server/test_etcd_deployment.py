"""etcd's deployment as a scenario says it (`etcd: {cores, members, member_round_trip_s}`): ranges
use a member's cores side by side until they are busy; with several members every range the
apiserver reads waits for a ReadIndex round first, and nothing served from the watch cache does;
the text summary says when etcd held the LISTs up while the apiserver's cores were idle; and the
calibration's deployment is the default, so the calibration computes what it did."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import simapf
from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.scenario import scenario_for
from simapf.engine.environment import Environment
from simapf.errors import ConfigError
from simapf.simulation.runner import run_lean
from simapf.scenario.schema import Scenario
from simapf.server import ResourceModel, ServerParams, ServingPath
from simapf.server.etcd import EtcdModel, ReadIndexLoop, range_work
from simapf.server.params import EtcdParams
from simapf.simulation.summary_text import format_summary

from srvhelp import S, cost

OBJECTS, OBJECT_BYTES = 1000, 1000  # a 1 MB LIST of 1000 objects
BOTTLENECK_LINE = "LISTs from etcd are waiting on etcd"


def listers(etcd: dict, *, duration_s: float = 10, api_cores: float = 64, clients: int = 128,
            think_s: float = 0.001, resource_version: str | None = None, consistent_from_cache: bool = False) -> dict:
    """Closed-loop clients LISTing one 1 MB collection as fast as they are answered; exempt from
    APF (system:masters), so nothing but the apiserver's and etcd's capacity holds them."""
    return {
        "name": "etcd-deployment",
        "run": {"duration_s": duration_s, "seed": 1, "steady_state_from_s": 3},
        "kubernetes": {"feature_gates": {"ConsistentListFromCache": consistent_from_cache, "EtcdRangeStream": False}},
        "apiserver": {"cores": api_cores},
        "etcd": etcd,
        "resources": [{"name": "configmaps", "count": OBJECTS, "namespaces": 1,
                       "object_size": {"mean_bytes": OBJECT_BYTES, "distribution": "constant"}}],
        "clients": [{"name": "listers", "kind": "closed_loop", "count": clients,
                     "identity": {"user": "admin", "groups": ["system:masters"]},
                     "think_time": {"mean_s": think_s, "distribution": "constant"},
                     "request": {"verb": "list", "resource": "configmaps",
                                 "options": {"resource_version": resource_version}}}],
    }  # fmt: skip


# ------------------------------------------------------------------ cores


def test_ranges_use_a_members_cores_side_by_side():
    """n ranges at once on c cores: one range runs on one core, so they end after n/min(c, n)
    ranges' work: throughput rises with the cores until there is a core per range."""
    params = EtcdParams(objects_per_s=None)
    work = range_work(params, 1e6)
    for cores in (1, 2, 4, 8, 16):
        env = Environment()
        etcd = EtcdModel(env.clock, params.model_copy(update={"concurrency": cores}))
        ends: list[int] = []
        for _ in range(8):
            etcd.read(work, lambda _arg: ends.append(env.now))
        env.run()
        assert max(ends) == pytest.approx(8 * work / min(cores, 8) * S, abs=10)
        assert etcd.capacity_per_s(1e6) == pytest.approx(cores / work)


def test_members_serve_the_calls_they_are_sent_with_their_own_cores():
    """The apiserver's etcd client sends calls to the members in turn, and each member serves
    its ranges with its own cores: three members of one core serve three ranges at once."""
    env = Environment()
    etcd = EtcdModel(env.clock, EtcdParams(concurrency=1, members=3))
    ends: list[int] = []
    for _ in range(3):
        etcd.read(1.0, lambda _arg: ends.append(env.now))
    env.run()
    assert ends == [S, S, S]
    assert [m.ranges for m in etcd.members] == [1, 1, 1] and etcd.busy_seconds() == pytest.approx(3.0)


def test_concurrent_lists_from_etcd_use_its_cores_until_they_are_busy():
    """LISTs from etcd, more at once than etcd has cores: with each core more they complete in
    proportion, at the fitted per-core rates, etcd's cores busy all the time and the apiserver's
    mostly idle; with enough cores the apiserver's become the limit and etcd idles."""
    work = range_work(ServerParams().etcd, OBJECTS * OBJECT_BYTES, OBJECTS)
    seen = {}
    for cores in (1, 2, 4, 32):
        summary = simapf.run(simapf.load_scenario(listers({"cores": cores}))).summary
        seen[cores] = summary["etcd"]
        if cores <= 4:
            # Every core serves one range after another: the fitted rate per core, times cores.
            assert summary["etcd"]["busy_fraction_steady"] > 0.99
            assert summary["etcd"]["ranges"] == pytest.approx(cores * 10 / work, rel=0.05)
    assert seen[1]["ranges"] < seen[2]["ranges"] < seen[4]["ranges"] < seen[32]["ranges"]
    # Four members of one core each serve as one member of four: calls go to each in turn. In
    # turn, not to whichever is free: a member can idle for a moment while another has two
    # ranges queued, so they are busy a little less than one member of four cores is.
    members = simapf.run(simapf.load_scenario(listers({"cores": 1, "members": 4}))).summary["etcd"]
    assert 0.97 < members["busy_fraction_steady"] <= seen[4]["busy_fraction_steady"]
    assert members["ranges"] == pytest.approx(seen[4]["ranges"], rel=0.05)
    # 32 cores are more than the apiserver can keep busy: it, not etcd, limits the LISTs.
    assert seen[32]["busy_fraction_steady"] < 0.5  # etcd idles more than half the time
    assert seen[32]["apiserver_cores_fraction_steady"] > 2 * seen[4]["apiserver_cores_fraction_steady"] / 3


# ------------------------------------------------------------------ ReadIndex


def test_a_read_index_round_serves_every_read_waiting_when_it_starts():
    """etcd's linearizableReadLoop: reads arriving during a round wait for the next one, which
    starts as soon as the round returns, and serves all of them."""
    env = Environment()
    loop = ReadIndexLoop(env.clock, round_ns=10 * S // 1000)  # 10 ms
    done: list[tuple[str, int]] = []
    loop.wait(lambda name: done.append((name, env.now)), "first")

    def later():
        yield env.timeout(3 * S // 1000)
        for name in ("second", "third"):
            loop.wait(lambda n: done.append((n, env.now)), name)

    env.process(later())
    env.run()
    ms = S // 1000
    assert done == [("first", 10 * ms), ("second", 20 * ms), ("third", 20 * ms)]
    assert loop.rounds == 2 and loop.waiting == 0


def _etcd_list_latencies(members: int, path: ServingPath, n: int = 6, rtt_s: float = 0.01) -> list[float]:
    """n LISTs one after another (each sent when the last is answered), in seconds each."""
    env = Environment()
    params = ServerParams.model_validate({
        "request_cpu": {"work_cv": 0}, "etcd": {"members": members, "member_round_trip_s": rtt_s},
    })  # fmt: skip
    model = ResourceModel(env.clock, params)
    c = cost(path, 1e6, 1000)
    took: list[float] = []

    def one_after_another():
        for _ in range(n):
            start = env.now
            done = env.event()
            model.start(c, done.succeed)
            yield done
            took.append((env.now - start) / S)

    env.run(until=env.process(one_after_another()))
    return took


def test_members_add_read_index_rounds_to_ranges_from_etcd():
    """With three members a range first waits for its member's ReadIndex round: one round trip
    on the leader (member 0), two on a follower, the members taken in turn."""
    one = _etcd_list_latencies(1, ServingPath.ETCD)
    three = _etcd_list_latencies(3, ServingPath.ETCD)
    added = [b - a for a, b in zip(one, three)]
    assert added == pytest.approx([0.01, 0.02, 0.02, 0.01, 0.02, 0.02], abs=2e-4)


def test_members_add_nothing_to_lists_from_the_watch_cache():
    assert _etcd_list_latencies(3, ServingPath.CACHE) == _etcd_list_latencies(1, ServingPath.CACHE)


def _list_latency(summary: dict) -> dict:
    return next(row for row in summary["latency"] if row["verb"] == "list")


@pytest.mark.parametrize("resource_version, consistent_from_cache", [("0", False), (None, True)])
def test_lists_served_by_the_watch_cache_do_not_wait_for_read_index(resource_version, consistent_from_cache):
    """resourceVersion "0", and a consistent LIST with ConsistentListFromCache, are served from the
    watch cache: etcd's members change nothing."""

    def latency(etcd: dict) -> dict:
        sc = listers(etcd, duration_s=5, clients=1, think_s=0.05, resource_version=resource_version,
                     consistent_from_cache=consistent_from_cache)  # fmt: skip
        return _list_latency(simapf.run(simapf.load_scenario(sc)).summary)

    assert latency({"members": 5, "member_round_trip_s": 0.02}) == latency({"members": 1})


def test_a_list_from_etcd_waits_for_read_index_whatever_its_resource_version():
    """kube-apiserver never asks etcd for a serializable range, so a LIST from etcd at a given
    resourceVersion (here an exact one, with the cache's snapshots off) is linearizable too."""

    def mean_s(members: int, resource_version: str | None) -> float:
        sc = listers({"members": members, "member_round_trip_s": 0.02}, duration_s=5, clients=1, think_s=0.05,
                     resource_version=resource_version)  # fmt: skip
        sc["kubernetes"]["feature_gates"]["ListFromCacheSnapshot"] = False
        if resource_version is not None:
            sc["clients"][0]["request"]["options"]["resource_version_match"] = "Exact"
        return _list_latency(simapf.run(simapf.load_scenario(sc)).summary)["mean_s"]

    for rv in (None, "1"):
        # One request at a time: a third of them reach the leader (1 round trip), the rest a follower (2).
        assert mean_s(3, rv) - mean_s(1, rv) == pytest.approx(5 / 3 * 0.02, rel=0.15)


# ------------------------------------------------------------------ the text summary


def test_the_summary_says_when_etcd_holds_the_lists_up():
    """etcd's one core busy all the time while most of the apiserver's 64 idle: the line appears.
    With enough cores etcd is not busy; with an apiserver of 10 cores both are, and it does not."""
    busy = simapf.run(simapf.load_scenario(listers({"cores": 1}))).summary
    assert busy["etcd"]["bottleneck"]
    text = format_summary(busy)
    assert BOTTLENECK_LINE in text and "etcd busy 100 % of the time while the apiserver used" in text
    assert "1 core, 1 member (the calibration's kind node: simapf's default)" in text
    roomy = simapf.run(simapf.load_scenario(listers({"cores": 32}))).summary
    both = simapf.run(simapf.load_scenario(listers({"cores": 1}, api_cores=10))).summary
    for summary in (roomy, both):
        assert not summary["etcd"]["bottleneck"] and BOTTLENECK_LINE not in format_summary(summary)
    # etcd was busy, but so was the apiserver: more than half its cores.
    assert both["etcd"]["busy_fraction_steady"] > 0.9 and both["etcd"]["apiserver_cores_fraction_steady"] > 0.5
    assert "32 cores, 1 member:" in format_summary(roomy)


def test_an_embedded_etcd_is_never_the_bottleneck_of_idle_cores():
    sc = listers({"embedded": True}, duration_s=5)
    summary = simapf.run(simapf.load_scenario(sc)).summary
    assert summary["etcd"]["busy_fraction_steady"] is None and not summary["etcd"]["bottleneck"]
    assert "embedded in the apiserver's process" in format_summary(summary)


# ------------------------------------------------------------------ the scenario's etcd section


def test_the_etcd_section_sets_the_resource_model_and_contradictions_are_errors():
    loaded = simapf.load_scenario({"etcd": {"cores": 8, "members": 3, "member_round_trip_s": "2ms"}})
    assert (loaded.params.etcd.concurrency, loaded.params.etcd.members) == (8, 3)
    assert loaded.params.etcd.member_round_trip_s == pytest.approx(0.002)
    # A parameter set saying it alone is kept; saying it twice, differently, is an error.
    assert simapf.load_scenario({"apiserver": {"params": {"etcd": {"concurrency": 4}}}}).params.etcd.concurrency == 4
    with pytest.raises(ConfigError, match=r"apiserver.params.etcd.concurrency: 4 contradicts etcd.cores: 2"):
        simapf.load_scenario({"etcd": {"cores": 2}, "apiserver": {"params": {"etcd": {"concurrency": 4}}}})
    with pytest.raises(ConfigError, match=r"etcd: an embedded etcd is one member"):
        simapf.load_scenario({"etcd": {"embedded": True, "members": 3}})
    with pytest.raises(ConfigError, match=r"etcd.members: an embedded etcd is one member"):
        simapf.load_scenario({"etcd": {"members": 3}, "apiserver": {"params": {"etcd": {"embedded": True}}}})


def test_the_default_deployment_is_the_calibrations():
    """Unless a scenario says otherwise, etcd is the deployment the fit found: its defaults are the
    resource model's, which are the calibration's record."""
    fitted = ServerParams().etcd
    default = simapf.load_scenario(Scenario()).params.etcd
    assert default == fitted
    assert (fitted.concurrency, fitted.members, fitted.embedded) == (1, 1, False)


def test_the_calibrations_scenario_writes_its_deployment_and_computes_what_it_did():
    """A calibration cell's scenario says which etcd it ran against, and the cell's result is
    that of the same scenario leaving etcd to its default: the fit sees nothing new."""
    grid = cells(load_rows())
    cell = min(grid, key=lambda c: c.row.qps * c.row.object_count)  # a cheap one
    params, setup = ServerParams(), ExperimentSetup()
    written = scenario_for(cell, params, setup)
    assert written["etcd"] == {"cores": params.etcd.concurrency, "members": params.etcd.members, "embedded": False}
    without = {k: v for k, v in written.items() if k != "etcd"}
    a, b = (run_lean(simapf.load_scenario(sc)) for sc in (written, without))
    assert a.scrapes == b.scrapes and a.ok_total == b.ok_total > 0


def test_an_imported_scenario_says_which_etcd_it_runs_against(tmp_path):
    """`simapf import` cannot read etcd's deployment from an apiserver's artefacts: it writes the
    default's every field, and its header says what that stands for and what to set."""
    from simapf.scenario.importer import import_cluster

    examples = Path(__file__).resolve().parents[2] / "examples" / "cluster"
    out = import_cluster(examples, tmp_path / "cluster.yaml", scraped_at_unix_s=1763716400)
    written = yaml.safe_load(out.read_text())["etcd"]
    assert written == {"cores": 1, "members": 1, "member_round_trip_s": 0.0005}
    assert simapf.load_scenario(out).params.etcd == ServerParams().etcd
    header = out.read_text().split("\nname:")[0]
    assert "the calibration's kind node" in header and "etcd.members" in header and "etcd.cores" in header


def test_several_members_are_beyond_what_the_model_was_checked_against():
    """No measurement the model was compared with had more than one etcd member: a run with
    several says so among its extrapolations, one with the default does not."""

    def extrapolation(etcd: dict) -> list[str]:
        sc = listers(etcd, duration_s=5, clients=1, think_s=0.05)
        return simapf.run(simapf.load_scenario(sc)).summary["extrapolation"]

    assert any("several etcd members" in x for x in extrapolation({"members": 3}))
    assert not any("etcd members" in x for x in extrapolation({"members": 1}))
