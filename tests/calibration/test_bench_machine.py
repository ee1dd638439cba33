"""The bench's machine: rates fitted on its cells, and the parameter file the report predicts with."""

from __future__ import annotations

import statistics

import pytest
import yaml

from simapf.calibrate import bench_machine
from simapf.calibrate.bench_cells import cells
from simapf.calibrate.bench_machine import RATES, Measured, features, fit, machine_params
from simapf.server.params import ServerParams


def _synthetic(truth: dict[str, float], client: tuple[float, float], baseline: float) -> list[Measured]:
    """LIST cells whose CPU per LIST is exactly what `truth`'s rates give on the model's plan."""
    params = ServerParams()
    rows = []
    for i, cell in enumerate(cells()):
        if cell.name.startswith("informers"):
            continue
        f = features(cell, params)
        lists, duration = 20.0 + 37.0 * i, 20.0  # as many LISTs as the cell served
        per_list = sum(truth.get(f"{s}.{k}", 0.0) * x for (s, k), x in zip(RATES, f[:-1])) + f[-1]
        cores = (per_list * lists + baseline * duration) / duration
        size = cell.overrides["resources.configmaps.count"] * cell.overrides["resources.configmaps.object_size.mean_bytes"]
        reader = (client[0] + client[1] * size) * lists / duration
        rows.append(Measured(cell, duration, lists, cores, 0.0, reader, 0.0))
    return rows


def test_the_fit_finds_the_rates_that_made_the_cells():
    truth = {"request_cpu.request_core_s": 4e-4, "request_cpu.json_encode_core_s_per_object": 3e-6,
             "request_cpu.json_encode_core_s_per_byte": 2e-9, "request_cpu.protobuf_encode_core_s_per_byte": 8e-10,
             "request_cpu.json_indent_core_s_per_byte": 1.5e-9, "request_cpu.decode_core_s_per_object": 6e-6,
             "request_cpu.decode_core_s_per_byte": 1e-9}  # fmt: skip
    got = fit(_synthetic(truth, (1e-3, 2.5e-9), 0.03), ServerParams(), with_gc=False)
    for key, value in truth.items():
        assert got.rates[key] == pytest.approx(value, rel=1e-6), key
    assert got.baseline_cores == pytest.approx(0.03, rel=1e-6)
    assert got.client["client.colocated_core_s_per_request"] == pytest.approx(1e-3, rel=1e-6)
    assert got.client["client.colocated_core_s_per_byte"] == pytest.approx(2.5e-9, rel=1e-6)
    # The parameter file puts each rate in its section, as a scenario's params_file reads them.
    machine = machine_params(got)
    assert machine["request_cpu"]["json_encode_core_s_per_byte"] == got.rates["request_cpu.json_encode_core_s_per_byte"]
    assert machine["client"]["colocated_core_s_per_byte"] == got.client["client.colocated_core_s_per_byte"]
    assert machine["process"]["baseline_cores"] == got.baseline_cores


def test_the_shipped_machine_file_is_the_fit_of_its_table():
    record = yaml.safe_load(bench_machine.MACHINE.read_text())
    table = bench_machine.ROOT / record["fit"]["table"]
    again = machine_params(fit(bench_machine.measured(table), ServerParams()), ServerParams())
    for section, values in again.items():
        for key, value in values.items():
            assert record["params"][section][key] == pytest.approx(value, rel=1e-9), (section, key)
    # The idle heap is measured, not fitted: the median of what the record says it saw.
    idle = record["idle"]
    assert len(idle["live_heap_bytes"]) >= 2
    assert record["params"]["process"]["live_heap_bytes"] == statistics.median(idle["live_heap_bytes"])
