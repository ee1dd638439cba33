"""Each apiserver setting is declared once, in `ServerParams`; its fitted defaults are read from
the shipped calibration record; no test or tool rewrites Python source to keep them in step."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Annotated

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.record import SHIPPED, read_record
from simapf.server.params import FeatureGates, ServerParams

ROOT = Path(__file__).resolve().parents[1]
SOURCE_DIRS = ("simapf", "tests", "benchmarks")


def _python_files() -> list[Path]:
    return [p for d in SOURCE_DIRS for p in sorted((ROOT / d).rglob("*.py"))]


def _fitted_fields() -> dict[str, str]:
    """{the field's own key: the key its default is read under} for every fitted default."""
    found = {}
    for section, info in ServerParams.model_fields.items():
        for field, sub in info.annotation.model_fields.items():
            key = getattr(sub.default_factory, "fitted_key", None)
            if key is not None:
                found[f"{section}.{field}"] = key
    for field, info in ExperimentSetup.model_fields.items():
        key = getattr(info.default_factory, "fitted_key", None)
        if key is not None:
            found[f"experiment.{field}"] = key
    return found


def test_each_fitted_default_is_read_from_its_own_key_of_the_record():
    fitted = _fitted_fields()
    assert fitted, "no default is marked fitted"
    assert {own: key for own, key in fitted.items() if own != key} == {}
    free = set(read_record(SHIPPED)["fit"]["free_parameters"])
    # The experiment's client is read whole; its fitted fields are free parameters of their own.
    assert set(fitted) - {"experiment.client"} <= free
    assert {k for k in free if not k.startswith("experiment.client.")} <= set(fitted)


def test_the_record_is_the_only_copy_of_a_fitted_value():
    """A fitted value written as a literal in source would be a second copy to keep in step."""
    record = read_record(SHIPPED)
    values = [v["fitted"] for v in record["fit"]["free_parameters"].values()]
    params = (ROOT / "simapf" / "server" / "params.py").read_text(encoding="utf-8")
    experiment = (ROOT / "simapf" / "calibrate" / "experiment.py").read_text(encoding="utf-8")
    assert [v for v in values if repr(v) in params or repr(v) in experiment] == []


def test_adopt_defaults_is_gone():
    assert not (ROOT / "simapf" / "calibration" / "adopt_defaults.py").exists()
    assert [p for p in _python_files() if "adopt_defaults" in p.read_text(encoding="utf-8")
            and p != Path(__file__)] == []  # fmt: skip


# A write to the project's own Python source: a `..._PY` path constant, or a `.py` path built from
# the checkout (ROOT, REPO_ROOT, PACKAGE_DIR, __file__). Tests that write a user's policy module
# into tmp_path, or patch a copy of the package, write no source of the project.
_SOURCE = r"(\b[A-Z_]*_PY\b|\b(ROOT|REPO_ROOT|PACKAGE_DIR|__file__)\b[^\n]*\.py['\"]\)?)"
_WRITES_PYTHON = re.compile(
    rf"{_SOURCE}\s*\)?\.write_text\(|write_text_atomic\([^\n]*?{_SOURCE}|open\([^\n]*?{_SOURCE}[^\n]*['\"][wa]"
)


def test_no_test_or_tool_rewrites_python_source():
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in _python_files() if p != Path(__file__)
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if _WRITES_PYTHON.search(line)]  # fmt: skip
    assert offenders == []


@pytest.mark.parametrize("line", [
    'PARAMS_PY.write_text(src, encoding="utf-8")',
    'write_text_atomic(ROOT / "simapf" / "x.py", text)',
    '(REPO_ROOT / "simapf" / "server" / "params.py").write_text(text)',
    'with open(Path(__file__).parent / "params.py", "w") as fh:',
])  # fmt: skip
def test_the_rewrite_check_sees_a_rewrite(line):
    assert _WRITES_PYTHON.search(line)


def test_the_parameter_tables_are_generated_and_current():
    from simapf.server.reference import main

    assert main(["--check"]) == 0


# ------------------------------------------------------------------ shorthands, version defaults


def test_each_shorthand_takes_its_type_and_default_from_the_parameter():
    """A scenario field that sets a parameter declares no rule of its own: ServerParams' field is
    the only declaration of its type, bounds and default."""
    from simapf.scenario.schema import Scenario
    from simapf.scenario.schema.server import SHORTHANDS
    from simapf.server.params import parameter_default, parameter_field, parameter_type

    for (where, field), path in SHORTHANDS.items():
        info = Scenario.model_fields[where].annotation.model_fields[field]
        own = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        param = parameter_type(path)
        if path == "gc.gogc":  # the spelling keeps `off` as written; the parameter reads it as None
            assert set(map(id, own.__metadata__)) <= set(map(id, param.__metadata__))
        else:
            assert own in (param, param | None), path
        assert info.default in (parameter_default(path), None), path
        assert parameter_field(path).description


def test_the_shorthand_table_names_real_fields_both_sides():
    from simapf.scenario.schema import Scenario
    from simapf.scenario.schema.server import SHORTHANDS
    from simapf.server.params import parameter_field

    for (where, field), path in SHORTHANDS.items():
        assert field in Scenario.model_fields[where].annotation.model_fields
        assert parameter_field(path) is not None


@pytest.mark.parametrize("shorthand, written", [
    ({"gogc": "off"}, {"gc": {"gogc": None}}),
    ({"gogc": False}, {"gc": {"gogc": "off"}}),
    ({"memory_limit_bytes": "2Gi"}, {"process": {"memory_limit_bytes": 2 * 2**30}}),
    ({"cores": "8000m"}, {"cpu": {"cores": 8}}),
])  # fmt: skip
def test_a_shorthand_and_the_same_value_in_params_agree(shorthand, written):
    from simapf.scenario.load import load_scenario

    loaded = load_scenario({"apiserver": {**shorthand, "params": written}})
    section, values = next(iter(written.items()))
    key = next(iter(values))
    expected = load_scenario({"apiserver": shorthand}).params
    assert getattr(getattr(loaded.params, section), key) == getattr(getattr(expected, section), key)


def test_a_shorthand_and_another_value_in_params_contradict():
    from simapf.errors import ConfigError
    from simapf.scenario.load import load_scenario

    with pytest.raises(ConfigError, match=r"apiserver.params.gc.gogc: 200 contradicts apiserver.gogc: 'off'"):
        load_scenario({"apiserver": {"gogc": "off", "params": {"gc": {"gogc": 200}}}})


@pytest.mark.parametrize("version", ["1.20", "1.24", "1.27", "1.30", "1.31", "v1.36.2-gke.1", "1.37", "1.38"])
def test_a_version_sets_what_defaults_for_says_where_no_parameter_does(version):
    from simapf.scenario.load import load_scenario

    params = load_scenario({"kubernetes": {"version": version}}).params.model_dump()
    for section, values in ServerParams.defaults_for(version).items():
        for key, value in values.items():
            assert params[section][key] == value, (version, section, key)
    # A parameter set says otherwise: it stands.
    old = load_scenario({"kubernetes": {"version": version}, "apiserver": {"params": {"gc": {"page_release": "free"}}}})
    assert old.params.gc.page_release == "free"


def test_an_etcd_shorthand_and_the_same_value_in_params_agree():
    from simapf.scenario.load import load_scenario

    loaded = load_scenario({"etcd": {"embedded": True, "cores": 2},
                            "apiserver": {"params": {"etcd": {"embedded": True, "concurrency": 2}}}})  # fmt: skip
    assert loaded.params.etcd.embedded and loaded.params.etcd.concurrency == 2


# ------------------------------------------------------------------ feature gates


def test_one_feature_gates_type():
    """The scenario's gates, the apiserver's parameters and APF read one declaration of them."""
    import ast

    from simapf.scenario.schema import Scenario
    from simapf.server.params import FeatureGates

    found = []
    for path in sorted((ROOT / "simapf").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Gates") \
                    and not any(getattr(b, "id", None) == "Protocol" for b in node.bases):
                found.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert found == ["simapf/server/params.py:FeatureGates"]
    assert Scenario.model_fields["kubernetes"].annotation.model_fields["feature_gates"].annotation is FeatureGates
    assert ServerParams.model_fields["features"].annotation is FeatureGates


def test_the_record_keeps_the_serving_gates_as_it_always_wrote_them():
    record = read_record(SHIPPED)["server"]["features"]
    assert ServerParams().record_dump()["features"] == record
    assert ServerParams.from_dict({"features": record}) == ServerParams()


def _valid_alone(section: str, field: str, value) -> bool:
    try:
        ServerParams.model_validate({section: {field: value}})
    except ValidationError:
        return False
    return True


def _values(section: str, field: str, info) -> st.SearchStrategy:
    """Values a parameter takes (its own rules kept; some break a rule across fields)."""
    return _another_value(info).filter(lambda value: _valid_alone(section, field, value))


def _another_value(info) -> st.SearchStrategy:
    default = info.get_default(call_default_factory=True)
    args = typing.get_args(info.annotation)
    choices = [a for a in args if a is not type(None)] if typing.get_origin(info.annotation) is typing.Literal else []
    if isinstance(default, bool) or info.annotation in (bool, bool | None):
        return st.sampled_from([True, False] + ([None] if type(None) in args else []))
    if choices:
        return st.sampled_from(choices)
    if isinstance(default, int) and not isinstance(default, float):
        return st.integers(max(default // 2, 0), default * 2 + 1)
    if isinstance(default, float):
        return st.floats(default / 2, default * 2 + 1e-3, allow_nan=False)
    return st.just(default)  # null where unset: its spelling is its own field's test


_SECTIONS = {section: info.annotation.model_fields for section, info in ServerParams.model_fields.items()}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.fixed_dictionaries({section: st.fixed_dictionaries({field: _values(section, field, info) for field, info in fields.items()})
                              for section, fields in _SECTIONS.items()}))  # fmt: skip
def test_a_dump_validates_back_to_the_same_parameters(data):
    try:
        params = ServerParams.model_validate(data)
    except ValidationError:
        assume(False)  # a combination the parameters refuse
    for mode in ("python", "json"):
        assert ServerParams.model_validate(params.model_dump(mode=mode)) == params, mode


@pytest.mark.parametrize("gate", sorted(FeatureGates.model_fields))
def test_every_gate_survives_a_dump_and_a_reload(gate):
    for value in (True, False):
        params = ServerParams(features=FeatureGates(**{gate: value}))
        reloaded = ServerParams.model_validate(params.model_dump())
        assert getattr(reloaded.features, gate) is value


def test_a_scenarios_gates_reach_apf_and_the_serving_paths():
    from simapf.scenario.load import load_scenario

    loaded = load_scenario({"kubernetes": {"version": "1.33", "feature_gates": {"WatchList": False, "ListFromCacheSnapshot": False}}})
    assert loaded.gates is loaded.params.features
    assert not loaded.gates.WatchList and not loaded.gates.ListFromCacheSnapshot
    assert loaded.gates.EtcdRangeStream is False  # null: by the version, off before 1.37
    assert loaded.params.model_dump()["features"]["list_from_cache_snapshot"] is False
