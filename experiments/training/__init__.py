"""The training library behind the scripts: what a :class:`experiments.recipe.Recipe` builds and runs.

- :mod:`experiments.training.flags`: ``experiments.train``'s flags (the recipe's fields, flat) and their recipe.
- :mod:`experiments.training.parts`: the training workload, the environments, the network and the algorithm.
- :mod:`experiments.training.warm_start`: what RL starts from (a behaviour clone, a residual's teacher).
- :mod:`experiments.training.loop`: one run, start to end (training, checkpoints, validation, resume, evaluation).
- :mod:`experiments.training.verdict`: the run's one-line verdict.
- :mod:`experiments.training.many`: many recipes on one executor (seeds, sweeps, the study's runs), and what their
  run folders hold already.
- :mod:`experiments.training.variants`: recipe variants judged on validation windows (``experiments.recipe_sweep``).
- :mod:`experiments.training.study`: the synthetic-vs-real study's stages (``experiments.study``).
"""
