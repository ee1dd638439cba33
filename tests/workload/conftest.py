"""Fixtures of the workload tests (the scenario builders are in wlhelp.py)."""

import pytest
from wlhelp import Probe, simulation


@pytest.fixture
def probe_run():
    """probe_run(scenario) -> (sim, result, probe)."""

    def go(sc: dict, overrides=()):
        sim = simulation(sc, overrides)
        probe = Probe(sim)
        return sim, sim.run(), probe

    return go
