"""Every command works from an ordinary (non-editable) install, run outside the checkout.

The package is installed with pip into a scratch folder and run from another one, so nothing
can be found through the checkout: the calibration data and record, the validation table and
its scenarios, the default scenario and the shipped APF objects must all travel in the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

FROM_THE_PACKAGE = """
import sys
from pathlib import Path
import simapf
from simapf.calibrate.data import cells, load_rows
from simapf.calibrate.grid import run_grid
from simapf.calibrate.record import load_params
from simapf.calibrate.published import load_sources, load_table, run_table

assert not Path(simapf.__file__).resolve().is_relative_to(Path(sys.argv[1])), simapf.__file__
rows = load_rows()
params, setup, _ = load_params()
first = [c for c in cells(rows) if c.seats == 1][:1]
result = run_grid(first, params, setup, n_jobs=1)
assert result[first[0].key].mem_mb > 0
table = load_table()
assert len(table) >= 10 and load_sources()
print(len(rows), len(table), len(run_table([table[0]["id"]], workers=1)))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(ROOT)],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    return target


def _run(installed: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_calibration_data_and_validation_table_come_from_the_package(installed, tmp_path):
    proc = _run(installed, tmp_path, "-c", FROM_THE_PACKAGE, str(ROOT))
    assert proc.returncode == 0, proc.stderr
    n_rows, n_table, n_run = map(int, proc.stdout.split())
    assert n_rows >= 20 and n_table >= 10 and n_run == 1


def test_the_main_command_runs_from_the_package(installed, tmp_path):
    proc = _run(installed, tmp_path, "-m", "simapf.cli", "run", "--out", "out", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "summary.json").is_file()


def test_the_report_says_it_needs_a_checkout(installed, tmp_path):
    proc = _run(installed, tmp_path, "-m", "simapf.cli", "calibrate", "--report", "--quiet")
    assert proc.returncode == 2
    assert proc.stderr.startswith("simapf: error: ") and "checkout" in proc.stderr
    assert "Traceback" not in proc.stderr
