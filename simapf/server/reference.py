"""The Default column of docs/resource-model.md's parameter tables, kept equal to `ServerParams`.

Each section of `ServerParams` has a table under a `### `section`` heading, one row per field:
`| `field` | default | meaning |`. A calibration changes two dozen defaults at once;
`calibration/adopt_defaults.py` rewrites the column with `refresh_defaults`, and a test checks
that the document shows the shipped defaults.
"""

from __future__ import annotations

import re
from typing import Any

from simapf.server.params import ServerParams


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

    Raises ValueError naming a section or field the document has no row for."""
    for section in ServerParams.model_fields:
        heading = re.search(rf"^### `{section}`.*$", doc, re.M)
        if heading is None:
            raise ValueError(f"no table for `{section}`")
        end = doc.find("\n### ", heading.end())
        end = len(doc) if end == -1 else end
        table = doc[heading.end():end]
        values = getattr(params, section)
        for field in type(values).model_fields:
            row = re.compile(rf"^(\| `{field}` \| )[^|]*( \|)", re.M)
            if not row.search(table):
                raise ValueError(f"no row for `{section}.{field}`")
            cell = shown(getattr(values, field))
            table = row.sub(lambda m: m.group(1) + cell + m.group(2), table, count=1)
        doc = doc[: heading.end()] + table + doc[end:]
    return doc
