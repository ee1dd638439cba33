"""The validation table (calibration/validation/table.yaml): the resource model against
published measurements it was not fitted to.

Fast tests check that the table, its scenario files and its sources hang together. The slow
test runs every scenario with five seeds, reads the median of each quantity over them, and asks
every row to be within the tolerance its source's precision allows, the median |error| to be at
most 30 % and no row off by more than 3x. Rows marked `known_wrong` (the model lacks the mechanism that decides
them) are expected to fail, strictly: one that starts passing should lose its mark.
"""

from __future__ import annotations

import json
import math

import pytest

import simapf
from simapf.calibrate import published as v

ROWS = v.load_table()
SOURCES = v.load_sources()


# ------------------------------------------------------------------------------ fast


def test_table_rows_are_unique_and_complete():
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids))
    assert len(ROWS) >= 12
    for r in ROWS:
        assert r["why"].strip() and r.get("setup", "").strip(), r["id"]


def test_every_source_id_exists_in_sources_yaml():
    missing = sorted({r["source"] for r in ROWS} - set(SOURCES))
    assert not missing, f"rows cite sources not in sources.yaml: {missing}"


def test_every_scenario_file_loads_with_its_rows_overrides():
    runs = set()
    for r in ROWS:
        parts = [r.get("numerator"), r.get("denominator")] if r["quantity"] == "ratio" else [None]
        for part in parts:
            over = dict(r.get("overrides") or {})
            if part and "row" not in part:
                over.update(part.get("overrides") or {})
            runs.add((v._reading(r).scenario, json.dumps(over, sort_keys=True)))
    for scenario, over in sorted(runs):
        loaded = v._load(scenario, str(v.VALIDATION_DIR), json.loads(over))
        assert loaded.scenario.run.duration_s > 0


def test_every_scenario_file_is_used_and_has_a_header():
    used = {r["scenario"] for r in ROWS if "scenario" in r}
    for path in sorted((v.VALIDATION_DIR / "scenarios").glob("*.yaml")):
        rel = f"scenarios/{path.name}"
        assert rel in used, f"{rel} is not used by any row"
        head = path.read_text().splitlines()[:3]
        assert head and head[0].startswith("#"), f"{rel}: the header comment (source, settings) is missing"
        assert "Source:" in path.read_text(), f"{rel}: the header does not name its source"


def test_known_wrong_rows_say_why():
    for r in ROWS:
        if "known_wrong" in r:
            assert isinstance(r["known_wrong"], str) and len(r["known_wrong"]) > 20, r["id"]


def test_tolerance_and_fold():
    t = v.Tolerance.parse("30%", "t")
    assert t.within(1.3, 1.0) and not t.within(1.31, 1.0) and t.within(0.7, 1.0)
    b = v.Tolerance.parse("2x", "t")
    assert b.within(2.0, 1.0) and b.within(0.5, 1.0) and not b.within(2.01, 1.0)
    assert not b.within(math.nan, 1.0)
    assert v.fold(3.0, 1.0) == 3.0 == v.fold(1.0, 3.0)
    assert v.fold(0.0, 1.0) == math.inf
    with pytest.raises(Exception):
        v.Tolerance.parse("thirty", "t")


def test_a_reading_is_the_median_of_its_seeds():
    """Each seed is its own draw (the scenario's seed, then the next ones), and the table reads
    their median; one seed reads that draw alone."""
    row_id = "issue114276-memory-after-20-lists"  # its RSS moves with the Ps its buffers land on
    r = v._build(v.load_table())[row_id].reading
    draws = [v._run_one(r.scenario, r.overrides, [(r.quantity, r.args)], str(v.VALIDATION_DIR), k)
             ["values"][(r.quantity, r.args)] for k in range(3)]  # fmt: skip
    # The seeds differ so that the median is neither their mean nor the first draw (seeds 2 and 3
    # land on the same whole byte).
    assert sorted(draws)[1] != sum(draws) / 3 and sorted(draws)[1] != draws[0]
    table = v.run_table([row_id], workers=1, seeds=3)
    scale = v.UNITS[table.loc[0, "unit"]]
    assert table.loc[0, "predicted"] == pytest.approx(sorted(draws)[1] / scale, rel=1e-12)
    assert table.attrs["runs"] == 3 and table.attrs["seeds"] == 3
    single = v.run_table([row_id], workers=1, seeds=1)
    assert single.loc[0, "predicted"] == pytest.approx(draws[0] / scale, rel=1e-12)
    with pytest.raises(ValueError):
        v.run_table([row_id], workers=1, seeds=0)


def test_scraped_peak_reads_like_a_dashboard():
    from simapf.simulation.observe import scraped_peak

    # One spike in 30 one-second samples: a 15 s scraper catches it at one phase in 15.
    trace = [1.0] * 30
    trace[7] = 16.0
    assert scraped_peak(trace, 1.0, 15) == pytest.approx(1.0 + 15.0 / 15)
    assert scraped_peak(trace, 1.0, 1) == 16.0 == scraped_peak(trace, 1.0, None)
    assert scraped_peak(trace, 0.5, 15) == pytest.approx(1.0 + 15.0 / 30)  # half-second samples: 30 phases
    assert scraped_peak([], 1.0, 15) == 0.0


# ------------------------------------------------------------------------------ slow


@pytest.fixture(scope="module")
def table():
    return v.run_table()


def _param(r):
    if r.get("known_wrong"):
        return pytest.param(r["id"], marks=pytest.mark.xfail(strict=True, reason=r["known_wrong"]))
    return r["id"]


@pytest.mark.slow
@pytest.mark.parametrize("row_id", [_param(r) for r in ROWS])
def test_row_within_its_tolerance(table, row_id):
    row = table.set_index("id").loc[row_id]
    assert row["within"], (
        f"{row_id}: predicted {row['predicted']:.4g} {row['unit']}, measured {row['measured']:.4g} "
        f"({row['error']:+.0%}), tolerance {row['tolerance']}"
    )


@pytest.mark.slow
def test_table_as_a_whole(table):
    s = v.summary(table)  # rows not marked known wrong
    assert s["median_abs_error"] <= 0.30, s
    assert s["worst_fold"] <= 3.0, s


def test_the_harness_rows_run_the_calibrations_scenario_for_their_cell():
    """#132233's rows other than the fitted ones run exactly what the calibration runs for a cell
    of theirs: the same scenario, warm-up, window and load generator, and a seed of their own."""
    from simapf.calibrate.experiment import ExperimentSetup

    setup = ExperimentSetup()
    rows = [r for r in ROWS if "harness" in r]
    assert {r["source"] for r in rows} == {"issue132233-etcd-table-100KB-10MB", "issue132233-etcd-100MB-100k-objects",
                                          "issue132233-etcd-100MB-100-objects"}  # fmt: skip
    assert len(rows) == 67
    for r in rows:
        h = r["harness"]
        run = v._load(v._reading(r).scenario, str(v.VALIDATION_DIR), {}).scenario
        assert run == simapf.load_scenario(v.harness_scenario(h)).scenario, r["id"]
        assert run.run.steady_state_from_s == pytest.approx(setup.warmup_for(h["qps"])), r["id"]
        assert run.clients[0].ramp_up_s == setup.ramp_s and run.clients[0].rate_per_s == h["qps"], r["id"]
        assert run.apf.estimator.list_params == {"seats": h["seats"]}, r["id"]


@pytest.mark.parametrize("name", ["kep3157-list-informers", "kep3157-watchlist-informers"])
def test_kep3157_idle_heap_lies_between_the_sources_idle_readings(name):
    """KEP-3157's two figures read the same idle apiserver at 3.7 G and ~2.7 G. An idle Go heap
    lies between its live bytes just after a cycle and its goal, (1 + GOGC/100) times them: the
    model's idle RSS (nonheap + live, before the informers start) may not exceed the lower
    reading, that heap at its goal must reach the higher, and the scenarios' live heap puts the
    idle reading in the middle of what those allow."""
    high = float(SOURCES["kep3157-list-informers-8"]["series"]["idle"]) * 1e9
    low = float(SOURCES["kep3157-watchlist-informers-1024"]["series"]["idle_before_test"].split()[0].lstrip("~")) * 1e9
    loaded = simapf.load_scenario(v.VALIDATION_DIR / "scenarios" / f"{name}.yaml",
                                  {"clients.secret-informers.count": 1, "run.duration_s": 10})  # fmt: skip
    nonheap = loaded.params.process.nonheap_bytes
    grow = 1.0 + loaded.params.gc.gogc / 100.0
    idle = v._idle_rss(simapf.run(loaded), loaded, {})
    assert idle <= low
    assert nonheap + (idle - nonheap) * grow >= high
    fewest = nonheap + (high - nonheap) / grow
    assert idle == pytest.approx((fewest + low) / 2, rel=0.02)
