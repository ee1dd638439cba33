"""docs/tutorial.md shows what `simapf run` prints for the built-in default: the block is a run's
output, checked here against a run, so it does not drift from what a reader sees. The wall time,
which depends on the machine, is shown as `…`. A change of the model that moves it rewrites the
block from a run: `python tests/test_tutorial_output.py`, never by hand."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import simapf
from simapf.scenario import default_scenario_path
from simapf.simulation.summary_text import format_summary

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
# The block right after the tutorial's first run: its output, from the first line to `requests`.
BLOCK = re.compile(r"(```sh\nsimapf run --out runs/default\n```\n.*?```\n)(simapf .*?\n  requests .*?\n)(```)", re.S)


def shown() -> re.Match:
    m = BLOCK.search(TUTORIAL.read_text())
    assert m, "docs/tutorial.md: no output block after `simapf run --out runs/default`"
    return m


def run_output() -> str:
    """What `simapf run` prints for the built-in default, to its `requests` line, wall time as `…`."""
    loaded = simapf.load_scenario(default_scenario_path())
    loaded = dataclasses.replace(loaded, source="<built-in default>")  # as `simapf run` names it
    text = format_summary(simapf.run(loaded).summary)
    lines = text.splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if line.startswith("  requests "))
    first = re.sub(r" in [0-9.,]+ wall s", " in … wall s", lines[0])
    assert first != lines[0], lines[0]
    return first + "".join(lines[1 : end + 1])


def test_the_tutorials_first_output_is_a_runs():
    assert shown().group(2) == run_output(), "rewrite it from a run: python tests/test_tutorial_output.py"


if __name__ == "__main__":  # rewrite the block from a run
    m = shown()
    text = TUTORIAL.read_text()
    TUTORIAL.write_text(text[: m.start(2)] + run_output() + text[m.end(2):])
    print(f"wrote {TUTORIAL.relative_to(ROOT)}", file=sys.stderr)
