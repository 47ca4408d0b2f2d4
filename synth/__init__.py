"""hpcgym's synth package."""
