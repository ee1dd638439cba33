from pathlib import Path

import pytest

from sweephelp import BASIC_SWEEP, SMALL, write_sweep


@pytest.fixture
def basic_sweep(tmp_path: Path) -> Path:
    """A sweep of 8 short runs (2 policies x 2 rates x 2 replications) in tmp_path/in."""
    return write_sweep(tmp_path / "in", BASIC_SWEEP, SMALL)
