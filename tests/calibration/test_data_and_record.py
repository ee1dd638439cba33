"""The measured data as shipped, its checks, and the calibration record's consistency."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from simapf.calibrate.data import DEFAULT_DATA, SEATS, cells, load_rows
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.record import SHIPPED, build_record, file_digest, load_params, read_record, write_record
from simapf.errors import ConfigError
from simapf.server.params import ServerParams

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_data_has_its_provenance_and_24_rows():
    rows = load_rows()
    assert len(rows) == 24
    assert (ROOT / "calibration" / "README.md").exists()
    assert (ROOT / "calibration" / "DATA-README.md").read_text(encoding="utf-8").startswith("# Measured data")
    # 24 rows x 3 seat settings; the source leaves 18 cells empty (most requests rejected).
    all_cells = cells(rows)
    assert len(all_cells) == 72
    assert sum(c.measured_mb is None for c in all_cells) == 18
    # Sizes are bytes, decimal: 100 KB = 1e5.
    assert sorted({r.response_bytes for r in rows}) == [1e5, 1e6, 1e7]
    assert {r.source for r in rows} == {"etcd", "cache"}
    # Every group has its max row and its overload row at 4/3 of the QPS (+-1 %).
    for g in {r.group for r in rows}:
        pair = sorted((r for r in rows if r.group == g), key=lambda r: r.qps)
        assert [r.load for r in pair] == ["max", "overload"]
        assert pair[1].qps / pair[0].qps == pytest.approx(4 / 3, rel=0.05)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "data.csv"
    p.write_text(text)
    return p


def test_bad_data_is_one_line_config_error(tmp_path):
    header = "source,response_bytes,object_count,qps,load,cpu_percent,mem_mb_seats_1,mem_mb_seats_10,mem_mb_seats_100\n"
    cases = {
        "missing.csv": None,
        "columns": "source,qps\netcd,1\n",
        "source": header + "disk,1e5,10,10,max,100,400,,\n",
        "number": header + "etcd,lots,10,10,max,100,400,,\n",
        "negative": header + "etcd,1e5,10,-1,max,100,400,,\n",
        "empty": header,
    }
    for name, text in cases.items():
        path = tmp_path / name if text is None else _write(tmp_path, text)
        with pytest.raises(ConfigError) as exc:
            load_rows(path)
        assert "\n" not in str(exc.value) and str(path) in str(exc.value), name


def test_record_round_trip_and_atomic_write(tmp_path):
    p = ServerParams(gc={"gogc": 150})
    s = ExperimentSetup(window_s=12)
    rec = build_record(p, s, data_path=DEFAULT_DATA, rows=24, fit={"iterations": 1}, error={"memory_median": 0.1})
    out = tmp_path / "rec.yaml"
    write_record(rec, out)
    assert [f.name for f in tmp_path.iterdir()] == ["rec.yaml"]  # no temporary left behind
    params, setup, data = load_params(out)
    assert params == p and setup == s
    assert data["data"]["sha256"] == file_digest(DEFAULT_DATA)
    # The server section is a ServerParams file on its own.
    assert ServerParams.from_dict(read_record(out)["server"]) == p


def test_plain_server_params_yaml_is_accepted_as_a_start(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("gc:\n  gogc: 200\n")
    params, setup, _ = load_params(f)
    assert params.gc.gogc == 200 and setup == ExperimentSetup()


def test_shipped_defaults_are_the_recorded_fit():
    """ServerParams' defaults are the fitted values: the record in calibration/ says which."""
    params, setup, rec = load_params(SHIPPED)
    assert ServerParams() == params
    assert ExperimentSetup() == setup
    assert rec["data"]["sha256"] == file_digest(DEFAULT_DATA)
    assert rec["fitted_at"] and rec["error"]["memory_median"] > 0
    # Every free parameter's fitted value is the default now in force.
    flat = {**params.model_dump(), "experiment": setup.model_dump()}
    for key, v in rec["fit"]["free_parameters"].items():
        node = flat
        for part in key.split("."):
            node = node[part]
        assert node == pytest.approx(v["fitted"], rel=1e-5), key
        lo, hi = v["bounds"]
        assert lo <= v["fitted"] <= hi, key


def test_data_copy_matches_its_columns():
    with DEFAULT_DATA.open(encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert header[-3:] == [f"mem_mb_seats_{s}" for s in SEATS]
