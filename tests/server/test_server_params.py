"""ServerParams: defaults, YAML loading, errors that name the field path."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from simapf.errors import ConfigError
from simapf.server import ServerParams
from simapf.server.params import parse_bytes


def _walk(model: type[BaseModel], prefix: str = ""):
    for name, field in model.model_fields.items():
        yield prefix + name, field
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _walk(ann, prefix + name + ".")


def test_every_field_has_a_default_and_a_description():
    for path, field in _walk(ServerParams):
        assert not field.is_required(), path
        assert field.description, path


def test_defaults_are_consistent():
    p = ServerParams()
    assert p.cpu.cores == 16 and p.cpu.procs == 16
    assert p.cpu.usable < p.cpu.cores and p.cpu.usable_cores is None
    assert p.gc.gogc == 100 and p.gc.gomemlimit_bytes is None
    assert p.gc.dedicated_fraction == 0.25 and p.gc.limiter_cap_fraction == 0.5
    assert p.process.memory_limit_bytes is None


def test_load_yaml_with_quantities_and_gogc_off(tmp_path):
    f = tmp_path / "server.yaml"
    f.write_text(
        "cpu:\n  cores: 8\n  usable_cores: 6\n  gomaxprocs: 4\n"
        "process:\n  memory_limit_bytes: 2Gi\n  restart_s: 5\n"
        "gc:\n  gogc: off\n  gomemlimit_bytes: 1.5G\n"
        "request_cpu:\n  json_encode_core_s_per_byte: 1.0e-8\n"
    )
    p = ServerParams.from_yaml(f)
    assert p.cpu.procs == 4 and p.cpu.effective_cores == 4
    assert p.process.memory_limit_bytes == 2 * 2**30
    assert p.gc.gogc is None
    assert p.gc.gomemlimit_bytes == 1.5e9
    assert p.request_cpu.json_encode_core_s_per_byte == 1e-8
    assert p.request_cpu.json_encode_core_s_per_object == ServerParams().request_cpu.json_encode_core_s_per_object


def test_empty_yaml_gives_defaults(tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("")
    assert ServerParams.from_yaml(f) == ServerParams()


def test_unknown_field_names_its_path(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("gc:\n  gogcc: 200\n")
    with pytest.raises(ConfigError) as exc:
        ServerParams.from_yaml(f)
    msg = str(exc.value)
    assert str(f) in msg and "gc.gogcc" in msg and "\n" not in msg


def test_bad_value_names_its_path():
    with pytest.raises(ConfigError, match=r"etcd\.concurrency"):
        ServerParams.from_dict({"etcd": {"concurrency": 0}})
    with pytest.raises(ConfigError, match=r"process\.memory_limit_bytes"):
        ServerParams.from_dict({"process": {"memory_limit_bytes": "lots"}})
    with pytest.raises(ConfigError, match=r"cpu: .*usable_cores"):
        ServerParams.from_dict({"cpu": {"cores": 4, "usable_cores": 8}})


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        ServerParams.from_yaml(tmp_path / "nope.yaml")
    f = tmp_path / "broken.yaml"
    f.write_text("cpu: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        ServerParams.from_yaml(f)
    f.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        ServerParams.from_yaml(f)


@pytest.mark.parametrize(
    "text, value",
    [("512Mi", 512 * 2**20), ("2G", 2e9), ("1.5e9", 1.5e9), ("100k", 1e5), ("3", 3.0)],
)
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


def test_the_parameter_tables_show_the_shipped_defaults():
    from pathlib import Path

    from simapf.server.reference import refresh_defaults

    doc = (Path(__file__).resolve().parents[2] / "docs" / "resource-model.md").read_text(encoding="utf-8")
    assert refresh_defaults(doc, ServerParams()) == doc


def test_refreshing_the_tables_rewrites_only_the_default_cells():
    from simapf.server.reference import refresh_defaults

    doc = (
        "intro `cores` here stays\n"
        + "\n".join(f"### `{section}`: x\n\n| Field | Default | Meaning |\n|---|---|---|\n"
                    + "".join(f"| `{f}` | STALE | keeps | this |\n" for f in ServerParams().record_dump()[section])
                    for section in ServerParams.model_fields)
    )  # fmt: skip
    p = ServerParams(cpu={"cores": 8}, gc={"gomemlimit_bytes": None, "gogc": 200})
    out = refresh_defaults(doc, p)
    assert "| `cores` | 8 | keeps | this |" in out and "| `gogc` | 200 |" in out
    assert "| `gomemlimit_bytes` | null |" in out and "| `idle_mark_workers` | true |" in out
    assert out.startswith("intro `cores` here stays") and "STALE" not in out
    with pytest.raises(ValueError, match="gc.gogc"):
        refresh_defaults(doc.replace("| `gogc` |", "| `gogcc` |"), p)


def test_every_parameter_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "resource-model.md").read_text(encoding="utf-8")
    missing = [path for path, _f in _walk(ServerParams) if f"`{path.rsplit('.', 1)[-1]}`" not in doc]
    assert not missing
