"""Tune the ``tuned`` priority for a trace: ``python -m baselines.tune --trace theta --backfill easy``.

The weights are searched with CMA-ES on fixed windows of the trace's train split (the test split is never read;
:mod:`baselines.tuned` explains the score and the search). The fit goes to ``tuned/<trace>-<backfill>.json``
(``--out`` to change it), where ``baselines.run``, ``experiments.evaluate`` and ``experiments.train`` find it for
that trace. The fits shipped for the bundled traces were made by this command with its defaults.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from baselines import learned, tuned
from hpcgym import cli, machines, traces
from hpcgym.sim import predict

BACKFILLS = ("easy", "none", "conservative")


def parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = cli.ArgumentParser(prog="python -m baselines.tune", description=__doc__,
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--trace", default="theta", help="bundled trace name or a trace file")
    cli.add_trace_args(ap)
    ap.add_argument("--backfill", nargs="+", default=["easy", "none"], choices=BACKFILLS,
                    help="the backfilling to tune for (one fit each)")
    ap.add_argument("--predictors", nargs="+", default=["last2", "median5"],
                    help="runtime predictors to try; the better on the tuning windows is kept")
    ap.add_argument("--windows", type=cli.positive_int, default=64, help="tuning windows (of the train split)")
    ap.add_argument("--window", type=cli.positive_int, default=1024, help="jobs per tuning window [formerly --length]")
    cli.alias(ap, "--length", "--window")
    ap.add_argument("--evaluations", type=cli.positive_int, default=300, help="CMA-ES evaluations per predictor")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the windows and of CMA-ES")
    ap.add_argument("--out", type=Path, default=None,
                    help="output file (one backfill mode) or folder (default: ./tuned/<trace>-<backfill>.json)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def _held_out(names: Sequence[str], train, nodes: int):
    """For a learned predictor among ``names``: its out-of-fold models on the train split (same loss), else None."""
    found = [n for n in names if n.lower().startswith(predict.LEARNED_NAME)]
    if not found:
        return None
    if len(found) > 1:
        raise cli.UsageError(f"tune one learned model at a time, not {found}")
    loss = learned.about(predict.get(found[0]).source)["loss"]
    return learned.out_of_fold(train, nodes, loss)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line."""
    ap = parser()
    args = ap.parse_args(argv)
    if args.out is not None and args.out.suffix == ".json" and len(args.backfill) > 1:
        ap.error("--out FILE.json takes one --backfill mode; give a folder for several")
    for name in args.predictors:
        predict.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jobs = traces.read(args.trace, **cli.read_options(args))
    nodes = machines.get(jobs.attrs["machine"]).nodes
    train = traces.split(jobs, "train")
    if args.window > len(train):  # tuned.fit would cut every window to the whole split (baselines.run refuses too)
        raise cli.UsageError(f"--window {args.window} is longer than the train split of {args.trace} "
                             f"({len(train)} jobs): lower it")
    command = "python -m baselines.tune " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    name = str(jobs.attrs.get("name") or Path(args.trace).name)
    held_out = _held_out(args.predictors, train, nodes)
    for backfill in args.backfill:
        result = tuned.fit(train, nodes, backfill, args.predictors, args.windows, args.window, args.evaluations,
                           args.seed, trace=name, progress=not args.quiet, held_out=held_out)
        result.command = command
        if args.out is not None and args.out.suffix == ".json":
            out = args.out
        else:
            out = (args.out or tuned.LOCAL) / tuned.file_name(name, backfill)
        tuned.save(result, out)
        gain = result.tuning_bsld / result.start_bsld - 1
        print(f"{name} {backfill}: predictor {result.predictor}, tuning bsld {result.tuning_bsld:.3f} "
              f"(SAF on the same predictions {result.start_bsld:.3f}, {gain:+.1%}); weights "
              + ", ".join(f"{k} {v:.3g}" for k, v in result.weights.items()) + f" -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
