# A LIST policy whose estimate does not take from_cache.
from simapf.apf.estimators import initial_only


class Policy:
    def estimate(self, attrs, ctx):
        return initial_only(1)
