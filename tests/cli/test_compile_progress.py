"""`simapf compile` is not silent for minutes: it says up front what it does and how long the
last build took, then each stage as the build's own output reaches it."""

from __future__ import annotations

import sys

from click.testing import CliRunner

from simapf import compiled_core
from simapf.cli import main

# Lines of a real build's output (mypyc through setuptools), in the order they come.
BUILD_OUTPUT = [
    "simapf/server/etcd.py:142: warning: Treating generator comprehension as list\n",
    "running build_ext\n",
    "building 'simapf._compiled__mypyc' extension\n",
    "gcc -Wsign-compare -DNDEBUG -g -fwrapv -O3 -Wall -fPIC -c build/__native_simapf.c\n",
    "building 'simapf.engine.environment' extension\n",
    "gcc -shared build/environment.o -o simapf/environment.so\n",
    "building 'simapf.apf.types' extension\n",
]


def test_the_builds_stages_are_read_from_its_output(tmp_path):
    # The build's output as it streams, from a child process: one call per stage, in order.
    script = tmp_path / "fake_build.py"
    script.write_text(f"import sys\nsys.stdout.writelines({BUILD_OUTPUT!r})\nsys.exit(3)\n")
    stages: list[str] = []
    code, tail = compiled_core._run_build([sys.executable, str(script)], tmp_path, {}, True, stages.append)
    assert code == 3 and "".join(tail) == "".join(BUILD_OUTPUT)
    assert stages == ["mypyc has written the C; compiling it (the longest step)",
                      f"building the {len(compiled_core.MODULES)} modules' small extensions"]  # fmt: skip


def test_compile_announces_its_work_and_each_stage(monkeypatch, tmp_path):
    (tmp_path / compiled_core.LAST_BUILD.name).write_text("412\n")
    recorded = compiled_core.last_build_seconds(tmp_path)
    assert recorded == 412.0
    monkeypatch.setattr(compiled_core, "last_build_seconds", lambda: recorded)
    heard: list[str] = []

    def build(on_stage=None, **_kw):
        for line in BUILD_OUTPUT:
            stage = compiled_core.stage_of(line)
            if stage and stage not in heard:
                heard.append(stage)
                on_stage(stage)

    monkeypatch.setattr(compiled_core, "build", build)
    monkeypatch.setattr(compiled_core, "c_compiler", lambda: "/usr/bin/cc")  # no compiler needed here
    result = CliRunner().invoke(main, ["compile"])
    assert result.exit_code == 0, result.output
    err = result.stderr.splitlines()
    n = len(compiled_core.MODULES)
    assert err[0].startswith(f"simapf: compile: translating {n} modules to C with mypyc, then compiling the C with cc -O3")
    assert err[0].endswith("; the last build here took 6.9 min")
    assert err[1].endswith(": mypyc has written the C; compiling it (the longest step)")
    assert err[2].endswith(f": building the {n} modules' small extensions")
    assert result.stdout.startswith(f"compiled {n} modules in ")


def test_a_first_build_says_it_takes_minutes(monkeypatch):
    monkeypatch.setattr(compiled_core, "last_build_seconds", lambda: None)
    monkeypatch.setattr(compiled_core, "build", lambda on_stage=None, **_kw: None)
    monkeypatch.setattr(compiled_core, "c_compiler", lambda: "/usr/bin/cc")
    result = CliRunner().invoke(main, ["compile"])
    assert result.exit_code == 0 and result.stderr.splitlines()[0].endswith("; this takes minutes")
