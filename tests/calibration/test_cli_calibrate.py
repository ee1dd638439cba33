"""`simapf calibrate`: user errors are one line and exit status 2; help works; what a fit moves."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

import simapf.calibrate.command as command
from simapf.calibrate.fit import FREE_PARAMS, LOSS, NOISE_FLOOR
from simapf.calibrate.record import SHIPPED
from simapf.cli import main
from simapf.errors import ConfigError


def run(*args: str):
    return CliRunner().invoke(main, ["calibrate", *args])


def test_help_names_the_options():
    res = run("--help")
    assert res.exit_code == 0
    for opt in ("--data", "--out", "--start", "--report", "--max-iterations"):
        assert opt in res.output


def _one_line_error(res, *needles: str) -> None:
    assert res.exit_code == 2, res.output
    err = res.output.strip()
    assert err.startswith("simapf: error: ") and "\n" not in err and "Traceback" not in err
    for n in needles:
        assert n in err


def test_missing_data_file(tmp_path):
    _one_line_error(run("--data", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "p.yaml")), "no such file")
    assert not (tmp_path / "p.yaml").exists()


def test_bad_data_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("source,qps\netcd,1\n")
    _one_line_error(run("--data", str(bad), "--out", str(tmp_path / "p.yaml")), "missing column")


def test_bad_start_and_unknown_free_parameter(tmp_path):
    start = tmp_path / "start.yaml"
    start.write_text("gc:\n  gogcc: 1\n")
    _one_line_error(run("--start", str(start), "--out", str(tmp_path / "p.yaml")), "gc.gogcc")
    _one_line_error(run("--free", "gc.nope", "--out", str(tmp_path / "p.yaml")), "unknown free parameter")


def test_report_on_a_missing_record(tmp_path):
    _one_line_error(run("--report", "--params", str(tmp_path / "none.yaml")), "no such file")


def _chosen_fit(monkeypatch, tmp_path, *args: str) -> dict:
    """The free parameters and loss `simapf calibrate` hands to the fit (which is stopped)."""
    seen: dict = {}

    def stop(rows, params, setup, free, **kw):
        seen.update(free=[fp.key for fp in free], loss=kw["loss"])
        raise ConfigError("stopped before fitting")

    monkeypatch.setattr(command, "fit", stop)
    # --quiet: no estimate line before the fit (it would measure this machine's pace first)
    _one_line_error(run(*args, "--out", str(tmp_path / "p.yaml"), "--quiet"), "stopped before fitting")
    return seen


def test_a_fit_moves_what_its_start_record_moved_with_its_loss(monkeypatch, tmp_path):
    shipped = yaml.safe_load(SHIPPED.read_text())
    seen = _chosen_fit(monkeypatch, tmp_path)
    assert seen == {"free": list(shipped["fit"]["free_parameters"]), "loss": shipped["fit"]["loss"]}
    # A record fitted with another loss than the default is refitted with its own.
    other = next(name for name in ("worst", "linear") if name != LOSS)
    linear = tmp_path / "other-loss.yaml"
    linear.write_text(yaml.safe_dump(dict(shipped, fit={**shipped["fit"], "loss": other})))
    seen = _chosen_fit(monkeypatch, tmp_path, "--start", str(linear))
    assert seen["loss"] == other

    two = {"etcd.bytes_per_s": {}, "gc.mark_rate_bytes_per_core_s": {}}
    record = dict(shipped, fit={"loss": "soft_l1", "free_parameters": two})
    start = tmp_path / "start.yaml"
    start.write_text(yaml.safe_dump(record))
    seen = _chosen_fit(monkeypatch, tmp_path, "--start", str(start))
    assert seen == {"free": ["etcd.bytes_per_s", "gc.mark_rate_bytes_per_core_s"], "loss": "soft_l1"}
    # The options win over the record.
    seen = _chosen_fit(monkeypatch, tmp_path, "--start", str(start), "--free", "cpu.usable_fraction",
                       "--loss", "linear")  # fmt: skip
    assert seen == {"free": ["cpu.usable_fraction"], "loss": "linear"}
    # A plain ServerParams YAML names no fit: the built-in set and the default loss.
    plain = tmp_path / "plain.yaml"
    plain.write_text("gc:\n  gogc: 100\n")
    seen = _chosen_fit(monkeypatch, tmp_path, "--start", str(plain))
    assert seen == {"free": [fp.key for fp in FREE_PARAMS], "loss": LOSS}


def test_the_built_in_free_set_is_the_shipped_records():
    assert [fp.key for fp in FREE_PARAMS] == list(yaml.safe_load(SHIPPED.read_text())["fit"]["free_parameters"])


def test_the_noise_floor_is_the_measured_one_unless_given(monkeypatch, tmp_path):
    floors = []

    def stop(rows, params, setup, free, **kw):
        floors.append(kw["noise_floor"])
        raise ConfigError("stopped before fitting")

    monkeypatch.setattr(command, "fit", stop)
    for args in ((), ("--noise-floor", "0")):
        _one_line_error(run(*args, "--out", str(tmp_path / "p.yaml"), "--quiet"), "stopped before fitting")
    assert floors == [NOISE_FLOOR, 0.0]
    assert f"default: {NOISE_FLOOR:g}," in " ".join(run("--help").output.split())  # the help says what it is
    res = run("--noise-floor", "-1", "--out", str(tmp_path / "p.yaml"))
    assert res.exit_code == 2 and "'--noise-floor': -1.0 is not in the range" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "p.yaml").exists()
