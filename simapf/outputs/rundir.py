"""A run's directory: series (Parquet and CSV), summary.json, tables and the overview figure.

`Result` (simapf.simulation.result) is data; this is the one place that writes it, for the
simulation and for the real bench alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simapf.files import json_text, output_directory
from simapf.simulation.result import Result


def write_run(result: Result, out_dir: str | Path, figure: bool = True, force: bool = False) -> Path:
    """Write `result` to `out_dir` and return the directory. Files are written to a temporary
    directory first and moved into place, so an interrupted write leaves no half-written
    directory. A directory that is not empty is refused unless it holds an earlier run's output
    (whose files are replaced) or `force` (simapf's files are added beside the others); see
    `simapf.files.output_directory`."""
    out = Path(out_dir)
    with output_directory(out, "run", force) as tmp:
        write_run_files(result, tmp, figure)
    return out


def write_run_files(result: Result, folder: Path, figure: bool = True) -> list[str]:
    """Write the run's files into `folder` (an output's staging directory); their names."""
    tmp = Path(folder)
    result.series.to_parquet(tmp / "series.parquet", index=False)
    result.series.to_csv(tmp / "series.csv", index=False)
    result.latency.to_csv(tmp / "latency.csv", index=False)
    result.levels.to_csv(tmp / "priority_levels.csv", index=False)
    if result.client_latency is not None:
        result.client_latency.to_csv(tmp / "client_latency.csv", index=False)
    if result.requests is not None:
        result.requests.to_parquet(tmp / "requests.parquet", index=False)
    if result.histograms is not None:
        result.histograms.to_parquet(tmp / "histograms.parquet", index=False)
    (tmp / "summary.json").write_text(json_text(result.summary, indent=2, default=_json_default) + "\n")
    if figure:
        from simapf.outputs.figures import overview_figure, save_figure

        save_figure(overview_figure(result), tmp / "overview", result.typed.provenance)
    return sorted(p.name for p in tmp.iterdir())


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return None if np.isnan(x) else float(x)
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
