class Policy:
    def estimate(self, attrs, ctx, from_cache)
        return 1
