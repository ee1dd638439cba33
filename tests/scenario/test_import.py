"""`simapf import`: the shipped example artefacts (examples/cluster/, in the formats kubectl
prints) become a scenario that loads, says where its numbers came from, and runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import simapf
from simapf.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cluster"
SCRAPED_AT = 1763716400  # a day after the example's process_start_time_seconds


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("import") / "cluster.yaml"
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(out), "--scraped-at", str(SCRAPED_AT)])
    assert res.exit_code == 0, res.output
    return out


def test_the_scenario_holds_the_clusters_objects_rates_and_apf(imported):
    loaded = simapf.load_scenario(imported)
    sc = loaded.scenario
    counts = {(r.group, r.name): r.count for r in sc.resources}
    assert counts[("", "pods")] == 6000 and counts[("example.com", "widgets")] == 5000
    sizes = {r.name: r.object_size.mean_bytes for r in sc.resources}
    assert sizes["pods"] == 12000 and sizes["events"] == 4096  # mean GET size; no GET: the default
    clients = {c.name: c for c in sc.clients}
    assert clients["get-pods-resource"].rate_per_s == pytest.approx(30)  # 2,592,000 GETs in a day
    assert clients["list-pods-cluster"].rate_per_s == pytest.approx(0.5)
    writes = clients["write-pods"]
    assert writes.rate_per_s == pytest.approx(20.4) and writes.mix == pytest.approx({"create": 0.2 / 20.4,
                                                                                     "delete": 0.2 / 20.4,
                                                                                     "patch": 20 / 20.4}, rel=0.01)  # fmt: skip
    assert clients["watch-configmaps"].count == 400
    assert sc.apf.config == "cluster.apf.yaml" and (imported.parent / "cluster.apf.yaml").is_file()
    from simapf.scenario.load import apf_objects

    levels = {pl.name for pl in apf_objects(sc.apf.config, {}, loaded.base_dir, "apf").priority_levels}
    assert "batch" in levels  # the cluster's own priority level came along
    text = imported.read_text()
    assert 'count: apiserver_storage_objects{resource="pods"}' in text and "uptime 86,400 s" in text


def test_the_imported_scenario_runs(imported):
    result = simapf.run(imported, {"run.duration_s": 10})
    assert result.summary["requests"]["by_outcome"]["ok"] > 1000


def test_without_a_time_the_counters_cannot_be_rates(tmp_path):
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(tmp_path / "x.yaml")])
    assert res.exit_code == 2 and "--uptime-s" in res.stderr and "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []
    res = CliRunner().invoke(main, ["import", str(tmp_path), "-o", str(tmp_path / "x.yaml"), "--uptime-s", "60"])
    assert res.exit_code == 2 and "no apf.yaml here" in res.stderr


def test_an_existing_scenario_file_is_not_replaced(imported):
    before = imported.read_text()
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(imported), "--uptime-s", "60"])
    assert res.exit_code == 2 and "exist" in res.stderr and "--force" in res.stderr
    assert imported.read_text() == before
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(imported), "--uptime-s", "60", "--force"])
    assert res.exit_code == 0 and "uptime 60 s" in imported.read_text()


def test_scraped_at_and_uptime_may_both_be_given_when_they_agree(tmp_path):
    out = tmp_path / "s.yaml"
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(out), "--scraped-at", str(SCRAPED_AT),
                                    "--uptime-s", "86400.4"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "uptime 86,400 s (--scraped-at less process_start_time_seconds, as --uptime-s says)" in out.read_text()
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(tmp_path / "t.yaml"), "--scraped-at",
                                    str(SCRAPED_AT), "--uptime-s", "86000"])  # fmt: skip
    assert res.exit_code == 2 and "--scraped-at and --uptime-s disagree" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.apf.yaml", "s.yaml"]


def _failing_on(monkeypatch, target: Path, error: BaseException) -> None:
    """os.replace fails when it would put a file at `target`."""
    import os

    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if Path(dst) == target and ".simapf-staging." in str(src):
            raise error
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_if_the_second_file_cannot_be_written_the_first_is_not_left(tmp_path, monkeypatch, error):
    out = tmp_path / "s.yaml"
    _failing_on(monkeypatch, out, error)  # the scenario goes after its APF copy
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(out), "--uptime-s", "60"])
    assert res.exit_code != 0
    if isinstance(error, OSError):
        assert res.exit_code == 2 and "cannot write: No space left on device" in res.stderr
    assert list(tmp_path.iterdir()) == []  # no APF copy, no staging folder


def test_with_force_the_old_files_stay_until_both_new_ones_are_in_place(tmp_path, monkeypatch):
    out, copy = tmp_path / "s.yaml", tmp_path / "s.apf.yaml"
    out.write_text("my scenario\n")
    copy.write_text("my apf\n")
    _failing_on(monkeypatch, out, OSError(5, "Input/output error"))
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(out), "--uptime-s", "60", "--force"])
    assert res.exit_code == 2 and str(out) in res.stderr
    assert out.read_text() == "my scenario\n" and copy.read_text() == "my apf\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.apf.yaml", "s.yaml"]
    monkeypatch.undo()
    res = CliRunner().invoke(main, ["import", str(EXAMPLE), "-o", str(out), "--uptime-s", "60", "--force"])
    assert res.exit_code == 0 and "uptime 60 s" in out.read_text()
    assert copy.read_bytes() == (EXAMPLE / "apf.yaml").read_bytes()


def test_write_files_together_puts_back_every_file_it_replaced(tmp_path, monkeypatch):
    from simapf.files import write_files_together

    paths = [tmp_path / n for n in ("a", "b", "c")]
    paths[0].write_text("old a")
    _failing_on(monkeypatch, paths[2], OSError(5, "Input/output error"))
    with pytest.raises(OSError):
        write_files_together({p: b"new" for p in paths}, "import")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and paths[0].read_text() == "old a"


def test_metrics_may_hold_nan_quantiles_but_no_negative_counts(tmp_path):
    from simapf.errors import ConfigError
    from simapf.scenario.importer import read_metrics

    text = ('# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds{quantile="0.5"} NaN\n'
            "go_gc_duration_seconds_sum 0\ngo_gc_duration_seconds_count 0\n"
            '# TYPE apiserver_request_total counter\napiserver_request_total{verb="GET"} 5\n')  # fmt: skip
    assert read_metrics(tmp_path / "m.txt", text)["apiserver_request_total"] == [({"verb": "GET"}, 5.0)]
    with pytest.raises(ConfigError, match=r"m.txt: line 4: go_gc_duration_seconds_count is -1"):
        read_metrics(tmp_path / "m.txt", text.replace("_count 0", "_count -1"))


def test_the_clusters_flowschemas_classify_imported_requests_as_in_the_cluster(imported):
    """A kube-system controller's lease GETs (scope resource: one named lease, in a namespace)
    belong to the cluster's system-leader-election FlowSchema, whose rule has no clusterScope:
    they match it only when they are sent in a namespace, as they are in the cluster."""
    import yaml

    data = yaml.safe_load(imported.read_text())
    gets = next(c for c in data["clients"] if c["name"] == "get-leases.coordination.k8s.io-resource")
    assert gets["request"]["namespace"] == "random"
    gets["identity"] = {"service_account": "kube-system/kube-controller-manager"}
    data["clients"] = [gets]
    result = simapf.run(simapf.load_scenario(data, {"run.duration_s": 5}, base_dir=imported.parent))
    levels = {row["priority_level"]: row["requests"] for row in result.summary["priority_levels"] if row["requests"]}
    assert list(levels) == ["leader-election"] and levels["leader-election"] > 50


def test_rejected_requests_are_not_counted_twice(tmp_path):
    """A 429 is APF's rejection, which the client retries: the retry is in the count already."""
    import shutil

    import yaml

    arts = tmp_path / "arts"
    shutil.copytree(EXAMPLE, arts)
    rejected = ('apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="pods",'
                'scope="resource",subresource="",verb="GET",version="v1"} 2592000\n')  # fmt: skip
    text = (arts / "metrics.txt").read_text()
    at = text.index("# HELP apiserver_response_sizes")
    (arts / "metrics.txt").write_text(text[:at] + rejected + text[at:])
    out = tmp_path / "s.yaml"
    res = CliRunner().invoke(main, ["import", str(arts), "-o", str(out), "--uptime-s", "86400"])
    assert res.exit_code == 0, res.output
    clients = {c["name"]: c for c in yaml.safe_load(out.read_text())["clients"]}
    assert clients["get-pods-resource"]["rate_per_s"] == pytest.approx(30)
    assert "2,592,000 GETs at scope resource in 86,400 s, and 2,592,000 answered 429 and retried" in out.read_text()


# A day of a cluster's artefacts (a copy of examples/cluster/, kept as the test's own): its
# apiserver rejected 80 requests (429) in that day.
A_DAY = Path(__file__).resolve().parents[1] / "data" / "import" / "cluster-a-day"


def test_an_imported_cluster_starts_in_its_steady_state(tmp_path):
    out = tmp_path / "cluster.yaml"
    res = CliRunner().invoke(main, ["import", str(A_DAY), "-o", str(out), "--scraped-at", str(SCRAPED_AT)])
    assert res.exit_code == 0, res.output
    # The docs' "does it look like my cluster?" run: its informers had listed when the metrics
    # were read, so they do not all list at once in its first minute.
    result = simapf.run(out, {"run.duration_s": 60})
    s = result.summary
    informers = [c for c in s["clients"] if c["kind"] == "informer"]
    assert sum(c["instances"] for c in informers) == 1683 and sum(c["lists"] for c in informers) == 0
    day_share = 80 / sum(float(line.rsplit(" ", 1)[1]) for line in (A_DAY / "metrics.txt").read_text().splitlines()
                         if line.startswith("apiserver_request_total{"))  # fmt: skip
    assert s["requests"]["rejected_share"] <= max(10 * day_share, 1e-3), s["requests"]
    # The priority levels' requests are the summary's (none ended before APF saw it).
    assert result.levels["requests"].sum() == s["requests"]["total"]
