"""Malformed scenarios end in one line naming the field, exit status 2, and nothing on disk.

The corpus is `tests/data/scenarios/bad/`: each file is a small scenario with one mistake, and
`expected.yaml` there lists what its error must say. Most run in this process through click's
runner (fast); a few run as a real `python -m simapf.cli` to prove the exit status and that no
traceback reaches the terminal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from simapf.cli import main
from simapf.simulation.result import Result
from simapf.outputs.rundir import write_run

BAD = Path(__file__).parents[1] / "data" / "scenarios" / "bad"
EXPECTED: dict[str, list[str]] = yaml.safe_load((BAD / "expected.yaml").read_text())

BASE = """\
name: small
run: {duration_s: 10, seed: 1}
resources:
  - {name: configmaps, count: 100, object_size: {mean_bytes: 4Ki}}
clients:
  - name: readers
    kind: open_loop
    identity: {user: alice}
    rate_per_s: 5
    request: {verb: list, resource: configmaps}
  - name: writers
    kind: mutator
    identity: {service_account: "ops/writer"}
    resource: configmaps
    rate_per_s: 2
"""


def _scenario_files() -> list[str]:
    return sorted(p.name for p in BAD.glob("*.yaml") if p.name != "expected.yaml" and not p.name.startswith("_"))


def _invoke(args: list[str]):
    return CliRunner().invoke(main, args)


def _assert_one_line_error(stderr: str, *must_contain: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("simapf: error: "), line
    assert "Traceback" not in stderr
    for text in must_contain:
        assert text in line, f"{text!r} not in {line!r}"
    return line


# ------------------------------------------------------------------------------ the corpus


def test_every_corpus_file_has_an_expectation_and_vice_versa():
    assert _scenario_files() == sorted(EXPECTED)
    assert len(EXPECTED) >= 24


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_scenario_is_one_line_exit_2_and_writes_nothing(name, tmp_path):
    out = tmp_path / "out"
    result = _invoke(["run", str(BAD / name), "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # not an exception escaping as a bug
    line = _assert_one_line_error(result.stderr, name, *EXPECTED[name])
    # One mistake per file: a second problem would mean the file tests two things at once.
    assert "more problem" not in line
    assert result.stdout == ""
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # nor a temporary directory beside it


@pytest.mark.parametrize("name", ["negative-rate.yaml", "missing-priority-level.yaml", "invalid-yaml.yaml"])
def test_real_process_exit_status_and_no_traceback(name, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "simapf.cli", "run", str(BAD / name), "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    _assert_one_line_error(proc.stderr, name, EXPECTED[name][0])
    assert proc.stdout == ""
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_missing_scenario_file_is_one_line(tmp_path):
    result = _invoke(["run", str(tmp_path / "nope.yaml"), "--no-progress"])
    assert result.exit_code == 2
    _assert_one_line_error(result.stderr, "nope.yaml: no such file")


def test_bare_off_for_gogc_means_off_not_zero(tmp_path):
    # YAML reads a bare `off` as false; pydantic alone would turn that into GOGC=0.
    from simapf.scenario import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text("apiserver: {gogc: off}\n")
    loaded = load_scenario(path)
    assert loaded.scenario.apiserver.gogc == "off"
    assert loaded.params.gc.gogc is None


def test_params_file_values_yield_to_apiserver_fields_and_clamp_to_cores(tmp_path):
    # A parameter file fitted on a bigger machine: its usable_cores cannot exceed this
    # scenario's cores, which win over the file's.
    from simapf.scenario import load_scenario
    (tmp_path / "fitted.yaml").write_text("params:\n  cpu: {cores: 32, usable_cores: 30}\n")
    (tmp_path / "s.yaml").write_text("apiserver: {cores: 8, params_file: fitted.yaml}\n")
    cpu = load_scenario(tmp_path / "s.yaml").params.cpu
    assert (cpu.cores, cpu.usable_cores) == (8, 8)
    # Without apiserver.cores in the scenario, the file's cores stand.
    (tmp_path / "s.yaml").write_text("apiserver: {params_file: fitted.yaml}\n")
    cpu = load_scenario(tmp_path / "s.yaml").params.cpu
    assert (cpu.cores, cpu.usable_cores) == (32, 30)


# ------------------------------------------------------------------------------ --set


@pytest.fixture
def base_file(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(BASE)
    return path


def test_set_changes_the_run(base_file):
    plain = _invoke(["run", str(base_file), "--json", "--no-progress"])
    assert plain.exit_code == 0, plain.output
    changed = _invoke(["run", str(base_file), "--json", "--no-progress",
                       "--set", "run.duration_s=4", "--set", "clients.readers.count=0"])  # fmt: skip
    assert changed.exit_code == 0, changed.output
    before, after = json.loads(plain.stdout), json.loads(changed.stdout)
    assert (before["duration_s"], after["duration_s"]) == (10, 4)
    readers = {c["client"]: c for c in after["clients"]}["readers"]
    assert readers["attempts"] == 0 and {c["client"]: c for c in before["clients"]}["readers"]["attempts"] > 0
    assert after["scenario"]["clients"][0]["count"] == 0  # the resolved scenario records the override


@pytest.mark.parametrize(
    "override, must_contain",
    [
        ("clients.nosuch.count=3", ["--set clients.nosuch.count", "no element 'nosuch' in clients", "readers, writers"]),
        ("run.duration_s=-1", ["run.duration_s: Input should be greater than 0", "(from --set run.duration_s=-1)"]),
        ("nodot", ["--set 'nodot'", "KEY=VALUE"]),
        ("run..seed=2", ["empty part"]),
        ("run.duration_s.x=3", ["run.duration_s is a number"]),
        ("clients.writers.rate_per_s=zero", ["clients[1].rate_per_s: expected a number", "(from --set"]),
        ("nosuch=1", ["nosuch: unknown field"]),
        ("apf.priority_levels.workload-low.hand_size=200", ["apf.priority_levels.workload-low.hand_size: "]),
        ("kubernetes.version=1.20", ["kubernetes.version: read as the number 1.2", '"1.20"']),
    ],
)
def test_bad_set_is_one_line_exit_2(base_file, tmp_path, override, must_contain):
    out = tmp_path / "out"
    result = _invoke(["run", str(base_file), "--set", override, "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    _assert_one_line_error(result.stderr, *must_contain)
    assert not out.exists()


# ------------------------------------------------------------------------------ writing


def _tiny_result() -> Result:
    series = pd.DataFrame({"time_s": [0.0, 1.0], "metric": ["m", "m"], "value": [1.0, 2.0]})
    table = pd.DataFrame({"priority_level": ["a"], "requests": [1]})
    return Result(summary={"duration_s": 1.0}, series=series, latency=table, levels=table)


def _boom(*_args, **_kwargs):
    raise RuntimeError("figure failed")


def test_write_failure_leaves_no_directory(tmp_path, monkeypatch):
    import simapf.outputs.figures

    monkeypatch.setattr(simapf.outputs.figures, "overview_figure", _boom)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="figure failed"):
        write_run(_tiny_result(), out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_failure_keeps_the_earlier_run(tmp_path, monkeypatch):
    import simapf.outputs.figures

    out = tmp_path / "out"
    write_run(_tiny_result(), out, figure=False)
    before = sorted(p.name for p in out.iterdir())
    assert "summary.json" in before
    monkeypatch.setattr(simapf.outputs.figures, "overview_figure", _boom)
    with pytest.raises(RuntimeError):
        write_run(_tiny_result(), out)
    assert sorted(p.name for p in out.iterdir()) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_cli_write_error_is_one_line_and_leaves_nothing(base_file, tmp_path, monkeypatch):
    import errno

    import simapf.outputs.figures

    def full_disk(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(simapf.outputs.figures, "overview_figure", full_disk)
    out = tmp_path / "runs" / "out"
    result = _invoke(["run", str(base_file), "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    _assert_one_line_error(result.stderr, f"--out {out}: cannot write: No space left on device")
    assert not out.exists()
    assert not out.parent.exists()  # the folder made for it is removed too


def test_yaml_size_is_counted_without_expanding_aliases():
    from simapf.errors import ConfigError
    from simapf.files import check_yaml_size

    node = ["x"] * 10
    for _ in range(6):  # shared references, as a YAML alias makes them: 10^7 values expanded
        node = [node] * 10
    with pytest.raises(ConfigError, match="aliases"):
        check_yaml_size({"a": node}, "t")
    check_yaml_size({"resources": [{"count": 1}] * 1000}, "t")  # an ordinary document passes


def test_an_alias_bomb_given_with_set_is_refused(tmp_path):
    bomb = ("{a: &a [x,x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b],"
            " d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c], e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d],"
            " f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e], g: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]}")
    result = _invoke(["run", "--set", f"apf.priority_levels={bomb}", "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 2
    _assert_one_line_error(result.stderr, "--set apf.priority_levels", "aliases")
