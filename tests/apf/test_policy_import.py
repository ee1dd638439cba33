"""A LIST policy module in the folder simapf runs in is importable without PYTHONPATH, as a user
of `python -m` expects: from the `simapf` command (whose script lives in the venv's bin), and in
the worker processes of a comparison."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

SIMAPF = Path(sys.executable).parent / "simapf"  # the console script: sys.path[0] is bin/, not here

POLICY = """\
from simapf.apf.estimators import initial_only


class Three:
    def estimate(self, attrs, ctx, from_cache):
        return initial_only(3)
"""

SCENARIO = {
    "name": "mine", "run": {"duration_s": 3},
    "resources": [{"name": "configmaps", "count": 10, "object_size": {"mean_bytes": 1024}}],
    "clients": [{"name": "l", "kind": "open_loop", "identity": {"user": "u"}, "rate_per_s": 5,
                 "request": {"verb": "list", "resource": "configmaps"}}],
}  # fmt: skip


def _simapf(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(SIMAPF), *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "mine_policy.py").write_text(textwrap.dedent(POLICY))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**SCENARIO, "apf": {"estimator": {"list_policy": "mine_policy:Three"}}}))
    return tmp_path


def test_a_policy_in_the_current_folder_runs_without_pythonpath(tmp_path):
    done = _simapf(_folder(tmp_path), "run", "s.yaml", "--json", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert '"peak_rss_bytes"' in done.stdout


def test_a_comparisons_workers_import_it_too(tmp_path):
    done = _simapf(_folder(tmp_path), "compare", "s.yaml", "--policy", "upstream", "--policy", "mine_policy:Three",
                   "--replications", "1", "--workers", "2", "--json", "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mine_policy:Three" in done.stdout


def test_a_module_found_nowhere_says_where_simapf_looked(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({**SCENARIO, "apf": {"estimator": {"list_policy": "absent_policy:X"}}}))
    done = _simapf(tmp_path, "run", "s.yaml", "--no-progress")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "from the current folder or PYTHONPATH" in done.stderr
