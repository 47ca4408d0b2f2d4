"""An example package that adds to hpcgym: a heuristic, a trace format, a generator, a network and an agent.

Installed (``pip install -e examples/hpcgym_example_plugin``), its entry points make ``bigfirst``, ``joblog`` and
``resample`` names that every hpcgym tool knows; ``docs/extend.md`` walks through each file.
"""
