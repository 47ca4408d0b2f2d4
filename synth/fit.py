"""Fit a synthesizer on the chronological train split of a trace and save it.

Example: ``python -m synth.fit --trace theta --model arrivals --out models/theta-arrivals``
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

import synth
from hpcgym import cli, machines, traces


def fit_model(trace: str, model: str, split: str = "train", seed: int = 0, read: dict | None = None, **params):
    """Load ``trace``, take its ``split``, fit ``model`` on it; return (model, training job table).

    ``read`` holds ``format``, ``machine`` and ``columns`` for :func:`hpcgym.traces.read`.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jobs = traces.read(trace, **(read or {}))
    part = traces.split(jobs, split)
    params.setdefault("max_nodes", machines.get(jobs.attrs["machine"]).nodes)
    return synth.get(model, **params).fit(part, seed=seed), part


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m synth.fit", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", default="theta", help="bundled trace name or file (default: theta)")
    cli.add_trace_args(ap)
    ap.add_argument("--model", default=synth.DEFAULT, choices=synth.names(),
                    help="the synthesizer (with those of installed packages: docs/extend.md; default: arrivals)")
    ap.add_argument("--split", default="train", choices=["train", "all"], help="default: train (first 70%%)")
    ap.add_argument("--epochs", type=int, default=None, help="training epochs (neural models)")
    ap.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of the fit (default: 0)")
    ap.add_argument("--out", type=Path, required=True,
                    help="directory to save the model in (its state is a pickle: share such folders only with "
                         "people who trust you, and load only folders you trust)")
    args = ap.parse_args(argv)
    params = {} if args.epochs is None else {"epochs": args.epochs}
    with tqdm(total=1, desc=f"fitting {args.model} on {args.trace} [{args.split}]") as bar:
        read = cli.read_options(args)
        model, part = fit_model(args.trace, args.model, args.split, args.seed, read, **params)
        bar.update()
    model.save(args.out)
    print(f"fitted {args.model} on {len(part)} jobs in {model.fit_seconds:.1f} s; saved to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
