"""Go's rounding rules, where upstream's arithmetic differs from Python's."""

import math


def go_round(x: float) -> int:
    """Go's math.Round: the nearest integer, halves away from zero.

    Python's round() rounds halves to even, and floor(x + 0.5) is off by one for
    0.49999999999999994; truncating and comparing the exact fractional part is neither.
    """
    t = int(x)  # truncates toward zero; x - t is exact in binary floating point
    if x >= 0:
        return t + 1 if x - t >= 0.5 else t
    return t - 1 if t - x >= 0.5 else t


def go_ceil(x: float) -> int:
    return int(math.ceil(x))
