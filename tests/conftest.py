"""Shared fixtures: a toy machine and a toy trace small enough to check by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from hpcgym.machines import Machine
from hpcgym.testing import TOY, TOY_ROWS, make_jobs


@pytest.fixture
def toy_machine() -> Machine:
    return TOY


@pytest.fixture
def toy_jobs() -> pd.DataFrame:
    """16 jobs on the 4-node toy machine, with a blocking wide job and short backfill candidates."""
    return make_jobs(TOY_ROWS)
