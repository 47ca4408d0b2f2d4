"""hpcgym's agents package."""
