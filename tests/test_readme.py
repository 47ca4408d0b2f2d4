"""The README: its Python examples (and those of the pages its sections moved to) run as written, its quick start is
the command CI runs, it stays a short front door, and it shows what the first command prints."""

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *(ROOT / "docs" / f"{name}.md" for name in ("traces", "environments", "synthetic", "training"))]
BLOCKS = [(page.name, code) for page in PAGES
          for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)]


@pytest.mark.parametrize("page,code", BLOCKS, ids=[f"{p}-block{i}" for i, (p, _) in enumerate(BLOCKS)])
def test_python_block_runs(page, code):
    warnings.simplefilter("ignore")
    exec(compile(code, page, "exec"), {})


def test_quick_start_test_command_is_what_ci_runs():
    bash = re.search(r"## Quick start.*?```bash\n(.*?)```", README.read_text(), flags=re.S).group(1)
    first, second = bash.strip().splitlines()
    ci = (ROOT / ".ci" / "run").read_text()
    assert second in ci
    assert first.endswith("&& python -m experiments.train --workload synthetic")  # the main job


def test_readme_is_a_short_front_door_with_the_expected_output():
    text = README.read_text()
    assert len(text.encode()) < 15_000, f"the README is {len(text.encode()):,} bytes: move detail to docs/"
    status = text.split("**Status.**", 1)[1].split("\n\n", 1)[0]
    assert text.index("**Status.**") < text.index("## Quick start") and len(status.splitlines()) == 3
    output = re.search(r"```text\n(.*?)```", text, flags=re.S).group(1)
    assert "verdict: kept the" in output and "x the reference" in output  # the first command's last line
    assert "download.pytorch.org/whl/cpu" in text  # the install note for machines without a local CPU build


def test_readme_links_resolve():
    links = re.findall(r"\]\((?!https?:)([^)#\s]+)", README.read_text())
    assert links and not [link for link in links if not (ROOT / link).exists()]
