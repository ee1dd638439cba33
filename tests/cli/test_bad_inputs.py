"""Every bad input of the corpora ends in one clear line, exit status 2, and nothing on disk.

Two corpora, one bad input per file: `tests/data/scenarios/bad/` (scenario files, through
`simapf run`) and `tests/data/bad-inputs/<kind>/` (replay traces and levels, calibration data,
sweep specs, user policy modules, figure specs, each through its own command). Each file's
expected message is in the `expected.yaml` beside it. All of them run in one child process
capped in memory and time (`tests/bad_input_runner.py`), so an input that hangs simapf or
blows up its memory fails its case rather than the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).parents[1]
SCENARIOS = HERE / "data" / "scenarios" / "bad"
INPUTS = HERE / "data" / "bad-inputs"

# The command each kind of bad input goes through: {file} is the input, {here} its folder,
# {out} an empty folder the command may write into (and must leave empty).
COMMANDS = {
    "scenario": ["run", "{file}", "--out", "{out}/run", "--no-progress"],
    "replay-trace": ["replay", "--level", "{here}/_level.json", "--trace", "{file}", "--out", "{out}/replayed.csv"],
    "replay-level": ["replay", "--level", "{file}", "--trace", "{here}/_trace.csv", "--out", "{out}/replayed.csv"],
    "calibration-data": ["calibrate", "--data", "{file}", "--out", "{out}/params.yaml", "--quiet", "--backend",
                         "serial"],
    "sweep": ["sweep", "{file}", "--out", "{out}/sweep", "--workers", "1", "--no-progress"],
    "policy": ["run", "{file}", "--out", "{out}/run", "--no-progress"],
    "figures": ["figures", "{file}", "--out", "{out}/figures"],
    "optimize": ["optimize", "{file}", "--out", "{out}/search", "--workers", "1", "--no-progress"],
}  # fmt: skip


def _corpus() -> dict[str, tuple[str, Path, list[str]]]:
    """case name -> (kind, input file, what its error must say)."""
    cases = {}
    expected = yaml.safe_load((SCENARIOS / "expected.yaml").read_text())
    for name, must in expected.items():
        cases[f"scenario/{name}"] = ("scenario", SCENARIOS / name, must)
    for name, must in yaml.safe_load((INPUTS / "expected.yaml").read_text()).items():
        kind = name.split("/", 1)[0]
        cases[name] = (kind, INPUTS / name, must)
    return cases


CASES = _corpus()


def _inputs_on_disk() -> set[str]:
    found = {f"scenario/{p.name}" for p in SCENARIOS.glob("*.yaml") if p.name != "expected.yaml" and not p.name.startswith("_")}
    for kind in COMMANDS:
        if kind != "scenario":
            found |= {f"{kind}/{p.name}" for p in (INPUTS / kind).iterdir() if not p.name.startswith(("_", "."))
                      and p.suffix != ".py"}  # fmt: skip
    return found


def test_every_input_has_an_expectation_and_every_class_is_covered():
    assert set(CASES) == _inputs_on_disk()
    assert len(CASES) >= 100
    kinds = {kind for kind, _, _ in CASES.values()}
    assert kinds == set(COMMANDS)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("corpus")
    plan = []
    for i, (name, (kind, path, _)) in enumerate(sorted(CASES.items())):
        out = work / f"out{i}"
        out.mkdir()
        fill = {"file": str(path), "here": str(path.parent), "out": str(out)}
        args = [a.format(**fill) for a in COMMANDS[kind]]
        plan.append({"name": name, "args": args, "out": str(out), "sys_path": [str(INPUTS / "policy")]})
    (work / "cases.json").write_text(json.dumps(plan))
    proc = subprocess.run([sys.executable, str(HERE / "bad_input_runner.py"), str(work / "cases.json")],
                          capture_output=True, text=True, timeout=1800, cwd=work)  # fmt: skip
    results = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        results[row["name"]] = row
    assert results, proc.stderr[-3000:]
    return results


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(name, outcomes):
    kind, path, must = CASES[name]
    assert name in outcomes, "the corpus run stopped before this case (killed by its memory cap?)"
    got = outcomes[name]
    assert got["escaped"] is None, got["escaped"]
    assert got["exit_code"] == 2, got
    lines = got["stderr"].splitlines()
    assert len(lines) == 1, got["stderr"]
    line = lines[0]
    assert line.startswith("simapf: error: ") and "Traceback" not in line
    assert path.name in line, f"the error does not name the file: {line!r}"
    for text in must:
        assert text in line, f"{text!r} not in {line!r}"
    assert got["stdout"] == ""
    assert got["left"] == [], f"left behind: {got['left']}"
