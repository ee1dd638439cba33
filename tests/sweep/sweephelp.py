"""A small scenario (20 simulated seconds, a few clients, ~30 ms a run) and sweep files around it."""

from __future__ import annotations

from pathlib import Path

import yaml

SMALL = {
    "name": "small-lists",
    "run": {"duration_s": 20, "seed": 3},
    "apiserver": {"cores": 4, "max_requests_inflight": 40, "max_mutating_requests_inflight": 20,
                  "memory_limit_bytes": "2Gi"},
    "resources": [{"name": "widgets", "count": 300,
                   "object_size": {"mean_bytes": "20Ki", "distribution": "lognormal", "sigma": 0.5}}],
    "clients": [
        {"name": "listers", "kind": "open_loop", "count": 4, "identity": {"user": "lister-{i}"},
         "rate_per_s": 5, "request": {"verb": "list", "resource": "widgets"}},
        {"name": "writers", "kind": "mutator", "identity": {"user": "writer"}, "resource": "widgets",
         "rate_per_s": 5},
    ],
}  # fmt: skip


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
