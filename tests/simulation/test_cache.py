"""The result cache (simapf.simulation.cache): a run computed once is read back byte for byte, any change
of what decides it misses, parallel writers leave one good entry, the size bound evicts the
least recently used, and --no-cache or SIMAPF_NO_CACHE turn it off."""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import stat
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import simapf
import simapf.simulation.result
import simapf.version
from simapf.simulation import cache
from simapf.cli import main
from simapf.sweeps.measure import RunTask, row_key
from simapf.outputs.rundir import write_run

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "bad-commands" / "_files" / "tiny.yaml"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """The cache on, in a folder of this test's (conftest turns it off for every other test)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SIMAPF_CACHE_DIR", str(folder))
    monkeypatch.delenv("SIMAPF_NO_CACHE", raising=False)
    monkeypatch.delenv("SIMAPF_CACHE_SIZE", raising=False)
    return folder


def _entries(folder: Path, kind: str = "") -> list[Path]:
    return sorted(p for p in (folder / "results").glob(f"{kind}*") if cache.ENTRY.match(p.name))


def _cli(args: list[str], env: dict | None = None):
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _runs():
    return cache.tally.snapshot()


def ANY(_value) -> bool:  # noqa: N802 - a predicate that takes whatever an entry holds
    return True


# ------------------------------------------------------------------------------ the figures


# A timeseries figure and a sweep figure of figures/docs.yaml, made short (the docs' own, a slow
# test below; a comparison's rows from the cache, test_a_comparison_from_the_cache_...).
SPEC = """
name: docs-short
figures:
  - name: relist-storm
    kind: timeseries
    scenario: {root}/scenarios/relist-storm.yaml
    set: {{run.duration_s: 60, events: []}}
    metrics: [memory]
  - name: gomemlimit-squeeze
    kind: sweep
    sweep: squeeze.yaml
    x: resources.configmaps.count
    y: [gc_mean_cores]
"""
SWEEP = """
name: squeeze
base: {root}/scenarios/gomemlimit-squeeze.yaml
factors:
  resources.configmaps.count: [2000, 4000]
  run.duration_s: [8]
replications: 1
metrics: [gc_mean_cores]
"""


def test_figures_made_twice_reuse_every_run_and_give_the_same_bytes(tmp_path, cache_dir):
    (tmp_path / "spec.yaml").write_text(SPEC.format(root=ROOT))
    (tmp_path / "squeeze.yaml").write_text(SWEEP.format(root=ROOT))
    code, _out, first = _cli(["figures", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "a")])
    assert code == 0, first
    assert "from the cache" not in first
    code, _out, second = _cli(["figures", str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "b")])
    assert code == 0, second
    done = [line for line in second.splitlines() if line.startswith("figure ") and not line.endswith("...")]
    assert len(done) == 2
    assert "1 run from the cache" in done[0]
    assert "2 runs from the cache" in done[1]
    assert f"all 3 runs came from the result cache in {cache_dir}" in second
    made = sorted(p.name for p in (tmp_path / "a").iterdir() if not p.name.startswith("."))
    assert len(made) == 8  # PNG, SVG, PDF and provenance of each
    for name in made:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


# A figure's closing line: how many runs it rested on, all from the cache (or none), then its time.
ALL_FROM_THE_CACHE = re.compile(r"^figure \d+/\d+ \S+: (\d+ runs? from the cache, )?[\d.]+ (s|min) ")


@pytest.mark.slow
def test_the_docs_figures_made_twice_reuse_every_run_and_give_the_same_bytes(tmp_path, cache_dir):
    """The issue's check: `simapf figures figures/docs.yaml --out DIR` twice, the second from the cache."""
    spec = str(ROOT / "figures" / "docs.yaml")
    code, _out, first = _cli(["figures", spec, "--out", str(tmp_path / "a")])
    assert code == 0, first
    before = _runs()
    code, _out, second = _cli(["figures", spec, "--out", str(tmp_path / "b")])
    assert code == 0, second
    reused, ran = (now - then for now, then in zip(_runs(), before))
    assert ran == 0 and reused > 0
    done = [line for line in second.splitlines() if line.startswith("figure ") and not line.endswith("...")]
    assert done and all(ALL_FROM_THE_CACHE.match(line) for line in done), done
    assert f"all {reused} runs came from the result cache in {cache_dir}" in second
    for shown in _documented_log():  # docs/result-cache.md shows this log: its counts are the run's
        assert any(line.startswith(shown) for line in second.splitlines()), (shown, second)
    made = sorted(p.name for p in (tmp_path / "a").iterdir() if not p.name.startswith("."))
    assert len(made) == 4 * len(done)  # PNG, SVG, PDF and provenance of each figure
    for name in made:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def _documented_log() -> list[str]:
    """The beginnings of the lines of docs/result-cache.md's sample log of the second make."""
    text = (ROOT / "docs" / "result-cache.md").read_text()
    block = text.split("The second run's log says so", 1)[1].split("```", 2)[1]
    shown = [m[1] for m in re.finditer(r"^(figure \d+/\d+ \S+: \d+ runs? from the cache, )", block, re.M)]
    shown += [m[1] for m in re.finditer(r"^(simapf: all \d+ runs came from the result cache in )", block, re.M)]
    assert len(shown) >= 2, block
    return shown


# ------------------------------------------------------------------------------ byte for byte


def test_a_result_from_the_cache_writes_the_same_files(tmp_path, cache_dir):
    before = _runs()
    fresh = simapf.run(TINY)
    again = simapf.run(TINY)
    assert _runs()[0] - before[0] == 1 and _runs()[1] - before[1] == 1  # one computed, one read back
    assert not fresh.cached and again.cached
    assert again.summary["wall_s"] == fresh.summary["wall_s"]  # the time the run took when it ran
    write_run(fresh, tmp_path / "fresh")
    write_run(again, tmp_path / "again")
    for name in ("summary.json", "series.parquet", "histograms.parquet", "latency.csv", "client_latency.csv"):
        assert (tmp_path / "fresh" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    uncached = simapf.run(TINY, cache=False)
    assert not uncached.cached
    assert uncached.series.equals(again.series)


def test_a_sweep_row_from_the_cache_is_the_computed_one(tmp_path, cache_dir):
    (tmp_path / "storm.yaml").write_text(f"""
name: storm
base: {ROOT}/scenarios/relist-storm.yaml
factors:
  run.duration_s: [200]
replications: 2
""")  # every metric
    spec = tmp_path / "storm.yaml"
    before = _runs()
    first = simapf.sweep(spec, tmp_path / "first", workers=1)
    middle = _runs()
    second = simapf.sweep(spec, tmp_path / "second", workers=1)
    assert (middle[0] - before[0], middle[1] - before[1]) == (0, 2)
    assert (_runs()[0] - middle[0], _runs()[1] - middle[1]) == (2, 0)
    for path in sorted((tmp_path / "first").glob("run-*.parquet")):
        # The table of each run, wall_s included, as the first sweep wrote it.
        assert pq.read_table(path).equals(pq.read_table(tmp_path / "second" / path.name)), path.name
        assert (tmp_path / "second" / path.name).read_bytes() == path.read_bytes(), path.name
    assert first.equals(second)


def test_a_comparison_from_the_cache_is_the_computed_one(cache_dir):
    overrides = {"run.duration_s": 200, "kubernetes.feature_gates.StreamingCollectionEncodingToJSON": False}
    args = dict(policies=["upstream", "streamed-cache-cap"], replications=2, workers=1, overrides=overrides)
    fresh = simapf.compare(ROOT / "scenarios" / "relist-storm.yaml", **args)
    before = _runs()
    again = simapf.compare(ROOT / "scenarios" / "relist-storm.yaml", **args)
    assert _runs()[0] - before[0] == 4 and _runs()[1] == before[1]
    assert fresh.table.to_csv() == again.table.to_csv()
    assert fresh.differences.to_csv() == again.differences.to_csv()
    assert fresh.runs.to_csv() == again.runs.to_csv()  # wall_s too: each run's own


def test_a_calibration_cell_and_a_validation_reading_from_the_cache_are_the_computed_ones(cache_dir):
    from simapf.calibrate import published
    from simapf.calibrate.data import load_rows
    from simapf.calibrate.grid import run_grid
    from simapf.calibrate.record import load_params
    from simapf.calibrate.report import all_cells

    params, setup, _record = load_params()
    cheapest = sorted(all_cells(load_rows()), key=lambda c: setup.requests_for(c.row.qps))[:2]
    fresh = run_grid(cheapest, params, setup, n_jobs=1)
    before = _runs()
    assert run_grid(cheapest, params, setup, n_jobs=1) == fresh
    assert _runs()[0] - before[0] == 2 and _runs()[1] == before[1]
    row = "issue114276-memory-after-20-lists"
    table = published.run_table([row], workers=1, seeds=2)
    before = _runs()
    again = published.run_table([row], workers=1, seeds=2)
    assert _runs()[0] - before[0] == 2 and _runs()[1] == before[1]
    assert table.to_csv() == again.to_csv()


# ------------------------------------------------------------------------------ keys


def test_another_seed_parameter_or_version_misses(cache_dir, monkeypatch):
    simapf.run(TINY)
    changes = ({"run.seed": 2}, {"clients.getter.rate_per_s": 21}, {"apiserver.params.request_cpu.request_core_s": 8e-4})
    for overrides in changes:
        before = _runs()
        assert not simapf.run(TINY, overrides).cached, overrides
        assert _runs()[1] - before[1] == 1, overrides
    assert simapf.run(TINY).cached
    monkeypatch.setattr(simapf.version, "__version__", "9.9.9")
    assert not simapf.run(TINY).cached
    assert len(_entries(cache_dir, "result")) == 5


def test_a_file_the_scenario_names_is_part_of_the_key(tmp_path, cache_dir):
    """An APF configuration file edited between two runs: the second run is computed."""
    shutil.copy(ROOT / "simapf" / "apf" / "bootstrap.yaml", tmp_path / "apf.yaml")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TINY.read_text() + "apf: {config: apf.yaml}\n")
    assert not simapf.run(scenario).cached
    assert simapf.run(scenario).cached
    text = (tmp_path / "apf.yaml").read_text()
    assert "nominalConcurrencyShares: 20" in text
    (tmp_path / "apf.yaml").write_text(text.replace("nominalConcurrencyShares: 20", "nominalConcurrencyShares: 21", 1))
    assert not simapf.run(scenario).cached


def test_a_calibration_file_the_scenario_names_is_part_of_the_key(tmp_path, cache_dir):
    """A parameter file (a calibration record) edited between two runs: the second is computed."""
    (tmp_path / "fitted.yaml").write_text("params:\n  request_cpu: {request_core_s: 0.0008}\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(TINY.read_text() + "\n" + "apiserver: {params_file: fitted.yaml}\n")
    assert not simapf.run(scenario).cached
    assert simapf.run(scenario).cached
    (tmp_path / "fitted.yaml").write_text("params:\n  request_cpu: {request_core_s: 0.0009}\n")
    assert not simapf.run(scenario).cached


def _row_keys(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """The row key of a sweep's task, and of that task with one of its inputs changed."""
    from simapf.sweeps.measure import bundle

    def task(overrides: dict | None = None, fitted: str = "0.0008", metrics=("peak_rss_bytes",)) -> RunTask:
        (tmp_path / "fitted.yaml").write_text(f"params:\n  request_cpu: {{request_core_s: {fitted}}}\n")
        loaded = simapf.load_scenario(TINY, {"apiserver.params_file": str(tmp_path / "fitted.yaml"),
                                             **(overrides or {})})  # fmt: skip
        data, files = bundle(loaded)
        return RunTask(key={"run_id": 0}, scenario=data, files=files, metrics=metrics)

    keys = {
        "base": row_key(task()),
        "seed": row_key(task({"run.seed": 2})),
        "scenario": row_key(task({"clients.getter.rate_per_s": 21})),
        "calibration parameter": row_key(task({"apiserver.params.request_cpu.request_core_s": 9e-4})),
        "calibration file": row_key(task(fitted="0.0009")),
        "metrics asked": row_key(task(metrics=("peak_rss_bytes", "oom_kills"))),
    }
    monkeypatch.setattr(simapf.version, "__version__", "9.9.9")
    keys["version"] = row_key(task())
    monkeypatch.undo()
    monkeypatch.setattr(cache, "source_digest", lambda: "0" * 64)  # the model's code changed
    keys["sources"] = row_key(task())
    monkeypatch.undo()
    return keys


def test_every_input_of_a_sweep_row_changes_its_key(tmp_path, monkeypatch):
    keys = _row_keys(tmp_path, monkeypatch)
    assert all(keys.values())
    assert len(set(keys.values())) == len(keys), keys
    assert _row_keys(tmp_path, monkeypatch)["base"] == keys["base"]  # and the same inputs, the same key


def test_every_input_of_a_calibration_cell_changes_its_key(monkeypatch):
    from simapf.calibrate.data import load_rows
    from simapf.calibrate.grid import cell_key
    from simapf.calibrate.record import load_params
    from simapf.calibrate.report import all_cells

    params, setup, _record = load_params()
    cell, other = all_cells(load_rows())[:2]
    cpu = params.request_cpu.model_copy(update={"request_core_s": params.request_cpu.request_core_s * 1.01})
    keys = {
        "base": cell_key(cell, params, setup),
        "cell": cell_key(other, params, setup),
        "calibration parameter": cell_key(cell, params.model_copy(update={"request_cpu": cpu}), setup),
        "seed": cell_key(cell, params, setup.model_copy(update={"seed": setup.seed + 1})),
    }
    monkeypatch.setattr(simapf.version, "__version__", "9.9.9")
    keys["version"] = cell_key(cell, params, setup)
    assert len(set(keys.values())) == len(keys), keys
    monkeypatch.undo()
    assert cell_key(cell, params, setup) == keys["base"]


def test_the_sources_count_but_a_figures_style_and_the_bench_do_not(tmp_path):
    package = tmp_path / "simapf"
    shutil.copytree(ROOT / "simapf", package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    digest = cache.source_digest(package)
    with open(package / "outputs" / "style.py", "a") as fh:
        fh.write("\n# a new colour\n")
    with open(package / "figures" / "kepfigures.py", "a") as fh:
        fh.write("\n# a new layout\n")
    # Nor does the real bench, nor a cell of its data set measured again.
    with open(package / "bench" / "measure.py", "a") as fh:
        fh.write("\n# another sampler\n")
    with open(package / "calibration" / "bench" / "cells.csv", "a") as fh:
        fh.write("a-cell-measured-again\n")
    assert cache.source_digest.__wrapped__(package) == digest
    with open(package / "server" / "memory.py", "a") as fh:
        fh.write("\n# a model change\n")
    changed = cache.source_digest.__wrapped__(package)
    assert changed != digest
    # A compiled core beside the sources (its extension modules, the digest of what it was built
    # from) runs the same model: the same entries.
    (package / "_compiled__mypyc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF...")
    (package / "server" / "memory.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF...")
    (package / "_compiled.sha256").write_text("0" * 64 + "\n")
    assert cache.source_digest.__wrapped__(package) == changed
    (package / "calibration" / "params.yaml").write_text("# another calibration\n")
    assert cache.source_digest.__wrapped__(package) != changed


def test_a_run_of_the_users_own_policy_code_is_never_cached(cache_dir):
    loaded = simapf.load_scenario(TINY, {"apf.estimator.list_policy": "mine:Policy"})  # not imported yet
    data = loaded.scenario.model_dump(mode="json")
    assert cache.names_user_code(data) and row_key(RunTask(key={}, scenario=data)) is None
    assert row_key(RunTask(key={}, scenario=simapf.load_scenario(TINY).scenario.model_dump(mode="json")))
    calls = []
    assert cache.result(loaded, lambda: calls.append(1) or "computed") == "computed"
    assert cache.result(loaded, lambda: calls.append(1) or "computed") == "computed"
    assert calls == [1, 1] and not _entries(cache_dir)


# ------------------------------------------------------------------------------ the folder


def _write_the_same_entry(folder: str, value: bytes, times: int) -> None:
    store = cache.Cache(Path(folder))
    for _ in range(times):
        store.put("row", "ab" * 32, value)


def test_two_writers_of_the_same_entry_leave_one_good_entry_and_readers_never_see_half(tmp_path):
    value = os.urandom(3 * 2**20)  # large enough that a write takes a while
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_the_same_entry, args=(str(tmp_path), value, 15)) for _ in range(2)]
    for w in writers:
        w.start()
    store = cache.Cache(tmp_path)
    seen = 0
    while any(w.is_alive() for w in writers):
        got = store.get("row", "ab" * 32, ANY)
        if got is not cache.MISS:
            assert got == value
            seen += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert store.get("row", "ab" * 32, ANY) == value
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["row-" + "ab" * 32]  # no temporary file left
    assert seen > 0


def test_past_its_size_the_least_recently_used_entries_go(tmp_path):
    store = cache.Cache(tmp_path, max_bytes=2_500_000)
    blobs = [os.urandom(300_000) for _ in range(9)]  # incompressible: entries of about 300 kB
    keys = [f"{i:064x}" for i in range(9)]

    def later() -> None:
        time.sleep(0.05)  # file times move by the kernel's tick: keep the uses apart

    for k, blob in zip(keys[:8], blobs):
        store.put("row", k, blob)  # 8 of them fit
        later()
    assert store.get("row", keys[0], ANY) == blobs[0]  # used again: entry 1 is now the least recently used
    later()
    store.put("row", keys[8], blobs[8])
    assert store.get("row", keys[1], ANY) is cache.MISS
    assert all(store.get("row", k, ANY) == b for k, b in zip(keys, blobs) if k != keys[1])
    assert store.size() <= 2_500_000
    store.put("row", "d" * 64, os.urandom(400_000))  # more than an eighth of the bound: not kept
    assert store.get("row", "d" * 64, ANY) is cache.MISS


def test_a_damaged_entry_misses_and_goes(tmp_path):
    store = cache.Cache(tmp_path)
    store.put("row", "e" * 64, {"x": 1.0})
    path = store.path("row", "e" * 64)
    path.write_bytes(path.read_bytes()[:-5])
    assert store.get("row", "e" * 64, ANY) is cache.MISS
    assert not path.exists()


class _Other:
    """Not what any entry holds."""


BAD_VALUES = {"a dict": {"summary": {}}, "none": None, "a string": "a run", "another object": _Other()}


def _replace_entries(folder: Path, kind: str, bad) -> list[Path]:
    """Every entry of `kind` in the cache `folder` made to hold `bad` (a FIFO for "a fifo")."""
    entries = _entries(folder, kind)
    assert entries
    for path in entries:
        path.unlink()
        if bad == "a fifo":
            os.mkfifo(path)
        else:
            path.write_bytes(cache._encode(cache.ENTRY.match(path.name)["key"], bad))
    return entries


def _until(seconds: int):
    """Fail, rather than hang, a call that does not return within `seconds`."""
    import signal

    def overtime(_signum, _frame):
        raise TimeoutError(f"over {seconds} s")

    signal.signal(signal.SIGALRM, overtime)
    signal.alarm(seconds)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]


def _same_run(text: str) -> list[str]:
    """A run's report but for its wall time and where it wrote."""
    return [line for line in text.splitlines()[1:] if "wrote " not in line]


@pytest.mark.parametrize("bad", [*BAD_VALUES, "a fifo"])
def test_a_run_entry_holding_the_wrong_thing_is_a_miss_computed_again(tmp_path, cache_dir, bad, caplog):
    code, fresh, _ = _cli(["run", str(TINY), "--out", str(tmp_path / "a"), "--no-progress"])
    assert code == 0
    (entry,) = _replace_entries(cache_dir, "result", BAD_VALUES.get(bad, bad))
    _until(60)
    try:
        result = CliRunner().invoke(main, ["run", str(TINY), "--out", str(tmp_path / "b"), "--no-progress"])
    finally:
        import signal

        signal.alarm(0)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert _same_run(result.stdout) == _same_run(fresh)
    (warning,) = _warnings(caplog)
    assert entry.name in warning
    assert stat.S_ISREG(entry.stat().st_mode) and isinstance(cache.Cache(cache_dir).get(
        "result", cache.ENTRY.match(entry.name)["key"], cache._is_result), simapf.simulation.result.Result)  # replaced


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_rows_holding_the_wrong_thing_are_misses_computed_again(tmp_path, cache_dir, command, caplog):
    spec = tmp_path / "tiny-sweep.yaml"
    spec.write_text(f"name: tiny\nbase: {TINY}\nfactors: {{run.duration_s: [5, 6]}}\nreplications: 1\n")
    args = {"sweep": ["sweep", str(spec), "--no-progress"],
            "compare": ["compare", str(TINY), "--policy", "upstream", "--policy", "streamed-cache-cap", "--no-progress"]}[command]  # fmt: skip
    out = ["--out", str(tmp_path / "first")] if command == "sweep" else []
    code, fresh, _ = _cli(args + out)
    assert code == 0
    entries = _replace_entries(cache_dir, "row", {"wall_s": 1.0})  # a dict, but no row
    out = ["--out", str(tmp_path / "second")] if command == "sweep" else []
    before = _runs()
    result = CliRunner().invoke(main, args + out)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert _runs()[1] - before[1] == len(entries)  # every one computed again
    assert len(_warnings(caplog)) == 1, _warnings(caplog)
    if command == "compare":
        assert result.stdout == fresh
    _, again, _ = _cli(args + (["--out", str(tmp_path / "third")] if command == "sweep" else []))
    assert _runs()[0] - before[0] == len(entries)  # replaced: the third reads them all


def test_clear_removes_entries_and_nothing_else(tmp_path, cache_dir):
    simapf.run(TINY)
    (cache_dir / "results" / "notes.txt").write_text("mine")
    (cache_dir / "mine.txt").write_text("mine")
    code, out, _err = _cli(["cache"])
    assert code == 0 and str(cache_dir) in out and "result: 1 entries" in out
    code, out, _err = _cli(["cache", "--clear"])
    assert code == 0 and "removed 1 entries" in out
    assert sorted(p.name for p in (cache_dir / "results").iterdir()) == ["notes.txt"]
    assert (cache_dir / "mine.txt").read_text() == "mine"


def test_a_folder_others_can_write_to_is_refused(tmp_path, cache_dir):
    cache_dir.mkdir()
    cache_dir.chmod(0o777)
    code, out, err = _cli(["run", str(TINY), "--no-progress"])
    assert code == 2 and out == ""
    assert err.startswith("simapf: error: the cache folder") and "writable by other users" in err
    assert len(err.strip().splitlines()) == 1
    cache_dir.chmod(0o700)
    assert not stat.S_IMODE(cache_dir.stat().st_mode) & 0o077


def test_a_size_that_does_not_parse_is_one_line(cache_dir):
    code, out, err = _cli(["run", str(TINY), "--no-progress"], env={"SIMAPF_CACHE_SIZE": "lots"})
    assert code == 2 and out == "" and err.startswith("simapf: error: SIMAPF_CACHE_SIZE='lots'")


# ------------------------------------------------------------------------------ off


def test_no_cache_and_the_environment_variable_compute_every_run(cache_dir):
    code, _out, err = _cli(["run", str(TINY), "--no-progress", "--no-cache"])
    assert code == 0 and not cache_dir.exists()
    code, _out, err = _cli(["run", str(TINY), "--no-progress"], env={"SIMAPF_NO_CACHE": "1"})
    assert code == 0 and not cache_dir.exists()
    code, _out, err = _cli(["run", str(TINY), "--no-progress"])
    assert code == 0 and "from the result cache" not in err and len(_entries(cache_dir, "result")) == 1
    code, _out, err = _cli(["run", str(TINY), "--no-progress"])
    assert code == 0 and "simapf: the run came from the result cache" in err
    before = _runs()
    code, _out, err = _cli(["run", str(TINY), "--no-progress", "--no-cache"])
    assert code == 0 and "from the result cache" not in err and _runs()[0] == before[0]
    code, _out, err = _cli(["run", str(TINY), "--no-progress"], env={"SIMAPF_NO_CACHE": "1"})
    assert code == 0 and "from the result cache" not in err and _runs()[0] == before[0]
    assert not simapf.run(TINY, cache=False).cached
    with cache.turned_off():
        assert not simapf.run(TINY).cached
    assert simapf.run(TINY).cached


@pytest.mark.parametrize("command", ["run", "compare", "sweep", "optimize", "figures", "calibrate"])
def test_every_command_that_runs_simulations_takes_no_cache(command):
    code, out, _err = _cli([command, "--help"])
    assert code == 0 and "--no-cache" in out


def test_calibration_cells_and_validation_readings_holding_the_wrong_thing_are_misses(cache_dir):
    from simapf.calibrate import published
    from simapf.calibrate.data import load_rows
    from simapf.calibrate.grid import run_grid
    from simapf.calibrate.record import load_params
    from simapf.calibrate.report import all_cells

    params, setup, _record = load_params()
    cheapest = sorted(all_cells(load_rows()), key=lambda c: setup.requests_for(c.row.qps))[:2]
    fresh = run_grid(cheapest, params, setup, n_jobs=1)
    # Each cell's entry made to hold the other's result: a CellResult, but not this cell's.
    a, b = _entries(cache_dir, "cell")
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(cache._encode(cache.ENTRY.match(a.name)["key"], cache._decode(b_bytes)[1]))
    b.write_bytes(cache._encode(cache.ENTRY.match(b.name)["key"], cache._decode(a_bytes)[1]))
    before = _runs()
    assert run_grid(cheapest, params, setup, n_jobs=1) == fresh
    assert _runs()[1] - before[1] == 2
    row = "issue114276-memory-after-20-lists"
    table = published.run_table([row], workers=1, seeds=1)
    _replace_entries(cache_dir, "validation", {"values": {}, "regime": "", "inputs": {}, "wall_s": 1.0, "sim_s": 1})
    before = _runs()
    assert published.run_table([row], workers=1, seeds=1).to_csv() == table.to_csv()
    assert _runs()[0] == before[0]  # nothing read back: computed again


def test_a_bad_scheduler_address_is_refused_though_every_run_is_in_the_cache(cache_dir):
    args = ["compare", str(TINY), "--policy", "upstream", "--policy", "size-based", "--no-progress"]
    assert CliRunner().invoke(main, args).exit_code == 0
    result = CliRunner().invoke(main, [*args, "--dask", "not-an-address"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("simapf: error: --dask not-an-address: not a Dask scheduler's address")
    # A well-formed address no run needed is said so, not passed over in silence.
    result = CliRunner().invoke(main, [*args, "--dask", "tcp://127.0.0.1:9"])
    assert result.exit_code == 0
    assert result.stderr.splitlines()[-1].endswith("; the Dask scheduler at tcp://127.0.0.1:9 was not needed")


def test_a_hit_validates_its_summary_once(cache_dir, monkeypatch):
    loaded = simapf.load_scenario(TINY)
    simapf.run(loaded)  # computed and kept
    calls = []
    real = simapf.simulation.result.validate
    monkeypatch.setattr(simapf.simulation.result, "validate", lambda s: calls.append(1) or real(s))
    got = simapf.run(loaded)
    assert got.cached and len(calls) == 1
