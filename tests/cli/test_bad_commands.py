"""Every command refuses bad input as `run --out` does: one line, exit 2, and nothing changed.

The corpus is `tests/data/bad-commands/*.yaml`, a list of cases per file, each a command line a
user could type in a folder the case sets up:

    - name: truncated-series              # unique within its file; the case is FILE/NAME
      setup:                               # run in a fresh folder, in order, before the command
        - {run: r}                         # r: a finished `simapf run --out` of _files/tiny.yaml
        - {truncate: r/series.parquet, to: 100}
      args: [export, r, --format, openmetrics, -o, out.om]
      expect: ["r/series.parquet"]        # substrings of the one-line error

Setup steps: `run: DIR` (a copy of the finished run), `copy: SRC` with optional `to: DST` (SRC
is under `_files/`), `write: PATH` with `text:` or `hex:` (and `append: TEXT, times: N` to add TEXT
N times after `text`, for a file too long to write out), `mkdir: PATH`, `truncate: PATH` with
`to: BYTES`, `remove: PATH`, `symlink: PATH` with `to: TARGET`. In `args`, `{files}` is the
`_files/` folder, `{repo}` the repository and `{case}` the case's folder. The case's folder is
on sys.path, as `PYTHONPATH=.` would put it, and `env:` sets environment variables.

Each case must end in exit status 2 with one line on stderr that starts `simapf: error: `, holds
no traceback and every `expect` substring, print nothing on stdout, leave every file and folder
of its folder as it was (nothing written, nothing half-written, no staging directory, nothing
of the user's changed or lost), and stay within 60 s and 2 GiB of resident memory. They all run
in one child process (`tests/bad_command_runner.py`), as the user's commands would.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parents[1]
REPO = HERE.parent
CORPUS = HERE / "data" / "bad-commands"
FILES = CORPUS / "_files"
MAX_RSS_BYTES = 2 * 2**30
MAX_WALL_S = 60

# Every subcommand the corpus must reach, and how many cases it must hold in all.
SUBCOMMANDS = {"run", "compare", "sweep", "optimize", "figures", "export", "import", "replay", "calibrate",
               "apf-report", "compile"}  # fmt: skip
MIN_CASES = 200


def _load_corpus() -> dict[str, dict]:
    cases: dict[str, dict] = {}
    for path in sorted(CORPUS.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text()) or []:
            name = f"{path.stem}/{case['name']}"
            assert name not in cases, f"{name} is in the corpus twice"
            assert set(case) <= {"name", "setup", "args", "expect", "env", "why"}, (name, sorted(case))
            cases[name] = case
    return cases


CASES = _load_corpus()


def _subcommand(args: list[str]) -> str:
    return next(a for a in args if not a.startswith("-"))


def test_the_corpus_reaches_every_subcommand():
    assert len(CASES) >= MIN_CASES, len(CASES)
    reached = {_subcommand(c["args"]) for c in CASES.values()}
    assert SUBCOMMANDS <= reached, sorted(SUBCOMMANDS - reached)  # (and a command that does not exist)


def _setup(folder: Path, steps: list[dict], run_dir: Path) -> None:
    for step in steps:
        ((kind, target),) = [(k, v) for k, v in step.items() if k in
                             {"run", "copy", "write", "mkdir", "truncate", "remove", "symlink"}]  # fmt: skip
        dest = folder / target
        if kind == "run":
            shutil.copytree(run_dir, dest)
        elif kind == "copy":
            src = FILES / target
            dest = folder / step.get("to", Path(target).name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest)
        elif kind == "write":
            dest.parent.mkdir(parents=True, exist_ok=True)
            if "hex" in step:
                dest.write_bytes(bytes.fromhex(step["hex"]))
            else:
                text = step["text"] + step.get("append", "") * int(step.get("times", 0))
                dest.write_text(text, encoding="utf-8", errors="surrogatepass")
        elif kind == "mkdir":
            dest.mkdir(parents=True, exist_ok=True)
        elif kind == "truncate":
            with open(dest, "r+b") as fh:
                fh.truncate(int(step["to"]))
        elif kind == "remove":
            (shutil.rmtree if dest.is_dir() else os.remove)(dest)
        elif kind == "symlink":
            dest.symlink_to(step["to"])


def _snapshot(folder: Path) -> dict[str, tuple]:
    """Every path under `folder`: its kind, mode and (for files) the hash of its bytes."""
    seen: dict[str, tuple] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            rel = str(path.relative_to(folder))
            st = path.lstat()
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = ("dir", st.st_mode)
            else:
                seen[rel] = ("file", st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
    return seen


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fixture") / "run"
    proc = subprocess.run([sys.executable, "-m", "simapf.cli", "run", str(FILES / "tiny.yaml"), "--out", str(out),
                           "--no-progress"], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, finished_run) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("bad-commands")
    plan, before = [], {}
    for i, (name, case) in enumerate(sorted(CASES.items())):
        folder = work / f"case{i}"
        folder.mkdir()
        _setup(folder, case.get("setup", []), finished_run)
        fill = {"files": str(FILES), "repo": str(REPO), "case": str(folder)}
        args = [str(a).format(**fill) for a in case["args"]]
        env = {k: str(v).format(**fill) for k, v in (case.get("env") or {}).items()}
        plan.append({"name": name, "args": args, "cwd": str(folder), "env": env, "sys_path": [str(folder)]})
        before[name] = (folder, _snapshot(folder))
    (work / "cases.json").write_text(json.dumps(plan))
    # Python's own cache of a user's imported policy module (__pycache__ in the case's folder) is
    # not simapf writing there: the runner and its worker processes write none.
    proc = subprocess.run([sys.executable, str(HERE / "bad_command_runner.py"), str(work / "cases.json")],
                          capture_output=True, text=True, timeout=3600, cwd=work,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip
    results = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        folder, snap = before[row["name"]]
        row["changed"] = _changes(snap, _snapshot(folder))
        results[row["name"]] = row
    assert results, proc.stderr[-3000:]
    return results


def _changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    return sorted([f"new: {p}" for p in after.keys() - before.keys()]
                  + [f"gone: {p}" for p in before.keys() - after.keys()]
                  + [f"changed: {p}" for p in before.keys() & after.keys() if before[p] != after[p]])  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_command_is_one_line_exit_2_and_changes_nothing(name, outcomes):
    case = CASES[name]
    assert name in outcomes, "the corpus run stopped before this case (killed by its memory cap?)"
    got = outcomes[name]
    assert got["escaped"] is None, got["escaped"]
    assert got["exit_code"] == 2, got
    lines = got["stderr"].splitlines()
    assert len(lines) == 1, got["stderr"]
    line = lines[0]
    assert line.startswith("simapf: error: ") and "Traceback" not in line
    for text in case.get("expect", []):
        assert str(text) in line, f"{text!r} not in {line!r}"
    assert got["stdout"] == ""
    assert got["changed"] == [], f"the command changed its folder: {got['changed']}"
    assert got["wall_s"] <= MAX_WALL_S
    assert got["max_rss_bytes"] <= MAX_RSS_BYTES, f"{got['max_rss_bytes'] / 2**20:.0f} MiB resident"
