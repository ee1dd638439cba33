# A LIST policy that allows one instance per process; every apiserver replica builds its own.
from simapf.apf.estimators import initial_only

_BUILT = []


class Policy:
    def __init__(self):
        if _BUILT:
            raise RuntimeError("Policy is a singleton: already built")
        _BUILT.append(self)

    def estimate(self, attrs, ctx, from_cache):
        return initial_only(1)
