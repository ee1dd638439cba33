"""A malformed sweep file is one line naming the file and the field, exit status 2, before any run."""

import copy
import subprocess
import sys

import pytest
from click.testing import CliRunner

from simapf.cli import main
from simapf.errors import ConfigError
from simapf.sweeps import load_sweep_spec

from sweephelp import BASIC_SWEEP, SMALL, write_sweep


def _with(**changes):
    sweep = copy.deepcopy(BASIC_SWEEP)
    for key, value in changes.items():
        if value is None:
            sweep.pop(key, None)
        else:
            sweep[key] = value
    return sweep


def _factors(**extra):
    f = copy.deepcopy(BASIC_SWEEP["factors"])
    f.update(extra)
    return f


CASES = [
    # (sweep, expected field path and message fragments)
    (_with(replicatons=3), ["replicatons", "unknown field"]),
    (_with(replications=0), ["replications", "greater than or equal to 1"]),
    # 2 x 1,000 x 50 levels, 2 replications: 200,000 runs, refused before anything loads them.
    (_with(factors=_factors(**{"clients.listers.rate_per_s": list(range(1, 1001)), "clients.listers.count": list(range(1, 51))})),
     ["factors: 200,000 runs", "more than 100,000"]),
    (_with(base=None), ["base", "required field missing"]),
    (_with(base="missing.yaml"), ["base:", "missing.yaml: no such file"]),
    (_with(factors=_factors(**{"clients.listers.rate_per_s": {"range": [1, 5]}})),
     ["factors.clients.listers.rate_per_s.range", "[start, stop, step]"]),
    (_with(factors=_factors(**{"clients.listers.rate_per_s": {"range": [1, 5, 0]}})),
     ["factors.clients.listers.rate_per_s.range", "step must not be 0"]),
    (_with(factors=_factors(**{"clients.listers.rate_per_s": {"range": [5, 1, 1]}})),
     ["factors.clients.listers.rate_per_s.range", "no values"]),
    (_with(factors=_factors(**{"clients.listers.rate_per_s": {"valus": [1]}})),
     ["factors.clients.listers.rate_per_s", "expected a list of values"]),
    (_with(factors=_factors(**{"clients.listers.rate_per_s": [1, 2, 1]})),
     ["factors.clients.listers.rate_per_s[2]", "repeats [0]"]),
    (_with(factors=_factors(**{"clients.listers.rate_per_s": [4, -1]})),
     ["factors.clients.listers.rate_per_s[1] (-1)", "greater than 0"]),
    (_with(factors=_factors(**{"clients.listerz.rate_per_s": [4]})),
     ["factors.clients.listerz.rate_per_s[0]", "no element 'listerz'"]),
    (_with(factors=_factors(**{"apiserver.corez": [4]})), ["factors.apiserver.corez[0]", "apiserver.corez"]),
    (_with(factors=_factors(**{"run.seed": [1, 2]})), ["factors.run.seed", "replications"]),
    (_with(factors=_factors(**{"run.duration_s": [10]})), ["factors.run.duration_s", "also fixed in set"]),
    (_with(common_random_numbers=["apf.estimator.list_policy"]),
     ["common_random_numbers[0]", "not a factor"]),
    (_with(backend={"kind": "joblib", "address": "tcp://x:8786"}), ["backend.address", "needs kind: dask"]),
    (_with(backend={"kind": "spark"}), ["backend.kind", "joblib"]),
    (_with(metrics=["peak_rss", "p99_s/*"]), ["metrics", "unknown metric 'peak_rss'"]),
    (_with(set={"clients.listers.identity": {"user": None}}), ["set:", "clients[0].identity"]),
]


@pytest.mark.parametrize("sweep,fragments", CASES, ids=[c[1][0] for c in CASES])
def test_malformed_sweep_is_one_line_exit_2(tmp_path, sweep, fragments):
    path = write_sweep(tmp_path, sweep, SMALL)
    result = CliRunner().invoke(main, ["sweep", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"simapf: error: {path}: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert not (tmp_path / "out").exists()  # nothing made before the file is known good


def test_a_combination_that_fails_only_together_is_named(tmp_path):
    # Each level is fine on its own; together the event falls after the end of the run.
    scenario = dict(SMALL, events=[{"at_s": 12, "kind": "restart"}])
    sweep = {"base": "scenario.yaml", "factors": {"run.duration_s": [20, 10], "clients.listers.count": [1, 2]}}
    path = write_sweep(tmp_path, sweep, scenario)
    with pytest.raises(ConfigError) as err:
        load_sweep_spec(path)
    msg = str(err.value)
    assert "factors.run.duration_s[1] (10)" in msg and "events[0].at_s" in msg


def test_invalid_yaml_and_not_a_mapping(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: [unclosed\n")
    result = CliRunner().invoke(main, ["sweep", str(bad)])
    assert result.exit_code == 2 and "invalid YAML at line" in result.stderr
    bad.write_text("- just\n- a list\n")
    result = CliRunner().invoke(main, ["sweep", str(bad)])
    assert result.exit_code == 2 and "must be a mapping" in result.stderr


def test_missing_sweep_file_through_the_real_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "simapf.cli", "sweep", str(tmp_path / "nope.yaml")],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"simapf: error: {tmp_path / 'nope.yaml'}: no such file"


def test_dask_address_with_another_backend_is_refused(basic_sweep, tmp_path):
    result = CliRunner().invoke(main, ["sweep", str(basic_sweep), "--backend", "serial", "--dask", "tcp://x:1",
                                       "--out", str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 2 and "needs the dask backend" in result.stderr


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_help(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output and "--dask" in result.output
