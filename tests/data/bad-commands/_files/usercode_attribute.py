# A LIST policy that reads a field the estimation context does not have.
from simapf.apf.estimators import initial_only


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return initial_only(min(10, ctx.max_seats))
