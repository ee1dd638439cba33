# A LIST policy that uses infinity for "no cap" and returns it for cache-served LISTs.
import math

from simapf.apf.types import WorkEstimate


class Policy:
    cache_cap = math.inf

    def estimate(self, attrs, ctx, from_cache):
        return WorkEstimate(self.cache_cap if from_cache else 10)
