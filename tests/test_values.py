"""Values that parse but mean nothing are refused, and what means something still runs (issue 47).

The bad-command corpus (tests/data/bad-commands/values.yaml) holds the refusals as a user meets
them; here is what a corpus case cannot say: that every numeric field of every model takes the
shared types, that numbers written as YAML writes them and values at the bounds still load and
run, and that every JSON simapf writes is strict JSON.
"""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, TypeAdapter, ValidationError

import simapf
from simapf.cli import main as cli
from simapf.errors import ConfigError
from simapf.files import check_text, json_text
from simapf.quantities import MAX_CORES, MAX_GO_DURATION_S, MIN_RATE_PER_S
from simapf.scenario.schema import Scenario
from simapf.search.spec import OptimizeSpec
from simapf.server.params import ServerParams
from simapf.sweeps.spec import SweepSpec

FILES = Path(__file__).parent / "data" / "bad-commands" / "_files"
TINY = FILES / "tiny.yaml"
CLIENTS = FILES / "values-clients.yaml"


def _strict_json(text: str) -> Any:
    """JSON as any strict reader takes it: NaN and Infinity are errors."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------------------ every field


def _numeric_fields(model: type[BaseModel], path: str = "", seen: set | None = None):
    """(path, type, int or float) for every number below `model`: a field's own, with its
    field's bounds, or the items of a list or mapping of numbers."""
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    for name, info in model.model_fields.items():
        for leaf, contained in _leaves(info.annotation):
            kind = _plain(leaf)
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from _numeric_fields(kind, f"{path}{name}.", seen)
            elif kind in (int, float):
                tp = leaf if contained or not info.metadata else Annotated[(leaf, *info.metadata)]
                yield f"{path}{name}{'[]' if contained else ''}", tp, kind


def _leaves(tp: Any, contained: bool = False) -> list[tuple[Any, bool]]:
    """The types `tp` is made of, through unions, lists and mapping values (with whether they
    are inside a container)."""
    plain = tp
    while typing.get_origin(plain) is Annotated:
        plain = typing.get_args(plain)[0]
    origin = typing.get_origin(plain)
    if origin in (typing.Union, type(int | None)):
        return [leaf for a in typing.get_args(plain) for leaf in _leaves(a, contained)]
    if origin in (list, dict):
        return _leaves(typing.get_args(plain)[-1], True)
    return [(tp, contained)]


def _plain(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


FIELDS = [(f"{m.__name__}.{p}", t, k) for m in (Scenario, ServerParams, SweepSpec, OptimizeSpec)
          for p, t, k in _numeric_fields(m)]  # fmt: skip


def test_the_models_have_numeric_fields_to_check():
    assert len(FIELDS) > 150  # the walk reaches the nested models and the union members


@pytest.mark.parametrize("path, tp, kind", FIELDS, ids=[f[0] for f in FIELDS])
def test_every_number_refuses_booleans_and_non_finite_values(path, tp, kind):
    adapter = TypeAdapter(tp)
    refused = [True, False, math.nan, math.inf, -math.inf, "nan", ".inf"] + ([2.0, "2"] if kind is int else [])
    if path.endswith(".gogc"):  # GOGC: `off` is YAML's false, and "200" how the environment writes it
        refused = [v for v in refused if v is not False and v != "2"]
    for value in refused:
        with pytest.raises(ValidationError):
            adapter.validate_python(value)


# ------------------------------------------------------------------------------ still accepted


def test_numbers_as_yaml_and_kubernetes_write_them_still_load():
    loaded = simapf.load_scenario(TINY, [
        "apiserver.cores=500m",                               # millicores
        "clients.getter.rate_per_s=1e1",                      # text to YAML 1.1, a number to simapf
        "run.scrape_interval_s=1e-1",
        "run.duration_s=1m",                                  # a Go duration
        "resources.configmaps.object_size.mean_bytes=4Ki",    # a quantity
        "apiserver.gogc='200'",                               # GOGC as the environment writes it
        "apiserver.request_timeout_s=30",                     # a YAML int where a float is meant
    ]).scenario  # fmt: skip
    assert loaded.apiserver.cores == 0.5 and loaded.clients[1].rate_per_s == 10.0
    assert loaded.run.scrape_interval_s == 0.1 and loaded.run.duration_s == 60.0
    assert loaded.resources[0].object_size.mean_bytes == 4096.0
    assert loaded.apiserver.gogc == 200 and loaded.apiserver.request_timeout_s == 30.0


@pytest.mark.parametrize("version", ["1.20", "1.37", "1.38.2", "v1.33.4", "1.33.4-gke.1200", "v1.23.0-alpha.3", 1.28])
def test_kubernetes_versions_simapf_models_load(version):
    assert simapf.load_scenario(TINY, {"kubernetes.version": version}).scenario.kubernetes.version == str(version)


# What the bounds allow must run without overflowing: the extremes of each kind of bound.
AT_THE_BOUNDS = {
    "one millicore": {"apiserver.cores": "1m"},
    "the most cores": {"apiserver.cores": MAX_CORES},
    "the longest think time": {"clients.users.think_time.mean_s": MAX_GO_DURATION_S},
    "the longest restart and outage": {"apiserver.restart_s": MAX_GO_DURATION_S, "events.0.duration_s": MAX_GO_DURATION_S},
    "the longest request timeout": {"apiserver.request_timeout_s": MAX_GO_DURATION_S},
    "the slowest rate": {"clients.lister.rate_per_s": MIN_RATE_PER_S},
    "the slowest token bucket": {"clients.lister.rate_limit.qps": MIN_RATE_PER_S},
    "the slowest client link": {"clients.lister.network.stream_bytes_per_s": MIN_RATE_PER_S},
    "the slowest etcd": {"apiserver.params.etcd.bytes_per_s": MIN_RATE_PER_S},
    "the longest backoff": {"clients.kubelets.backoff.max_s": MAX_GO_DURATION_S / 2, "clients.kubelets.backoff.jitter": 1},
    "the smallest work variation": {"apiserver.params.request_cpu.work_cv": 1e-150},
    "the most frequent forced GC": {"apiserver.params.gc.force_period_s": 1e-3},
}  # fmt: skip


@pytest.mark.parametrize("overrides", AT_THE_BOUNDS.values(), ids=AT_THE_BOUNDS.keys())
def test_values_at_the_bounds_run_and_summarise_in_strict_json(overrides):
    result = simapf.run(simapf.load_scenario(CLIENTS, overrides))
    assert result.summary["duration_s"] == 10
    _strict_json(json_text(result.summary))


# ------------------------------------------------------------------------------ refused


def test_a_scenario_given_as_a_mapping_is_checked_for_text_too():
    with pytest.raises(ConfigError, match=r"clients\[0\].identity.user: 'x\\udc80'"):
        simapf.load_scenario({"clients": [{"identity": {"user": "x\udc80"}}]})


def test_text_in_any_language_is_written_out():
    check_text({"name": "café ☸ 雲", "groups": ["système"], "ключ": "значение"}, "f.yaml")


def test_a_key_is_checked_like_a_value():
    with pytest.raises(ConfigError, match=r"f.yaml: a.b: key 'x\\ud800'"):
        check_text({"a": {"b": {"x\ud800": 1}}}, "f.yaml")


# ------------------------------------------------------------------------------ strict JSON


def test_json_text_writes_what_has_no_value_as_null():
    doc = {"mean": math.nan, "p99": [math.inf, np.float64(math.nan), -math.inf], "n": np.int64(3),
           "share": np.float32(0.5), "ok": True, "none": None, "pair": (1, 2.5)}  # fmt: skip
    assert _strict_json(json_text(doc)) == {"mean": None, "p99": [None, None, None], "n": 3, "share": 0.5,
                                            "ok": True, "none": None, "pair": [1, 2.5]}  # fmt: skip


def test_json_text_refuses_a_nan_that_slips_past():
    # An object only `default` knows, turned into NaN: strict JSON cannot say it, so it fails loudly.
    with pytest.raises(ValueError):
        json_text({"x": object()}, default=lambda _: math.nan)


def test_json_text_of_finite_values_is_json_dumps():
    doc = {"a": 1.25, "b": [1, 2, {"c": "é"}], "d": np.float64(0.1)}
    assert json_text(doc, indent=2, sort_keys=True) == json.dumps(doc, indent=2, sort_keys=True)


@pytest.fixture
def run_with_nan(monkeypatch):
    """`simapf run` whose summary holds a NaN and an infinity, as a statistic over nothing would."""
    import simapf.simulation.runner

    real = simapf.simulation.runner.collect

    def collect(*args, **kwargs):
        result = real(*args, **kwargs)
        # Two of the schema's float fields (the figures read the summary through it).
        result.summary["cpu"].update(gc_peak_cores=math.nan, gc_cpu_fraction=np.float64(math.inf))
        return result

    monkeypatch.setattr(simapf.simulation.runner, "collect", collect)


def test_run_json_and_summary_json_are_strict_json(run_with_nan, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", str(TINY), "--set", "run.duration_s=2", "--no-progress", "--json",
                                      "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = _strict_json(result.stdout)
    written = _strict_json((out / "summary.json").read_text())
    for cpu in (printed["cpu"], written["cpu"]):
        assert cpu["gc_peak_cores"] is None and cpu["gc_cpu_fraction"] is None


def test_compare_json_is_strict_json():
    # Two policies that agree on every LIST of this scenario: relative differences from a
    # baseline of 0 have no value, which JSON says with null.
    result = CliRunner().invoke(cli, ["compare", str(TINY), "--policy", "upstream", "--policy", "size-based",
                                      "--replications", "2", "--set", "run.duration_s=4", "--json", "--no-progress",
                                      "--workers", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = _strict_json(result.stdout)
    assert any(row.get("relative_diff") is None for row in doc["differences"])
