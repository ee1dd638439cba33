"""The notebooks run top to bottom, at CI size (SIMAPF_NOTEBOOK_SIZE=ci), within two minutes each.

They are stored without outputs; this runs each in a fresh kernel with nbclient, from the
notebooks/ directory as a user's Jupyter would, and checks that it ends with its answer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 120  # a notebook's budget at CI size on two cores


def test_there_are_five_notebooks_stored_without_outputs():
    import nbformat

    assert len(NOTEBOOKS) >= 5
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert nb.cells[0].cell_type == "markdown" and "**Question" in nb.cells[0].source, path.name
        assert any(c.cell_type == "markdown" and c.source.startswith("## Answer") for c in nb.cells), path.name
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: stored with outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_at_ci_size(path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("SIMAPF_NOTEBOOK_SIZE", "ci")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})  # fmt: skip
    client.execute()
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    assert text.strip(), f"{path.name}: its last cell printed no answer"
    assert os.environ["SIMAPF_NOTEBOOK_SIZE"] == "ci"
