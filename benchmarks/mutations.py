"""Mutation check: plant each bug that matters in a copy of the repository and show that the fast tests catch it.

Usage: ``python benchmarks/mutations.py [--only NAME ...] [--list] [--timeout 300]``.

Each mutation is one textual edit of one source file (the edit must match exactly once, so a mutation that no longer
applies is reported, not skipped). The script copies the repository (tracked and untracked, not ignored, files) to a
temporary folder, runs the chosen fast tests there once unchanged (they must pass: the baseline, which also fills
numba's cache), then for each mutation copies that tree, applies the edit, clears the numba cache of the edited module
and of every module that imports it (numba keys a compiled function's cache on its own file only), and runs
``pytest -x -m "not slow"`` on the mutation's tests. A mutation is *caught* when pytest fails. The table gives each
mutation's verdict, the first failing test, and the seconds until pytest stopped (compilation included).
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    """One planted bug: replace ``old`` (exactly one occurrence) by ``new`` in ``path``; ``tests`` should fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


REWARDS = ("tests/test_rewards.py",)
OBS = ("tests/test_observation_columns.py",)
PRIVACY = ("tests/test_privacy.py",)
ENGINE = ("tests/test_engine_cases.py",)

MUTATIONS = [
    Mutation("reward sign (log, baseline)", "hpcgym/rewards.py", "return sign * (value - baseline)\n",
             "return sign * (baseline - value)\n", REWARDS),
    Mutation("reward sign (objective)", "hpcgym/rewards.py", "    if baseline is None:\n        return sign * value",
             "    if baseline is None:\n        return -sign * value", REWARDS),
    Mutation("reward scale (no division by the baseline)", "hpcgym/rewards.py",
             "return sign * (value - baseline) / max(abs(baseline), _RATIO_FLOOR)", "return sign * (value - baseline)",
             REWARDS),
    Mutation("reward log floor", "hpcgym/rewards.py", "_LOG_FLOOR, _RATIO_FLOOR = 1.0, 1e-9",
             "_LOG_FLOOR, _RATIO_FLOOR = 10.0, 1e-9", REWARDS),
    Mutation("mask bound at slots - 1", "hpcgym/observation.py", "k_max = min(len(queue), slots)",
             "k_max = min(len(queue), slots - 1)", OBS),
    Mutation("time of day on the trace's clock", "hpcgym/workload.py",
             "clock0=_unix_start(self.table) + int(submit[0]))", "clock0=_unix_start(self.table))", OBS),
    Mutation("time of day offset by an hour", "hpcgym/observation.py", "((clock0 + now) % 86400)",
             "((clock0 + now + 3600) % 86400)", OBS),
    Mutation("wait feature offset", "hpcgym/observation.py", "_log_norm(now - submit[j], inv_wait)",
             "_log_norm(now - submit[j] + 1, inv_wait)", OBS),
    Mutation("wait-for-nodes offset", "hpcgym/observation.py", "delay = max(ends[m] - now, 0)",
             "delay = max(ends[m] - now + 1, 0)", OBS),
    Mutation("privacy copy key without walltime", "synth/privacy.py", 'COPY_KEY = ["nodes", "run", "walltime"]',
             'COPY_KEY = ["nodes", "run"]', PRIVACY),
    Mutation("privacy: user id -1 counted as real", "synth/privacy.py",
             "known = set(train[column].astype(str)) - {UNKNOWN_ID}", "known = set(train[column].astype(str))",
             PRIVACY),
    Mutation("EASY shadow: strict cover", "hpcgym/sim/backfill.py", "if avail >= nodes[h]:", "if avail > nodes[h]:",
             ENGINE),
    Mutation("EASY shadow: first end, not the covering one", "hpcgym/sim/backfill.py",
             "when = max(rs[m - 1] // n, t)", "when = max(rs[0] // n, t)", ENGINE),
    Mutation("EASY extra nodes dropped", "hpcgym/sim/backfill.py",
             "if mode == RLSCHEDULER or nodes[j] > sc[EXTRA]:", "if True:", ENGINE),
    Mutation("EASY extra nodes: ties at the shadow excluded", "hpcgym/sim/backfill.py",
             "while m < rn and rs[m] // n <= when:", "while m < rn and rs[m] // n < when:", ENGINE),
    Mutation("EASY extra nodes not used up", "hpcgym/sim/backfill.py", "sc[EXTRA] -= nodes[j]",
             "sc[EXTRA] -= 0", ENGINE),
    Mutation("EASY rule (a) bound <= -> <", "hpcgym/sim/backfill.py", "else t + wall[j] <= sc[SHADOW]",
             "else t + wall[j] < sc[SHADOW]", ENGINE),
    Mutation("rlscheduler rule bound < -> <=", "hpcgym/sim/backfill.py", "t + wall[j] < sc[SHADOW] if mode",
             "t + wall[j] <= sc[SHADOW] if mode", ENGINE),
    Mutation("conservative: no compression", "hpcgym/sim/conservative.py",
             "        compress(t, code, sc, q, res, pt, pu, submit, wall, nodes, key)", "        pass", ENGINE),
    Mutation("conservative: compression in priority order", "hpcgym/sim/conservative.py",
             'reserve(old[np.argsort(res[old], kind="mergesort")], True,', "reserve(old, True,", ENGINE),
]


def repository_files() -> list[str]:
    """Tracked and untracked files that git does not ignore (what a checkout of the working tree holds)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if (ROOT / f).is_file()]


def copy_tree(files: list[str], src: Path, dst: Path, caches: bool) -> None:
    """Copy ``files`` (and, with ``caches``, numba's cache files) keeping modification times (numba's cache key)."""
    for f in files:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, dst / f)
    if caches:
        for cache in src.rglob("__pycache__/*.nb[ic]"):
            target = dst / cache.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cache, target)


def _module(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def importers(tree: Path, module: str) -> set[str]:
    """``module`` and every module of ``tree``'s ``hpcgym`` package that imports it, directly or not."""
    graph: dict[str, set[str]] = {}
    for path in (tree / "hpcgym").rglob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[_module(path, tree)] = found
    hit, grew = {module}, True
    while grew:
        new = {m for m, targets in graph.items() if m not in hit and targets & hit}
        hit |= new
        grew = bool(new)
    return hit


def clear_numba_cache(tree: Path, path: str) -> int:
    """Delete the numba cache of ``path``'s module and of its importers; return the files deleted."""
    deleted = 0
    for module in importers(tree, _module(tree / path, tree)):
        source = tree / Path(*module.split("."))
        folder, stem = (source, "__init__") if source.is_dir() else (source.parent, source.name)
        for cache in (folder / "__pycache__").glob(f"{stem}.*.nb[ic]"):
            cache.unlink()
            deleted += 1
    return deleted


def run_tests(tree: Path, tests: tuple[str, ...], timeout: int) -> tuple[int, str, float]:
    """(pytest's exit code, the first failing test or error, seconds) of the fast tests ``tests`` in ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("NUMBA_CACHE_DIR", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *tests]
    started = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout} s", time.perf_counter() - started
    seconds = time.perf_counter() - started
    first = re.search(r"^(FAILED|ERROR) (\S+)", done.stdout, re.M)
    return done.returncode, first.group(2) if first else done.stdout.strip().splitlines()[-1:][0], seconds


def apply(tree: Path, mutation: Mutation) -> None:
    """Edit the copy; refuse a mutation whose text no longer occurs exactly once."""
    path = tree / mutation.path
    text = path.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise ValueError(f"mutation {mutation.name!r}: {mutation.old!r} occurs {count} times in {mutation.path}")
    path.write_text(text.replace(mutation.old, mutation.new))


def main(argv: list[str] | None = None) -> int:
    """Run the check and print the table; exit 1 if a mutation survives or takes a minute or more to be caught."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=None, help="names (substrings) of the mutations to run")
    p.add_argument("--list", action="store_true", help="list the mutations and exit")
    p.add_argument("--timeout", type=int, default=300, help="seconds per pytest run (default 300)")
    args = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only is None or any(o.lower() in m.name.lower() for o in args.only)]
    if args.list or not chosen:
        for m in MUTATIONS:
            print(f"{m.name:50s} {m.path:28s} {' '.join(m.tests)}")
        return 0 if args.list else 2
    files = repository_files()
    with tempfile.TemporaryDirectory(prefix="mutations-") as tmp:
        base = Path(tmp) / "base"
        copy_tree(files, ROOT, base, caches=True)
        subsets = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        code, first, seconds = run_tests(base, subsets, args.timeout)
        print(f"baseline (unchanged copy): exit {code} in {seconds:.0f} s ({first})", flush=True)
        if code != 0:
            print("the tests fail without a mutation: nothing to conclude", file=sys.stderr)
            return 2
        rows = []
        for m in chosen:
            tree = Path(tmp) / "mutant"
            shutil.rmtree(tree, ignore_errors=True)
            copy_tree(files, base, tree, caches=True)
            apply(tree, m)
            clear_numba_cache(tree, m.path)
            code, first, seconds = run_tests(tree, m.tests, args.timeout)
            verdict = "caught" if code not in (0, -1) else ("TIMEOUT" if code == -1 else "SURVIVED")
            rows.append((m.name, verdict, seconds, first))
            print(f"{m.name}: {verdict} in {seconds:.0f} s", flush=True)
    print("\n| mutation | verdict | seconds | first failure |\n|---|---|---|---|")
    for name, verdict, seconds, first in rows:
        print(f"| {name} | {verdict} | {seconds:.0f} | `{first}` |")
    bad = [r for r in rows if r[1] != "caught" or r[2] >= 60]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} caught in under a minute")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
