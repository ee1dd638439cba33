"""`simapf calibrate`: user errors are one line and exit status 2; help works."""

from __future__ import annotations

from click.testing import CliRunner

from simapf.cli import main


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
