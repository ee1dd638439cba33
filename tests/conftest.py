"""The suite runs on pure Python. Its tests reach into simapf's classes (probes that replace a
method on one object, subclasses of the queueset), which compiled classes do not allow; the
compiled core is checked on a compiled copy of its own (tests/test_compiled.py)."""

from __future__ import annotations

import os

import pytest

# Every test computes its runs: none is read from (or left in) the user's result cache
# (simapf.simulation.cache). The cache's own tests turn it on in a folder of their own. Set at import, so
# the commands the tests start inherit it.
os.environ["SIMAPF_NO_CACHE"] = "1"

from simapf import compiled_core


def pytest_configure(config: pytest.Config) -> None:
    state = compiled_core.compiled()
    if state != "pure":
        pytest.exit(f"simapf's compiled core is built here ({state}); the tests need pure Python: "
                    "run `simapf compile --clean` first (tests/test_compiled.py checks the compiled core "
                    "on a copy of its own)", returncode=2)  # fmt: skip


@pytest.fixture(autouse=True, scope="session")
def _timings_of_the_session(tmp_path_factory):
    """The pace runs leave for estimates (simapf.jobs.estimate) go to a folder of the session's,
    not to the user's state folder; so do those of the commands tests start as processes."""
    import os

    before = os.environ.get("SIMAPF_STATE_DIR")
    os.environ["SIMAPF_STATE_DIR"] = str(tmp_path_factory.mktemp("simapf-state"))
    yield
    if before is None:
        os.environ.pop("SIMAPF_STATE_DIR", None)
    else:
        os.environ["SIMAPF_STATE_DIR"] = before
