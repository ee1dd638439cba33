# A LIST policy that checks its parameter itself, with a ValueError.
from simapf.apf.estimators import initial_only


class Policy:
    def __init__(self, seats=1):
        if not 1 <= seats <= 10:
            raise ValueError(f"seats must be from 1 to 10, got {seats}")
        self.seats = seats

    def estimate(self, attrs, ctx, from_cache):
        return initial_only(self.seats)
