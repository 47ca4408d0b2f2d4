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


#: A measured figure: a decimal (4.86), a percentage (59%), a ratio (800x) or a count in millions (2.5 M).
FIGURE = re.compile(r"\d\.\d|\d%|\d+x\b|\d M\b")
#: What makes a figure checkable: the command that measured it (or a marker naming the history it comes from).
COMMAND = re.compile(r"`python (-m )?[\w./]+|\(history: ")


def results_bullets(text: str) -> list[str]:
    """The bullets of the README's Results section, each as one line."""
    section = re.search(r"^## Results\n(.*?)^## ", text, flags=re.S | re.M).group(1)
    return [" ".join(b.split()) for b in re.split(r"^- ", section, flags=re.M)[1:]]


def test_every_results_figure_has_its_command_in_its_bullet():
    bullets = results_bullets(README.read_text())
    assert len(bullets) >= 6
    missing = [b[:80] for b in bullets if FIGURE.search(b) and not COMMAND.search(b)]
    assert not missing, f"Results bullets with figures and no command or history marker: {missing}"


def test_the_figure_check_can_fail():
    text = "## Results\n- **A** 4.86 with no command\n- **B** `python -m x` 5%\n- **C** (history: 2025) 3.1\n## Next\n"
    bullets = results_bullets(text)
    assert [bool(FIGURE.search(b)) and not COMMAND.search(b) for b in bullets] == [True, False, False]
