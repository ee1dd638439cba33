"""Runs are functions of their scenario and seed: same seed, same results (in this process or
another one); another seed, other results; and two APF policies on one scenario see the same
open-loop arrivals (common random numbers), whatever they then do with them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from wlhelp import closed_loop, discovery, informer, mutator, open_loop, outage, scenario

from simapf.simulation.runner import run

SECRETS = {"name": "secrets", "count": 300, "namespaces": 3, "object_size": {"mean_bytes": 8192, "distribution": "lognormal"}}
CONFIGMAPS = {"name": "configmaps", "count": 200, "namespaces": 4, "object_size": {"mean_bytes": 1024, "distribution": "exponential"}}


def busy_scenario(seed: int = 3) -> dict:
    """Every client kind, random sizes, an outage long enough for 410s, a restart and a ramp."""
    return scenario(
        open_loop("lister", rate_per_s=5.0, count=3, request={"verb": "list", "resource": "secrets", "namespace": "random"}),
        closed_loop("users", count=4, think_s=0.5, think="exponential"),
        informer("controllers", count=12, resource="secrets", start={"spread_s": 5.0}, watch_timeout_s=20.0,
                 selectivity=0.3, label_selector="app=x"),
        mutator("writers", rate_per_s=8.0, mix={"create": 1, "update": 3, "delete": 1}, count=2, resource="secrets"),
        discovery("kubectl", interval_s=5.0, extra_group_versions=6),
        duration_s=200.0, seed=seed, resources=[SECRETS, CONFIGMAPS],
        kubernetes={"feature_gates": {"WatchListClient": False}},
        apiserver={"restart_s": 5.0},
        events=[outage(30.0, 90.0), {"kind": "restart", "at_s": 150.0},
                {"kind": "ramp", "at_s": 60.0, "client": "users", "to_count": 8, "over_s": 20.0}],
    )  # fmt: skip


def _comparable(summary: dict) -> dict:
    s = dict(summary)
    s.pop("wall_s")
    return s


@pytest.fixture(scope="module")
def busy():
    return run(busy_scenario())


def test_the_busy_scenario_exercises_what_it_should(busy):
    clients = {c["client"]: c for c in busy.summary["clients"]}
    assert clients["controllers"]["relists"] > 0 and clients["controllers"]["gone_410"] > 0
    assert busy.summary["process"]["restarts"] == 1
    assert clients["users"]["instances"] == 8
    assert busy.summary["watches"]["events_delivered"] > 0


def test_same_seed_same_summary_series_and_records(busy):
    again = run(busy_scenario())
    assert _comparable(again.summary) == _comparable(busy.summary)
    pd.testing.assert_frame_equal(again.series, busy.series)
    pd.testing.assert_frame_equal(again.requests, busy.requests)
    pd.testing.assert_frame_equal(again.latency, busy.latency)


def test_another_seed_changes_the_run(busy):
    other = run(busy_scenario(seed=4))
    assert _comparable(other.summary) != _comparable(busy.summary)
    assert not other.series["value"].equals(busy.series["value"])


_CHILD = """
import json, sys
sys.path[:0] = [{tests!r}, {builders!r}]  # this test's folder, and tests/ for builders.py
from test_determinism import busy_scenario, _comparable
from simapf.simulation.runner import run
r = run(busy_scenario())
r.series.to_parquet({out!r} + ".parquet")
with open({out!r} + ".json", "w") as f:
    json.dump(_comparable(r.summary), f, sort_keys=True, default=str)
"""


def test_same_seed_same_results_in_processes_with_different_string_hashing(tmp_path, busy):
    # Python randomises str hashes per process: nothing the results depend on may iterate a set
    # of strings or objects, or use hash().
    outs = []
    for hash_seed in ("1", "2"):
        out = str(tmp_path / f"run{hash_seed}")
        code = _CHILD.format(tests=str(Path(__file__).parent), builders=str(Path(__file__).parents[1]), out=out)
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=str(tmp_path))
        outs.append(out)
    a, b = (json.loads(Path(o + ".json").read_text()) for o in outs)
    assert a == b
    assert a == json.loads(json.dumps(_comparable(busy.summary), sort_keys=True, default=str))
    pd.testing.assert_frame_equal(pd.read_parquet(outs[0] + ".parquet"), pd.read_parquet(outs[1] + ".parquet"))


# ------------------------------------------------------------------------- common random numbers


def _policy_scenario(policy: str, params: dict) -> dict:
    # Open-loop LISTs of Secrets into a level narrow enough that 10 seats per LIST hurt.
    return scenario(
        open_loop("lister", rate_per_s=120.0, count=4, request={"verb": "list", "resource": "secrets", "namespace": "random"}),
        open_loop("getter", rate_per_s=20.0, count=2, arrivals="constant"),
        closed_loop("users", count=3, think_s=0.2, think="exponential"),
        duration_s=30.0, seed=11, resources=[SECRETS, CONFIGMAPS],
        apf={"estimator": {"list_policy": policy, "list_params": params},
             "priority_levels": {"global-default": {"borrowing_limit_percent": 0, "queue_length_limit": 2,
                                                    "queues": 4, "hand_size": 2}}},
    )  # fmt: skip


def test_two_policies_see_the_same_open_loop_arrivals(probe_run):
    _, upstream, probe_a = probe_run(_policy_scenario("upstream", {}))
    _, constant, probe_b = probe_run(_policy_scenario("constant", {"seats": 10}))
    a, b = upstream.requests, constant.requests
    # The policies did differ: seats, and what became of the requests.
    lists_a, lists_b = a[a["verb"] == "list"], b[b["verb"] == "list"]
    assert set(lists_b.loc[lists_b["outcome"] == "ok", "seats"]) == {10}
    assert set(lists_a.loc[lists_a["outcome"] == "ok", "seats"]) != {10}
    assert a["outcome"].value_counts().to_dict() != b["outcome"].value_counts().to_dict()
    # But every open-loop client sent its first attempts at the very same instants, and the same
    # requests (the same namespaces drawn). (The probe sees requests still in flight at the end,
    # which the records, kept as requests complete, do not hold yet.)
    for client in ("lister", "getter"):
        fa = [(x.user, x.sent_s, x.verb, x.namespace) for x in probe_a.attempts if x.client == client and x.attempt == 0]
        fb = [(x.user, x.sent_s, x.verb, x.namespace) for x in probe_b.attempts if x.client == client and x.attempt == 0]
        assert len(fa) > 100
        assert fa == fb
        # The records agree with the probe on the first attempts both runs completed.
        done = a[(a["client"] == client) & (a["attempt"] == 0)]
        assert set(zip(done["user"], done["received_s"])) <= {(u, t) for u, t, _v, _n in fa}
