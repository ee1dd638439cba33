"""`simapf import`: a scenario from a real cluster's artefacts, collected with kubectl alone.

    kubectl get flowschemas,prioritylevelconfigurations -o yaml > apf.yaml
    kubectl get --raw /metrics > metrics.txt          # one kube-apiserver's
    kubectl api-resources > api-resources.txt

What each number becomes:

- resources: `apiserver_storage_objects` (count per resource), `kubectl api-resources` (group,
  version, namespaced), the mean GET response size from `apiserver_response_sizes` (the size of
  one object; 4 KiB where no GET was seen), the namespaces' own count for namespaced ones;
- clients, one per request class the apiserver served, at its average rate since the process
  started (`apiserver_request_total` / uptime, uptime from `process_start_time_seconds` and
  when the metrics were scraped): GETs and LISTs as open-loop clients, writes as one writer per
  resource with their verb mix, watches (`apiserver_longrunning_requests`) as informers;
- APF: the cluster's FlowSchemas and priority levels, as they are.

The metrics do not say who sent what, so every imported client is a service account of its own
(`imported/<verb>-<resource>`), which APF classifies as workload-low unless the cluster's
FlowSchemas say otherwise: the user edits identities, like every other number, for the what-if.
The result is an ordinary scenario file, commented with where each number came from.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from simapf.apf.config import load_objects
from simapf.errors import ConfigError
from simapf.files import MAX_METRICS_BYTES, read_text, write_text_atomic

DEFAULT_OBJECT_BYTES = 4096
MIN_RATE_PER_S = 0.01  # request classes rarer than this are left out
WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
READ_VERBS = {"GET": "get", "LIST": "list"}


@dataclass
class _Resource:
    name: str  # plural, as in URLs
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    count: int = 0
    object_bytes: float | None = None
    sources: list[str] = field(default_factory=list)


def read_api_resources(path: Path) -> dict[tuple[str, str], tuple[str, bool]]:
    """(group, resource) -> (version, namespaced), from `kubectl api-resources`'s table."""
    lines = [line for line in read_text(path).splitlines() if line.strip()]
    if not lines or not lines[0].startswith("NAME"):
        raise ConfigError(f"{path}: expected `kubectl api-resources` output (a table whose header starts with NAME)")
    header = lines[0]
    try:
        at = {col: header.index(col) for col in ("APIVERSION", "NAMESPACED", "KIND")}
    except ValueError:
        raise ConfigError(f"{path}: the header needs APIVERSION, NAMESPACED and KIND columns") from None
    out = {}
    for n, line in enumerate(lines[1:], start=2):
        name = line.split()[0]
        apiversion = line[at["APIVERSION"]:at["NAMESPACED"]].strip()
        namespaced = line[at["NAMESPACED"]:at["KIND"]].strip()
        if not apiversion or namespaced not in ("true", "false"):
            raise ConfigError(f"{path}: line {n}: cannot read APIVERSION and NAMESPACED")
        group, _, version = apiversion.rpartition("/")
        out[(group, name)] = (version, namespaced == "true")
    return out


def read_metrics(path: Path) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Samples by name, from Prometheus text as `kubectl get --raw /metrics` prints it."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    try:
        for family in text_string_to_metric_families(read_text(path, MAX_METRICS_BYTES, "a metrics file")):
            for s in family.samples:
                samples.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    except ValueError as err:
        raise ConfigError(f"{path}: not Prometheus text: {err}") from None
    return samples


def _get_totals(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> dict[tuple[str, str], float]:
    """`name`'s GET samples summed per (group, resource), over scopes and versions."""
    totals: dict[tuple[str, str], float] = {}
    for labels, value in samples.get(name, []):
        if labels.get("verb") == "GET":
            key = (labels.get("group", ""), labels.get("resource", ""))
            totals[key] = totals.get(key, 0.0) + value
    return totals


def _fmt_rate(x: float) -> float:
    return float(f"{x:.3g}")


def import_cluster(apf: Path, metrics: Path, api_resources: Path, out: Path, *, scraped_at_unix_s: float | None = None,
                   uptime_s: float | None = None, name: str = "imported", duration_s: float = 300,
                   force: bool = False) -> Path:  # fmt: skip
    """Write the scenario (and a copy of the APF objects beside it); returns its path. Existing
    files are not replaced unless `force`."""
    out = Path(out)
    apf_copy = out.with_name(out.stem + ".apf.yaml")
    for path in (out, apf_copy):
        if path.exists() and not force:
            raise ConfigError(f"{path}: exists; simapf does not replace it unless --force")
    if not out.parent.is_dir():
        raise ConfigError(f"{out}: folder {str(out.parent)!r} does not exist")
    samples = read_metrics(metrics)
    kinds = read_api_resources(api_resources)
    load_objects(apf)  # before it is copied: a device or a huge file must not be
    if uptime_s is None:
        start = samples.get("process_start_time_seconds")
        if not start or scraped_at_unix_s is None:
            raise ConfigError(f"{metrics}: to turn counters into rates give --uptime-s, or --scraped-at with the "
                              "metrics' process_start_time_seconds")  # fmt: skip
        uptime_s = scraped_at_unix_s - start[0][1]
    if not uptime_s > 0:
        raise ConfigError(f"uptime: {uptime_s:g} s; --scraped-at must be after process_start_time_seconds")
    objects = samples.get("apiserver_storage_objects")
    if not objects:
        raise ConfigError(f"{metrics}: no apiserver_storage_objects; is it kube-apiserver's /metrics?")

    resources: dict[tuple[str, str], _Resource] = {}
    for labels, value in objects:
        plural, _, group = labels.get("resource", "").partition(".")
        if not plural or value < 0:
            continue
        version, namespaced = kinds.get((group, plural), ("v1", True))
        r = resources[(group, plural)] = _Resource(plural, group, version, namespaced, int(value))
        r.sources.append(f"count: apiserver_storage_objects{{resource=\"{labels['resource']}\"}}")
    namespaces = max(1, resources.get(("", "namespaces"), _Resource("namespaces", count=1)).count)

    get_bytes = _get_totals(samples, "apiserver_response_sizes_sum")
    gets = _get_totals(samples, "apiserver_response_sizes_count")
    for key, r in resources.items():
        if gets.get(key, 0.0) > 0:
            r.object_bytes = get_bytes.get(key, 0.0) / gets[key]
            r.sources.append("object size: mean GET response size (apiserver_response_sizes)")

    # Request classes: (group, resource, verb, scope) -> requests since the process started.
    served: dict[tuple[str, str, str, str], float] = {}
    for labels, value in samples.get("apiserver_request_total", []):
        if labels.get("subresource"):
            continue  # status and other subresources: left out
        key = (labels.get("group", ""), labels.get("resource", ""), labels.get("verb", ""), labels.get("scope", ""))
        served[key] = served.get(key, 0.0) + value

    clients: list[dict] = []
    notes: list[str] = []
    writes: dict[tuple[str, str], dict[str, float]] = {}
    for (group, plural, verb, scope), total in sorted(served.items()):
        rate = total / uptime_s
        if rate < MIN_RATE_PER_S or (group, plural) not in resources:
            continue
        key = f"{plural}.{group}" if group else plural
        if verb in READ_VERBS:
            v = READ_VERBS[verb]
            request: dict = {"verb": v, "resource": key}
            if scope == "namespace" and resources[(group, plural)].namespaced:
                request["namespace"] = "ns-0"
            clients.append({"name": f"{v}-{key}-{scope}", "kind": "open_loop",
                            "identity": {"service_account": f"imported/{v}-{plural}"},
                            "rate_per_s": _fmt_rate(rate), "request": request})  # fmt: skip
            notes.append(f"{v}-{key}-{scope}: {total:,.0f} {verb}s at scope {scope} in {uptime_s:,.0f} s (apiserver_request_total)")
        elif verb in WRITE_VERBS:
            writes.setdefault((group, plural), {})[WRITE_VERBS[verb]] = writes.get((group, plural), {}).get(WRITE_VERBS[verb], 0.0) + rate
    for (group, plural), mix in sorted(writes.items()):
        key = f"{plural}.{group}" if group else plural
        rate = sum(mix.values())
        clients.append({"name": f"write-{key}", "kind": "mutator", "identity": {"service_account": f"imported/write-{plural}"},
                        "resource": key, "rate_per_s": _fmt_rate(rate),
                        "namespace": "random" if resources[(group, plural)].namespaced else None,
                        "mix": {v: _fmt_rate(x / rate) for v, x in sorted(mix.items())}})  # fmt: skip
        notes.append(f"write-{key}: " + ", ".join(f"{v} {x:.3g}/s" for v, x in sorted(mix.items())) + " (apiserver_request_total)")
    for labels, value in sorted(samples.get("apiserver_longrunning_requests", []), key=lambda s: str(s[0])):
        group, plural = labels.get("group", ""), labels.get("resource", "")
        if labels.get("verb") != "WATCH" or value < 1 or (group, plural) not in resources:
            continue
        key = f"{plural}.{group}" if group else plural
        clients.append({"name": f"watch-{key}", "kind": "informer", "count": int(value),
                        "identity": {"service_account": f"imported/watch-{plural}"}, "resource": key})  # fmt: skip
        notes.append(f"watch-{key}: {int(value)} open watches (apiserver_longrunning_requests)")

    scenario = {
        "name": name,
        "description": f"Imported from {metrics.name}, {api_resources.name} and {apf.name}: the cluster's objects, "
                       "its request rates averaged since the apiserver started, and its APF configuration.",
        "run": {"duration_s": duration_s, "seed": 1},
        "apf": {"config": apf_copy.name},
        "resources": [
            {"name": r.name, "group": r.group, "version": r.version, "namespaced": r.namespaced, "count": r.count,
             **({"namespaces": namespaces} if r.namespaced else {}),
             "object_size": {"mean_bytes": int(round(r.object_bytes or DEFAULT_OBJECT_BYTES))}}
            for r in sorted(resources.values(), key=lambda r: (r.group, r.name))
        ],
        "clients": clients,
    }  # fmt: skip
    header = [
        "# Imported by `simapf import` from a real cluster's artefacts (simapf/importer.py says how).",
        f"#   {metrics}: kubectl get --raw /metrics; uptime {uptime_s:,.0f} s"
        + (" (--uptime-s)" if scraped_at_unix_s is None else " (--scraped-at less process_start_time_seconds)"),
        f"#   {api_resources}: kubectl api-resources",
        f"#   {apf}: kubectl get flowschemas,prioritylevelconfigurations -o yaml (copied to {apf_copy.name})",
        "#",
        "# Where the numbers come from:",
        *(f"#   {r.name}{'.' + r.group if r.group else ''}: " + "; ".join(r.sources)
          + ("" if r.object_bytes else f"; object size: {DEFAULT_OBJECT_BYTES} bytes (no GET seen)")
          for r in sorted(resources.values(), key=lambda r: (r.group, r.name))),
        *(f"#   {n}" for n in notes),
        "# Not in the artefacts, so left at simapf's defaults: the apiserver's cores and memory limit, who",
        "# sends what (every client is its own service account), selectors, and object size spread.",
        "",
    ]  # fmt: skip
    body = yaml.safe_dump(scenario, sort_keys=False, width=110)
    try:
        shutil.copyfile(apf, apf_copy)
    except OSError as err:
        raise ConfigError(f"{apf_copy}: cannot write: {err.strerror or err}") from None
    write_text_atomic(out, "\n".join(header) + body)
    _check(out)
    return out


def _check(path: Path) -> None:
    """The written scenario must load; a failure here is simapf's bug, said plainly."""
    from simapf.scenario import load_scenario

    load_scenario(path)
