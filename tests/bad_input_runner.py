"""Run simapf's command line on every bad input of the corpora, under a memory and time cap.

    python tests/bad_input_runner.py CASES.json  ->  one JSON result per case on stdout

Each case is {"name", "args", "out", "sys_path"}: the CLI's arguments, the folder the command
may write into (it must be empty afterwards) and folders to put on sys.path (where a user's
policy modules are found, as PYTHONPATH would make them). The whole process is limited to
MEMORY_CAP bytes of address space and each case to TIME_CAP_S seconds, so an input that makes
simapf hang or blow up fails its case instead of the machine.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

MEMORY_CAP = 6 * 2**30
TIME_CAP_S = 60


class Overtime(Exception):
    pass


def _overtime(_signum, _frame):
    raise Overtime()


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    signal.signal(signal.SIGALRM, _overtime)
    from click.testing import CliRunner

    from simapf.cli import main as cli

    cases = json.loads(Path(sys.argv[1]).read_text())
    for case in cases:
        sys.path[:0] = case["sys_path"]
        signal.alarm(TIME_CAP_S)
        try:
            result = CliRunner().invoke(cli, case["args"])
            outcome = {"exit_code": result.exit_code, "stderr": result.stderr, "stdout": result.stdout,
                       "escaped": None if isinstance(result.exception, (SystemExit, type(None)))
                       else f"{type(result.exception).__name__}: {result.exception}"}  # fmt: skip
        except Overtime:
            outcome = {"exit_code": None, "stderr": "", "stdout": "", "escaped": f"over {TIME_CAP_S} s"}
        finally:
            signal.alarm(0)
            del sys.path[: len(case["sys_path"])]
        left = sorted(p.name for p in Path(case["out"]).iterdir())
        print(json.dumps({"name": case["name"], "left": left, **outcome}), flush=True)


if __name__ == "__main__":
    main()
