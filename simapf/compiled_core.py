"""The compiled core: the modules every request passes through, compiled with mypyc into
extension modules beside their sources (an optional extra; pure Python stays the default).

    pip install -e '.[compiled]'     # mypyc, pinned (it needs a C compiler)
    simapf compile                   # build; Python then imports the compiled modules
    simapf compile --clean           # remove them: pure Python again
    simapf compile --check           # mypyc's check and translation only, no C compiled

Python imports an extension module in preference to the `.py` beside it, so once built the
compiled core serves every run, sweep and test until it is removed. The results are the same
either way (tests/test_compiled.py compares the golden runs). A build remembers the digest of
the sources it was made from; importing simapf warns when they have changed since (`compiled()`
says "stale"), because the old build would still be the code that runs.
"""

from __future__ import annotations

import collections
import hashlib
import importlib.machinery
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Callable

from simapf.errors import SimapfError

PACKAGE_DIR = Path(__file__).resolve().parent

# The modules a request passes through (the engine benchmark's profile), in dependency order.
MODULES = (
    "engine/clock.py", "engine/environment.py", "apf/types.py", "apf/gomath.py", "apf/integrator.py", "apf/queueset.py", "apf/classify.py",
    "apf/estimators/serving.py", "apf/estimators/work.py", "apf/controller.py",
    "server/variation.py", "server/paths.py", "server/costs.py", "server/cpu.py", "server/etcd.py", "server/memory.py",
    "server/gc.py", "server/network.py", "server/watch_caches.py", "server/model.py", "server/runtime.py", "server/pool.py",
    "workload/inventory.py", "workload/balancer.py", "workload/latencies.py", "workload/clientgo.py", "workload/cluster.py",
    "workload/instance.py", "workload/informer.py", "workload/clients.py",
    "simulation/histograms.py", "simulation/observe.py",
)  # fmt: skip
GROUP = "simapf._compiled"  # the shared library mypyc builds for the group: simapf/_compiled__mypyc*.so
# mypy's view while compiling: the compiled modules checked strictly, the modules they import read
# for their types only, pydantic models as pydantic builds them.
MYPY_CONFIG = """[mypy]
ignore_missing_imports = True
follow_imports = silent
plugins = pydantic.mypy
"""
STAMP = PACKAGE_DIR / "_compiled.sha256"  # the sources' digest when they were compiled
# How long the last build here took, in seconds: what the next one announces. Kept by `clean`.
LAST_BUILD = PACKAGE_DIR / "_compiled.last-build-s"


class CompileError(SimapfError):
    """The compiled core could not be built: `str()` is one line, `detail` the build's output."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def c_compiler() -> str:
    """The C compiler the build will call (CC, else the one Python was built with), found on
    PATH; a CompileError if there is none, before any time is spent."""
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    words = shlex.split(command)
    name = words[0] if words else "cc"
    found = shutil.which(name)
    if found is None:
        source = "CC" if os.environ.get("CC") else "the compiler Python was built with"
        raise CompileError(f"no C compiler: {name} ({source}) is not found; install one (e.g. gcc) or set CC")
    return found


def sources_digest(package_dir: Path = PACKAGE_DIR) -> str:
    digest = hashlib.sha256()
    for module in MODULES:
        digest.update(module.encode() + b"\0" + (package_dir / module).read_bytes())
    return digest.hexdigest()


def _extensions(package_dir: Path) -> list[Path]:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = [p for m in MODULES for p in (package_dir / m).parent.glob(Path(m).stem + ".*") if p.name.endswith(suffixes)]
    found += [p for p in package_dir.glob("_compiled__mypyc*") if p.name.endswith(suffixes)]
    return found


def compiled(package_dir: Path = PACKAGE_DIR) -> str:
    """"compiled", "pure" or "stale" (built from sources that have changed since)."""
    if not _extensions(package_dir):
        return "pure"
    stamp = package_dir / STAMP.name
    if stamp.exists() and stamp.read_text().strip() == sources_digest(package_dir):
        return "compiled"
    return "stale"


def clean(package_dir: Path = PACKAGE_DIR) -> int:
    """Remove the compiled modules; returns how many files went."""
    removed = _extensions(package_dir)
    for path in removed:
        path.unlink()
    stamp = package_dir / STAMP.name
    if stamp.exists():
        stamp.unlink()
        removed.append(stamp)
    return len(removed)


def last_build_seconds(package_dir: Path = PACKAGE_DIR) -> float | None:
    """How long the last successful build here took, if one was recorded."""
    try:
        return float((package_dir / LAST_BUILD.name).read_text())
    except (OSError, ValueError):
        return None


def stage_of(line: str, modules: int = len(MODULES)) -> str | None:
    """The build stage a line of its output belongs to, in words, or None. mypyc first checks
    the modules and translates them to C (silent for a long while), then setuptools compiles the
    group's C and builds one small extension per module that loads it."""
    if line.startswith("running build_ext"):
        return "mypyc has written the C; compiling it (the longest step)"
    m = re.match(r"building '([\w.]+)' extension", line)
    if m and m.group(1) != GROUP + "__mypyc":
        return f"building the {modules} modules' small extensions"
    return None


def build(package_dir: Path = PACKAGE_DIR, quiet: bool = True, on_stage: Callable[[str], None] | None = None) -> None:
    """Compile MODULES of the package at `package_dir` in place; `on_stage` hears each stage
    as it starts (`stage_of`)."""
    c_compiler()
    try:
        import mypyc  # noqa: F401
    except ImportError:
        raise CompileError("mypyc is not installed: pip install 'simapf[compiled]'") from None
    clean(package_dir)
    root = package_dir.parent
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="simapf-compile-") as tmp:
        # setuptools' build_ext --inplace, driven by mypycify, from the folder that holds the
        # package so that module names are simapf.*; its build files stay in the temporary folder.
        script = Path(tmp) / "setup.py"
        script.write_text(
            "from setuptools import setup\n"
            f"setup(name='simapf-compiled', ext_modules={_mypycify_call(package_dir, Path(tmp))})\n"
        )
        env = {**os.environ, "PYTHONPATH": str(root)}
        command = [sys.executable, str(script), "build_ext", "--inplace",
                   "--build-temp", str(Path(tmp) / "temp"), "--build-lib", str(Path(tmp) / "lib")]  # fmt: skip
        returncode, tail = _run_build(command, root, env, quiet, on_stage)
    if returncode != 0:
        clean(package_dir)
        detail = "".join(tail)[-4000:] if quiet else ""
        raise CompileError(f"mypyc failed (exit {returncode}); `simapf --debug compile` shows its output",
                           detail.rstrip())  # fmt: skip
    (package_dir / STAMP.name).write_text(sources_digest(package_dir) + "\n")
    (package_dir / LAST_BUILD.name).write_text(f"{time.monotonic() - started:.0f}\n")


def translate(package_dir: Path = PACKAGE_DIR) -> int:
    """mypyc's half of a build, without the C compiler: check MODULES as mypyc does and translate
    them to C, in a temporary folder (the package is not touched). What breaks a build breaks
    here, in about a minute instead of several; returns how many C files mypyc wrote, or raises
    a CompileError with its output as `detail`."""
    try:
        import mypyc  # noqa: F401
    except ImportError:
        raise CompileError("mypyc is not installed: pip install 'simapf[compiled]'") from None
    with tempfile.TemporaryDirectory(prefix="simapf-translate-") as tmp:
        script = Path(tmp) / "translate.py"
        script.write_text(f"{_mypycify_call(package_dir, Path(tmp))}\n")
        env = {**os.environ, "PYTHONPATH": str(package_dir.parent)}
        done = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
        if done.returncode != 0:
            raise CompileError(f"mypyc cannot translate the compiled core (exit {done.returncode}); "
                               "`simapf --debug compile --check` shows its output", done.stdout[-4000:].rstrip())  # fmt: skip
        return len(list((Path(tmp) / "mypyc").rglob("*.c")))


def _mypycify_call(package_dir: Path, tmp: Path) -> str:
    """The Python expression that has mypyc check and translate MODULES of `package_dir`, with
    its configuration and C files in `tmp`: the extensions setuptools then compiles."""
    config = tmp / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    paths = [str(package_dir / m) for m in MODULES]
    return (f"__import__('mypyc.build').build.mypycify({['--config-file', str(config), *paths]!r}, "
            f"group_name={GROUP!r}, opt_level='3', target_dir={str(tmp / 'mypyc')!r})")


def _run_build(command: list[str], cwd: Path, env: dict[str, str], quiet: bool,
               on_stage: Callable[[str], None] | None) -> tuple[int, collections.deque]:  # fmt: skip
    """Run the build, reading its output as it comes: each stage to `on_stage`, every line to
    stdout unless `quiet`; its exit status and the output's last lines."""
    tail: collections.deque = collections.deque(maxlen=200)
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:  # fmt: skip
        assert proc.stdout is not None
        last = None
        for line in proc.stdout:
            tail.append(line)
            if not quiet:
                sys.stdout.write(line)
            stage = stage_of(line)
            if stage is not None and stage != last and on_stage is not None:
                on_stage(stage)
            last = stage or last
    return proc.returncode, tail
