# A LIST policy that averages a history which is empty at first: the statistics module raises.
import statistics

from simapf.apf.estimators import initial_only


class Policy:
    def __init__(self):
        self.history = []

    def estimate(self, attrs, ctx, from_cache):
        typical = statistics.mean(self.history)
        return initial_only(max(1, round(typical)))
