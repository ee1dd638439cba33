"""How far a run's figures can be trusted: parameter draws, model error, intervals.

- `draws`: parameter sets drawn from the calibration's uncertainty (its Jacobian).
- `model_error`: the validation's residuals by kind of figure and regime, as conformal bands.
- `intervals`: every headline figure's interval from the draws and the band (the draws are run
  by `simapf.sweeps.drawn_runs`).
"""

# The most parameter draws a run, a comparison or a sweep's combination takes (`--uncertainty N`,
# a sweep file's `uncertainty`): each is a whole run. Here, free of imports, so that the command
# line can bound its option without loading numpy.
MAX_DRAWS = 1000
