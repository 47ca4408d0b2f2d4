"""Fill the ``--help`` blocks of ``docs/cli.md`` from the tools themselves.

Run from the repository root after changing a command line::

    python docs/gen_cli.py          # rewrite the blocks
    python docs/gen_cli.py --check  # exit 1 if a block's flags differ from the tool's

A block is ``<!-- help: MODULE [SUBCOMMAND] -->``, a fenced ``text`` block, and ``<!-- /help -->``; the text is
``python -m MODULE [SUBCOMMAND] --help`` at a width of 100 columns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "cli.md"
BLOCK = re.compile(r"<!-- help: (?P<cmd>[\w. -]+?) -->\n```text\n(?P<body>.*?)```\n<!-- /help -->", re.S)
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def help_text(cmd: str) -> str:
    """The help of ``python -m <cmd> --help`` (``cmd`` is a module, optionally followed by a subcommand)."""
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", PYTHON_COLORS="0")
    out = subprocess.run([sys.executable, "-m", *cmd.split(), "--help"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"python -m {cmd} --help failed:\n{out.stderr}")
    return out.stdout


def blocks(text: str) -> dict[str, str]:
    """Command -> the help text stored in the page."""
    return {m["cmd"]: m["body"] for m in BLOCK.finditer(text)}


def flags(text: str) -> set[str]:
    """The long options a help text mentions."""
    return set(FLAG.findall(text))


def current(cmds: list[str]) -> dict[str, str]:
    """Command -> its help now (the tools run in parallel: each one imports pandas)."""
    with ThreadPoolExecutor(8) as pool:
        return dict(zip(cmds, pool.map(help_text, cmds), strict=True))


def differences(text: str) -> list[str]:
    """One line per block whose flags differ from its tool's current ``--help``."""
    stored = blocks(text)
    out = []
    for cmd, now in current(list(stored)).items():
        missing, stale = flags(now) - flags(stored[cmd]), flags(stored[cmd]) - flags(now)
        if missing or stale:
            out.append(f"{cmd}: not in docs/cli.md {sorted(missing)}; gone from the tool {sorted(stale)}")
    return out


def regenerate(text: str) -> str:
    """The page with every block replaced by its tool's current ``--help``."""
    now = current(list(blocks(text)))

    def fill(m: re.Match) -> str:
        body = now[m["cmd"]].rstrip() + "\n"
        return f"<!-- help: {m['cmd']} -->\n```text\n{body}```\n<!-- /help -->"

    return BLOCK.sub(fill, text)


def main(argv: list[str]) -> int:
    """Rewrite the page, or with ``--check`` report the blocks that are out of date."""
    text = PAGE.read_text()
    if "--check" in argv:
        diffs = differences(text)
        sys.stderr.write("".join(f"{d}\n" for d in diffs))
        return 1 if diffs else 0
    PAGE.write_text(regenerate(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
