# A LIST policy that forgets to return on one path.
from simapf.apf.estimators import initial_only


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        if not from_cache:
            return initial_only(4)
        initial_only(1)
