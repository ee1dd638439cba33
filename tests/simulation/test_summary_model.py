"""summary.json against its schema (simapf.simulation.summary_model): what a run writes
validates, and a field the schema does not declare fails with its path."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

import simapf
from simapf.outputs.rundir import write_run
from simapf.simulation.summary_model import Summary, validate

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


def _sections(model: type[pydantic.BaseModel], seen: set) -> None:
    seen.add(model)
    for field in model.model_fields.values():
        for arg in [field.annotation, *getattr(field.annotation, "__args__", ())]:
            for inner in [arg, *getattr(arg, "__args__", ())]:
                if isinstance(inner, type) and issubclass(inner, pydantic.BaseModel) and inner not in seen:
                    _sections(inner, seen)


def test_every_field_of_the_schema_is_documented():
    page = (ROOT / "docs/summary.md").read_text()
    models: set = set()
    _sections(Summary, models)
    assert len(models) > 10  # the walk reached the nested sections
    missing = sorted(f"{m.__name__}.{name}" for m in models for name in m.model_fields if f"`{name}`" not in page)
    assert not missing, f"fields of the summary model docs/summary.md does not name: {missing}"
