# A LIST policy that returns a number of seats instead of a WorkEstimate.
class Policy:
    def estimate(self, attrs, ctx, from_cache):
        return 3
