"""Every summary and figure says what made it: build, resolved scenario, calibration, seeds."""

from __future__ import annotations

import json

import simapf
from simapf.provenance import canonical_sha256, figure_metadata, provenance
from simapf.server import ServerParams
from simapf.outputs.rundir import write_run

SHORT = {"run.duration_s": 2}


def test_summary_and_figures_carry_the_same_record(tmp_path):
    loaded = simapf.load_scenario("scenarios/list-experiment.yaml", SHORT)
    result = simapf.run(loaded)
    record = result.summary["provenance"]
    assert record["scenario_sha256"] == canonical_sha256(result.summary["scenario"])
    assert record["seeds"] == [1] and record["replications"] == 1
    assert record["simapf_version"] == simapf.__version__
    out = write_run(result, tmp_path / "a")
    assert json.loads((out / "overview.provenance.json").read_text()) == record
    png = (out / "overview.png").read_bytes()
    assert b"simapf:provenance" in png and record["scenario_sha256"].encode() in png
    assert record["calibration_sha256"] in (out / "overview.svg").read_text()


def test_the_same_run_writes_the_same_bytes(tmp_path):
    a = write_run(simapf.run(simapf.load_scenario("scenarios/list-experiment.yaml", SHORT)), tmp_path / "a")
    b = write_run(simapf.run(simapf.load_scenario("scenarios/list-experiment.yaml", SHORT)), tmp_path / "b")
    for name in ("overview.png", "overview.svg", "overview.provenance.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_hashes_change_with_the_scenario_and_the_calibration():
    sc = simapf.load_scenario("scenarios/list-experiment.yaml", SHORT).scenario.model_dump(mode="json")
    other = simapf.load_scenario("scenarios/list-experiment.yaml", {**SHORT, "clients.lister.rate_per_s": 900})
    base = provenance(sc, ServerParams(), [1])
    assert provenance(other.scenario.model_dump(mode="json"), ServerParams(), [1])["scenario_sha256"] != base["scenario_sha256"]
    slower = ServerParams(etcd={"bytes_per_s": 1e8})
    assert provenance(sc, slower, [1])["calibration_sha256"] != base["calibration_sha256"]
    assert provenance(sc, ServerParams(), [1]) == base  # and nothing else moves them


def test_figure_metadata_has_no_dates():
    record = {"seeds": [1]}
    assert figure_metadata(record, "svg")["Date"] is None
    assert figure_metadata(record, "pdf")["CreationDate"] is None
    assert json.loads(figure_metadata(record, "png")["simapf:provenance"]) == record
