# A LIST policy whose exception message spans lines.
class Policy:
    def estimate(self, attrs, ctx, from_cache):
        raise RuntimeError("no seats for this request:\n  resource=" + attrs.resource + "\n  verb=" + attrs.verb)
