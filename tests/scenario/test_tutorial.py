"""docs/tutorial.md runs as written: its YAML, shell and Python blocks, in order, in a fresh directory."""

import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
SETUP = "python3 -m venv"  # the install block: the test runs in the installed environment already
# Programs the tutorial hands a run to, which simapf does not install: a command of theirs runs
# where they are installed (tests/outputs/test_export.py checks promtool's load of an export the same way).
OTHER_TOOLS = ("promtool",)


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(TUTORIAL.read_text(encoding="utf-8"))]


def test_tutorial_scenario_is_valid():
    from simapf.scenario import load_scenario
    import yaml

    (text,) = [body for lang, body in blocks() if lang == "yaml"]
    loaded = load_scenario(yaml.safe_load(text))
    assert [e.at_s for e in loaded.scenario.events] == [300]  # the outage at minute 5


@pytest.mark.slow
def test_tutorial_commands_run(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "MPLBACKEND": "Agg"}
    items = blocks()
    python: list[str] = []
    not_run: list[str] = []
    for k, (lang, body) in enumerate(items):
        if lang == "yaml":
            (tmp_path / "my-cluster.yaml").write_text(body)
        elif lang == "sh" and SETUP not in body:
            for command in _commands(body):
                tool = shlex.split(command)[0]
                if tool in OTHER_TOOLS and shutil.which(tool) is None:
                    not_run.append(command)
                    continue
                proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True)
                # A command followed by a bare block (its output) is expected to fail with it.
                expected_error = items[k + 1][1].strip() if k + 1 < len(items) and items[k + 1][0] == "" else None
                if expected_error and expected_error.startswith("simapf: error:"):
                    assert proc.returncode == 2, command
                    # The same file and field path; the wording of the message may improve.
                    assert proc.stderr.strip().split(": ")[:4] == expected_error.split(": ")[:4]
                else:
                    assert proc.returncode == 0, f"{command}\n{proc.stderr}"
        elif lang == "python":
            python.append(body)
    # The Python blocks build on each other, as cells of one notebook do.
    script = "\n".join(python)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("runs/default/overview.png", "runs/list/summary.json", "runs/watchlist/series.parquet", "rss.png"):
        assert (tmp_path / name).exists(), name
    if not_run:
        warnings.warn(f"not run, its program not installed here: {'; '.join(not_run)}", stacklevel=1)


def _commands(body: str) -> list[str]:
    """Shell commands of a block: one per line, a quoted multi-line `python -c "..."` as one."""
    out: list[str] = []
    for line in body.splitlines():
        if out and out[-1].count('"') % 2 == 1:  # inside an open double quote
            out[-1] += "\n" + line
        elif line.strip():
            out.append(line)
    return out
