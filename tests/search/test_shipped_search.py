"""The shipped search, `sweeps/optimize-relist-storm.yaml`, run unchanged on a local Dask cluster,
finds what docs/compare-and-sweep.md says it finds, and draws the figure the docs show.

A change of the model or of the search moves what it finds: `python tests/search/test_shipped_search.py`
runs the search (on joblib: the backend does not change the answer) and rewrites the docs' block
and figure from that run."""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "compare-and-sweep.md"
FIGURE = ROOT / "docs" / "figures" / "optimize-relist-storm.svg"
SPEC = ROOT / "sweeps" / "optimize-relist-storm.yaml"


def documented_report() -> str:
    text = DOC.read_text()
    block = re.search(r"<!-- optimize-relist-storm: begin.*?-->\n```\n(.*?)```\n<!-- optimize-relist-storm: end", text, re.S)
    assert block, "docs/compare-and-sweep.md has no optimize-relist-storm block"
    return block.group(1)


def deterministic_part(report: str) -> str:
    """The report without the lines that depend on the machine, the backend and the directory."""
    lines = [line for line in report.splitlines() if not line.startswith(("  ran ", "  wrote "))]
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_the_shipped_search_on_a_local_dask_cluster_finds_what_the_docs_say(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    from simapf.search import optimize

    monkeypatch.chdir(ROOT)  # as the docs ran it: from the checkout, with the file's relative path
    result = optimize(SPEC.relative_to(ROOT), tmp_path / "search", backend="dask", workers=2)
    assert "dask, a local cluster of 2 worker(s)" in result.backend
    assert deterministic_part(result.summary_text()) == documented_report()
    # The Done-when of the search: the best settings keep the limit in every run, and their p99
    # beats every shipped policy's that keeps it too; the others break the limit.
    assert result.best is not None
    assert (~result.compare["feasible"]).any() and result.compare["feasible"].any()
    for _, row in result.compare.iterrows():
        if row["feasible"]:
            assert result.best["objective"] < row["objective"], row["setting"]
        else:
            assert row["worst:peak_rss_bytes"] > 4 * 2**30 or row["worst:oom_kills"] > 0, row["setting"]
    assert (tmp_path / "search" / "pareto.svg").read_bytes() == FIGURE.read_bytes()


if __name__ == "__main__":  # regenerate the docs' block and figure from a run
    import os

    from simapf.search import optimize

    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        result = optimize(SPEC.relative_to(ROOT), Path(tmp) / "search", progress=True)
        text = DOC.read_text()
        block = re.search(r"(<!-- optimize-relist-storm: begin.*?-->\n```\n)(.*?)(```\n<!-- optimize-relist-storm: end)",
                          text, re.S)  # fmt: skip
        assert block, "docs/compare-and-sweep.md has no optimize-relist-storm block"
        report = deterministic_part(result.summary_text())
        DOC.write_text(text[: block.start(2)] + report + text[block.end(2):])
        shutil.copyfile(Path(tmp) / "search" / "pareto.svg", FIGURE)
        shutil.copyfile(Path(tmp) / "search" / "pareto.png", FIGURE.with_suffix(".png"))
    print(f"wrote {DOC.relative_to(ROOT)} and {FIGURE.relative_to(ROOT)} (.svg, .png)", file=sys.stderr)
