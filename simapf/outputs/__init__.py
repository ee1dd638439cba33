"""What simapf writes for people and other tools from a run: its directory, figures, exports."""
