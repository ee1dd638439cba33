"""The suite runs on pure Python. Its tests reach into simapf's classes (probes that replace a
method on one object, subclasses of the queueset), which compiled classes do not allow; the
compiled core is checked on a compiled copy of its own (tests/test_compiled.py)."""

from __future__ import annotations

import os

import pytest

# Every test computes its runs: none is read from (or left in) the user's result cache
# (simapf.cache). The cache's own tests turn it on in a folder of their own. Set at import, so
# the commands the tests start inherit it.
os.environ["SIMAPF_NO_CACHE"] = "1"

from simapf import compiled_core


def pytest_configure(config: pytest.Config) -> None:
    state = compiled_core.compiled()
    if state != "pure":
        pytest.exit(f"simapf's compiled core is built here ({state}); the tests need pure Python: "
                    "run `simapf compile --clean` first (tests/test_compiled.py checks the compiled core "
                    "on a copy of its own)", returncode=2)  # fmt: skip
