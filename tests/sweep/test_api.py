"""The package's entry points: lazy (no pandas at `import simapf`) and always the functions."""

import subprocess
import sys

CODE = """
import sys
import simapf
assert "pandas" not in sys.modules, "import simapf must not import pandas"
from simapf.simulation.runner import Simulation          # loading the run module ...
import simapf.sweeps, simapf.comparison
assert callable(simapf.run) and simapf.run.__name__ == "run"   # ... leaves simapf.run the function
for name in ("sweep", "compare", "load_sweep"):
    f = getattr(simapf, name)
    assert callable(f) and f.__name__ == name, (name, f)
print("ok")
"""


def test_entry_points_are_lazy_functions():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
