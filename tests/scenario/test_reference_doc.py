"""docs/scenario-reference.md is generated from the schema and must stay in step with it."""

from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from simapf.scenario import docs
from simapf.scenario.schema import Scenario

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "scenario-reference.md"


def test_committed_reference_is_what_the_generator_writes():
    assert REFERENCE.exists(), "run: python -m simapf.scenario.docs"
    assert REFERENCE.read_text(encoding="utf-8") == docs.render(), (
        "docs/scenario-reference.md is out of date: run python -m simapf.scenario.docs"
    )


def test_every_schema_field_has_a_description():
    missing = [path for path, _m, _n, info in docs.all_fields(Scenario) if not (info.description or "").strip()]
    assert missing == []


def test_walk_reaches_every_kind_and_nested_model():
    paths = {path for path, *_ in docs.all_fields(Scenario)}
    # One field from each union member and from models nested in lists and mappings.
    for p in ("clients[].rate_per_s", "clients[].think_time.mean_s", "clients[].list.page_size",
              "clients[].discovery_rate_limit.burst", "clients[].request.options.selectivity",
              "events[].duration_s", "events[].estimator.list_policy", "events[].WatchListClient",
              "events[].priority_levels.<name>.hand_size", "apf.priority_levels.<name>.queues",
              "resources[].object_size.mean_bytes", "kubernetes.feature_gates.WatchList"):  # fmt: skip
        assert p in paths


def test_reference_has_a_row_for_every_field_path():
    text = docs.render()
    absent = [path for path, *_ in docs.all_fields(Scenario) if f"| `{path}` |" not in text]
    assert absent == []


def test_rows_show_type_default_and_unit():
    text = docs.render()
    assert "| `run.duration_s` | number > 0, ≤ 1e+07 | `300` | s |" in text
    assert "| `apiserver.memory_limit_bytes` | bytes (number or quantity like `8Gi`) or null | `null` | bytes |" in text
    assert "| `clients[].mix` | mapping of `create` / `update` / `patch` / `delete` to number | `{update: 1}` |" in text
    assert "| `resources[].count` | integer ≥ 0, ≤ 5e+07 | required | objects |" in text
    assert "| `apiserver.gogc` | integer, `off` or null | `100` | % |" in text


def test_a_numeric_field_without_a_unit_stops_the_generator():
    class Bare(BaseModel):
        widgets: int = Field(3, description="How many widgets.")

    with pytest.raises(ValueError, match="Bare.widgets: a numeric field needs a unit"):
        list(docs.field_rows(Bare, ""))


def test_check_mode_reports_a_stale_file(tmp_path):
    out = tmp_path / "ref.md"
    assert docs.main(["--out", str(out)]) == 0
    assert docs.main(["--out", str(out), "--check"]) == 0
    out.write_text(out.read_text() + "edited by hand\n")
    assert docs.main(["--out", str(out), "--check"]) == 1
