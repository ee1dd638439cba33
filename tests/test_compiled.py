"""The compiled core (simapf.compiled_core) gives the results pure Python gives: a compiled copy
of the package runs the golden runs, and their summaries match the stored ones byte for byte."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simapf import compiled_core

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "simulation"  # test_golden_runs: the runs and their stored summaries
PACKAGE = Path(compiled_core.__file__).resolve().parent

# Runs in the compiled copy: each golden run's summary, and where the modules came from.
SCRIPT = """
import copy, json, pickle, sys
import simapf.server.cpu, simapf.apf.queueset, simapf.apf.types, simapf.workload.clients
from simapf.apf.types import ListOptions, RequestAttributes
from simapf.server.paths import RequestCost, ResponseShape, ServingPath
from test_golden_runs import RUNS, summary_text
out = sys.argv[1]
for name, scenario, overrides in RUNS:
    open(f"{out}/{name}.json", "w").write(summary_text(scenario, overrides))
# Compiled frozen dataclasses still pickle and copy (as process pools and Dask send objects).
attrs = RequestAttributes("u", ("g",), "list", list_options=ListOptions(limit=5))
cost = RequestCost(ServingPath.ETCD, ResponseShape(1000.0, 3))
for obj in (attrs, cost):
    assert pickle.loads(pickle.dumps(obj)) == obj == copy.deepcopy(obj) == copy.copy(obj)
print(json.dumps([m.__file__ for m in (simapf.server.cpu, simapf.apf.queueset, simapf.apf.types,
                                       simapf.workload.clients)]))
"""


@pytest.mark.slow
def test_the_compiled_core_gives_the_golden_summaries(tmp_path: Path):
    copy = tmp_path / "simapf"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "_compiled.sha256"))
    stages: list[str] = []
    compiled_core.build(copy, on_stage=stages.append)
    assert compiled_core.compiled(copy) == "compiled"
    # What `simapf compile` says as it goes is read from the real build's output.
    assert stages == ["mypyc has written the C; compiling it (the longest step)",
                      f"building the {len(compiled_core.MODULES)} modules' small extensions"]  # fmt: skip
    assert compiled_core.last_build_seconds(copy) > 0
    out = tmp_path / "summaries"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(GOLDEN), str(TESTS)])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    modules = json.loads(done.stdout.splitlines()[-1])
    assert all(m.startswith(str(copy)) and m.endswith(".so") for m in modules), modules
    sys.path.insert(0, str(GOLDEN))
    from test_golden_runs import RUNS, STORED

    for name, _scenario, _overrides in RUNS:
        assert (out / f"{name}.json").read_text() == (STORED / f"{name}.json").read_text(), name


def test_a_change_to_a_compiled_source_makes_the_build_stale(tmp_path: Path):
    copy = tmp_path / "simapf"
    for module in compiled_core.MODULES:
        (copy / module).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE / module, copy / module)
    assert compiled_core.compiled(copy) == "pure"
    # What a build leaves: an extension module and the digest of its sources.
    (copy / "server" / f"cpu{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    (copy / compiled_core.STAMP.name).write_text(compiled_core.sources_digest(copy) + "\n")
    assert compiled_core.compiled(copy) == "compiled"
    with open(copy / "server" / "cpu.py", "a") as source:
        source.write("# edited\n")
    assert compiled_core.compiled(copy) == "stale"
    assert compiled_core.clean(copy) == 2 and compiled_core.compiled(copy) == "pure"


def test_compile_clean_with_nothing_built_says_so():
    from click.testing import CliRunner

    from simapf.cli import main

    result = CliRunner().invoke(main, ["compile", "--clean"])
    assert result.exit_code == 0 and "nothing compiled: simapf runs pure Python" in result.output


def test_mypyc_translates_the_compiled_core():
    # mypyc's half of `simapf compile` (the slow test above builds it whole): a module of the
    # core that mypyc cannot compile fails the fast suite, not only the long checks.
    from click.testing import CliRunner

    from simapf.cli import main

    result = CliRunner().invoke(main, ["compile", "--check"])
    assert result.exit_code == 0, result.output
    assert f"mypyc translates the {len(compiled_core.MODULES)} modules" in result.output
    assert compiled_core.compiled() == "pure"  # nothing was built beside the sources


@pytest.mark.slow
def test_a_module_mypyc_cannot_compile_fails_the_check(tmp_path: Path):
    copy = tmp_path / "simapf"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "_compiled.sha256"))
    # Valid Python that mypy accepts and mypyc refuses: a native class cannot subclass int.
    with open(copy / "engine" / "clock.py", "a") as source:
        source.write("\n\nclass _Broken(int):\n    pass\n")
    with pytest.raises(compiled_core.CompileError, match="mypyc cannot translate") as raised:
        compiled_core.translate(copy)
    # Its output, which `--debug` shows, names the line and mypyc's reason.
    assert "engine/clock.py:" in raised.value.detail and "Inheriting from most builtin types" in raised.value.detail


def test_compile_check_and_clean_do_not_go_together():
    from click.testing import CliRunner

    from simapf.cli import main

    result = CliRunner().invoke(main, ["compile", "--check", "--clean"])
    assert result.exit_code == 2 and "--clean and --check do not go together" in result.output
