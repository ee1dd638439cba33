# A LIST policy whose constructor divides by its parameter: list_params {factor: 0} breaks it.
from simapf.apf.estimators import initial_only


class Policy:
    def __init__(self, factor=1.0):
        self.per_seat = 100_000 / factor

    def estimate(self, attrs, ctx, from_cache):
        return initial_only(1)
