# A LIST policy that returns (initial seats, additional latency) as a tuple.
class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return 2, 0
