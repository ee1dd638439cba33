"""Where a number or a figure came from: the simapf build, the scenario, the calibration, the seeds.

Every `summary.json` and every figure simapf writes carries the same record:

    {"simapf_version": "0.1.0", "git_commit": "4dd9a3f…" or null, "git_dirty": false,
     "scenario_sha256": "…", "calibration_sha256": "…", "seeds": [1], "replications": 1}

`scenario_sha256` hashes the fully resolved scenario (every default filled in, as the summary
holds it), `calibration_sha256` the resource model's parameters the run used (every
`ServerParams` field), both as canonical JSON, so two runs with the same hashes and seeds give
the same numbers. The git commit is read from the checkout simapf runs from, if it is one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any, Iterable

from simapf.version import __version__
from simapf.files import json_text

PACKAGE_DIR = Path(__file__).resolve().parent


def canonical_sha256(data: Any) -> str:
    """SHA-256 of `data` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def git_state(besides: str | None = None) -> tuple[str | None, bool]:
    """(commit, dirty) of the checkout simapf runs from; (None, False) from an installed copy.
    `besides` (a path inside the checkout) leaves a command's own output out of "dirty"."""
    try:
        top = subprocess.run(["git", "-C", str(PACKAGE_DIR), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=5)  # fmt: skip
        if top.returncode != 0 or not (PACKAGE_DIR.parent / "pyproject.toml").is_file():
            return None, False
        if Path(top.stdout.strip()).resolve() != PACKAGE_DIR.parent:
            return None, False  # simapf installed inside some other repository
        head = subprocess.run(["git", "-C", str(PACKAGE_DIR), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=5)  # fmt: skip
        status = subprocess.run(["git", "-C", str(PACKAGE_DIR.parent), "status", "--porcelain", "--", "simapf",
                                 *([f":(exclude){besides}"] if besides else [])],
                                capture_output=True, text=True, timeout=5)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None, False
    if head.returncode != 0:
        return None, False
    return head.stdout.strip(), bool(status.stdout.strip())


def build_record(seeds: Iterable[int], replications: int = 1) -> dict[str, Any]:
    """The part of a provenance record that is not hashed inputs: the build, seeds, replications."""
    commit, dirty = git_state()
    return {"simapf_version": __version__, "git_commit": commit, "git_dirty": dirty,
            "seeds": [int(s) for s in seeds], "replications": int(replications)}  # fmt: skip


def provenance(scenario: dict[str, Any], params: Any, seeds: Iterable[int], replications: int = 1) -> dict[str, Any]:
    """The provenance record of results made from `scenario` (resolved, as a dict) with the
    resource-model parameters `params` (a ServerParams or its dict) and `seeds`."""
    dumped = params.record_dump() if hasattr(params, "record_dump") else params
    return {**build_record(seeds, replications), "scenario_sha256": canonical_sha256(scenario),
            "calibration_sha256": canonical_sha256(dumped)}  # fmt: skip


def figure_metadata(record: dict[str, Any], fmt: str) -> dict[str, Any]:
    """Matplotlib `savefig(metadata=...)` for `fmt` carrying `record`, and nothing that changes
    from one save to the next (no creation dates), so the same inputs give the same bytes."""
    text = json_text(record, sort_keys=True)
    if fmt == "png":
        return {"simapf:provenance": text}  # a PNG text chunk
    if fmt == "svg":
        return {"Description": text, "Date": None}  # Dublin Core dc:description
    if fmt == "pdf":
        return {"Subject": "simapf:provenance", "Keywords": text, "CreationDate": None}
    return {}
