"""The engine: the run's clock and event loop, and what runs on them."""
