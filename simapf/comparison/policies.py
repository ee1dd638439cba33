"""The LIST policies a comparison puts side by side, as the user names them.

    upstream                               a registered name
    etcd-uncapped:max_list_seats=200       with parameters (values read as YAML)
    mypkg.policies:HalfPrice:factor=0.5    a user's class, with parameters

A `:` also separates a user class's module from its name, so parameters are the trailing
`:`-separated parts that contain `=`; the rest is the policy's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simapf.errors import ConfigError
from simapf.files import check_text, parse_yaml_value


@dataclass(frozen=True)
class Policy:
    label: str  # how tables and figures name it
    name: str  # apf.estimator.list_policy
    params: dict[str, Any] = field(default_factory=dict)  # apf.estimator.list_params

    def overrides(self) -> dict[str, Any]:
        return {"apf.estimator.list_policy": self.name, "apf.estimator.list_params": dict(self.params)}


def parse_policy(spec: "str | Policy | dict | tuple") -> Policy:
    """A Policy from `NAME[:k=v,...]`, a {name, params, label} mapping or a (name, params) pair."""
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, tuple):
        name, params = spec
        return _make(str(name), dict(params), None)
    if isinstance(spec, dict):
        unknown = set(spec) - {"name", "params", "label"}
        if unknown or "name" not in spec:
            raise ConfigError(f"policy {spec!r}: expected a mapping with name, and optionally params and label")
        return _make(str(spec["name"]), dict(spec.get("params") or {}), spec.get("label"))
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"--policy {spec!r}: expected NAME or NAME:key=value,...")
    text = spec.strip()
    parts = text.split(":")
    n = len(parts)
    while n > 1 and "=" in parts[n - 1]:
        n -= 1
    name = ":".join(parts[:n])
    params: dict[str, Any] = {}
    for part in parts[n:]:
        for item in part.split(","):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise ConfigError(f"--policy {text}: {item!r} is not key=value")
            if key in params:
                raise ConfigError(f"--policy {text}: {key} is given twice")
            params[key] = parse_yaml_value(value, f"--policy {text}: {key}")
    return _make(name, params, text)


def _make(name: str, params: dict[str, Any], label: str | None) -> Policy:
    if not name:
        raise ConfigError(f"--policy {label or name!r}: no policy name")
    if label is None:
        label = name + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")
    check_text({"name": name, "label": label, "params": params}, "--policy")  # all three are written out
    return Policy(str(label), name, params)
