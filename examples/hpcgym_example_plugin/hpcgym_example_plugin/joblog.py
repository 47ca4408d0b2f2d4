"""A trace format: one line per finished job, and lines starting with ``#`` for comments.

``JOB id=7 user=ann submit=1709287200 start=1709287260 end=1709290800 nodes=4 limit=3600``: times in Unix seconds,
``limit`` the requested time.
"""

import pandas as pd

from hpcgym.errors import TraceFormatError
from hpcgym.traces.formats import TraceFormat

FIELDS = ("id", "user", "submit", "start", "end", "nodes", "limit")


def parse_line(path, number, text):
    """The fields of one ``JOB`` line, or a TraceFormatError naming the file, the line and the field."""
    words = text.split()
    if words[0] != "JOB":
        raise TraceFormatError(path, number, None, f"expected a line starting with JOB, not {words[0]!r}")
    fields = dict(word.split("=", 1) for word in words[1:] if "=" in word)
    missing = [f for f in FIELDS if f not in fields]
    if missing:
        raise TraceFormatError(path, number, missing[0], "missing")
    return fields


def read_joblog(path, machine):
    """The canonical columns of a job log (hpcgym validates and finishes the table)."""
    rows = []
    with open(path) as fh:
        for number, text in enumerate(fh, start=1):
            if text.strip() and not text.startswith("#"):
                rows.append({**parse_line(path, number, text), "line": number})
    table = pd.DataFrame(rows, columns=[*FIELDS, "line"])
    start, end = pd.to_numeric(table["start"]), pd.to_numeric(table["end"])
    return pd.DataFrame({"job_id": table["id"], "user": table["user"], "submit": table["submit"],
                         "run": end - start, "walltime": table["limit"], "nodes": table["nodes"],
                         "line": table["line"]})


FORMAT = TraceFormat("joblog", read_joblog, suffixes=(".joblog",), looks_like=lambda line: line.startswith(b"JOB "),
                     description="one JOB line per finished job (the example plugin)")
