class Policy:
    def __init__(self, factor):
        self.factor = factor

    def estimate(self, attrs, ctx, from_cache):
        return 1
