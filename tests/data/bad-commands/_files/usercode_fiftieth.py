# A LIST policy that keeps the last 49 estimates in a fixed-size list and overruns it on the 50th.
from simapf.apf.estimators import initial_only


class Policy:
    def __init__(self):
        self.recent = [0] * 49
        self.calls = 0

    def estimate(self, attrs, ctx, from_cache):
        self.recent[self.calls] = 1
        self.calls += 1
        return initial_only(1)
