"""Shared fixtures: a toy machine and a toy trace small enough to check by hand."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from hpcgym.machines import Machine
from hpcgym.testing import TOY, TOY_ROWS, make_jobs


@pytest.fixture(autouse=True, scope="session")
def _sb3_logger_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep SB3's logger folders in pytest's temporary tree.

    A model that learns without ``tensorboard_log`` makes a ``SB3-<date>`` folder in the system's temporary
    directory unless ``SB3_LOGDIR`` names one; the suite's models would leave a dozen behind on every run.
    """
    os.environ.setdefault("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))


@pytest.fixture
def toy_machine() -> Machine:
    return TOY


@pytest.fixture
def toy_jobs() -> pd.DataFrame:
    """16 jobs on the 4-node toy machine, with a blocking wide job and short backfill candidates."""
    return make_jobs(TOY_ROWS)
