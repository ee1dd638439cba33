"""Where a registered number comes from: the names an entry's `is:` expression can use.

    run["NAME"]            the summary of a run the registry defines (`runs:`), as `summary.json` has it
    scenario["PATH"]       a shipped scenario, resolved (every default filled in), as a run sees it
    data["PATH"]           a shipped YAML or JSON file as written (a sweep or search spec, params.yaml)
    csv["PATH"]            a shipped CSV's rows; `.row(column=value, ...)` is the one row that matches
    params                 the resource model's parameters as a run takes them: the calibration's, else defaults
    schema["PATH"]         a scenario field as docs/scenario-reference.md lists it (`clients[].retry.max_retries`):
                           its `.default`, and its bounds `.most` and `.least`
    apf_levels(S)          every bootstrap priority level's limits at server concurrency S, as
                           `simapf apf-report` gives them: `apf_levels(600)["workload-low"].nominal_cl`
    bootstrap              APF's bootstrap objects (simapf/apf/bootstrap.yaml): `.levels["workload-low"]`,
                           `.flowschemas["service-accounts"]`, each its `spec`
    py["MODULE"]           a module of simapf, for its constants: `py["simapf.workload.cluster"].WATCH_HISTORY_NS`
    code["PATH"]           a source file's text; `.value("ceil({} * n)")` is the literal at `{}` of those words
    math                   Python's math module (log, ceil, ...)
    parameter_tables(until) docs/resource-model.md's tables of `ServerParams`: per section (up to `until`) its
                           fields, defaults (as `python -m simapf.server.reference` writes them) and descriptions
    summary_text(s)        what `simapf run` prints for a run's summary, its wall time as `…`

Every value reads as a tree: `run["default"].memory.peak_rss_bytes`, `.events[0]` by index, and
`.clients["controllers"]` picks the element of a list whose `name` (or `client`,
`priority_level`) is that. Units are converted in
the expression (`/ 1e9` for GB, `/ 2**30` for GiB); the registry gives the rounding.
"""

from __future__ import annotations

import csv as csv_module
import dataclasses
import functools
import json
import re
from pathlib import Path
from typing import Any

import yaml

from docnumbers.scan import ROOT


NAMES = ("name", "client", "priority_level", "id")  # what names an element of a list


class Tree:
    """A read-only view of nested dicts and lists with attribute and name lookup."""

    __slots__ = ("_v", "_path")

    def __init__(self, value: Any, path: str):
        self._v, self._path = value, path

    def __getattr__(self, key: str) -> Any:
        return self[key]

    def __getitem__(self, key: Any) -> Any:
        v = self._v
        try:
            if isinstance(v, list) and isinstance(key, str):
                (found,) = [x for x in v if isinstance(x, dict) and key in (x.get(k) for k in NAMES)]
            else:
                found = v[key]
        except (KeyError, IndexError, TypeError, ValueError):
            raise LookupError(f"{self._path}: no {key!r}") from None
        return wrap(found, f"{self._path}.{key}")

    def __contains__(self, key: Any) -> bool:
        return key in self._v

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._v else default

    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self):  # a list's elements; a mapping's values (the levels of `bootstrap.levels`)
        items = self._v.values() if isinstance(self._v, dict) else self._v
        return (wrap(x, f"{self._path}[{i}]") for i, x in enumerate(items))

    def row(self, **where: Any) -> "Tree":
        """The one row of a table whose columns have these values (compared as text)."""
        rows = [r for r in self._v if all(str(r.get(k)) == str(w) for k, w in where.items())]
        if len(rows) != 1:
            raise LookupError(f"{self._path}: {len(rows)} rows where {where}, not one")
        return wrap(rows[0], f"{self._path}.row({where})")


def wrap(value: Any, path: str) -> Any:
    return Tree(value, path) if isinstance(value, (dict, list)) else value


class Files:
    """`kind["path"]`: a file of the checkout, read once."""

    def __init__(self, kind: str, read):
        self.kind, self.read = kind, functools.cache(read)

    def __getitem__(self, path: str) -> Any:
        if not (ROOT / path.partition("#")[0]).is_file() and path != "default":
            raise LookupError(f'{self.kind}["{path}"]: no such file in the checkout')
        return wrap(self.read(path), f'{self.kind}["{path}"]')


class Code:
    """A source file of the checkout, for a literal it holds."""

    def __init__(self, path: str):
        self.path = path
        self.text = (ROOT / path).read_text(encoding="utf-8")

    def value(self, words: str) -> float:
        before, after = (re.escape(p) for p in words.split("{}"))
        found = re.findall(f"{before}([-+]?[0-9_.]+(?:e[-+]?[0-9]+)?){after}", self.text)
        if len(found) != 1:
            raise LookupError(f'code["{self.path}"]: {words!r} is there {len(found)} times, not once')
        return float(found[0].replace("_", ""))


class Modules:
    def __getitem__(self, name: str) -> Any:
        import importlib

        return importlib.import_module(name)


def _data(path: str) -> Any:
    text = (ROOT / path).read_text(encoding="utf-8")
    return json.loads(text) if path.endswith(".json") else yaml.safe_load(text)


def _csv(path: str) -> list[dict[str, Any]]:
    with open(ROOT / path, newline="", encoding="utf-8") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv_module.DictReader(f)]


def _number(text: str) -> Any:
    try:
        return float(text) if re.fullmatch(r"-?[\d.]+(?:e[-+]?\d+)?", text or "") else text
    except ValueError:
        return text


def _scenario(path: str) -> dict[str, Any]:
    import simapf

    return simapf.load_scenario(scenario_source(path)).scenario.model_dump(mode="json")


def scenario_source(where: str) -> Any:
    """A scenario named as the registry names it: a file, "default", or "DOC.md#yaml"."""
    if where == "default":
        from simapf.scenario import default_scenario_path

        return default_scenario_path()
    path, _, block = where.partition("#")
    if not block:
        return ROOT / path
    text = (ROOT / path).read_text(encoding="utf-8")
    (body,) = re.findall(rf"^```{block}\n(.*?)^```", text, re.S | re.M)
    return yaml.safe_load(body)


def summary_text(summary: Tree, until: str | None = None) -> str:
    """What `simapf run` prints for this summary, the wall time as `…` (it is the machine's), to
    the line starting with `until` if given."""
    from simapf.simulation.summary_text import format_summary

    text = format_summary(summary._v)
    lines = text.splitlines(keepends=True)
    if until is not None:
        lines = lines[: next(i for i, line in enumerate(lines) if line.lstrip().startswith(until)) + 1]
    first = re.sub(r" in [0-9.,]+ wall s", " in … wall s", lines[0])
    return first + "".join(lines[1:])


def parameter_tables(until: str | None = None) -> str:
    """Every section of `ServerParams` as a table: field, default, the field's own description; the
    fields and defaults as `python -m simapf.server.reference` reads them (the parameters' dump)."""
    from simapf.server.params import ServerParams
    from simapf.server.reference import shown

    params, out = ServerParams(), []
    dumped = params.model_dump()
    for section, info in ServerParams.model_fields.items():
        if section == until:
            break
        fields = type(getattr(params, section)).model_fields
        by_name = {getattr(f, "validation_alias", None) or name: f for name, f in fields.items()} | dict(fields)
        out.append(f"### `{section}`: {info.description}\n\n| Field | Default | Meaning |\n|---|---|---|\n")
        out += [f"| `{name}` | {shown(value)} | {(by_name[name].description or '').strip()} |\n"
                for name, value in dumped[section].items()]  # fmt: skip
        out.append("\n")
    return "".join(out)[:-1]


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """A run the documents quote: a scenario, the overrides given to it, and whether it is slow."""

    name: str
    scenario: str  # a shipped file, "default" (the built-in) or "DOC.md#yaml" (a document's YAML block)
    set: tuple[str, ...] = ()
    slow: bool = False

    def summary(self) -> dict[str, Any]:
        import simapf

        loaded = simapf.load_scenario(scenario_source(self.scenario), list(self.set))
        if self.scenario == "default":
            loaded = dataclasses.replace(loaded, source="<built-in default>")  # as `simapf run` names it
        return simapf.run(loaded).summary  # through the result cache: a second check reads it back


class Runs:
    """`run["NAME"]`: a registered run's summary, run at most once per process (and read from the
    result cache where it is on)."""

    def __init__(self, specs: dict[str, RunSpec], allowed: set[str] | None = None, done: dict | None = None):
        self.specs, self.allowed, self._done = specs, allowed, {} if done is None else done

    def __getitem__(self, name: str) -> Tree:
        if name not in self.specs:
            raise LookupError(f'run["{name}"]: no such run in the registry\'s runs')
        if self.allowed is not None and name not in self.allowed:
            raise SkipRun(name)
        if name not in self._done:
            self._done[name] = self.specs[name].summary()
        return Tree(self._done[name], f'run["{name}"]')


class SkipRun(Exception):
    """An entry needs a run this check leaves to the slow one."""


@functools.cache
def _params() -> dict[str, Any]:
    from simapf.server.params import ServerParams

    return ServerParams().model_dump(mode="json")


class _Params:
    def __getattr__(self, key: str) -> Any:
        return Tree(_params(), "params")[key]


class Field:
    """A scenario field's default and bounds, from the schema."""

    def __init__(self, path: str):
        from simapf.scenario import docs
        from simapf.scenario.schema import Scenario

        infos = [info for p, _model, _name, info in docs.all_fields(Scenario) if p == path]
        if not infos:
            raise LookupError(f'schema["{path}"]: no such field (see docs/scenario-reference.md)')
        self.info = infos[0]

    @property
    def default(self) -> Any:
        return self.info.default

    def _bound(self, *names: str) -> Any:
        for m in self.info.metadata:
            for n in names:
                if getattr(m, n, None) is not None:
                    return getattr(m, n)
        raise LookupError(f"the field has no {'/'.join(names)} bound")

    @property
    def most(self) -> Any:
        return self._bound("le", "lt")

    @property
    def least(self) -> Any:
        return self._bound("ge", "gt")


class _Schema:
    def __getitem__(self, path: str) -> Field:
        return Field(path)


@functools.cache
def apf_levels(server_concurrency: int) -> Tree:
    import dataclasses as dc

    from simapf.apf.report import level_rows

    return Tree([{"name": r.priority_level, **dc.asdict(r)} for r in level_rows(server_concurrency)], f"apf_levels({server_concurrency})")


@functools.cache
def _bootstrap() -> dict[str, Any]:
    items = _data("simapf/apf/bootstrap.yaml")["items"]
    by_kind = {kind: {i["metadata"]["name"]: i["spec"] for i in items if i["kind"] == kind}
               for kind in ("PriorityLevelConfiguration", "FlowSchema")}  # fmt: skip
    return {"levels": by_kind["PriorityLevelConfiguration"], "flowschemas": by_kind["FlowSchema"]}


class _Bootstrap:
    def __getattr__(self, key: str) -> Any:
        return Tree(_bootstrap(), "bootstrap")[key]


def namespace(runs: Runs) -> dict[str, Any]:
    return {
        "run": runs,
        "params": _Params(),
        "bootstrap": _Bootstrap(),
        "schema": _Schema(),
        "apf_levels": apf_levels,
        "scenario": Files("scenario", _scenario),
        "data": Files("data", _data),
        "csv": Files("csv", _csv),
        "py": Modules(),
        "code": Files("code", Code),
        "summary_text": summary_text,
        "parameter_tables": parameter_tables,
        "math": __import__("math"),
        "str": str,
        "int": int,
        "float": float,
        "all": all,
        "any": any,
        "min": min,
        "max": max,
        "sum": sum,
        "len": len,
        "sorted": sorted,
        "pow": pow,
        "abs": abs,
        "round": round,
    }
