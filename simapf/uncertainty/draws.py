"""Parameter sets drawn from the calibration's uncertainty.

The fit (`simapf.calibrate.fit`) works on x = ln(value / start) of its free parameters and
keeps, beside its record, the Jacobian J of its residuals r at the solution. Linearised there,
the residuals are r(x̂ + z) ≈ r + J z, and with residuals of spread s (their root mean square
over the degrees of freedom left) the fitted x has the covariance of a linear least-squares
problem, (JᵀJ / s²)⁻¹. A parameter the data cannot pin has a zero column in J, and that
covariance an infinite variance in its direction; a prior of PRIOR_SD (in ln units) around the
fitted value bounds it: Σ = (JᵀJ / s² + I / PRIOR_SD²)⁻¹, the Laplace approximation of the
posterior under that prior. A draw is x̂ + z with z ~ N(0, Σ), each value kept within the
parameter's bounds.

A draw changes a scenario's parameters by the factor it changes the fitted value
(exp(z)): a scenario that sets a fitted parameter itself keeps its own value, scaled by the
same relative uncertainty. The experiment's own parameters (its load generator, its ramp) are
fitted too but belong to no other scenario, and are left out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simapf.errors import ConfigError
from simapf.files import read_yaml
from simapf.server.params import SHIPPED_RECORD

# How far a fitted parameter may be from its fitted value where the data says nothing of it:
# one standard deviation of ln(value) is a factor e. The data pins most of the shipped record's
# parameters much closer (docs/validation.md, parameter uncertainty); this prior only decides
# the directions it leaves free.
PRIOR_SD = 1.0


@dataclass(frozen=True)
class ParameterDraws:
    """`factors[d, k]`: draw d multiplies parameter `keys[k]` by this (1.0: the fitted value)."""

    keys: tuple[str, ...]
    fitted: tuple[float, ...]
    bounds: tuple[tuple[float, float], ...]
    factors: np.ndarray
    sd: tuple[float, ...]  # each parameter's standard deviation of ln(value)

    def __len__(self) -> int:
        return len(self.factors)

    def values(self, d: int) -> dict[str, float]:
        """Draw d's fitted parameter values."""
        return {k: v * float(f) for k, v, f in zip(self.keys, self.fitted, self.factors[d])}


def covariance(jacobian: np.ndarray, residuals: np.ndarray, prior_sd: float = PRIOR_SD) -> np.ndarray:
    """The fitted ln-parameters' covariance: (JᵀJ / s² + I / prior_sd²)⁻¹, with s² the mean
    square of the residuals that are not 0 over their degrees of freedom (a residual that is
    exactly 0 is a criterion met, an empty cell rejecting enough, not a measurement)."""
    n, p = jacobian.shape
    active = np.count_nonzero(residuals)
    if active <= p:
        raise ConfigError(f"the calibration has {active} residuals for {p} parameters: no spread to draw from")
    s2 = float(np.sum(residuals**2)) / (active - p)
    precision = jacobian.T @ jacobian / s2 + np.eye(p) / prior_sd**2
    return np.linalg.inv(precision)


def jacobian_path(record_path: str | Path) -> Path:
    """Where a calibration record's Jacobian is kept: beside it, as `<record stem>.jacobian.json`."""
    p = Path(record_path)
    return p.with_name(p.stem + ".jacobian.json")


def _fitted_parameters(path: Path) -> dict[str, dict]:
    """The record's `fit.free_parameters`: each fitted parameter's value and the bounds its fit
    kept it within, in the order of the Jacobian's columns."""
    record = read_yaml(path)
    free = ((record.get("fit") or {}).get("free_parameters") if isinstance(record, dict) else None) or {}
    if not isinstance(free, dict) or not free:
        raise ConfigError(f"{path}: fit.free_parameters: a record fitted by `simapf calibrate` is needed for parameter draws")
    return free


def draw_parameters(n: int, seed: int, record_path: str | Path | None = None,
                    prior_sd: float = PRIOR_SD) -> ParameterDraws:  # fmt: skip
    """`n` parameter sets drawn from the record's uncertainty (default: the shipped record),
    reproducibly from `seed`; experiment-only parameters left out."""
    path = Path(record_path) if record_path is not None else SHIPPED_RECORD
    free = _fitted_parameters(path)
    jpath = jacobian_path(path)
    try:
        stored = json.loads(jpath.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{jpath}: the calibration's Jacobian, needed for parameter draws: {exc}") from None
    keys = list(free)
    if stored.get("free") != keys:
        raise ConfigError(f"{jpath}: its parameters are not those of {path.name}'s fit")
    cov = covariance(np.array(stored["jacobian"]), np.array(stored["residuals"]), prior_sd)
    fitted = np.array([float(free[k]["fitted"]) for k in keys])
    lo = np.array([float(free[k]["bounds"][0]) for k in keys])
    hi = np.array([float(free[k]["bounds"][1]) for k in keys])
    rng = np.random.default_rng([seed, 0x5EED])
    z = rng.multivariate_normal(np.zeros(len(keys)), cov, size=n, method="eigh")
    values = np.clip(fitted * np.exp(z), lo, hi)
    keep = [i for i, k in enumerate(keys) if not k.startswith("experiment.")]
    return ParameterDraws(
        keys=tuple(keys[i] for i in keep), fitted=tuple(float(fitted[i]) for i in keep),
        bounds=tuple((float(lo[i]), float(hi[i])) for i in keep), factors=(values / fitted)[:, keep],
        sd=tuple(math.sqrt(cov[i, i]) for i in keep),
    )  # fmt: skip
