"""Make a calibration record's values the shipped defaults.

    .venv/bin/python calibration/adopt_defaults.py [calibration/params.yaml]

Rewrites the default of every `ServerParams` field (simapf/server/params.py) and every
`ExperimentSetup` field (simapf/calibrate/experiment.py) whose value in the record differs from
the current default, in place, leaving descriptions and layout alone. Values are written as
the record holds them (exactly), so `ServerParams()` then equals the record's `server` section,
which tests/calibration/ checks. The Default column of docs/resource-model.md's parameter
tables is rewritten to match (tests/server/test_server_params.py checks it). Review the diff
before committing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from simapf.calibrate.experiment import ExperimentSetup  # noqa: E402
from simapf.calibrate.record import SHIPPED, read_record  # noqa: E402
from simapf.server.params import ServerParams  # noqa: E402
from simapf.server.reference import refresh_defaults  # noqa: E402

PARAMS_PY = ROOT / "simapf" / "server" / "params.py"
PARAMETER_DOC = ROOT / "docs" / "resource-model.md"
EXPERIMENT_PY = ROOT / "simapf" / "calibrate" / "experiment.py"


def literal(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if value == int(value) and abs(value) >= 1e6:
            return f"{value:.6g}" if float(f"{value:.6g}") == value else repr(value)
        return repr(value)
    return repr(value)


def set_default(source: str, cls: str, field: str, text: str) -> str:
    """Replace the first argument of `field: ... = Field(` inside `class cls`."""
    start = source.index(f"class {cls}(")
    nxt = source.find("\nclass ", start + 1)
    end = nxt if nxt != -1 else len(source)
    body = source[start:end]
    m = re.search(rf"\n    {field}: [^\n]*?= Field\(", body)
    if m is None:
        raise SystemExit(f"{cls}.{field}: no Field( found")
    i = m.end()
    depth = 0
    j = i
    while True:  # the first argument ends at the first comma (or paren) at depth 0
        ch = body[j]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            break
        j += 1
    old = body[i:j]
    lead = old[: len(old) - len(old.lstrip())]
    body = body[:i] + lead + text + body[j:]
    return source[:start] + body + source[end:]


def main() -> None:
    record = read_record(sys.argv[1] if len(sys.argv) > 1 else SHIPPED)
    current = ServerParams()
    src = PARAMS_PY.read_text(encoding="utf-8")
    changed = []
    for section, values in record["server"].items():
        sub = getattr(current, section)
        cls = type(sub).__name__
        for field, value in values.items():
            if getattr(sub, field) != value:
                src = set_default(src, cls, field, literal(value))
                changed.append(f"{section}.{field} = {literal(value)}")
    PARAMS_PY.write_text(src, encoding="utf-8")
    exp_src = EXPERIMENT_PY.read_text(encoding="utf-8")
    setup = ExperimentSetup()
    for field, value in record["experiment"].items():
        if field == "client":
            args = ", ".join(f"{k}={literal(v)}" for k, v in value.items() if v not in (0, 0.0, False, None))
            if setup.client.model_dump() != value:
                exp_src = set_default(exp_src, "ExperimentSetup", "client", f"ClientParams({args})")
                changed.append(f"experiment.client = ClientParams({args})")
        elif getattr(setup, field) != value:
            exp_src = set_default(exp_src, "ExperimentSetup", field, literal(value))
            changed.append(f"experiment.{field} = {literal(value)}")
    EXPERIMENT_PY.write_text(exp_src, encoding="utf-8")
    doc = PARAMETER_DOC.read_text(encoding="utf-8")
    PARAMETER_DOC.write_text(refresh_defaults(doc, ServerParams.model_validate(record["server"])), encoding="utf-8")
    print("\n".join(changed) or "defaults already match the record")


if __name__ == "__main__":
    main()
