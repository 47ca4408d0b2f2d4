"""hpcgym's experiments package."""
