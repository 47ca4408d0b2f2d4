"""Evaluate trained agents and every heuristic x backfill mode on identical held-out real windows.

Examples::

    python -m experiments.evaluate --model runs/theta-real-ppo-s0 --trace theta --windows 20 --window 1024
    python -m experiments.evaluate --agent mine=mypkg.agents:MyAgent --trace theta
    python -m experiments.evaluate --model runs/theta-real-ppo-s0 --cross-period theta-2022

``--agent`` plays any object that follows the agent protocol (:class:`experiments.runs.AgentModel`: SB3's
``predict``), next to the run folders' networks; in Python, pass ``{label: agent}`` to
:func:`experiments.evaluation.evaluate`.

Windows are drawn once (``--seed``) from the chronological *test* split (the last 30% of the trace), and every
scheduler runs on the same ones; then every scheduler schedules the whole test split as one stream (one episode;
``--no-whole-split`` skips it). The stream's cost follows the split, not the windows asked for (SDSC-SP2's is
16,210 jobs, HPC2N's 60,861): a line before it says about how long it will take, and a bar follows it. A run's
networks play it together, one environment step for all of them (``benchmarks/stream_cost.py`` measures it).
Writes ``per_window.csv`` (one row per scheduler x window), ``per_job.csv`` (one row
per scheduler x window x job) and ``stream.csv`` (one row per scheduler on the whole split) to ``--out`` (default:
``<model dir>/eval``; ``<model dir>/eval-TRACE`` for a ``--trace`` other than the run's own, so that the run's own
scores stay where ``compare`` and ``seeds`` read them), and prints the summary table: mean bounded slowdown with a
95% bootstrap interval over windows; the paired ratio to the reference (the strongest implementable row, e.g.
``tuned``) with a 95% block-bootstrap CI, on the windows (blocks of consecutive jobs as long as a window, so that
overlapping windows do not count twice) and on the whole split (blocks of 1,024 consecutive jobs); and the win rate
against the baseline, FCFS+EASY. A row *beats* the reference only where the CI's upper end is below 1 (marked
"better"). Implementable rows come first; the clairvoyant rows are upper bounds no scheduler can reach.

``--cross-period OTHER`` tests on another period instead: the months of the trace OTHER (the same machine) that the
runs' trace does not cover, e.g. agents trained on ``theta`` (Nov 2022 - Jul 2023) on ``theta-2022``'s Jan - Nov
2022, and the reverse (output: ``<model dir>/eval-cross-OTHER``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments import evaluation, runs
from experiments.runs import Agent, RunFolder
from hpcgym import cli


def __getattr__(name: str) -> Any:
    """The library's names (``evaluate_on_test``, ``summary``, ...), which lived here before :mod:`.evaluation`."""
    return getattr(evaluation, name)


def _runs_trace(run_dirs: Sequence[Path], read: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The trace the runs trained on (they must agree), with how they read it; theta without runs."""
    sources = [RunFolder(run).recipe().source for run in run_dirs]
    saved = {source.trace for source in sources}
    if len(saved) > 1:
        raise ValueError(f"the runs trained on different traces {sorted(saved)}: pick one with --trace")
    if not run_dirs:
        return "theta", read
    given = {k: v for k, v in read.items() if v is not None}
    return sources[0].trace, {**sources[0].read_kwargs(), **given}


def default_out(folders: Sequence[RunFolder], trace: str | None, cross: str | None = None) -> Path:
    """``<first run>/eval``; ``<first run>/eval-<trace>`` for another trace; ``eval-cross-<other>`` across periods.

    The run's own ``eval`` folder is what ``compare``, ``seeds`` and the study read as the run's test scores, under
    the trace its settings name: an evaluation on another trace written there would be reported under the wrong name.
    """
    if not folders:
        return Path("eval")
    own = folders[0].recipe().source.trace
    if cross is None and (trace is None or trace == own):
        return folders[0].eval
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(cross or trace).name).strip("_") or "trace"
    return folders[0].path / (f"eval-cross-{slug}" if cross else f"eval-{slug}")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = cli.ArgumentParser(prog="python -m experiments.evaluate", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, nargs="*", default=[],
                    help="training run directories (with model.zip). A model zip holds pickles: loading one runs "
                         "code, so load only runs you trust (default: none)")
    ap.add_argument("--agent", action="append", default=[], metavar="[LABEL=]MODULE:OBJECT",
                    help="an agent of your own (experiments.runs.AgentModel: SB3's predict; or an Agent, or a "
                         "function or class that returns one), imported and played like the runs' networks; "
                         "repeatable. Importing runs the module's code (default: none)")
    ap.add_argument("--trace", default=None,
                    help="real trace whose test split is used (default: the runs' own trace, else theta)")
    cli.add_trace_args(ap)
    ap.add_argument("--windows", type=cli.positive_int, default=20, help="number of test windows (default: 20)")
    ap.add_argument("--window", type=cli.positive_int, default=1024, help="jobs per window (default: 1024) "
                    "[formerly --length]")
    cli.alias(ap, "--length", "--window")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the window draw (default: 0)")
    ap.add_argument("--no-whole-split", dest="whole", action="store_false",
                    help="skip the whole test split as one stream (default: every row also schedules it)")
    ap.add_argument("--cross-period", default=None, metavar="OTHER",
                    help="test on the months of the trace OTHER (same machine) that the runs' trace does not cover, "
                         "e.g. theta-2022 for runs trained on theta (default: the trace's own test split)")
    ap.add_argument("--threads", type=cli.positive_int, default=1,
                    help="torch threads for the networks (default: 1, as experiments.train: these tiny networks run "
                         "fastest on one; two threads made the windows 3x slower on a busy 2-core machine)")
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: <first model>/eval, or "
                                                          "<first model>/eval-TRACE for a --trace other than the "
                                                          "run's own, eval-cross-OTHER with --cross-period)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.window < 2:  # the environment's own least (a window of one job has no decision)
        ap.error(f"--window must be at least 2, not {args.window}")
    folders = [RunFolder(run).check("model") for run in args.model]  # every mistake before any work
    runs.check_distinct(folders)
    out = args.out or default_out(folders, args.trace, args.cross_period)
    if args.out is None and folders:
        folders[0].check_links()  # the results go into the run's folder: nothing may follow a link out of it
    runs.check_writable(out, "the output folder")
    if folders or args.agent:
        import torch

        torch.set_num_threads(args.threads)
    agents = _agents(folders, args.agent)
    read = cli.read_options(args)
    if args.trace is None:
        args.trace, read = _runs_trace(args.model, read)
    size = {"windows": args.windows, "length": args.window, "seed": args.seed, "read": read, "whole": args.whole}
    if args.cross_period:
        done = evaluation.evaluate_cross_period(args.trace, args.cross_period, agents, **size)
    else:
        done = evaluation.evaluate(args.trace, agents, **size)
    table = evaluation.write(out, done)
    print(evaluation.format_summary(table, table.attrs["description"]))
    print(f"results: {out}")
    return 0


def _agents(folders: Sequence[RunFolder], specs: Sequence[str]) -> dict[str, Agent]:
    """The runs' networks and the ``--agent`` objects, by row label (two rows of one label are refused)."""
    own = dict(runs.load_agent(spec) for spec in specs)
    if len(own) < len(specs) or set(own) & {f.name for f in folders}:
        raise cli.UsageError("two --agent or --model rows would have the same label: name them (LABEL=MODULE:OBJECT)")
    agents: dict[str, Agent] = {}
    for folder in folders:
        agents.update(folder.agents())
    return {**agents, **own}


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
