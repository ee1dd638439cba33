# A LIST policy whose arithmetic goes below zero: seats left over at the level.
from simapf.apf.types import WorkEstimate


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return WorkEstimate(ctx.pl_max_seats - 100)
