"""Run identities and seeds: the same in every process, independent of order, sensitive to what a run is."""

import json
import os
import subprocess
import sys

import pytest

from simapf.sweeps.plan import canonical_json, derive_seed, plan_runs, range_values, run_id

FACTORS = {"apf.estimator.list_policy": ["upstream", "size-based"], "clients.a.rate_per_s": [1, 2.5]}


def test_product_order_and_count():
    runs = plan_runs(FACTORS, replications=3, seed=1)
    assert len(runs) == 12
    assert [r.index for r in runs] == list(range(12))
    # Factors in file order, the last fastest, replication innermost.
    assert [(r.factors["apf.estimator.list_policy"], r.factors["clients.a.rate_per_s"], r.replication) for r in runs[:4]] == [
        ("upstream", 1, 0), ("upstream", 1, 1), ("upstream", 1, 2), ("upstream", 2.5, 0)]  # fmt: skip
    assert len({r.run_id for r in runs}) == 12
    assert len({r.seed for r in runs}) == 12


def test_ids_and_seeds_do_not_depend_on_key_order_or_process():
    a = plan_runs(FACTORS, 2, 5)
    b = plan_runs(dict(reversed(list(FACTORS.items()))), 2, 5)
    assert {(r.run_id, r.seed) for r in a} == {(r.run_id, r.seed) for r in b}
    # Another interpreter with another hash salt derives the same seed (hash() would not).
    code = ("from simapf.sweeps.plan import derive_seed, run_id;"
            "print(derive_seed(5, {'x': 'upstream', 'y': 2.5}, 1), run_id(5, {'x': 'upstream'}, 1))")  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out == [str(derive_seed(5, {"y": 2.5, "x": "upstream"}, 1)), run_id(5, {"x": "upstream"}, 1)]


def test_seed_is_pinned():
    # A change here silently changes every published sweep's numbers: it must be deliberate.
    assert derive_seed(1, {"a": 1}, 0) == derive_seed(1, {"a": 1}, 0) == 656886793822662240
    assert run_id(1, {"a": 1}, 0) == "560552c4a9e60858"


def test_seed_changes_with_sweep_seed_level_and_replication():
    base = derive_seed(1, {"a": 1}, 0)
    assert derive_seed(2, {"a": 1}, 0) != base
    assert derive_seed(1, {"a": 2}, 0) != base
    assert derive_seed(1, {"a": 1}, 1) != base
    assert derive_seed(1, {"a": 1.0}, 0) != base  # 1 and 1.0 are different levels as written
    assert 0 <= base < 2**63


def test_common_random_numbers_share_seeds_across_that_factor_only():
    runs = plan_runs(FACTORS, 2, 1, common_random_numbers=["apf.estimator.list_policy"])
    by = {(r.factors["apf.estimator.list_policy"], r.factors["clients.a.rate_per_s"], r.replication): r for r in runs}
    assert by["upstream", 1, 0].seed == by["size-based", 1, 0].seed
    assert by["upstream", 1, 0].seed != by["upstream", 1, 1].seed
    assert by["upstream", 1, 0].seed != by["upstream", 2.5, 0].seed
    # The ids still tell the runs apart.
    assert by["upstream", 1, 0].run_id != by["size-based", 1, 0].run_id


def test_range_like_python_range():
    assert range_values(10, 50, 10) == [10, 20, 30, 40]
    assert all(isinstance(v, int) for v in range_values(10, 50, 10))
    assert range_values(0.1, 0.4, 0.1) == [0.1, 0.2, 0.3]  # no 0.30000000000000004
    assert range_values(5, 1, -2) == [5, 3]
    assert range_values(1, 1, 1) == []
    with pytest.raises(ValueError, match="step"):
        range_values(0, 1, 0)


def test_canonical_json_is_one_spelling():
    assert canonical_json({"b": [1, {"d": 1, "c": 2}], "a": "x"}) == '{"a":"x","b":[1,{"c":2,"d":1}]}'
    assert json.loads(canonical_json({"µ": 1})) == {"µ": 1}
    with pytest.raises(ValueError):
        canonical_json(float("nan"))
