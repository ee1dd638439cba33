"""summary.json against its schema (simapf.schema.summary): what a run writes
validates, and a field the schema does not declare fails with its path."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pydantic
import pytest

import simapf
from simapf.outputs.rundir import write_run
from simapf.schema.summary import Summary, validate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict:
    result = simapf.run(simapf.load_scenario(ROOT / "scenarios/list-experiment.yaml", {"run.duration_s": 4}))
    out = write_run(result, tmp_path_factory.mktemp("run") / "out", figure=False)
    return json.loads((out / "summary.json").read_text())


def test_the_written_summary_is_the_models(written):
    typed = validate(written)
    assert isinstance(typed, Summary)
    # Typed: the sections are models, read by attribute.
    assert typed.memory.peak_rss_bytes == written["memory"]["peak_rss_bytes"]
    assert [c.client for c in typed.clients] == [c["client"] for c in written["clients"]]


@pytest.mark.parametrize("path, value", [
    (("memory", "peak_rss_bytes_typo"), 1),                   # a field no section declares
    (("cpu", "peak_rss_bytes_interval"), {"lo": 1, "hi": 2, "level": 0.9, "parts": {}}),  # an interval beside no field
    (("priority_levels", 0, "dispatched_by_magic"), 3),        # counts by reason only where declared
    (("memory", "peak_rss_bytes"), "a lot"),                   # a field of the wrong type
])  # fmt: skip
def test_a_field_the_schema_does_not_know_fails_with_its_path(written, path, value):
    bad = json.loads(json.dumps(written))
    holder = bad
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    with pytest.raises(pydantic.ValidationError) as failed:
        validate(bad)
    assert ".".join(str(p) for p in path[:-1]) in str(failed.value)


def _models_in(annotation: object) -> list[type[pydantic.BaseModel]]:
    """The models an annotation holds: itself, or inside an Optional, a list, a dict (two deep)."""
    return [inner for arg in [annotation, *typing.get_args(annotation)] for inner in [arg, *typing.get_args(arg)]
            if isinstance(inner, type) and issubclass(inner, pydantic.BaseModel)]  # fmt: skip


def _sections(model: type[pydantic.BaseModel], seen: set) -> None:
    seen.add(model)
    for field in model.model_fields.values():
        for inner in _models_in(field.annotation):
            if inner not in seen:
                _sections(inner, seen)


def test_every_field_of_the_schema_is_documented():
    page = (ROOT / "docs/summary.md").read_text()
    models: set = set()
    _sections(Summary, models)
    assert len(models) > 10  # the walk reached the nested sections
    missing = sorted(f"{m.__name__}.{name}" for m in models for name in m.model_fields if f"`{name}`" not in page)
    assert not missing, f"fields of the summary model docs/summary.md does not name: {missing}"


# ---------------------------------------------------------------- nothing reads it by key

PACKAGE = ROOT / "simapf"
_KEY = r"""\[\s*["'](\w+)["']\s*\]|\.get\(\s*["'](\w+)["']"""
# A Result's summary, or a variable named for one (`summary`, `predicted_summary`, `s`), read by key...
_BY_NAME = re.compile(r"(?:\.summary|\b\w*summary\w*|\bs)\s*(?:" + _KEY + r")(?!\s*=[^=])")
# ...or any mapping read as a section, then its field: `x["memory"]["peak_rss_bytes"]`.
_SECTION_THEN_FIELD = re.compile(r"(?:\[\s*[\"'](\w+)[\"']\s*\]|\.get\(\s*[\"'](\w+)[\"'][^)]*\)(?:\s*or\s*\{\})?\)?)"
                                 r"\s*(?:" + _KEY + r")")  # fmt: skip


def _section_fields() -> dict[str, set[str]]:
    """Each section of the summary by its name, with its fields' names."""
    out: dict[str, set[str]] = {}
    for name, info in Summary.model_fields.items():
        models = _models_in(info.annotation)
        if models:
            out[name] = set(models[0].model_fields)
    return out


# The floors below the run's (tests/test_module_structure.py) hold no summary; their settings have
# sections of the same names (`cpu.cores`), so only names the summary goes by are looked for there.
BELOW_SUMMARIES = {"engine", "apf", "server", "scenario", "workload"}


def reads_by_key(text: str, chains: bool = True) -> list[str]:
    """The lines of `text` that read a run's summary by string key (writing one is the owner's);
    `chains`: a section's field read on any mapping counts too."""
    top, sections = set(Summary.model_fields), _section_fields()
    found = []
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        by_name = any((m.group(1) or m.group(2)) in top for m in _BY_NAME.finditer(code))
        chained = chains and any((m.group(1) or m.group(2)) in sections and (m.group(3) or m.group(4)) in sections[m.group(1) or m.group(2)]
                                 for m in _SECTION_THEN_FIELD.finditer(code))  # fmt: skip
        if by_name or chained:
            found.append(line.strip())
    return found


def test_the_key_scan_finds_what_reading_by_key_looks_like():
    read = ['cores = summary["cpu"]["mean_cores"]', "heap = r.summary['bench']['base_heap_live_bytes']",
            'by_path = (summary.get("lists") or {}).get("by_path") or {}', 'div = _time_axis(ax, s["duration_s"])',
            'limit = doc["memory"]["memory_limit_bytes"]', 'return next(c for c in summary["clients"])',
            'prov = result.summary.get("provenance")']  # fmt: skip
    written = ['summary["extrapolation"] = beyond(inputs)', 'summary["uncertainty"] = {', 'row["cpu"] = 2',
               'usable = data["cpu"]["usable_cores"]', 'typed.memory.peak_rss_bytes']  # fmt: skip
    assert reads_by_key("\n".join(read)) == read
    assert reads_by_key("\n".join(written)) == []


def test_no_module_reads_a_summary_by_string_key():
    """Every reader goes through the model (simapf.schema.summary): a field renamed there is found
    by the type checker and the tests, not by a KeyError in a user's run."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        room = path.relative_to(PACKAGE).parts[0]
        if room != "schema" and (lines := reads_by_key(path.read_text(encoding="utf-8"), room not in BELOW_SUMMARIES)):
            found[str(path.relative_to(ROOT))] = lines
    assert found == {}
