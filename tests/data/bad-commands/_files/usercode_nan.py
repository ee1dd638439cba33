# A LIST policy whose weight table gives NaN for a resource it does not know.
import math

from simapf.apf.types import WorkEstimate

WEIGHTS = {"pods": 2.0, "secrets": 4.0}


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return WorkEstimate(WEIGHTS.get(attrs.resource, math.nan))
