"""hpcgym's agents package.

:data:`NETWORKS`: the names ``--network`` takes besides ``MODULE:CLASS`` (here, so that naming them imports no
torch; :func:`agents.policies.resolve` turns a name into its policy).
"""

#: the job scorer's policy, or SB3's plain MLP (compared, never better: docs/results.md)
NETWORKS = ("scorer", "mlp")
