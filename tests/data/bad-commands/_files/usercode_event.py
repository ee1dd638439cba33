# A LIST policy a scenario switches to mid-run: it fails on its first LIST, after the switch.
class Policy:
    def estimate(self, attrs, ctx, from_cache):
        raise LookupError(f"no seats configured for {attrs.resource}")
