"""The top floor's applications that draw from many runs: `simapf figures` (KEP figures)."""
