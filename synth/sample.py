"""Sample a job trace from a saved synthesizer and write it as SWF (or CSV).

Example: ``python -m synth.sample --model models/theta-arrivals --jobs 20000 --seed 1 --out theta-synth.swf.gz``
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hpcgym.traces import write_swf
from synth.base import Synthesizer


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = argparse.ArgumentParser(prog="python -m synth.sample", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a directory written by synth.fit")
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs to sample (default: 10,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--machine", default=None, help="machine for the SWF header (default: none)")
    ap.add_argument("--out", type=Path, required=True, help="output .swf[.gz] or .csv file")
    args = ap.parse_args(argv)
    model = Synthesizer.load(args.model)
    jobs = model.sample(args.jobs, seed=args.seed)
    if args.out.suffix == ".csv":
        tmp = args.out.with_suffix(".csv.tmp")
        jobs.to_csv(tmp, index=False)
        tmp.replace(args.out)
    else:
        write_swf(jobs, args.out, machine=args.machine)
    fixes = jobs.attrs.get("postprocess") or "none"
    print(f"sampled {len(jobs)} jobs from {model.name} -> {args.out} (post-processing: {fixes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
