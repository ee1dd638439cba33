# A LIST policy that charges per page and forgets that limit 0 means one page of everything.
import math

from simapf.apf.estimators import initial_only


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        stats = ctx.object_stats.lookup(attrs.api_group, attrs.resource)
        pages = stats.object_count / attrs.list_options.limit
        return initial_only(max(1, math.ceil(pages)))
