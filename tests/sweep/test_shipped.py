"""The shipped sweep is valid as a whole and runs (a slice of it, to keep this quick)."""

from pathlib import Path

import yaml

import simapf
from simapf.sweeps import load_sweep_spec

SHIPPED = Path(__file__).resolve().parents[2] / "sweeps" / "policies-size-qps.yaml"


def test_shipped_sweep_is_valid_everywhere():
    loaded = load_sweep_spec(SHIPPED)
    assert loaded.name == "policies-size-qps"
    assert len(loaded.runs) == 6 * 3 * 3 * 2 * 2
    assert loaded.factors["kubernetes.feature_gates.ConsistentListFromCache"] == [True, False]
    # Policies are common random numbers: at one size, rate and path they share seeds.
    seeds = {r.seed for r in loaded.runs if r.replication == 0 and r.factors["clients.listers.rate_per_s"] == 4
             and r.factors["resources.widgets.object_size.mean_bytes"] == "20Ki"
             and r.factors["kubernetes.feature_gates.ConsistentListFromCache"]}  # fmt: skip
    assert len(seeds) == 1


def test_a_slice_of_the_shipped_sweep_runs(tmp_path):
    data = yaml.safe_load(SHIPPED.read_text())
    data["factors"]["apf.estimator.list_policy"] = ["upstream", "etcd-uncapped"]
    data["factors"]["resources.widgets.object_size.mean_bytes"] = {"values": ["100Ki"]}
    data["factors"]["clients.listers.rate_per_s"] = [16]
    data["replications"] = 1
    data["base"]["run"]["duration_s"] = 20
    df = simapf.sweep(data, tmp_path / "out", backend="serial", base_dir=SHIPPED.parent)
    assert len(df) == 4
    by = df.set_index(["apf.estimator.list_policy", "kubernetes.feature_gates.ConsistentListFromCache"])
    # 100 MB LISTs. From the cache all are charged the 1 MB the cache is assumed to stream
    # (10 seats); from etcd upstream stops at workload-low's max seats (37 at concurrency 600),
    # etcd-uncapped at the global cap (100).
    assert by.loc[("upstream", True), "seats_per_list_mean"] == by.loc[("etcd-uncapped", True), "seats_per_list_mean"] == 10
    assert by.loc[("upstream", False), "seats_per_list_mean"] == 37
    assert by.loc[("etcd-uncapped", False), "seats_per_list_mean"] == 100
    assert (df["requests/workload-high"] > 0).all() and (df["requests/workload-low"] > 0).all()
