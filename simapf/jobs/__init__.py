"""Long work: its estimate before it starts, its time budget, and the result cache."""
