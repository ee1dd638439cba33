"""What every part of the scenario file shares: a strict model, and durations written as
Kubernetes and Go write them."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

# The numbers every field takes (see simapf.quantities): finite, no booleans, durations Go can hold.
from simapf.quantities import (  # noqa: F401  (re-exported for the schema modules)
    MAX_CORES, MAX_GO_DURATION_S, MILLICORE, MIN_RATE_PER_S, RATE_FLOOR, Cores, Integer, Number, Rate, Seconds,
    cpu_quantity,
)  # fmt: skip


# A duration as Kubernetes and Go write them ("90s", "10m", "1h30m", "500ms", "1.5h"): every field
# in seconds (a name ending in `_s`, not a rate `_per_s`) takes one as well as a number.
_DURATION_RE = re.compile(r"^\s*(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h)(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))*\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float | None:
    """Seconds of a Go duration string ("1h30m" -> 5400.0); None if it is not one."""
    if not _DURATION_RE.match(text):
        return None
    return sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))


# The longest text any field takes (a million-character name is a mistake, and every name is
# copied into series labels and outputs), and the longest name: Kubernetes' DNS subdomain.
MAX_TEXT_LENGTH = 10_000
MAX_NAME_LENGTH = 253
# The most elements of a scenario's lists (resources, clients, webhooks, CRD groups; events may
# be ten times as many): each is checked against the others, and each client and resource adds
# series to every scrape.
MAX_LIST_ITEMS = 1000


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, populate_by_name=True,
                              str_max_length=MAX_TEXT_LENGTH)  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _durations(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        seconds = {}
        for key, value in data.items():
            if isinstance(value, str) and key.endswith("_s") and not key.endswith("_per_s") and key in cls.model_fields:
                parsed = parse_duration(value)
                if parsed is not None:
                    seconds[key] = parsed
        return {**data, **seconds} if seconds else data


def _number_as_text(value: Any) -> Any:
    # YAML and --set read 0 or 1.38 as numbers; these fields are strings in Kubernetes.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


NumberAsText = BeforeValidator(_number_as_text)


# Bounds of a run's actors, each a one-line error beyond it: simapf keeps one actor per client
# instance, with its own random streams (tens of KB each), and draws every arrival.
MAX_INSTANCES = 100_000
MAX_RATE_PER_S = 1e6
