"""Reading the user's files (regular files only, within a limit, no key twice) and the bounds on
how much work a run, a sweep or a search may be: what the bad-command corpus
(`tests/data/bad-commands/bounds.yaml`) cannot express."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from simapf.cli import main
from simapf.errors import ConfigError
from simapf.files import load_yaml, parse_yaml_value, read_bytes, read_text, read_yaml
from simapf.messages import brief
from simapf.scenario import load_scenario
from simapf.scenario import work
from simapf.sweeps.plan import range_values
from simapf.sweeps.spec import announce_checks

TINY = Path(__file__).parent / "data" / "bad-commands" / "_files" / "tiny.yaml"


# ------------------------------------------------------------------ reading files


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    failed: list[str] = []
    reader = threading.Thread(target=lambda: _refused(fifo, failed), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading a FIFO waited for a writer"
    assert failed == [f"{fifo}: is a FIFO, not a regular file"]


def _refused(path: Path, failed: list[str]) -> None:
    try:
        read_yaml(path)
    except ConfigError as err:
        failed.append(str(err))


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs /proc")
def test_the_read_stops_at_the_limit_where_the_size_says_nothing():
    # /proc files are regular files of size 0 whose reads return more: only the bounded read
    # can tell, as it would for a file that grows while simapf reads it.
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(ConfigError, match=r"^/proc/self/status: more than simapf reads from a thing \(100 bytes\)$"):
        read_bytes(Path("/proc/self/status"), limit=100, what="a thing")
    assert len(read_bytes(Path("/proc/self/status"), limit=1 << 20)) > 100


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(3 * 2**20)
    opened = []
    monkeypatch.setattr(os, "fdopen", lambda *a, **k: opened.append(a) or pytest.fail("read"))
    with pytest.raises(ConfigError, match=r"big.yaml: 3 MiB is more than simapf reads from a YAML file \(2 MiB\)"):
        read_yaml(big)


def test_text_is_read_with_universal_newlines_as_before(tmp_path):
    f = tmp_path / "crlf.txt"
    f.write_bytes(b"a: 1\r\nb: 2\rc: 3\n")
    assert read_text(f) == "a: 1\nb: 2\nc: 3\n" == f.read_text()


def test_an_empty_yaml_file_is_refused_unless_asked_for(tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("# only a comment\n")
    with pytest.raises(ConfigError, match="empty.yaml: empty: no YAML in it"):
        read_yaml(f)
    assert read_yaml(f, empty_ok=True) is None


def test_a_key_twice_is_refused_with_both_lines():
    with pytest.raises(ConfigError) as caught:
        load_yaml("clients:\n  - name: a\n    count: 1\n    count: 2\n", "s.yaml")
    assert str(caught.value) == "s.yaml: invalid YAML at line 4, column 5: duplicate key 'count' (first at line 3)"


def test_a_merge_key_may_be_overridden_and_documents_are_checked_each():
    data = load_yaml("base: &b {cores: 4, gogc: 100}\nfast:\n  <<: *b\n  cores: 16\n", "s.yaml")
    assert data["fast"] == {"cores": 16, "gogc": 100}
    with pytest.raises(ConfigError, match=r"line 4, column 1: duplicate key 'kind' \(first at line 3\)"):
        load_yaml("kind: A\n---\nkind: B\nkind: C\n", "apf.yaml", all_documents=True)


def test_a_command_line_value_is_yaml_or_the_text_itself_but_never_a_key_twice():
    assert parse_yaml_value("{cores: 4}", "--set apiserver") == {"cores": 4}
    assert parse_yaml_value("a: b: c", "--set name") == "a: b: c"  # not YAML: the text as written
    assert parse_yaml_value("  ", "--set name") == ""
    with pytest.raises(ConfigError, match="--set apiserver: invalid YAML .* duplicate key 'cores'"):
        parse_yaml_value("{cores: 4, cores: 8}", "--set apiserver")


def test_a_long_value_is_cut_short_in_a_message():
    shown = brief("x" * 1_000_000)
    assert shown.startswith("'xxx") and shown.endswith("... (1,000,000 characters)") and len(shown) < 100
    assert brief("pods") == "'pods'"


# ------------------------------------------------------------------ the work of a run


def _loaded(tmp_path, text: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_scenario(path)


def test_the_estimated_series_cover_what_a_run_samples(tmp_path):
    from simapf.simulation.runner import run

    loaded = load_scenario(TINY, ["run.duration_s=5"])
    estimate = work.estimate(loaded)
    result = run(loaded)
    scrapes = result.series["time_s"].nunique()
    sampled = len(result.series) / scrapes
    per_scrape = estimate.samples / (5 / loaded.scenario.run.scrape_interval_s + 1)
    assert sampled <= per_scrape <= 3 * sampled, (sampled, per_scrape)


def test_a_small_run_is_not_announced_and_a_large_one_is(tmp_path):
    small = work.estimate(load_scenario(TINY))
    assert work.notice(small) is None
    large = work.estimate(_loaded(tmp_path, "run: {duration_s: 80000}\n"))  # ~4 M samples: minutes
    line = work.notice(large)
    assert line is not None and line.startswith("a large run: ") and "series samples" in line
    assert work.notice(small, runs=10_000, workers=2).startswith("10,000 runs of ~")


def test_work_past_its_bounds_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"run: .* series samples .* more than 10,000,000"):
        _loaded(tmp_path, "run: {duration_s: 1000000, scrape_interval_s: 1}\n")
    with pytest.raises(ConfigError, match="would need ~.* GiB of memory, more than 8.0 GiB"):
        _loaded(tmp_path, "apiserver: {replicas: 16}\napf: {priority_levels: {workload-low: {queues: 900000, hand_size: 1}}}\n")


def test_discovery_walks_count_toward_max_requests(tmp_path):
    text = ("run: {duration_s: 100, max_requests: 1000}\n"
            "clients: [{name: k, kind: discovery, identity: {user: u}, interval_s: 1, extra_group_versions: 100}]\n")
    with pytest.raises(ConfigError, match=r"~10,200 requests in 100 s, more than run.max_requests \(1,000\)"):
        _loaded(tmp_path, text)


def test_a_valid_run_prints_no_warning(tmp_path):
    result = CliRunner().invoke(main, ["run", str(TINY), "--no-progress", "--set", "run.duration_s=2"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


# ------------------------------------------------------------------ sweeps and searches


def test_a_range_is_counted_before_it_is_made():
    started = time.perf_counter()
    with pytest.raises(ValueError, match="1,000,000,000,000 values, more than the 100 runs"):
        range_values(0, 10**12, 1, limit=100)
    with pytest.raises(ValueError, match="100,000,000 values"):
        range_values(0.0, 1.0, 1e-8, limit=100)
    assert time.perf_counter() - started < 1
    assert range_values(0, 10, 5, limit=2) == [0, 5]


def test_long_checking_is_announced_before_it_starts(caplog):
    with caplog.at_level(logging.WARNING, logger="simapf.sweeps.spec"):
        announce_checks("sweep.yaml", 100, 0.01)
        assert caplog.records == []
        announce_checks("sweep.yaml", 100_000, 0.002)
    assert [r.getMessage() for r in caplog.records] == ["sweep.yaml: checking 100,000 scenarios before the first run, ~3 min"]


# ------------------------------------------------------------------ compile


def test_compile_without_a_compiler_is_one_line_and_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["compile"], env={"CC": str(tmp_path / "no-such-cc")})
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"simapf: error: no C compiler: {tmp_path / 'no-such-cc'} (CC) is not found; "
                                          "install one (e.g. gcc) or set CC"]  # fmt: skip
