"""Where the model was checked, and what of a run lies beyond it.

Each calibration cell and validation run stands at some point of the inputs that decide how far
the model can be trusted: how big its LIST responses were, how many objects a resource held,
how many bytes a second LISTs read from etcd, how many informers watched, which Kubernetes
version ran, and which features were in use. The report records the range of each over all of
them (`model-error.json`, `inputs`); every run lists its own inputs outside those ranges
(summary.json `extrapolation`, and its text output), so a reader knows when a number comes from
beyond what was ever compared with a measurement.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from simapf.schema.summary import Summary, typed

NUMERIC = {
    "list_response_bytes": "a LIST response's mean size",
    "objects_per_resource": "objects of one resource",
    "etcd_list_bytes_per_s": "bytes a second LISTs read from etcd",
    "informers": "informers",
}


def run_inputs(summary: Summary | Mapping[str, Any], scenario: dict[str, Any]) -> dict[str, Any]:
    """A run's inputs (see the module): numbers, its Kubernetes minor version and its features."""
    s = typed(summary)
    by_path = s.lists.by_path if s.lists else {}
    sizes = [v.bytes / v.requests for v in by_path.values() if v.requests and v.bytes > 0]
    etcd = by_path["etcd"].bytes if "etcd" in by_path else 0.0
    duration = float(s.duration_s or scenario["run"]["duration_s"])
    informers = sum(int(c.get("count", 1)) for c in scenario.get("clients", []) if c.get("kind") == "informer")
    used = features(scenario)
    if s.etcd.members > 1:
        used.add("several etcd members")  # ReadIndex rounds: the resolved deployment, however it was set
    return {
        "list_response_bytes": max(sizes, default=0.0),
        "objects_per_resource": max((int(r.get("count", 0)) for r in scenario.get("resources", [])), default=0),
        "etcd_list_bytes_per_s": etcd / duration if duration else 0.0,
        "informers": informers,
        "kubernetes_version": minor_version(scenario.get("kubernetes", {}).get("version", "")),
        "features": sorted(used),
    }


def minor_version(version: str) -> str:
    m = re.match(r"v?(\d+)\.(\d+)", str(version).strip())
    return f"{m.group(1)}.{m.group(2)}" if m else str(version)


def features(scenario: dict[str, Any]) -> set[str]:
    """The mechanisms a scenario puts to work beyond LISTs, GETs and watches of built-in objects."""
    api = scenario.get("apiserver", {})
    gates = scenario.get("kubernetes", {}).get("feature_gates", {})
    clients = scenario.get("clients", [])
    kinds = {c.get("kind") for c in clients}
    out = set()
    if any(c.get("kind") == "informer" for c in clients) and gates.get("WatchListClient"):
        out.add("WatchList informers")
    if api.get("replicas", 1) > 1:
        out.add("several apiserver replicas")
    if scenario.get("admission_webhooks"):
        out.add("admission webhooks")
    if scenario.get("crds"):
        out.add("CustomResourceDefinitions")
    if api.get("gomemlimit_bytes") is not None:
        out.add("GOMEMLIMIT")
    if api.get("memory_limit_bytes") is not None:
        out.add("a memory limit (OOM kills)")
    if "mutator" in kinds:
        out.add("writes")
    if "discovery" in kinds:
        out.add("kubectl discovery")
    if any(e.get("kind") == "outage" for e in scenario.get("events", [])):
        out.add("network outages")
    return out


def covered(all_inputs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The ranges and sets the checked runs' inputs span."""
    rows = list(all_inputs)
    out: dict[str, Any] = {k: [min(r[k] for r in rows), max(r[k] for r in rows)] for k in NUMERIC}
    out["kubernetes_versions"] = sorted({r["kubernetes_version"] for r in rows})
    out["features"] = sorted({f for r in rows for f in r["features"]})
    return out


def beyond(inputs: dict[str, Any], checked: dict[str, Any]) -> list[str]:
    """What of a run's `inputs` lies outside the `checked` ranges, each as a sentence."""
    out = []
    for key, what in NUMERIC.items():
        lo, hi = checked[key]
        x = inputs[key]
        if x and (x < lo or x > hi):
            out.append(f"{what}: {_num(x)}, checked from {_num(lo)} to {_num(hi)}")
    if inputs["kubernetes_version"] not in checked["kubernetes_versions"]:
        out.append(f"Kubernetes {inputs['kubernetes_version']}: checked on {', '.join(checked['kubernetes_versions'])}")
    for feature in inputs["features"]:
        if feature not in checked["features"]:
            out.append(f"{feature}: no validation row uses it")
    return out


def _num(x: float) -> str:
    if x >= 1e9:
        return f"{x / 1e9:.3g} G"
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e3:
        return f"{x / 1e3:.3g} k"
    return f"{x:.3g}" if not math.isclose(x, round(x)) else f"{x:.0f}"
