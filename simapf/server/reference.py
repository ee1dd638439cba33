"""The Default column of docs/resource-model.md's parameter tables, generated from `ServerParams`.

Each section of `ServerParams` has a table under a `### `section`` heading, one row per field:
`| `field` | default | meaning |`. The meanings are prose; the defaults are generated, since a
calibration record changes two dozen of them at once (fitted defaults are read from it), and a
test fails when the document does not show the shipped defaults.

    python -m simapf.server.reference            # rewrite the Default cells of docs/resource-model.md
    python -m simapf.server.reference --check    # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from simapf.files import write_text_atomic
from simapf.server.params import ServerParams

PARAMETER_DOC = Path(__file__).resolve().parents[2] / "docs" / "resource-model.md"


def shown(value: Any) -> str:
    """A default as the tables show it: YAML's spelling, floats to six significant digits."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def refresh_defaults(doc: str, params: ServerParams) -> str:
    """`doc` with every field's Default cell showing its value in `params`.

    Raises ValueError naming a section or field the document has no row for. The rows are the
    parameters as a calibration record writes them (`features` holds the gates the model reads)."""
    dumped = {**params.model_dump(), "features": params.record_dump()["features"]}
    for section in ServerParams.model_fields:
        heading = re.search(rf"^### `{section}`.*$", doc, re.M)
        if heading is None:
            raise ValueError(f"no table for `{section}`")
        end = doc.find("\n### ", heading.end())
        end = len(doc) if end == -1 else end
        table = doc[heading.end():end]
        for field, value in dumped[section].items():
            row = re.compile(rf"^(\| `{field}` \| )[^|]*( \|)", re.M)
            if not row.search(table):
                raise ValueError(f"no row for `{section}.{field}`")
            cell = shown(value)
            table = row.sub(lambda m: m.group(1) + cell + m.group(2), table, count=1)
        doc = doc[: heading.end()] + table + doc[end:]
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate the Default column of docs/resource-model.md.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the document is out of date; write nothing")
    args = parser.parse_args(argv)
    doc = PARAMETER_DOC.read_text(encoding="utf-8")
    fresh = refresh_defaults(doc, ServerParams())
    if fresh == doc:
        return 0
    if args.check:
        print(f"{PARAMETER_DOC} is out of date: run python -m simapf.server.reference", file=sys.stderr)
        return 1
    write_text_atomic(PARAMETER_DOC, fresh)
    print(f"wrote {PARAMETER_DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
