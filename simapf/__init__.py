"""simapf: a discrete-event simulator of kube-apiserver memory and CPU under API Priority and Fairness.

    import simapf
    result = simapf.run(simapf.load_scenario("scenarios/relist-storm.yaml"))
    result.summary, result.series, result.latency
"""

from simapf.version import __version__

__all__ = ["__version__", "compare", "load_scenario", "load_sweep", "optimize", "run", "sweep"]


def _warn_if_compiled_core_is_stale() -> None:
    # Python imports a built extension module in preference to its source, so a compiled core
    # built from other sources would run old code without a word (simapf.compiled_core).
    from pathlib import Path

    if not any(Path(__file__).parent.glob("_compiled__mypyc*")):
        return
    from simapf.compiled_core import compiled

    if compiled() == "stale":
        import warnings

        warnings.warn("the compiled core was built from other sources than these: `simapf compile` rebuilds "
                      "it, `simapf compile --clean` removes it", RuntimeWarning, stacklevel=2)  # fmt: skip


_warn_if_compiled_core_is_stale()


def __getattr__(name: str):
    # Lazy: `simapf replay` and the APF core must not pay for pandas at import.
    if name == "load_scenario":
        from simapf.scenario.load import load_scenario

        return load_scenario
    if name == "run":
        from simapf.sweeps.drawn_runs import run  # simapf.simulation.runner.run, and uncertainty=N

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

