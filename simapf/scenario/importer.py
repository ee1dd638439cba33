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
  resource with their verb mix, watches (`apiserver_longrunning_requests`) as informers that
  have listed when the run starts (their watches open, as in the cluster). A
  namespaced resource's requests on one object (scope `resource`) or on a namespace's
  collection (scope `namespace`) go to its namespaces, as in the cluster, so the cluster's
  FlowSchemas classify them as they would there (a rule without clusterScope matches only
  requests in a namespace). 429 responses are left out: they are APF's rejections, which the
  clients retry, so the request is counted again when it is served;
- APF: the cluster's FlowSchemas and priority levels, as they are;
- etcd: not in the artefacts (an apiserver's metrics do not say how many members etcd has or
  how many cores they have), so simapf's default deployment, written out in the scenario's
  `etcd` section and its header: the calibration's kind node, one member with one core's worth
  of range reads. An HA control plane's user sets its members and cores there.

The metrics do not say who sent what, so every imported client is a service account of its own
(`imported/<verb>-<resource>`), which APF classifies as workload-low unless the cluster's
FlowSchemas say otherwise: the user edits identities, like every other number, for the what-if.
The result is an ordinary scenario file, commented with where each number came from.

Every artefact is read and checked before anything is written, and every error names the
artefact (and its line where there is one); the scenario and its copy of the APF objects are
then written together (`simapf.files.write_files_together`): both, or neither.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simapf.apf.config import parse_objects
from simapf.apf.objects import LIST_KINDS, APFObjects
from simapf.errors import ConfigError
from simapf.files import MAX_METRICS_BYTES, MAX_TEXT_BYTES, MAX_YAML_BYTES, not_regular, read_bytes, write_files_together
from simapf.scenario.schema import Etcd

DEFAULT_OBJECT_BYTES = 4096
MIN_RATE_PER_S = 0.01  # request classes rarer than this are left out
WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
READ_VERBS = {"GET": "get", "LIST": "list"}
# --scraped-at and --uptime-s may both be given when they say the same: `date +%s` has whole
# seconds, process_start_time_seconds a fraction.
UPTIME_TOLERANCE_S = 1.0

# The artefacts, by file name, and how each is collected.
ARTEFACTS = {
    "apf.yaml": "kubectl get flowschemas,prioritylevelconfigurations -o yaml > apf.yaml",
    "metrics.txt": "kubectl get --raw /metrics > metrics.txt",
    "api-resources.txt": "kubectl api-resources > api-resources.txt",
}

Samples = dict[str, list[tuple[dict[str, str], float]]]


@dataclass
class _Resource:
    name: str  # plural, as in URLs
    group: str = ""
    version: str = "v1"
    namespaced: bool = True
    count: int = 0
    object_bytes: float | None = None
    sources: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Artefact:
    """One artefact as read: its bytes (copied as they are) and their text (checked)."""

    path: Path
    data: bytes
    text: str


# ----------------------------------------------------------------------------- the command


def import_cluster(artefacts: str | Path, out: str | Path, *, scraped_at_unix_s: float | None = None,
                   uptime_s: float | None = None, name: str = "imported", duration_s: float = 300,
                   force: bool = False) -> Path:  # fmt: skip
    """Write the scenario built from the artefacts in the folder `artefacts` to `out`, and a copy
    of the APF objects beside it (`<stem>.apf.yaml`); returns `out`. Everything is checked
    first; existing files are not replaced unless `force`, and never the artefacts themselves."""
    _check_options(scraped_at_unix_s, uptime_s, duration_s)
    folder = Path(artefacts)
    paths = _artefact_paths(folder)
    out_path, apf_copy = _check_outputs(out, list(paths.values()), force)
    apf = _read_artefact(paths["apf.yaml"])
    metrics = _read_artefact(paths["metrics.txt"])
    resources_table = _read_artefact(paths["api-resources.txt"])
    read_apf(apf.path, apf.text)
    samples = read_metrics(metrics.path, metrics.text)
    kinds = read_api_resources(resources_table.path, resources_table.text)
    uptime, how = _uptime(samples, metrics.path, scraped_at_unix_s, uptime_s)
    scenario, notes = _scenario(samples, kinds, uptime, name, duration_s, apf_copy.name, metrics.path)
    _check_scenario(scenario, apf.path, folder, out_path.parent)
    header = _header(notes, metrics.path, resources_table.path, apf.path, apf_copy.name, uptime, how)
    body = yaml.safe_dump(scenario, sort_keys=False, width=110)
    try:
        write_files_together({apf_copy: apf.data, out_path: ("\n".join(header) + body).encode("utf-8")}, "import")
    except OSError as err:  # a full disk, say: nothing was left behind, and the user can fix it
        raise ConfigError(f"-o {out}: cannot write: {err.strerror or err}") from None
    return out_path


def _check_options(scraped_at: float | None, uptime_s: float | None, duration_s: float) -> None:
    """What the options say, before any file is read."""
    if scraped_at is not None and not math.isfinite(scraped_at):
        raise ConfigError(f"--scraped-at: must be a time in Unix seconds (date +%s), got {scraped_at}")
    if uptime_s is not None and not (math.isfinite(uptime_s) and uptime_s > 0):
        raise ConfigError(f"--uptime-s: must be a number of seconds above 0, got {uptime_s:g}")
    if not math.isfinite(duration_s):
        raise ConfigError(f"--duration-s: must be a number of seconds, got {duration_s}")
    if scraped_at is None and uptime_s is None:
        raise ConfigError("to turn the metrics' counters into rates give --scraped-at (when /metrics was read, "
                          "in Unix seconds) or --uptime-s (the apiserver's uptime then)")  # fmt: skip


def _artefact_paths(folder: Path) -> dict[str, Path]:
    if not folder.exists():
        raise ConfigError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise ConfigError(f"{folder}: is a file; give the folder holding {', '.join(ARTEFACTS)}")
    paths = {n: folder / n for n in ARTEFACTS}
    for n, path in paths.items():
        if not path.exists():
            raise ConfigError(f"{folder}: no {n} here (collect it with `{ARTEFACTS[n]}`)")
        if not path.is_file():
            raise ConfigError(f"{path}: {not_regular(path.stat().st_mode)} (collect it with `{ARTEFACTS[n]}`)")
    return paths


def _check_outputs(out: str | Path, inputs: list[Path], force: bool) -> tuple[Path, Path]:
    """The scenario's path and its APF copy's, refused before any work if writing them would
    replace an input, a folder, or (without --force) any file."""
    shown = os.fspath(out)
    path = Path(out)
    if shown.endswith(("/", os.sep)) or path.name in ("", ".", "..") or path.is_dir():
        what = "is a folder" if path.is_dir() else "names a folder"
        raise ConfigError(f"-o {shown}: {what}; give the scenario file to write, e.g. {path / 'scenario.yaml'}")
    apf_copy = path.with_name(path.stem + ".apf.yaml")
    for target in (path, apf_copy):
        for given in inputs:
            if _same_file(target, given):
                what = "" if target == path else f"the copy of the APF objects, {target}, "
                raise ConfigError(f"-o {shown}: {what}would replace the artefact {given}; write the scenario elsewhere")
    folder = path.parent
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"-o {shown}: {existing} is a file, not a folder")
    if existing != folder:
        raise ConfigError(f"-o {shown}: folder {folder} does not exist")
    if apf_copy.is_dir():
        raise ConfigError(f"-o {shown}: {apf_copy}, where the APF objects are copied, is a folder")
    if not force:
        there = [str(p) for p in (path, apf_copy) if p.exists() or p.is_symlink()]
        if there:
            verb = "exists" if len(there) == 1 else "exist"
            raise ConfigError(f"-o {shown}: {' and '.join(there)} {verb}; simapf does not replace them unless --force")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"-o {shown}: cannot write in {folder}: permission denied")
    return path, apf_copy


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.absolute().resolve() == b.absolute().resolve()


# ----------------------------------------------------------------------------- reading


def _read_artefact(path: Path) -> _Artefact:
    """The artefact's bytes and text; an empty or binary file is refused, naming it."""
    how = ARTEFACTS[path.name]
    data = read_bytes(path, _LIMITS[path.name], f"{path.name} ({how})")  # a regular file, bounded
    if not data.strip():
        raise ConfigError(f"{path}: is empty; collect it with `{how}`")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{path}: is UTF-16 text (as PowerShell's > writes it); save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConfigError(_not_text(path, data, err.start)) from None
    if "\0" in text:
        raise ConfigError(_not_text(path, data, data.index(b"\0")))
    return _Artefact(path, data, text)


# How much of each artefact simapf reads (simapf.files' limits for YAML, metrics and text).
_LIMITS = {"apf.yaml": MAX_YAML_BYTES, "metrics.txt": MAX_METRICS_BYTES, "api-resources.txt": MAX_TEXT_BYTES}


def _not_text(path: Path, data: bytes, at: int) -> str:
    line = data.count(b"\n", 0, at) + 1
    return (f"{path}: line {line}: not text (byte {at} is 0x{data[at]:02x}: a binary or compressed file?); "
            f"collect it with `{ARTEFACTS[path.name]}`")  # fmt: skip


def read_apf(path: Path, text: str) -> APFObjects:
    """The FlowSchemas and priority levels, checked as `simapf run` checks them, and refused
    when there are none of either kind (which `simapf run` would quietly replace)."""
    if isinstance(_first_document(text), str):
        raise ConfigError(f"{path}: is text, not YAML objects (kubectl's table, without -o yaml?); collect it "
                          f"with `{ARTEFACTS['apf.yaml']}`")  # fmt: skip
    try:
        objects = parse_objects(text, source_name=str(path))
    except ConfigError as err:
        raise ConfigError(_with_item_line(str(err), str(path), text)) from None
    if not objects.flow_schemas and not objects.priority_levels:
        raise ConfigError(f"{path}: holds no FlowSchema or PriorityLevelConfiguration; collect it with "
                          f"`{ARTEFACTS['apf.yaml']}`")  # fmt: skip
    for kind, found in (("FlowSchema", objects.flow_schemas), ("PriorityLevelConfiguration", objects.priority_levels)):
        if not found:
            raise ConfigError(f"{path}: holds no {kind}; collect both kinds with `{ARTEFACTS['apf.yaml']}`")
    return objects


def _first_document(text: str) -> Any:
    try:
        return next(iter(yaml.safe_load_all(text)), None)
    except (yaml.YAMLError, RecursionError):
        return None  # parse_objects says what is wrong


def _with_item_line(message: str, source: str, text: str) -> str:
    """`message` about one object of the file (`items[3] (FlowSchema "x"): ...`) with the line
    that object starts on put in front, where the YAML says."""
    rest = message.removeprefix(f"{source}: ")
    lines = _item_lines(text)
    for where, line in lines.items():
        if rest.startswith((f"{where} ", f"{where}:")):
            for other, other_line in lines.items():  # a duplicate name's first place
                rest = rest.replace(f"(first seen at {other})", f"(first seen at {other}, line {other_line})")
            return f"{source}: line {line}: {rest}"
    return message


def _item_lines(text: str) -> dict[str, int]:
    """The line each object starts on, by its place as `simapf.apf.config` names it."""
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[str, int] = {}
    several = len(documents) > 1
    for index, node in enumerate(documents):
        where = f"documents[{index}]" if several else ""
        items, at = None, where
        if isinstance(node, yaml.SequenceNode):
            items = node
        elif isinstance(node, yaml.MappingNode):
            fields = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
            kind = fields.get("kind")
            if isinstance(kind, yaml.ScalarNode) and kind.value in LIST_KINDS:
                items, at = fields.get("items"), f"{where}.items" if where else "items"
            elif where:
                lines[where] = node.start_mark.line + 1
        if isinstance(items, yaml.SequenceNode):
            for i, item in enumerate(items.value):
                lines[f"{at}[{i}]"] = item.start_mark.line + 1
    return lines


class _NumberedLines(io.StringIO):
    """A text read line by line, counting the lines: where a parser stopped."""

    number = 0
    line = ""

    def __next__(self) -> str:
        self.line = super().__next__()
        self.number += 1
        return self.line


# Samples that count something, and so are never negative: counters, and the counts and buckets
# of histograms and summaries (their sums and quantiles may be, in general), and those simapf reads.
_NEVER_NEGATIVE = {"apiserver_request_total", "apiserver_response_sizes_sum", "apiserver_response_sizes_count",
                   "apiserver_longrunning_requests"}  # fmt: skip


def _is_count(family_type: str, name: str) -> bool:
    if name in _NEVER_NEGATIVE or family_type == "counter":
        return True
    return family_type in ("histogram", "summary", "gaugehistogram") and name.endswith(("_count", "_bucket", "_gcount"))


def read_metrics(path: Path, text: str) -> Samples:
    """Samples by name, from Prometheus text exposition as `kubectl get --raw /metrics` prints
    it (prometheus_client's parser), with the checks that parser leaves out: a complete last
    line, no sample given twice, counts that are finite and not negative."""
    from prometheus_client.parser import text_fd_to_metric_families

    if not text.endswith("\n"):
        last = text.count("\n") + 1
        raise ConfigError(f"{path}: line {last}: cut short (the file does not end with a newline); "
                          f"collect it again with `{ARTEFACTS['metrics.txt']}`")  # fmt: skip
    lines = _NumberedLines(text, newline="\n")
    samples: Samples = {}
    seen: set[tuple[str, tuple]] = set()
    try:
        for family in text_fd_to_metric_families(lines):
            for s in family.samples:
                labels, value = dict(s.labels), float(s.value)
                key = (s.name, tuple(sorted(labels.items())))
                if key in seen:
                    raise ConfigError(_sample_error(path, text, s.name, labels, "is given twice (the /metrics of "
                                                    "two apiservers in one file?)", last=True))  # fmt: skip
                seen.add(key)
                _check_value(path, text, family.type, s.name, labels, value)
                samples.setdefault(s.name, []).append((labels, value))
    except ValueError as err:
        reason = f" ({err})" if str(err) else ""
        shown = lines.line.strip()
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ConfigError(f"{path}: line {lines.number}: not Prometheus text{reason}: {shown!r}") from None
    if not any(n.startswith("apiserver_") for n in samples):
        raise ConfigError(f"{path}: no apiserver_ metrics at all; is it kube-apiserver's? collect it with "
                          f"`{ARTEFACTS['metrics.txt']}`")  # fmt: skip
    return samples


def _check_value(path: Path, text: str, family_type: str, name: str, labels: dict[str, str], value: float) -> None:
    if _is_count(family_type, name) and not (math.isfinite(value) and value >= 0):
        raise ConfigError(_sample_error(path, text, name, labels, f"is {_number(value)}; a count is a number of at least 0"))
    if name == "process_start_time_seconds" and not (math.isfinite(value) and value > 0):
        raise ConfigError(_sample_error(path, text, name, labels, f"is {_number(value)}; a start time is Unix seconds"))


def _number(value: float) -> str:
    return f"{value:.0f}" if math.isfinite(value) and value.is_integer() else f"{value:g}"


def _sample_error(path: Path, text: str, name: str, labels: dict[str, str], problem: str, last: bool = False) -> str:
    """`problem` of one sample, at its line (the last of its lines, for one given twice)."""
    shown = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    found = [n for n, line in enumerate(text.split("\n"), start=1) if _is_line_of(line, name, labels)]
    where = f" line {found[-1 if last else 0]}:" if found else ""
    return f"{path}:{where} {shown} {problem}"


def _is_line_of(line: str, name: str, labels: dict[str, str]) -> bool:
    line = line.strip()
    if not line.startswith(name) or line[len(name):len(name) + 1] not in ("{", " ", "\t"):
        return False
    return all(f'{k}="{v}"' in line for k, v in labels.items())


def read_api_resources(path: Path, text: str) -> dict[tuple[str, str], tuple[str, bool]]:
    """(group, resource) -> (version, namespaced), from `kubectl api-resources`'s table."""
    numbered = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    first_n, header = numbered[0]
    if not header.startswith("NAME"):
        hint = " (collected with --no-headers?)" if {"true", "false"} & set(header.split()) else ""
        raise ConfigError(f"{path}: line {first_n}: expected the header of `kubectl api-resources` (NAME, "
                          f"APIVERSION, NAMESPACED, KIND), got {_shorten(header)!r}{hint}")  # fmt: skip
    try:
        at = {col: header.index(col) for col in ("APIVERSION", "NAMESPACED", "KIND")}
    except ValueError:
        raise ConfigError(f"{path}: line {first_n}: the header needs APIVERSION, NAMESPACED and KIND columns, "
                          f"got {_shorten(header)!r}") from None  # fmt: skip
    if not at["APIVERSION"] < at["NAMESPACED"] < at["KIND"]:
        raise ConfigError(f"{path}: line {first_n}: expected the columns APIVERSION, NAMESPACED and KIND in "
                          "that order, as kubectl prints them")  # fmt: skip
    out = {}
    for n, line in numbered[1:]:
        cells = {col: line[start:end].strip() for col, start, end in (
            ("NAME", 0, at["APIVERSION"]), ("APIVERSION", at["APIVERSION"], at["NAMESPACED"]),
            ("NAMESPACED", at["NAMESPACED"], at["KIND"]), ("KIND", at["KIND"], len(line)))}  # fmt: skip
        problem = _row_problem(cells)
        if problem:
            raise ConfigError(f"{path}: line {n}: {problem} (a row out of the header's columns, or cut short?)")
        group, _, version = cells["APIVERSION"].rpartition("/")
        out[(group, cells["NAME"].split()[0])] = (version, cells["NAMESPACED"] == "true")
    return out


def _row_problem(cells: dict[str, str]) -> str | None:
    """What is wrong with one row of `kubectl api-resources`, read by the header's columns."""
    for col in ("NAME", "APIVERSION", "NAMESPACED", "KIND"):
        if not cells[col]:
            return f"no {col}"
    if len(cells["APIVERSION"].split()) > 1 or cells["APIVERSION"].count("/") > 1:
        return f"APIVERSION is {cells['APIVERSION']!r}, expected a version like v1 or apps/v1"
    if cells["NAMESPACED"] not in ("true", "false"):
        return f"NAMESPACED is {cells['NAMESPACED']!r}, expected true or false"
    return None


def _shorten(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def _uptime(samples: Samples, metrics: Path, scraped_at: float | None, uptime_s: float | None) -> tuple[float, str]:
    """The counters' window and how it was found; --scraped-at and --uptime-s both given must
    say the same."""
    if scraped_at is None:
        assert uptime_s is not None  # _check_options
        return uptime_s, "--uptime-s"
    start_samples = samples.get("process_start_time_seconds")
    if not start_samples:
        raise ConfigError(f"{metrics}: no process_start_time_seconds, so --scraped-at does not give the uptime; "
                          "give --uptime-s instead")  # fmt: skip
    start = start_samples[0][1]
    derived = scraped_at - start
    if not derived > 0:
        raise ConfigError(f"--scraped-at {scraped_at:.0f} is not after the apiserver started ({metrics}: "
                          f"process_start_time_seconds {start:.0f}); give when /metrics was read (date +%s then)")  # fmt: skip
    if uptime_s is not None:
        if abs(derived - uptime_s) > UPTIME_TOLERANCE_S:
            raise ConfigError(f"--scraped-at and --uptime-s disagree: --scraped-at {scraped_at:.0f} less {metrics}'s "
                              f"process_start_time_seconds {start:.0f} is an uptime of {derived:,.0f} s, not "
                              f"{uptime_s:,g} s; give one of them")  # fmt: skip
        return derived, "--scraped-at less process_start_time_seconds, as --uptime-s says"
    return derived, "--scraped-at less process_start_time_seconds"


# ----------------------------------------------------------------------------- building


def _get_totals(samples: Samples, name: str) -> dict[tuple[str, str], float]:
    """`name`'s GET samples summed per (group, resource), over scopes and versions."""
    totals: dict[tuple[str, str], float] = {}
    for labels, value in samples.get(name, []):
        if labels.get("verb") == "GET":
            key = (labels.get("group", ""), labels.get("resource", ""))
            totals[key] = totals.get(key, 0.0) + value
    return totals


def _fmt_rate(x: float) -> float:
    return float(f"{x:.3g}")


def _resources(samples: Samples, kinds: dict[tuple[str, str], tuple[str, bool]], metrics: Path) -> dict[tuple[str, str], _Resource]:
    objects = samples.get("apiserver_storage_objects")
    if not objects:
        raise ConfigError(f"{metrics}: no apiserver_storage_objects; is it kube-apiserver's /metrics?")
    resources: dict[tuple[str, str], _Resource] = {}
    for labels, value in objects:
        plural, _, group = labels.get("resource", "").partition(".")
        if not plural or not value >= 0:  # -1: the apiserver could not count them
            continue
        version, namespaced = kinds.get((group, plural), ("v1", True))
        r = resources[(group, plural)] = _Resource(plural, group, version, namespaced, int(value))
        r.sources.append(f"count: apiserver_storage_objects{{resource=\"{labels['resource']}\"}}")
    get_bytes = _get_totals(samples, "apiserver_response_sizes_sum")
    gets = _get_totals(samples, "apiserver_response_sizes_count")
    for key, r in resources.items():
        if gets.get(key, 0.0) > 0:
            r.object_bytes = get_bytes.get(key, 0.0) / gets[key]
            r.sources.append("object size: mean GET response size (apiserver_response_sizes)")
    return resources


RequestClass = tuple[str, str, str, str]  # group, resource, verb, scope


def _served(samples: Samples, metrics: Path) -> tuple[dict[RequestClass, float], dict[RequestClass, float]]:
    """Requests since the process started by class, and the 429s among them, left out: APF's
    rejections, which clients retry, so the retry is counted already (and the simulated
    clients retry theirs)."""
    if "apiserver_request_total" not in samples:
        raise ConfigError(f"{metrics}: no apiserver_request_total; is it kube-apiserver's /metrics?")
    served: dict[RequestClass, float] = {}
    retried: dict[RequestClass, float] = {}
    for labels, value in samples["apiserver_request_total"]:
        if labels.get("subresource"):
            continue  # status and other subresources: left out
        key = (labels.get("group", ""), labels.get("resource", ""), labels.get("verb", ""), labels.get("scope", ""))
        counts = retried if labels.get("code") == "429" else served
        counts[key] = counts.get(key, 0.0) + value
    return served, retried


def _scenario(samples: Samples, kinds: dict[tuple[str, str], tuple[str, bool]], uptime_s: float, name: str,
              duration_s: float, apf_copy: str, metrics: Path) -> tuple[dict, list[str]]:  # fmt: skip
    """The scenario, and a note per client on where its numbers came from."""
    resources = _resources(samples, kinds, metrics)
    served, retried = _served(samples, metrics)
    namespaces = max(1, resources.get(("", "namespaces"), _Resource("namespaces", count=1)).count)
    clients: list[dict] = []
    notes: list[str] = [f"{r.name}{'.' + r.group if r.group else ''}: " + "; ".join(r.sources)
                        + ("" if r.object_bytes else f"; object size: {DEFAULT_OBJECT_BYTES} bytes (no GET seen)")
                        for r in sorted(resources.values(), key=lambda r: (r.group, r.name))]  # fmt: skip
    writes: dict[tuple[str, str], dict[str, float]] = {}
    for (group, plural, verb, scope), total in sorted(served.items()):
        rate = total / uptime_s
        if rate < MIN_RATE_PER_S or (group, plural) not in resources:
            continue
        key = f"{plural}.{group}" if group else plural
        if verb in READ_VERBS:
            v = READ_VERBS[verb]
            request: dict = {"verb": v, "resource": key}
            # Upstream's scope: "resource" for one named object, "namespace" for a namespace's
            # collection; either is in a namespace when the resource is namespaced.
            if scope in ("resource", "namespace") and resources[(group, plural)].namespaced:
                request["namespace"] = "random"
            clients.append({"name": f"{v}-{key}-{scope}", "kind": "open_loop",
                            "identity": {"service_account": f"imported/{v}-{plural}"},
                            "rate_per_s": _fmt_rate(rate), "request": request})  # fmt: skip
            left_out = retried.get((group, plural, verb, scope), 0.0)
            notes.append(f"{v}-{key}-{scope}: {total:,.0f} {verb}s at scope {scope} in {uptime_s:,.0f} s"
                         + (f", and {left_out:,.0f} answered 429 and retried" if left_out else "")
                         + " (apiserver_request_total)")  # fmt: skip
        elif verb in WRITE_VERBS:
            mix = writes.setdefault((group, plural), {})
            mix[WRITE_VERBS[verb]] = mix.get(WRITE_VERBS[verb], 0.0) + rate
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
        # The watches were open when the metrics were read: the informers had listed, and the
        # run starts from there rather than with every one of them listing at once.
        clients.append({"name": f"watch-{key}", "kind": "informer", "count": int(value),
                        "identity": {"service_account": f"imported/watch-{plural}"}, "resource": key,
                        "synced_at_run_start": True})  # fmt: skip
        notes.append(f"watch-{key}: {int(value)} open watches, synced when the run starts (apiserver_longrunning_requests)")

    scenario = {
        "name": name,
        "description": f"Imported from {metrics.name}, api-resources.txt and apf.yaml: the cluster's objects, "
                       "its request rates averaged since the apiserver started, and its APF configuration.",
        "run": {"duration_s": duration_s, "seed": 1},
        "apf": {"config": apf_copy},
        "etcd": imported_etcd(),
        "resources": [
            {"name": r.name, "group": r.group, "version": r.version, "namespaced": r.namespaced, "count": r.count,
             **({"namespaces": namespaces} if r.namespaced else {}),
             "object_size": {"mean_bytes": int(round(r.object_bytes or DEFAULT_OBJECT_BYTES))}}
            for r in sorted(resources.values(), key=lambda r: (r.group, r.name))
        ],
        "clients": clients,
    }  # fmt: skip
    return scenario, notes


def imported_etcd() -> dict[str, Any]:
    """The etcd an imported scenario says it runs against: simapf's default deployment (the
    artefacts do not say), every field written out."""
    return Etcd().model_dump(include={"cores", "members", "member_round_trip_s"})


def _header(notes: list[str], metrics: Path, api_resources: Path, apf: Path, apf_copy: str,
            uptime_s: float, how: str) -> list[str]:  # fmt: skip
    etcd = imported_etcd()
    return [
        "# Imported by `simapf import` from a real cluster's artefacts (simapf/scenario/importer.py says how).",
        f"#   {metrics}: kubectl get --raw /metrics; uptime {uptime_s:,.0f} s ({how})",
        f"#   {api_resources}: kubectl api-resources",
        f"#   {apf}: kubectl get flowschemas,prioritylevelconfigurations -o yaml (copied to {apf_copy})",
        "#",
        "# Where the numbers come from:",
        *(f"#   {n}" for n in notes),
        "# Not in the artefacts, so left at simapf's defaults: the apiserver's cores and memory limit, who",
        "# sends what (every client is its own service account), selectors, and object size spread.",
        f"# etcd: members {etcd['members']}, cores {etcd['cores']}: simapf's default, the calibration's kind node, where",
        "# etcd shared the apiserver's node and served ranges as one core does. The artefacts do not say how",
        "# etcd is deployed: for an HA control plane set etcd.members (3 or 5) and etcd.cores (each member's),",
        "# and etcd.member_round_trip_s if its members are further apart than one data center.",
        "",
    ]


# Scenario fields set by an option rather than an artefact: a problem there is the option's.
_OPTION_FIELDS = {"name": "--name", "run.duration_s": "--duration-s"}


def _check_scenario(scenario: dict, apf: Path, artefacts: Path, base_dir: Path) -> None:
    """The scenario must load as it will be written (its APF objects read from the artefact,
    which its copy will be), before anything is written."""
    from simapf.scenario import load_scenario

    text = yaml.safe_dump({**scenario, "apf": {"config": str(apf.absolute())}}, sort_keys=False)
    try:
        load_scenario(yaml.safe_load(text), base_dir=base_dir)
    except ConfigError as err:
        problem = str(err).removeprefix("<scenario>: ")
        for key, option in _OPTION_FIELDS.items():
            if problem.startswith((f"{key}:", f"{key} ")):
                raise ConfigError(f"{option}: {problem.removeprefix(key).lstrip(': ')}") from None
        raise ConfigError(f"{artefacts}: the scenario imported from it does not load: {problem}") from None
