"""Valid scenarios that once broke: each test failed before its fix (issue 23)."""

from __future__ import annotations

import pytest

import simapf
from simapf.errors import ConfigError

CONFIGMAPS = {"name": "configmaps", "count": 10, "object_size": {"mean_bytes": 1024}}


def _scenario(**parts) -> dict:
    return {"name": "t", "run": {"duration_s": 60}, "resources": [CONFIGMAPS], **parts}


def test_a_ramp_down_before_informers_start_stops_them():
    # AttributeError ('InformerInstance' object has no attribute 'watch') before.
    sc = _scenario(
        clients=[{"name": "inf", "kind": "informer", "count": 5, "identity": {"user": "u"}, "resource": "configmaps",
                  "start": {"at_s": 10}}],
        events=[{"at_s": 1, "kind": "ramp", "client": "inf", "to_count": 0, "over_s": 1}],
    )  # fmt: skip
    assert simapf.run(sc).summary["requests"]["total"] == 0


def test_watch_caches_larger_than_the_container_kill_the_process_and_downtime_counts_to_the_end():
    # 2.5 GB of ConfigMaps in a 2 GiB container: RSS sat at 2.9 GB with no OOM kill before; now
    # the process dies, restarts, refills and dies again, and down_s counts the last downtime too.
    sc = {"name": "t", "run": {"duration_s": 60}, "apiserver": {"memory_limit_bytes": "2Gi"},
          "resources": [{"name": "configmaps", "count": 5000, "object_size": {"mean_bytes": "500Ki"}}]}  # fmt: skip
    s = simapf.run(sc).summary
    assert s["process"]["oom_kills"] >= 2
    rss = simapf.run(sc).metric("process_resident_memory_bytes")
    assert rss.max() <= 2 * 2**30
    restart_s = 30
    assert s["process"]["down_s"] > restart_s  # the downtime open at the end is counted


def test_a_policy_module_that_fails_to_import_is_an_error_in_the_users_code(tmp_path, monkeypatch):
    (tmp_path / "broken_policy.py").write_text("def oops(:\n")
    (tmp_path / "raising_policy.py").write_text("x = 1\nraise RuntimeError('no config')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sc = _scenario(apf={"estimator": {"list_policy": "broken_policy:Policy"}})
    with pytest.raises(ConfigError, match=r"broken_policy.py:1: SyntaxError"):
        simapf.load_scenario(sc)
    sc = _scenario(apf={"estimator": {"list_policy": "raising_policy:Policy"}})
    with pytest.raises(ConfigError, match=r"raising_policy.py:2: RuntimeError: no config"):
        simapf.load_scenario(sc)


def test_kubernetes_notations_for_durations_and_cores():
    sc = simapf.load_scenario(_scenario(
        run={"duration_s": "1h30m", "scrape_interval_s": "500ms"}, apiserver={"cores": "8000m"},
        clients=[{"name": "c", "kind": "closed_loop", "identity": {"user": "u"}, "think_time": {"mean_s": "2.5s"},
                  "request": {"verb": "get", "resource": "configmaps"}}],
        events=[{"at_s": "10m", "kind": "outage", "duration_s": "90s"}],
    )).scenario  # fmt: skip
    assert (sc.run.duration_s, sc.run.scrape_interval_s, sc.apiserver.cores) == (5400.0, 0.5, 8.0)
    assert sc.clients[0].think_time.mean_s == 2.5 and (sc.events[0].at_s, sc.events[0].duration_s) == (600.0, 90.0)
    with pytest.raises(ConfigError, match="run.duration_s"):
        simapf.load_scenario(_scenario(run={"duration_s": "10 minutes"}))
