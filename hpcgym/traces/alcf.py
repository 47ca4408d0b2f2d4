"""Reader for the ALCF job CSVs (Theta, ThetaGPU, Mira) as restructured by the DIR-LAB group.

Columns: ``job,user,project,state,gpu_num,cpu_num,node_num,submit_time,wait_time,run_time,wall_time,node_hour,
new_status``. Rows come in job-id order, not submit order; the reader sorts them. ``wall_time`` is the requested
limit. Runtimes are rounded up to whole seconds. Status ``Pass`` -> completed, ``Failed`` -> failed,
``Killed`` -> killed (ended at its walltime). A ``wall_time`` <= 0 is unknown (walltime = run, flagged).

Out-of-range values are never reinterpreted (see :mod:`hpcgym.traces._io`): a ``submit_time`` below 0 is unknown
(``"submit unknown"``); above 2**32, or before 1973 among Unix times, ``"submit out of range"``; a ``run_time`` or
``wall_time`` above 2**31 - 1 s, ``"run out of range"`` or ``"walltime out of range"``. Such jobs are dropped and
counted by reason, or raise with ``on_invalid="error"``, naming the line and column. Ids and counts beyond 2**53
raise :class:`~hpcgym.errors.TraceFormatError`, and so do fractional node or processor counts unless ``round=``
says how to round them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hpcgym import jobs
from hpcgym.machines import Machine, get
from hpcgym.traces._io import CsvSource, Rounding, finish, seconds, submit_column

REQUIRED = ("job", "user", "project", "cpu_num", "node_num", "submit_time", "wait_time", "run_time", "wall_time",
            "new_status")
STATUS = {"Pass": "completed", "Failed": "failed", "Killed": "killed"}
_NUMERIC = ("submit_time", "run_time", "wall_time", "job", "node_num", "cpu_num", "user", "project", "wait_time")


def read_alcf(
    path: str | Path,
    machine: str | Machine = "theta",
    on_invalid: jobs.OnInvalid = "drop",
    name: str | None = None,
    round: str | dict[str, str] | None = None,  # noqa: A002 - the option's name on every reader and CLI
    on_duplicate: jobs.OnDuplicate = "warn",
    compact: bool = False,
) -> pd.DataFrame:
    """Read an ALCF job CSV into the canonical job table.

    Args:
        path: the CSV file, plain or gzipped.
        machine: the machine the log comes from (``"theta"``, ``"mira"``, ``"thetagpu"``).
        on_invalid: ``"drop"`` or ``"error"``, as in :func:`hpcgym.jobs.apply_invalid_policy`.
        name: the trace name for ``attrs["name"]``.
        round: the rounding policy for fractional values (``"ceil"``, ``"nodes=ceil,run=nearest"``; see
            :mod:`hpcgym.traces._io`), counted in ``attrs["repaired"]``.
        on_duplicate: ``"warn"`` (default) or ``"error"`` for jobs whose id an earlier job has.
        compact: the canonical columns only, integers as int32 where they fit (see :mod:`hpcgym.jobs`).

    Raises:
        TraceFormatError: an empty file, a missing column, a malformed row or an unknown status, naming the line
            and field.
        InvalidJobError: with ``on_invalid="error"``, the first invalid job (see the module docstring).
    """
    mach = get(machine)
    src = CsvSource(path, REQUIRED, numeric=_NUMERIC, text=("new_status",))
    rounding = Rounding(round, path)
    submit, start, submit_flag = submit_column(src.whole("submit_time", "submit", rounding),
                                               src.value_text("submit_time"), "submit_time", path=path)
    run, run_flag = seconds(src.whole("run_time", "run", rounding), "run", "run_time", src.value_text("run_time"))
    wall, wall_flag = seconds(src.whole("wall_time", "walltime", rounding), "walltime", "wall_time",
                              src.value_text("wall_time"))
    status = src.status("new_status", STATUS.get, str(sorted(STATUS)))
    cols = {
        "job_id": src.ints("job"),
        "submit": submit,
        "run": run,
        "walltime": np.where(wall > 0, wall, run),
        "nodes": src.ints("node_num", "nodes", rounding),
        "procs": src.ints("cpu_num", "procs", rounding),
        "user": src.ints("user"),
        "group": src.ints("project"),
        "queue": np.full(src.rows, -1, np.int64),
        "status": status,
        "walltime_known": wall > 0,
        "wait": src.ints("wait_time", "wait", rounding),
    }
    return finish(cols, mach, on_invalid, path, name, start, src.line, flags=[submit_flag, run_flag, wall_flag],
                  on_duplicate=on_duplicate, compact=compact, repaired=rounding.repaired, id_field="job")
