"""A small scenario (20 simulated seconds, a few clients, ~30 ms a run) and sweep files around it."""

from __future__ import annotations

from pathlib import Path

import yaml
from builders import small_lists

SMALL = small_lists()


def small_scenario(**changes) -> dict:
    import copy

    data = copy.deepcopy(SMALL)
    data.update(changes)
    return data


def write_sweep(directory: Path, sweep: dict, scenario: dict | None = None, name: str = "sweep.yaml") -> Path:
    """Write `sweep` (and, if given, its base scenario as scenario.yaml next to it)."""
    directory.mkdir(parents=True, exist_ok=True)
    if scenario is not None:
        (directory / "scenario.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    path = directory / name
    path.write_text(yaml.safe_dump(sweep, sort_keys=False), encoding="utf-8")
    return path


BASIC_SWEEP = {
    "base": "scenario.yaml",
    "factors": {
        # A factor can set a whole subtree: here a policy together with its parameters.
        "apf.estimator": [{"list_policy": "upstream"}, {"list_policy": "constant", "list_params": {"seats": 3}}],
        "clients.listers.rate_per_s": {"range": [4, 12, 4]},
    },
    "set": {"run.duration_s": 15},
    "replications": 2,
    "seed": 7,
}
