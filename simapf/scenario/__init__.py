"""Scenario files: the schema (`schema`), loading with overrides and checks (`load`)."""

from importlib import resources
from pathlib import Path

from simapf.scenario.load import LoadedScenario, load_scenario
from simapf.scenario.schema import Scenario

DEFAULT_SCENARIO = "default.yaml"


def default_scenario_path() -> Path:
    """The built-in scenario `simapf run` uses when given no file."""
    return Path(str(resources.files("simapf.scenario") / DEFAULT_SCENARIO))


__all__ = ["LoadedScenario", "Scenario", "default_scenario_path", "load_scenario"]
