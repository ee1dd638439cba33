"""Fitted parameter sets as YAML: the values, the data they were fitted on, and their error.

    server:      every ServerParams field (what `ServerParams.from_yaml` reads as well)
    experiment:  the ExperimentSetup the fit reconstructed the data with
    fitted_at, simapf_version, data (file, sha256, rows), fit (loss, free parameters, start and
    fitted values, bounds, evaluations, wall time), error (the fit summary; LOGO once known)

`calibration/params.yaml` is the record of the shipped defaults: the fitted ones are read from it
(`simapf.server.params.fitted`), and a test checks that `ServerParams()` equals its `server`
section. Floats are written exactly (the fit's 17 digits),
so that this holds bit for bit.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from simapf.version import __version__
from simapf.calibrate.experiment import ExperimentSetup
from simapf.calibrate.fit import FREE_PARAMS, LOSS, LOSSES, FreeParam, free_params_by_key
from simapf.errors import ConfigError
from simapf.files import read_yaml, write_text_atomic
from simapf.messages import describe
from simapf.server.params import SHIPPED_RECORD, ServerParams
from simapf.uncertainty.draws import jacobian_path

SHIPPED = SHIPPED_RECORD


def file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _plain(value: Any) -> Any:
    """YAML-friendly: tuples as lists; floats kept exact, so that the record's `server`
    section equals the defaults (whose fitted values it holds), bit for bit."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def build_record(
    params: ServerParams,
    setup: ExperimentSetup,
    *,
    data_path: str | Path,
    rows: int,
    fit: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data_path = Path(data_path)
    try:
        shown = str(data_path.resolve().relative_to(Path.cwd()))
    except ValueError:
        shown = str(data_path)
    return {
        "fitted_at": _dt.date.today().isoformat(),
        "simapf_version": __version__,
        "data": {"file": shown, "sha256": file_digest(data_path), "rows": rows},
        "fit": _plain(fit or {}),
        "error": _plain(error or {}),
        "experiment": _plain(setup.model_dump(mode="json")),
        "server": _plain(params.record_dump()),
    }


RECORD_HEADER = "# simapf calibration record: "


def record_text(record: dict[str, Any]) -> str:
    """The record as simapf writes it: YAML under a header that says what it is."""
    header = (
        f"{RECORD_HEADER}resource-model parameters fitted to the LIST memory\n"
        "# experiment (see calibration/README.md). `server` loads with ServerParams.from_yaml.\n"
    )
    return header + yaml.safe_dump(record, sort_keys=False, width=100)


def is_record_file(path: Path) -> bool:
    """Whether `path` is a calibration record simapf wrote (its first line says so)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().startswith(RECORD_HEADER)
    except (OSError, UnicodeDecodeError):
        return False


def write_record(record: dict[str, Any], path: str | Path) -> None:
    """Write atomically (temporary name, then rename): nothing half-written is left behind."""
    write_text_atomic(Path(path), record_text(record))


def read_record(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a calibration record must be a mapping")
    return data


def record_loss(record: dict[str, Any]) -> str:
    """The least-squares loss a record was fitted with (`fit.loss`; the default when absent)."""
    loss = (record.get("fit") or {}).get("loss", LOSS)
    if loss not in LOSSES:
        raise ConfigError(f"fit.loss: unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    return loss


def record_free_params(record: dict[str, Any]) -> tuple[FreeParam, ...]:
    """The parameters a record was fitted on (`fit.free_parameters`), so that a refit from it or
    its leave-one-group-out moves what its own fit moved; the built-in set when it names none
    (a plain ServerParams YAML)."""
    keys = list(((record.get("fit") or {}).get("free_parameters") or {}).keys())
    return free_params_by_key(keys) if keys else FREE_PARAMS


def load_params(path: str | Path | None = None) -> tuple[ServerParams, ExperimentSetup, dict[str, Any]]:
    """(server params, experiment set-up, whole record) from a record; a plain ServerParams
    YAML (no `server` key) is accepted too, with the default experiment set-up."""
    path = Path(path) if path is not None else SHIPPED
    data = read_record(path)
    if "server" not in data:
        return ServerParams.from_dict(data, source_name=str(path)), ExperimentSetup(), {}
    params = ServerParams.from_dict(data.get("server"), source_name=f"{path}: server")
    try:
        setup = ExperimentSetup.model_validate(data.get("experiment") or {})
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe(exc, ExperimentSetup, prefix='experiment')}") from None
    return params, setup, data
