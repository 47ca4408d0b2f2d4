"""The README's Python examples run as written, and its quick start is the command CI runs."""

import re
import warnings
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code):
    warnings.simplefilter("ignore")
    exec(compile(code, "README.md", "exec"), {})


def test_quick_start_test_command_is_what_ci_runs():
    bash = re.search(r"## Quick start.*?```bash\n(.*?)```", README.read_text(), flags=re.S).group(1)
    first, second = bash.strip().splitlines()
    ci = (README.parent / ".ci" / "run").read_text()
    assert second in ci
    assert first.endswith("&& python -m experiments.train --workload synthetic")  # the main job
