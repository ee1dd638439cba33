"""Numbers as simapf's input files write them, and the bounds that keep them meaningful.

Every number a scenario, a parameter set or a spec gives is one of these types, so one set of
rules holds everywhere (`simapf.scenario.schema.base` re-exports them for the scenario schema):

- `Number`: a finite number. YAML integers are numbers, and so is text that is a number ("1e6",
  which YAML 1.1 reads as text); `true`, `.nan` and `.inf` are not, nor text like "nan".
- `Integer`: an integer, written as one: not `true` (YAML's 1), not 2.0, not "2".
- `Seconds`: a `Number` of seconds that is a Go duration: APF's clock, like Go's `time.Duration`,
  counts integer nanoseconds in 64 bits, so no duration is longer than ~292 years. Times per
  unit (seconds per byte, core-seconds per object) are durations of one unit too.
- `Rate`: a `Number` per second whose interval, its reciprocal, is a `Seconds`: a positive rate
  below one per ~292 years would put the next event beyond any clock.
- `Cores`: a `Number` of CPU cores, or millicores as Kubernetes writes them ("500m"): from one
  millicore, Kubernetes' smallest CPU quantity, to the most CPUs Linux runs on.

A field's own `ge`/`le` bounds stay in force beside a type's: the type's are `AtLeast`/`AtMost`
validators, not `ge`/`le` constraints, which a field's would silently replace.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AllowInfNan, BeforeValidator, GetCoreSchemaHandler, Strict
from pydantic_core import core_schema

# APF's clock and Go's time.Duration: int64 nanoseconds.
MAX_GO_DURATION_S = (2**63 - 1) / 1e9  # ~292 years
MIN_RATE_PER_S = 1 / MAX_GO_DURATION_S
MILLICORE = 0.001
# The most cores, threads and etcd servers a model may have: a large machine has a few hundred,
# Linux runs on at most 8,192 (NR_CPUS), and the model keeps state for each.
MAX_CORES = 4096

# A decimal number as text: what YAML 1.1 leaves a string ("1e6", "1e-3") but a user means as one.
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _number(value: Any) -> Any:
    # Booleans and other text are left for the strict float to refuse, with the value shown.
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # more digits than a float holds: not a finite number either
            return math.inf
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
        return float(value)
    return value


@dataclass(frozen=True)
class AtMost:
    """An upper bound a type carries; `why` says where it comes from."""

    limit: float
    why: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: Any) -> Any:
        if value is not None and value > self.limit:
            raise ValueError(f"{value:g} is more than {self.limit:.4g}, {self.why}")
        return value


@dataclass(frozen=True)
class AtLeast:
    """A lower bound a type carries for positive values (0 and below are the field's to allow
    or refuse: a rate limit's qps 0 means none)."""

    limit: float
    why: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, value: Any) -> Any:
        if value is not None and 0 < value < self.limit:
            raise ValueError(f"{value:g} is less than {self.limit:.4g}, {self.why}")
        return value


def cpu_quantity(value: Any) -> Any:
    """"8000m" -> 8.0, as a Kubernetes CPU quantity; anything else is left to the field."""
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(?:\.\d+)?m\s*", value):
        return float(value.strip()[:-1]) / 1000.0
    return value


Number = Annotated[float, Strict(), AllowInfNan(False), BeforeValidator(_number)]
Integer = Annotated[int, Strict()]
Seconds = Annotated[
    Number, AtMost(MAX_GO_DURATION_S, "the longest duration Go's int64 nanoseconds hold (~292 years)")
]
RATE_FLOOR = AtLeast(MIN_RATE_PER_S, "one per ~292 years: the interval would be longer than any Go duration")
Rate = Annotated[Number, RATE_FLOOR]
Cores = Annotated[
    Number,
    BeforeValidator(cpu_quantity),
    AtLeast(MILLICORE, "one millicore (1m), the smallest CPU quantity Kubernetes gives"),
    AtMost(MAX_CORES, "the most cores simapf models (it keeps state for each)"),
]
