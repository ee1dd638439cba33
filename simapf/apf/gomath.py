"""Go's rounding rules, where upstream's arithmetic differs from Python's."""

import math


def go_round(x: float) -> int:
    """Go's math.Round: halves away from zero (Python's round() is banker's rounding)."""
    if x >= 0:
        return int(math.floor(x + 0.5))
    return -int(math.floor(-x + 0.5))


def go_ceil(x: float) -> int:
    return int(math.ceil(x))
