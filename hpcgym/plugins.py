"""Entry points: how an installed package adds heuristics, trace formats, workloads and generators by name.

A package declares what it adds in its ``pyproject.toml``; hpcgym finds it the first time a name is looked up, so
every CLI, environment and table sees it without an import (``docs/extend.md`` walks through each):

- ``hpcgym.heuristics``: a :class:`~hpcgym.sim.policy.PriorityPolicy`, or a function that returns one
  (:mod:`hpcgym.sim.heuristics`);
- ``hpcgym.heuristic_families``: a function ``(argument, trace, backfill) -> PriorityPolicy`` for the heuristics
  that depend on where they run, named ``FAMILY`` or ``FAMILY:ARGUMENT`` (``baselines`` provides ``tuned``;
  :func:`hpcgym.sim.heuristics.resolve`);
- ``hpcgym.readers``: a :class:`~hpcgym.traces.formats.TraceFormat`, or a reader function
  (:mod:`hpcgym.traces.formats`);
- ``hpcgym.workloads``: a factory ``(machine, train) -> workload`` for ``workload=NAME`` (:mod:`hpcgym.workload`);
- ``hpcgym.synthesizers``: a :class:`synth.base.Synthesizer` subclass, as ``"module:Class"`` (:mod:`synth`).

The entry point's name is the name users type (``--policy bigfirst``, ``--format mylog``). A plugin that fails to
import (even one that calls ``sys.exit``) does not stop the others: it is left out with a warning naming it and
its error.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from hpcgym.errors import warn

GROUPS = ("hpcgym.heuristics", "hpcgym.heuristic_families", "hpcgym.readers", "hpcgym.workloads",
          "hpcgym.synthesizers")


def points(group: str) -> list[EntryPoint]:
    """The entry points installed in ``group``, in name order (a name declared twice: the first one)."""
    seen: dict[str, EntryPoint] = {}
    for point in sorted(entry_points(group=group), key=lambda p: p.name):
        seen.setdefault(point.name, point)
    return list(seen.values())


def load(group: str, check: Callable[[str, Any], Any] | None = None) -> dict[str, Any]:
    """Name -> the loaded object of every entry point of ``group``.

    ``check(name, obj)`` turns a loaded object into what the registry keeps, raising ``TypeError`` or ``ValueError``
    if it is not what the group takes. A plugin that fails to import or to pass the check is left out with one
    warning that names its entry point, its package and the error.
    """
    out: dict[str, Any] = {}
    for point in points(group):
        try:
            obj = point.load()
            out[point.name] = check(point.name, obj) if check else obj
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - one broken plugin must not take the others down
            dist = getattr(point.dist, "name", None) or "an installed package"
            warn(f"the {group} entry point {point.name!r} = {point.value!r} (from {dist}) was left out: "
                 f"{type(exc).__name__}: {exc}" + (" (it called sys.exit when imported)"
                                                   if isinstance(exc, SystemExit) else ""))
    return out


_added: set[str] = set()  # the groups :func:`add_to` has read in this process


def add_to(registry: dict[str, Any], group: str, check: Callable[[str, Any], Any] | None = None,
           key: Callable[[str], str] = str) -> None:
    """Put the entry points of ``group`` into ``registry`` (:func:`load`), once per process.

    A name already in the registry (built in, or registered by hand) is kept; ``key`` spells a name as the registry
    does (``str.lower`` for case-insensitive names).
    """
    if group in _added:
        return
    _added.add(group)
    for name, obj in load(group, check).items():
        registry.setdefault(key(name), obj)
