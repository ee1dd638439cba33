"""One run: built from a resolved scenario, run, observed, and its result."""
