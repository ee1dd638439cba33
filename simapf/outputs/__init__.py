"""What simapf writes for people and other tools: figures, exports, provenance."""
