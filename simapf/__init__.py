"""simapf: a discrete-event simulator of kube-apiserver memory and CPU under API Priority and Fairness.

    import simapf
    result = simapf.run(simapf.load_scenario("scenarios/relist-storm.yaml"))
    result.summary, result.series, result.latency
"""

__version__ = "0.1.0"

__all__ = ["__version__", "load_scenario", "run"]


def __getattr__(name: str):
    # Lazy: `simapf replay` and the APF core must not pay for pandas at import.
    if name == "load_scenario":
        from simapf.scenario.load import load_scenario

        return load_scenario
    if name == "run":
        from simapf.run import run

        return run
    raise AttributeError(f"module 'simapf' has no attribute {name!r}")
