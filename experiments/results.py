"""The one reader of per-window results: ``per_window.csv`` as a typed table (:class:`Windows`).

Every tool that reads an evaluation (``evaluate``'s summary, ``compare``, ``seeds``, the study's report, the plots,
``noise_floor``, the tables) goes through :class:`Windows`, so the roles of its rows are spelled once:

=============  ==========================  ==========================================================
role           ``kind``                    what the row is
=============  ==========================  ==========================================================
agent          ``agent``                   a trained network (the one a run kept)
start          ``cloned``, ``untrained``   a network RL started from (:data:`STARTS`)
heuristic      ``heuristic``               an implementable, non-learned row (heuristics, ``tuned``)
upper bound    ``clairvoyant``             the clairvoyant row: reads the true runtimes, no scheduler can
=============  ==========================  ==========================================================

The *references* are the heuristic and clairvoyant rows; the *reference* of a table is its strongest implementable
row (:meth:`Windows.reference`), and FCFS+EASY is the *baseline* (:data:`experiments.runs.BASELINE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments.runs import PER_WINDOW

AGENT = "agent"
#: the networks RL starts from
STARTS = ("cloned", "untrained")
#: every network row, in the order the seed table lists them
NETWORKS = (AGENT, "cloned", "untrained")
HEURISTIC = "heuristic"
CLAIRVOYANT = "clairvoyant"
#: the non-learned rows: implementable ones and the upper bound
REFERENCES = (HEURISTIC, CLAIRVOYANT)
#: the columns every per-window table has (``wait``, ``utilization``, ``start`` and ``block`` where known)
COLUMNS = ("scheduler", "kind", "backfill", "window", "bsld")


@dataclass(frozen=True)
class Windows:
    """One row per scheduler x test window: ``scheduler, kind, backfill, window, bsld`` (and what else is known).

    Build it from a table (``Windows(df)``) or read it (:meth:`read`); ``table`` is the rows as read, in order.
    """

    table: pd.DataFrame

    def __post_init__(self) -> None:
        """Refuse a table without the columns every reader relies on."""
        missing = [c for c in COLUMNS if c not in self.table and c != "backfill"]
        if missing:
            raise ValueError(f"a per-window table needs the columns {list(COLUMNS)}; this one lacks {missing}")

    @classmethod
    def read(cls, path: str | Path) -> Windows:
        """Read ``per_window.csv``, or the one in the folder ``path`` (a run's ``eval/``)."""
        path = Path(path)
        return cls(pd.read_csv(path / PER_WINDOW if path.is_dir() else path))

    def of_kind(self, *kinds: str) -> pd.DataFrame:
        """The rows of the given kinds, in the table's order."""
        return self.table[self.table["kind"].isin(kinds)]

    @property
    def agents(self) -> pd.DataFrame:
        """The trained networks' rows."""
        return self.of_kind(AGENT)

    @property
    def starts(self) -> pd.DataFrame:
        """The rows of the networks RL started from (cloned, untrained)."""
        return self.of_kind(*STARTS)

    @property
    def heuristics(self) -> pd.DataFrame:
        """The implementable non-learned rows (heuristics, ``tuned``)."""
        return self.of_kind(HEURISTIC)

    @property
    def references(self) -> pd.DataFrame:
        """The non-learned rows: the heuristics and the clairvoyant upper bound."""
        return self.of_kind(*REFERENCES)

    def rows(self, scheduler: str) -> pd.DataFrame:
        """One scheduler's rows, in the table's order."""
        return self.table[self.table["scheduler"] == scheduler]

    def bsld(self, scheduler: str) -> pd.Series:
        """One scheduler's bsld, indexed by window (empty when the table has no such row)."""
        return self.rows(scheduler).set_index("window")["bsld"]

    def fingerprint(self, scheduler: str, digits: int = 9) -> list[float]:
        """One scheduler's bsld window by window, rounded: equal lists mean evaluations on the same windows."""
        return self.rows(scheduler).sort_values("window")["bsld"].round(digits).tolist()

    def reference(self) -> str | None:
        """The strongest implementable row: the heuristic with the lowest mean bsld (None: no heuristic row)."""
        return strongest(self.heuristics)

    def mean_by(self, keys: Sequence[str]) -> pd.DataFrame:
        """Mean bsld over the windows per group of ``keys`` (in order of appearance), with the windows counted."""
        return self.table.groupby(list(keys), sort=False).agg(bsld=("bsld", "mean"),
                                                              windows=("bsld", "size")).reset_index()


def strongest(heuristics: pd.DataFrame) -> str | None:
    """The scheduler with the lowest mean bsld among ``heuristics``' rows (None: no rows)."""
    return None if heuristics.empty else str(heuristics.groupby("scheduler")["bsld"].mean().idxmin())
