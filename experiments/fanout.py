"""Fan-out: one function over many tasks, in this process, in a pool of processes, or as Ray tasks.

Every driver that runs several trainings at once goes through :class:`Executor`: the seeds of
``experiments.train --seeds``, the variants of ``experiments.recipe_sweep`` and the grid of ``experiments.sweep``
as lists of recipes (``experiments.training.many.run_all``), and the stages of ``experiments.study``.

- ``backend="local"``, ``jobs=1``: in this process, one task after the other (an error stops at once).
- ``backend="local"``, ``jobs>1``: a pool of ``jobs`` processes started with ``spawn`` (a fresh interpreter each: no
  torch or numba state is forked). The pool is terminated when the executor closes: letting the workers exit by
  themselves took minutes once torch, SDV and transformers were loaded in them.
- ``backend="ray"``: one Ray task per item (one CPU each) on the cluster at ``address``, or on a local instance of
  ``jobs`` CPUs (all of them when ``jobs`` is None). Ray retries a task whose worker died ``retries`` times.

:meth:`Executor.map` calls ``done(index, result)`` as each task ends and returns the results in the tasks' order.
With several workers, a task that raises does not stop the others: ``map`` waits for them all, then raises the
first error. The function and the tasks must pickle (a module-level function; plain data).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any


def _call(item: tuple[Callable[[Any], Any], int, Any]) -> tuple[int, Any]:
    """``(fn, index, task)`` -> ``(index, fn(task))`` (what a pool worker runs)."""
    fn, index, task = item
    return index, fn(task)


class Executor:
    """Runs ``fn`` over tasks (see the module docstring).

    Args:
        fn: a module-level function of one task.
        backend: ``local`` or ``ray``.
        jobs: tasks at once (processes, or the CPUs of a local Ray instance; None: all of them).
        address: with ``ray``, the cluster's address (empty: a local instance).
        retries: with ``ray``, how often a task whose worker died is run again.
    """

    def __init__(self, fn: Callable[[Any], Any], backend: str = "local", jobs: int | None = 1, address: str = "",
                 retries: int = 0):
        if backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', not {backend!r}")
        self.fn, self.backend, self.jobs, self.address, self.retries = fn, backend, jobs, address, retries
        self.pool: Any = None
        self.remote: Any = None

    def __enter__(self) -> Executor:
        if self.backend == "ray":
            import ray

            ray.init(address=self.address or None, num_cpus=None if self.address else self.jobs,
                     ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
            self.remote = ray.remote(num_cpus=1, max_retries=self.retries)(self.fn)
        elif (self.jobs or 1) > 1:
            self.pool = multiprocessing.get_context("spawn").Pool(self.jobs)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.backend == "ray":
            import ray

            ray.shutdown()
        elif self.pool is not None:
            self.pool.terminate()  # every task has ended (or the driver is stopping): end the workers now
            self.pool.join()
            self.pool = None

    def map(self, tasks: Sequence[Any], done: Callable[[int, Any], None] | None = None) -> list[Any]:
        """Run every task; call ``done(index, result)`` as each ends; return the results in order."""
        results: list[Any] = [None] * len(tasks)
        errors: list[BaseException] = []

        def finish(i: int, result: Any) -> None:
            results[i] = result
            if done is not None:
                done(i, result)

        if self.backend == "ray":
            self._map_ray(tasks, finish, errors)
        elif self.pool is not None:
            items = self.pool.imap_unordered(_call, [(self.fn, i, t) for i, t in enumerate(tasks)])
            for _ in tasks:
                try:
                    finish(*next(items))
                except Exception as exc:  # noqa: BLE001 - raised below, once the other tasks have ended
                    errors.append(exc)
        else:
            for i, task in enumerate(tasks):
                finish(i, self.fn(task))
        if errors:
            raise errors[0]
        return results

    def _map_ray(self, tasks: Sequence[Any], finish: Callable[[int, Any], None], errors: list[BaseException]) -> None:
        import ray

        refs = {self.remote.remote(t): i for i, t in enumerate(tasks)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                result = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - raised by map, once the other tasks have ended
                errors.append(exc)
                continue
            finish(refs[ready[0]], result)
