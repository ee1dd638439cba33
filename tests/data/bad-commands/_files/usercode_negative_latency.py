# A LIST policy that holds final seats for a negative time.
from simapf.apf.types import WorkEstimate


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return WorkEstimate(1, 2, -5_000_000)
