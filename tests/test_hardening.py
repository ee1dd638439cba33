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
        simapf.run(sc)
    sc = _scenario(apf={"estimator": {"list_policy": "raising_policy:Policy"}})
    with pytest.raises(ConfigError, match=r"raising_policy.py:2: RuntimeError: no config"):
        simapf.run(sc)


def test_validating_a_scenario_runs_none_of_the_users_code(tmp_path, monkeypatch):
    # A scenario file that names a policy module is trusted input: its code runs when a run
    # starts, never while the scenario is only read and checked. Before, loading imported it.
    marker = tmp_path / "imported"
    (tmp_path / "noisy_policy.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "class Policy:\n    def estimate(self, attrs, ctx, from_cache):\n        return 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sc = _scenario(apf={"estimator": {"list_policy": "noisy_policy:Policy"}},
                   events=[{"at_s": 5, "kind": "policy", "estimator": {"list_policy": "noisy_policy:Policy"}}])
    simapf.load_scenario(sc)
    assert not marker.exists()
    with pytest.raises(ConfigError, match=r"apf.estimator.list_policy: 'noisy_policy:': expected"):
        simapf.load_scenario(_scenario(apf={"estimator": {"list_policy": "noisy_policy:"}}))
    # An event's policy is imported when the run starts, not when the event fires.
    sc["events"][0]["estimator"]["list_policy"] = "noisy_policy:NoSuchClass"
    with pytest.raises(ConfigError, match=r"events\[0\].estimator.*NoSuchClass"):
        simapf.run(sc)
    assert marker.exists()


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


def test_a_sweep_sends_the_users_code_to_dask_workers_only_when_allowed(tmp_path, monkeypatch):
    from simapf.sweeps import sweep

    (tmp_path / "mine_policy.py").write_text(
        "class Policy:\n    def estimate(self, attrs, ctx, from_cache):\n        return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = {"name": "s", "base": _scenario(apf={"estimator": {"list_policy": "mine_policy:Policy"}}),
            "factors": {"run.duration_s": [10, 20]}}
    with pytest.raises(ConfigError, match=r"apf.estimator.list_policy: 'mine_policy:Policy' is your own Python code.*"
                                          r"--allow-user-code"):
        sweep(spec, tmp_path / "out", backend="dask", workers=1)
    assert not (tmp_path / "out").exists()
    # In this process the same sweep runs the user's code, as the user's own command asked.
    assert len(sweep(spec, backend="serial")) == 2


def test_the_users_traceback_only_behind_debug(tmp_path, monkeypatch):
    import yaml
    from click.testing import CliRunner

    from simapf.cli import main

    (tmp_path / "raising_policy.py").write_text("def helper():\n    raise KeyError('seats')\n\nhelper()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario(apf={"estimator": {"list_policy": "raising_policy:Policy"}})))
    plain = CliRunner().invoke(main, ["run", str(path), "--no-progress"])
    assert plain.exit_code == 2
    assert plain.stderr.count("\n") == 1 and "raising_policy.py:2: KeyError: 'seats'" in plain.stderr
    debug = CliRunner().invoke(main, ["--debug", "run", str(path), "--no-progress"])
    assert debug.exit_code == 2
    first, rest = debug.stderr.split("\n", 1)
    assert first == plain.stderr.rstrip("\n")
    assert rest.startswith("Traceback") and 'raising_policy.py", line 2, in helper' in rest
    assert "simapf/" not in rest.split("raising_policy.py", 1)[1]  # it ends in the user's code


def test_a_reject_level_written_with_hand_size_0_replays(tmp_path):
    # The replay format writes a Reject level (queues 0) with handSize 0 and queueLengthLimit
    # 0; both were refused ("handSize: must be >= 1") before.
    from simapf.apf.replay import run_replay

    (tmp_path / "level.json").write_text(
        '{"name": "r", "concurrencyLimit": 1, "queues": 0, "handSize": 0, "queueLengthLimit": 0}')
    (tmp_path / "trace.csv").write_text(
        "id,arrival_s,flow,initial_seats,final_seats,additional_latency_s,service_s\n"
        "a,0.0,fs/u,1,1,0,1.0\nb,0.5,fs/u,1,1,0,1.0\nc,1.5,fs/u,1,1,0,1.0\n")
    counts = run_replay(tmp_path / "level.json", tmp_path / "trace.csv", tmp_path / "out.csv")
    assert counts == {"requests": 3, "dispatched": 2, "rejected": 1}  # b finds the one seat taken
    assert "false,concurrency-limit" in (tmp_path / "out.csv").read_text().splitlines()[2]


def test_an_unwritable_replay_output_is_one_line(tmp_path, monkeypatch):
    # A read-only folder (simulated: tests may run as root, who can write anywhere) raised a
    # PermissionError traceback before.
    import errno
    import tempfile

    from click.testing import CliRunner

    from simapf.cli import main

    (tmp_path / "level.json").write_text('{"name": "l", "concurrencyLimit": 1, "queues": 0}')
    (tmp_path / "trace.csv").write_text(
        "id,arrival_s,flow,initial_seats,final_seats,additional_latency_s,service_s\na,0.0,fs/u,1,1,0,1.0\n")

    def read_only(*_args, **_kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    res = CliRunner().invoke(main, ["replay", "--level", str(tmp_path / "level.json"), "--trace",
                                    str(tmp_path / "trace.csv"), "--out", str(tmp_path / "out.csv")])  # fmt: skip
    assert res.exit_code == 2
    assert res.stderr.strip() == f"simapf: error: --out {tmp_path / 'out.csv'}: cannot write: Permission denied"
