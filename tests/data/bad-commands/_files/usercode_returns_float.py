# A LIST policy that forgets to round: seats as a fraction.
from simapf.apf.types import WorkEstimate


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        stats = ctx.object_stats.lookup(attrs.api_group, attrs.resource)
        return WorkEstimate(stats.object_count / 100)
