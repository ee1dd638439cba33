# A LIST policy whose helper function raises: the error is in the helper's line.
from simapf.apf.estimators import initial_only


def seats_for(resource):
    return {"pods": 4, "secrets": 2}[resource]


class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return initial_only(seats_for(attrs.resource))
