"""Calibration: fitting the resource model to the measured LIST memory experiment.

    data.py        the measured rows and cells (calibration/list-memory-experiments.csv)
    experiment.py  a cell as a simulation run, set up and read as the experiment was
    grid.py        many cells in parallel (joblib)
    metrics.py     relative errors and the summary figures
    fit.py         scipy.optimize.least_squares over the free parameters
    logo.py        leave-one-group-out
    record.py      calibration records (YAML)
    report.py      docs/validation.md and its figure
    command.py     `simapf calibrate`

The shipped `ServerParams` defaults are the record `calibration/params.yaml`.
"""
