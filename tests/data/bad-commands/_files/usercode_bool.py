# A LIST policy that passes a condition where seats belong.
from simapf.apf.types import WorkEstimate


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return WorkEstimate(from_cache or attrs.list_options.limit > 0)
