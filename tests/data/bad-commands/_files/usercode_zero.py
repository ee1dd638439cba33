# A LIST policy that rounds down: small LISTs get 0 seats.
from simapf.apf.estimators import initial_only


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        stats = ctx.object_stats.lookup(attrs.api_group, attrs.resource)
        return initial_only(stats.object_count // 10_000)
