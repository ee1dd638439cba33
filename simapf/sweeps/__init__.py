"""Sweeps: a base scenario, factors to vary, replications; many runs in parallel.

    spec   the sweep file (schema, loading, checks)
    plan   the runs: cartesian product x replications, ids and seeds
    measure  one run as a self-contained task, its result as a flat row
    backends where runs execute: serial, joblib (loky), Dask
    store  the result directory: one Parquet file per run, atomic, resumable; load_sweep
    runner `sweep()`
    uncertainty  parameter draws per combination, and the intervals they give its rows

The package is `sweeps`, not `sweep`, so that importing it never replaces the function
`simapf.sweep` with a module.
"""

from simapf.sweeps.runner import sweep
from simapf.sweeps.spec import LoadedSweep, SweepSpec, load_sweep_spec
from simapf.sweeps.store import load_sweep

__all__ = ["LoadedSweep", "SweepSpec", "load_sweep", "load_sweep_spec", "sweep"]
