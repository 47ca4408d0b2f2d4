"""hpcgym's baselines package."""
