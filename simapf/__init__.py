"""simapf: a discrete-event simulator of kube-apiserver memory and CPU under API Priority and Fairness.

    import simapf
    result = simapf.run(simapf.load_scenario("scenarios/relist-storm.yaml"))
    result.summary, result.series, result.latency
"""

__version__ = "0.1.0"

__all__ = ["__version__", "compare", "load_scenario", "load_sweep", "optimize", "run", "sweep"]


def __getattr__(name: str):
    # Lazy: `simapf replay` and the APF core must not pay for pandas at import.
    if name == "load_scenario":
        from simapf.scenario.load import load_scenario

        return load_scenario
    if name == "run":
        from simapf.runner import run

        return run
    if name == "compare":
        from simapf.comparison import compare

        return compare
    if name == "sweep":
        from simapf.sweeps import sweep

        return sweep
    if name == "optimize":
        from simapf.search import optimize

        return optimize
    if name == "load_sweep":
        from simapf.sweeps import load_sweep

        return load_sweep
    raise AttributeError(f"module 'simapf' has no attribute {name!r}")

