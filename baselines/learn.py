"""Fit the learned runtime predictor for a trace: ``python -m baselines.learn --trace theta``.

The model is fitted on the trace's train split (the test split is never read; :mod:`baselines.learned` explains
the features, the model and how the loss is chosen) and saved to ``predictors/<trace>.npz`` (``--out`` to change
it), where ``learned:<trace>`` finds it (``hpcgym.sim.predict``). The fits shipped for the bundled traces were made
by this command with its defaults and copied to ``hpcgym/data/predictors/``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from baselines import learned
from hpcgym import cli, machines, metrics, traces


def parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = cli.ArgumentParser(prog="python -m baselines.learn", description=__doc__,
                            formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--trace", default="theta", help="bundled trace name or a trace file")
    cli.add_trace_args(ap)
    ap.add_argument("--losses", nargs="+", default=list(learned.LOSSES),
                    help="candidate losses (quantile:Q or a scikit-learn loss); the one whose predictions schedule "
                         "best (SAF+EASY) in a blocked cross-validation of the train split is kept")
    ap.add_argument("--folds", type=cli.positive_int, default=5,
                    help="consecutive blocks of the train split that score the candidate losses (cross-validation)")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the validation windows and the boosting")
    ap.add_argument("--out", type=Path, default=None, help="output file (default: ./predictors/<trace>.npz)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line."""
    args = parser().parse_args(argv)
    if args.folds < 2:
        raise cli.UsageError(f"--folds must be at least 2, not {args.folds}")
    for loss in args.losses:
        learned.regressor(loss)  # an unknown loss fails before the trace is read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jobs = traces.read(args.trace, **cli.read_options(args))
    nodes = machines.get(jobs.attrs["machine"]).nodes
    name = str(jobs.attrs.get("name") or Path(args.trace).name)
    packed, info = learned.fit(traces.split(jobs, "train"), nodes, args.losses, args.folds, seed=args.seed,
                               progress=not args.quiet)
    info.trace = name
    info.command = "python -m baselines.learn " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    out = learned.save(packed, info, args.out or learned.local_path(name))
    scores = ", ".join(f"{loss} {v:.2f}" for loss, v in info.validation.items())
    print(f"{name}: loss {info.loss} ({scores}: SAF+EASY mean bsld, cross-validated), {info.rows:,} rows, "
          f"{len(packed):,} tree rows, {info.seconds:.1f} s -> {out}")
    if info.versus_chosen:
        print(choice_text(info.loss, info.versus_chosen))
    return 0


def choice_text(chosen: str, versus: dict[str, tuple[float, float, float]]) -> str:
    """Each other loss's paired ratio to the chosen one, and whether the validation windows resolve the choice.

    >>> choice_text("a", {"b": (1.2, 1.1, 1.3), "c": (1.05, 0.9, 1.2)})
    'against a on the same windows: b 1.200 (1.100-1.300) worse, c 1.050 (0.900-1.200); they do not tell a from c'
    >>> choice_text("a", {"b": (1.2, 1.1, 1.3)})
    'against a on the same windows: b 1.200 (1.100-1.300) worse; every other loss is worse'
    """
    ratios = ", ".join(f"{loss} {metrics.ratio_text(*r)}" for loss, r in versus.items())
    ties = [loss for loss, (_, low, _) in versus.items() if low <= 1]
    verdict = f"they do not tell {chosen} from {', '.join(ties)}" if ties else "every other loss is worse"
    return f"against {chosen} on the same windows: {ratios}; {verdict}"


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
