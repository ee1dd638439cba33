"""`simapf figures`: a spec's figures as PNG, SVG and PDF with provenance; the same spec gives
the same bytes; `--check` says when a scenario behind a figure has changed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from simapf.cli import main
from simapf.errors import ConfigError
from simapf.figures.kepfigures import check, load_spec, make

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = (ROOT / "scenarios" / "list-experiment.yaml").read_text()


def _project(tmp_path: Path, rate: float = 1800) -> Path:
    """A scenario and a spec of two cheap figures in `tmp_path`."""
    (tmp_path / "scenario.yaml").write_text(SCENARIO.replace("rate_per_s: 1800", f"rate_per_s: {rate}"))
    (tmp_path / "spec.yaml").write_text("""
name: test
figures:
  - name: memory
    kind: timeseries
    scenario: scenario.yaml
    set: {run.duration_s: 3}
    metrics: [memory, cpu, seats]
  - name: policies
    kind: policies
    scenario: scenario.yaml
    set: {run.duration_s: 2}
    policies: [upstream, "constant:seats=4"]
    replications: 2
    metrics: [peak_rss_bytes, seats_per_list_mean]
""")
    return tmp_path / "spec.yaml"


def test_make_writes_three_formats_with_provenance_and_the_same_bytes_twice(tmp_path):
    spec = _project(tmp_path)
    files = make(spec, tmp_path / "a")
    names = sorted(p.name for p in files)
    assert names == sorted(f"{n}.{x}" for n in ("memory", "policies") for x in ("png", "svg", "pdf", "provenance.json"))
    record = json.loads((tmp_path / "a" / "policies.provenance.json").read_text())
    assert record["replications"] == 2 and len(record["seeds"]) == 2 and record["figure"] == "policies"
    assert record["scenario_sha256"].encode() in (tmp_path / "a" / "policies.png").read_bytes()
    make(spec, tmp_path / "b")
    for name in ("memory.png", "memory.svg", "policies.png", "policies.svg"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_check_says_current_then_stale_after_the_scenario_changes(tmp_path):
    spec = _project(tmp_path)
    make(spec, tmp_path / "figs", only=["memory"])
    assert check(tmp_path / "figs") == [("memory", "current")]
    _project(tmp_path, rate=900)  # the scenario behind the figure changes
    assert check(tmp_path / "figs") == [("memory", "stale: its scenario changed")]
    result = CliRunner().invoke(main, ["figures", "--check", str(tmp_path / "figs")])
    assert result.exit_code == 1 and "memory: stale" in result.output
    # The directory can move: the spec is found relative to it.
    shutil.move(tmp_path / "figs", tmp_path / "moved")
    assert check(tmp_path / "moved") == [("memory", "stale: its scenario changed")]


def test_making_some_figures_keeps_the_others(tmp_path):
    spec = _project(tmp_path)
    make(spec, tmp_path / "figs")
    before = (tmp_path / "figs" / "policies.png").read_bytes()
    make(spec, tmp_path / "figs", only=["memory"])
    assert (tmp_path / "figs" / "policies.png").read_bytes() == before
    assert [n for n, _v in check(tmp_path / "figs")] == ["memory", "policies"]


def test_a_sweep_figure_draws_each_levels_mean_and_interval(tmp_path):
    import yaml

    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump({
        "base": "scenario.yaml", "set": {"run.duration_s": 2},
        "factors": {"clients.lister.rate_per_s": [300, 900], "apf.estimator.list_params.seats": [1, 4]},
        "replications": 2, "seed": 1}))  # fmt: skip
    (tmp_path / "spec.yaml").write_text("""
name: sweep
figures:
  - {name: rates, kind: sweep, sweep: sweep.yaml, x: clients.lister.rate_per_s, hue: apf.estimator.list_params.seats,
     y: [peak_rss_bytes, seats_per_list_mean]}
""")
    make(tmp_path / "spec.yaml", tmp_path / "figs")
    record = json.loads((tmp_path / "figs" / "rates.provenance.json").read_text())
    assert record["replications"] == 2 and len(record["seeds"]) == 8  # 2 x 2 levels x 2 replications
    assert check(tmp_path / "figs") == [("rates", "current")]
    (tmp_path / "spec.yaml").write_text((tmp_path / "spec.yaml").read_text().replace("hue:", "x2:"))
    with pytest.raises(ConfigError, match="x2"):
        load_spec(tmp_path / "spec.yaml")


def test_bad_specs_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nfigures:\n  - {name: a, kind: piechart}\n")
    with pytest.raises(ConfigError, match="figures.0"):
        load_spec(bad)
    bad.write_text("name: x\nfigures:\n  - {name: a, kind: validation}\n  - {name: a, kind: validation}\n")
    with pytest.raises(ConfigError, match="used twice"):
        load_spec(bad)
    result = CliRunner().invoke(main, ["figures", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "simapf: error:" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_the_shipped_specs_load():
    for spec in sorted((ROOT / "figures").glob("*.yaml")):
        load_spec(spec)


MEASURED = ROOT / "tests" / "data" / "prometheus" / "apiserver-rss-query-range.json"
OUTAGE_UNIX_S = 1767225720  # when the measured cluster's outage began


def test_a_query_range_export_is_read_and_put_on_the_runs_clock(tmp_path):
    from simapf.outputs import overlay

    measured = overlay.load_measured(MEASURED)
    assert set(measured["metric"]) == {"process_resident_memory_bytes"}
    assert measured["series"].nunique() == 2 and len(measured) == 22
    aligned = overlay.align(measured, OUTAGE_UNIX_S, at_s=2.0)
    assert aligned["time_s"].min() == pytest.approx(2.0 - 5) and aligned["time_s"].max() == pytest.approx(2.0 + 5)
    (tmp_path / "instant.json").write_text('{"status": "success", "data": {"resultType": "vector", "result": []}}')
    with pytest.raises(ConfigError, match="instant.json: not a Prometheus query_range result"):
        overlay.load_measured(tmp_path / "instant.json")


def test_a_timeseries_figure_overlays_measured_data_aligned_at_an_event(tmp_path):
    import matplotlib

    from simapf.figures.kepfigures import draw_timeseries

    matplotlib.use("Agg")
    (tmp_path / "scenario.yaml").write_text(SCENARIO)
    shutil.copy(MEASURED, tmp_path / "rss.json")
    (tmp_path / "spec.yaml").write_text(f"""
name: test
figures:
  - name: overlay
    kind: timeseries
    scenario: scenario.yaml
    set: {{run.duration_s: 4, events: [{{kind: outage, at_s: 2, duration_s: 1}}]}}
    metrics: [memory]
    overlay:
      - {{file: rss.json, panel: memory, metric: process_resident_memory_bytes,
          align: {{measured_at_unix_s: {OUTAGE_UNIX_S}, event: 0}}, label: "EKS"}}
""")
    spec, base = load_spec(tmp_path / "spec.yaml")
    fig, _, _ = draw_timeseries(spec.figures[0], base)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    measured = [line for name, line in lines.items() if name.startswith("EKS ")]
    assert len(measured) == 2 and any("10.0.0.11:6443" in name for name in lines)
    x, y = measured[0].get_xdata(), measured[0].get_ydata()
    assert x[0] == pytest.approx(-3.0) and x[5] == pytest.approx(2.0)  # the outage at the event's 2 s
    assert 1.3 < y[0] < 1.6  # GiB, as the panel
    # The measured file is one of the figure's inputs: a new export makes the figure stale.
    files = make(tmp_path / "spec.yaml", tmp_path / "figs")
    assert files and dict(check(tmp_path / "figs")) == {"overlay": "current"}
    (tmp_path / "rss.json").write_text(MEASURED.read_text().replace("1550000000", "1650000000"))
    assert "stale" in dict(check(tmp_path / "figs"))["overlay"]


def test_make_says_which_figure_runs_and_how_long_each_took(tmp_path):
    import re

    said: list[str] = []
    make(_project(tmp_path), tmp_path / "figs", log=said.append)
    assert said[0] == "figure 1/2 memory (timeseries)..." and said[2] == "figure 2/2 policies (policies)..."
    # With the runs each figure rests on (the result cache is off in the suite: test_cache.py).
    assert re.fullmatch(r"figure 1/2 memory: 1 run, \d+ s \(\d+ s so far\)", said[1]), said[1]
    assert re.fullmatch(r"figure 2/2 policies: 4 runs, \d+ s \(\d+ s so far\)", said[3]), said[3]


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    import errno

    import matplotlib.figure

    spec = _project(tmp_path)

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", no_space)
    res = CliRunner().invoke(main, ["figures", str(spec), "--out", str(tmp_path / "figs")])
    assert res.exit_code == 2 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == f"simapf: error: --out {tmp_path / 'figs'}: cannot write: No space left on device"
    assert not (tmp_path / "figs").exists() and not list(tmp_path.glob(".*figs*"))


def test_check_says_stale_after_the_models_source_changes(tmp_path, monkeypatch):
    """The figure rests on the model's code too: the same digest of its source the result cache
    keys its runs on (simapf.simulation.cache.source_digest)."""
    from simapf.simulation import cache

    spec = _project(tmp_path)
    make(spec, tmp_path / "figs", only=["memory"])
    record = json.loads((tmp_path / "figs" / "memory.provenance.json").read_text())
    assert record["sources_sha256"] == cache.source_digest()
    assert check(tmp_path / "figs") == [("memory", "current")]

    monkeypatch.setattr(cache, "source_digest", lambda: "0" * 64)  # as after an edit to simapf/server/memory.py
    assert check(tmp_path / "figs") == [("memory", "stale: its model's source changed")]
    monkeypatch.undo()

    # A figure made before the digest was recorded cannot be told current.
    del record["sources_sha256"]
    (tmp_path / "figs" / "memory.provenance.json").write_text(json.dumps(record))
    assert check(tmp_path / "figs") == [("memory", "stale: its model's source changed")]


def test_the_source_digest_follows_an_edit_to_the_model(tmp_path):
    """An edit to a copy of the package's model changes the digest; one to a module that only
    draws does not (those change no number a figure shows)."""
    from simapf.simulation import cache

    copy = tmp_path / "simapf"
    shutil.copytree(cache.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    before = cache.source_digest(copy)
    style = copy / "outputs" / "style.py"
    style.write_text(style.read_text() + "\n# a comment\n")
    assert cache.source_digest.__wrapped__(copy) == before
    memory = copy / "server" / "memory.py"
    memory.write_text(memory.read_text() + "\n# a comment\n")
    assert cache.source_digest.__wrapped__(copy) != before
