"""The schemas every floor shares: what a run's summary holds (simapf.schema.summary)."""
