"""Every file simapf writes is as safe as an --out directory, and a killed command's leftovers go.

Single-file outputs (`export -o`, `replay --out`, `calibrate --out`) refuse an existing file
unless --force, never replace the command's own input, appear whole or not at all, and fail in
one line that names the real reason. A run directory's marker records each file's size and
sha256, which export checks. Staging directories belong to the process writing them while it
lives: the next command writing the same kind of output there removes those a killed process
left, and nothing else. What the bad-command corpus cannot show lives here: a kill -9, a
permission error (this runs as root), a full disk, and the valid runs.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import simapf.files as files
from simapf.cli import main
from simapf.files import OUTPUT_MARKER, STAGING_PREFIX

HERE = Path(__file__).parents[1]
TINY = HERE / "data" / "bad-commands" / "_files" / "tiny.yaml"
RUN_FILES = {"summary.json", "series.parquet", "series.csv", "latency.csv", "client_latency.csv",
             "priority_levels.csv", "histograms.parquet", "overview.png", "overview.svg",
             "overview.provenance.json", OUTPUT_MARKER}  # fmt: skip
POSIX = pytest.mark.skipif(sys.platform == "win32" or files.fcntl is None, reason="POSIX signals and locks")


def _cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_error(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("simapf: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _names(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


def _staging(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(STAGING_PREFIX))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fixture") / "r"
    result = _cli("run", TINY, "--out", out, "--no-progress")
    assert result.exit_code == 0, result.output
    return out


# ------------------------------------------------------------------ the run's marker


def test_the_marker_records_each_files_size_and_sha256(run_dir):
    import hashlib

    marker = json.loads((run_dir / OUTPUT_MARKER).read_text())
    assert set(marker["contents"]) == set(marker["files"]) == RUN_FILES - {OUTPUT_MARKER}
    for name, recorded in marker["contents"].items():
        data = (run_dir / name).read_bytes()
        assert recorded == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_an_output_folder_is_an_ordinary_folder(run_dir):
    assert run_dir.stat().st_mode & 0o777 == 0o777 & ~files._umask()


def test_export_reads_a_run_written_before_the_marker_had_hashes(run_dir, tmp_path):
    assert _cli("export", run_dir, "--format", "openmetrics", "-o", tmp_path / "new.om").exit_code == 0
    old = tmp_path / "old"
    old.mkdir()
    for p in run_dir.iterdir():
        (old / p.name).write_bytes(p.read_bytes())
    marker = json.loads((old / OUTPUT_MARKER).read_text())
    del marker["contents"]
    (old / OUTPUT_MARKER).write_text(json.dumps(marker))
    result = _cli("export", old, "--format", "openmetrics", "-o", tmp_path / "old.om")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "old.om").read_bytes() == (tmp_path / "new.om").read_bytes()


def test_a_partial_update_keeps_the_hashes_of_the_files_it_keeps(tmp_path):
    out = tmp_path / "figs"
    with files.output_directory(out, "figures") as tmp:
        (tmp / "a.png").write_text("a")
        (tmp / "b.png").write_text("b")
    with files.output_directory(out, "figures", keep_earlier=True) as tmp:
        (tmp / "b.png").write_text("bb")
    contents = json.loads((out / OUTPUT_MARKER).read_text())["contents"]
    assert contents["a.png"]["bytes"] == 1 and contents["b.png"]["bytes"] == 2
    assert files.changed_since_written(out, "a.png", {"contents": contents}) is None
    (out / "a.png").write_text("A")
    assert "sha256" in files.changed_since_written(out, "a.png", {"contents": contents})


# ------------------------------------------------------------------ single output files


def test_force_replaces_a_file_and_a_symlink_is_replaced_not_followed(run_dir, tmp_path):
    mine = tmp_path / "mine.om"
    mine.write_text("mine\n")
    link = tmp_path / "link.om"
    link.symlink_to(mine)
    _one_line_error(_cli("export", run_dir, "--format", "openmetrics", "-o", link), "exists", "--force")
    result = _cli("export", run_dir, "--format", "openmetrics", "-o", link, "--force")
    assert result.exit_code == 0, result.output
    assert not link.is_symlink() and link.read_text().endswith("# EOF\n")
    assert mine.read_text() == "mine\n"


def test_a_missing_folder_is_made_as_for_out_directories(run_dir, tmp_path):
    result = _cli("export", run_dir, "--format", "openmetrics", "-o", tmp_path / "new" / "deeper" / "run.om")
    assert result.exit_code == 0, result.output
    assert _names(tmp_path / "new" / "deeper") == {"run.om"}


def test_a_failed_write_leaves_nothing_not_even_the_folders_it_made(run_dir, tmp_path, monkeypatch):
    def full(*_args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "replace", full)
    result = _cli("export", run_dir, "--format", "openmetrics", "-o", tmp_path / "new" / "run.om")
    _one_line_error(result, "new/run.om", "cannot write", os.strerror(errno.ENOSPC))
    assert _names(tmp_path) == set()


def test_a_read_only_folder_is_named_as_such(run_dir, tmp_path, monkeypatch):
    # Root may write anywhere, so the refusal is what os.access would say to a user.
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(files.os, "access", lambda p, mode: False if Path(p) == locked else real_access(p, mode))
    result = _cli("export", run_dir, "--format", "openmetrics", "-o", locked / "run.om")
    _one_line_error(result, f"-o {locked / 'run.om'}", "permission denied", str(locked))
    result = _cli("replay", "--level", HERE / "data/bad-inputs/replay-trace/_level.json", "--trace",
                  HERE / "data/bad-inputs/replay-level/_trace.csv", "--out", locked / "out.csv")  # fmt: skip
    _one_line_error(result, "--out", "permission denied")
    result = _cli("export", run_dir, "--format", "perfdata", "-o", locked / "perf")
    _one_line_error(result, "-o", "permission denied")
    assert _names(locked) == set()


def test_a_read_only_file_system_is_named_as_such(run_dir, tmp_path, monkeypatch):
    class ReadOnly:
        f_flag = os.ST_RDONLY

    mounted = tmp_path / "mnt"
    mounted.mkdir()
    real_access, real_statvfs = os.access, os.statvfs
    monkeypatch.setattr(files.os, "access", lambda p, mode: False if Path(p) == mounted else real_access(p, mode))
    monkeypatch.setattr(files.os, "statvfs", lambda p: ReadOnly() if Path(p) == mounted else real_statvfs(p))
    result = _cli("export", run_dir, "--format", "openmetrics", "-o", mounted / "run.om")
    _one_line_error(result, "read-only file system", str(mounted))


def test_replay_force_replaces_its_own_earlier_output(tmp_path):
    args = ["replay", "--level", HERE / "data/bad-inputs/replay-trace/_level.json", "--trace",
            HERE / "data/bad-inputs/replay-level/_trace.csv", "--out", tmp_path / "out.csv"]  # fmt: skip
    assert _cli(*args).exit_code == 0
    first = (tmp_path / "out.csv").read_text()
    _one_line_error(_cli(*args), "exists", "--force")
    assert _cli(*args, "--force").exit_code == 0
    assert (tmp_path / "out.csv").read_text() == first and _names(tmp_path) == {"out.csv"}


def test_calibrate_replaces_an_earlier_record_but_nothing_else(tmp_path):
    from simapf.calibrate.command import check_out
    from simapf.calibrate.record import SHIPPED
    from simapf.errors import SimapfError

    record = tmp_path / "params.yaml"
    record.write_bytes(SHIPPED.read_bytes())
    check_out(record, None)  # refitting a record in place, as the docs do with the shipped one
    mine = tmp_path / "notes.yaml"
    mine.write_text("my notes\n")
    with pytest.raises(SimapfError, match="exists; choose another name, or pass --force"):
        check_out(mine, None)
    check_out(mine, None, force=True)
    data = tmp_path / "data.csv"
    data.write_text("x\n")
    with pytest.raises(SimapfError, match="which this command reads"):
        check_out(data, data, force=True)
    (tmp_path / "params.jacobian.json").write_text("[]\n")  # not a Jacobian simapf wrote
    with pytest.raises(SimapfError, match="Jacobian"):
        check_out(record, None)


# ------------------------------------------------------------------ leftovers of killed commands

# A command whose figure never finishes: it is surely writing, its staging directory there,
# when it is killed.
HANGING_RUN = (
    "import sys, time, simapf.outputs.figures\n"
    "simapf.outputs.figures.save_figure = lambda *a, **k: time.sleep(120)\n"
    "from simapf.cli import main\n"
    "main(sys.argv[1:])\n"
)


def _start_hanging_run(folder: Path, out: str) -> subprocess.Popen:
    """A `simapf run --out OUT` in `folder`, stopped while it writes: returns once its staging
    directory is there."""
    before = set(_staging(folder)) | (set(_staging(folder / out)) if (folder / out).is_dir() else set())
    proc = subprocess.Popen([sys.executable, "-c", HANGING_RUN, "run", str(TINY), "--out", out, "--no-progress"],
                            cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        now = set(_staging(folder)) | (set(_staging(folder / out)) if (folder / out).is_dir() else set())
        if now - before and all((p / files._OWNER).exists() for p in now - before):
            return proc
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.02)


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)


@POSIX
@pytest.mark.parametrize("first", ["new", "earlier run"])
def test_a_killed_run_leaves_staging_that_the_next_run_removes(tmp_path, first):
    if first == "earlier run":  # staging inside the output directory
        assert _cli("run", TINY, "--out", tmp_path / "out", "--no-progress").exit_code == 0
    proc = _start_hanging_run(tmp_path, "out")
    _kill(proc)
    where = tmp_path / "out" if first == "earlier run" else tmp_path
    (leftover,) = _staging(where)
    result = subprocess.run([sys.executable, "-m", "simapf.cli", "run", str(TINY), "--out", "out", "--no-progress"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert not leftover.exists()
    assert _names(tmp_path) == {"out"} and _names(tmp_path / "out") == RUN_FILES


@POSIX
def test_a_live_commands_staging_and_what_is_not_a_leftover_of_this_kind_are_kept(tmp_path):
    live = _start_hanging_run(tmp_path, "a")
    try:
        (live_staging,) = _staging(tmp_path)
        (tmp_path / ".simapf-staging.mine").mkdir()  # not simapf's: no owner file
        (tmp_path / ".simapf-staging.mine" / "data.txt").write_text("keep")
        other_kind = _killed_while_writing(tmp_path, "compare")
        elsewhere = _killed_while_writing(tmp_path / "elsewhere", "run")
        result = _cli("run", TINY, "--out", tmp_path / "b", "--no-progress")
        assert result.exit_code == 0, result.output
        assert live_staging.is_dir() and (live_staging / files._OWNER).exists()
        assert (tmp_path / ".simapf-staging.mine" / "data.txt").read_text() == "keep"
        assert other_kind.is_dir() and elsewhere.is_dir()
    finally:
        _kill(live)
    assert _cli("run", TINY, "--out", tmp_path / "b", "--no-progress").exit_code == 0
    assert not live_staging.exists()  # its owner is gone now
    assert other_kind.is_dir() and elsewhere.is_dir() and (tmp_path / ".simapf-staging.mine").is_dir()


def _killed_while_writing(folder: Path, kind: str, single_file: bool = False) -> Path:
    """The staging directory a process left in `folder`, killed while writing `kind` output."""
    folder.mkdir(exist_ok=True)
    block = (f"files.output_file(Path('out.txt'), {kind!r}, '-o')" if single_file
             else f"files.output_directory(Path('out'), {kind!r})")  # fmt: skip
    script = ("import os, signal\nfrom pathlib import Path\nimport simapf.files as files\n"
              f"with {block}:\n    os.kill(os.getpid(), signal.SIGKILL)\n")  # fmt: skip
    before = set(_staging(folder))
    proc = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (left,) = set(_staging(folder)) - before
    return left


@POSIX
def test_a_killed_export_leaves_staging_that_the_next_export_removes(run_dir, tmp_path):
    left = _killed_while_writing(tmp_path, "openmetrics", single_file=True)
    result = _cli("export", run_dir, "--format", "openmetrics", "-o", tmp_path / "run.om")
    assert result.exit_code == 0, result.output
    assert not left.exists() and _names(tmp_path) == {"run.om"}


@POSIX
def test_a_leftover_in_an_empty_out_does_not_make_it_someone_elses(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    left = _killed_while_writing(out, "run")  # as `run --out .` killed in an empty folder leaves it
    result = _cli("run", TINY, "--out", out, "--no-progress")
    assert result.exit_code == 0, result.output
    assert not left.exists() and _names(out) == RUN_FILES


def test_an_out_another_command_made_meanwhile_is_left_to_it(tmp_path):
    """Two commands given one new --out: the second to finish says so in one line and leaves
    the first's output and no staging of its own."""
    from simapf.errors import SimapfError

    out = tmp_path / "out"
    with pytest.raises(SimapfError, match=r"--out .*out: another command wrote there while this one ran"):
        with files.output_directory(out, "run") as tmp:
            (tmp / "mine.txt").write_text("mine")
            out.mkdir()  # the other command's output appears
            (out / "theirs.txt").write_text("theirs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == ["theirs.txt"]
