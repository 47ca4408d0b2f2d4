"""The README: its Python examples (and those of the pages its sections moved to) run as written, its quick start is
the command CI runs, it stays a short front door, and it shows what the first command prints.

``tests/data/readme_first_command.txt`` is what a run of the first command printed (2026-11-29, from a checkout
without ``runs/`` and with an empty numba cache): ``PYTHONUNBUFFERED=1 python -m experiments.train --workload
synthetic > out 2>&1``, each line as a terminal shows it (the text after its last carriage return).
"""

import re
import warnings
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FIRST_RUN = ROOT / "tests" / "data" / "readme_first_command.txt"
#: how the README's sample output marks the lines it leaves out
OMITTED = re.compile(r"^\[\.\.\. (\d+) lines? omitted\b[^\]]*\]$")
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
    output = _sample_output()
    assert "verdict: kept the" in output and "x the reference" in output  # the first command's last line
    assert "download.pytorch.org/whl/cpu" in text  # the install note for machines without a local CPU build


def test_readme_links_resolve():
    links = re.findall(r"\]\((?!https?:)([^)#\s]+)", README.read_text())
    assert links and not [link for link in links if not (ROOT / link).exists()]


def _sample_output() -> str:
    return re.search(r"```text\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S).group(1)


def differences(shown: list[str], run: list[str]) -> list[str]:
    """Where ``shown`` is not ``run`` in order with only the omissions it marks (``[... N lines omitted ...]``)."""
    at = 0
    for number, line in enumerate(shown, 1):
        marked = OMITTED.match(line)
        if marked:
            at += int(marked.group(1))
            continue
        if at >= len(run) or run[at] != line:
            return [f"line {number} of the block, {line[:80]!r}, is not line {at + 1} of the run, "
                    f"{(run[at] if at < len(run) else '(the end)')[:80]!r}"]
        at += 1
    return [] if at == len(run) else [f"the block ends at line {at} of the run's {len(run)} without saying so"]


def test_the_sample_output_is_a_real_runs_lines_with_every_omission_marked():
    run = FIRST_RUN.read_text(encoding="utf-8").splitlines()
    shown = _sample_output().splitlines()
    assert not differences(shown, run), differences(shown, run)
    assert any(OMITTED.match(line) for line in shown)
    # the comparison can fail: an unmarked omission, a miscounted one, an edited line
    for bad in (shown[:3] + shown[4:], [line.replace("8 lines", "7 lines") for line in shown],
                [line.replace("4.86", "4.85") for line in shown]):
        assert differences(bad, run)


def test_the_sample_runs_numbers_are_the_committed_results():
    """Each row's mean bsld in the sample run is the committed per-window scores' mean (results/, 2 decimals)."""
    run = FIRST_RUN.read_text(encoding="utf-8").splitlines()
    rows = {cells[1].strip(): cells[4].split("(")[0].strip() for cells in (line.split("|") for line in run)
            if len(cells) > 5 and cells[4].strip()[:1].isdigit()}
    committed = pd.read_csv(ROOT / "results" / "theta-synthetic-ppo-s0.csv").groupby("scheduler")["bsld"].mean()
    shown = {name.removesuffix(" (upper bound)"): value for name, value in rows.items()}
    common = sorted(set(shown) & set(committed.index))
    assert len(common) >= 15 and "theta-synthetic-ppo-s0" in common
    assert {name: shown[name] for name in common} == {name: f"{committed[name]:.2f}" for name in common}
    assert run[-1].startswith("verdict: ") and "1.009 (0.882-1.215) x the reference tuned+easy (4.81)" in run[-1]
