"""Run simapf's command line on every case of the bad-command corpus, each in its own folder.

    python tests/bad_command_runner.py CASES.json  ->  one JSON result per case on stdout

Each case is {"name", "args", "cwd", "env", "sys_path"}: the CLI's arguments, the folder the
command runs in (the case's files, set up by the test beforehand), environment variables to set
for it and folders to put on sys.path (where a user's policy modules are found, as PYTHONPATH
would make them). Cases run one after another in this one process, as a user's commands would
each import simapf once; each is limited to TIME_CAP_S seconds, the process to MEMORY_CAP bytes
of address space, and its peak resident memory after each case is reported, so an input that
makes simapf hang or blow up its memory fails its case instead of the machine.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

MEMORY_CAP = 8 * 2**30  # address space, well above the 2 GiB of resident memory a case may use
TIME_CAP_S = 60


class Overtime(Exception):
    pass


def _overtime(_signum, _frame):
    raise Overtime()


def _forget_modules_under(folder: str) -> None:
    """Drop the user modules a case imported from its folder, so the next case imports its own."""
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None) or ""
        if origin.startswith(folder + os.sep):
            del sys.modules[name]


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    signal.signal(signal.SIGALRM, _overtime)
    from click.testing import CliRunner

    from simapf.cli import main as cli

    cases = json.loads(Path(sys.argv[1]).read_text())
    home = os.getcwd()
    for case in cases:
        sys.path[:0] = case["sys_path"]
        os.chdir(case["cwd"])
        started = time.perf_counter()
        signal.alarm(TIME_CAP_S)
        try:
            result = CliRunner().invoke(cli, case["args"], env=case["env"])
            outcome = {"exit_code": result.exit_code, "stderr": result.stderr, "stdout": result.stdout,
                       "escaped": None if isinstance(result.exception, (SystemExit, type(None)))
                       else f"{type(result.exception).__name__}: {result.exception}"}  # fmt: skip
        except Overtime:
            outcome = {"exit_code": None, "stderr": "", "stdout": "", "escaped": f"over {TIME_CAP_S} s"}
        finally:
            signal.alarm(0)
            os.chdir(home)
            del sys.path[: len(case["sys_path"])]
            _forget_modules_under(case["cwd"])
        outcome["wall_s"] = time.perf_counter() - started
        outcome["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps({"name": case["name"], **outcome}), flush=True)


if __name__ == "__main__":
    main()
