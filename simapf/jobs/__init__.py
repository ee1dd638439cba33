"""Long work: its estimate before it starts, its time budget and its pool of workers."""
