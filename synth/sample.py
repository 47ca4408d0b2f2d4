"""Sample a job trace from a saved synthesizer and write it as SWF (or CSV).

Example: ``python -m synth.sample --model models/theta-arrivals --jobs 20000 --seed 1 --out theta-synth.swf.gz``

An SWF always describes its machine: the header gets ``MaxNodes`` and ``MaxProcs``, so the file reads back with
``hpcgym.traces.read(path)`` and no ``machine=``. The machine is ``--machine``, or else the model's own: the catalog
machine with the model's node count and cores per node, or one built from them. Processor fields are written the
way that machine's logs count them (nodes for Theta, whose SWF log records nodes; cores elsewhere).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hpcgym import cli, machines
from hpcgym.io import write_table
from hpcgym.traces import write_swf
from synth.base import Synthesizer


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI."""
    ap = cli.ArgumentParser(prog="python -m synth.sample", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True, help="a directory written by synth.fit (required; it holds "
                    "a pickle: load only folders you trust)")
    ap.add_argument("--jobs", type=cli.positive_int, default=10_000, help="jobs to sample (default: 10,000)")
    ap.add_argument("--seed", type=cli.seed_arg, default=0,
                    help="seed of the sample: the same seed, the same jobs (default: 0)")
    ap.add_argument("--machine", default=None,
                    help="catalog machine for the SWF header and processor fields (default: the model's own)")
    ap.add_argument("--out", type=cli.out_file, required=True, help="output .swf[.gz] or .csv file (required)")
    args = ap.parse_args(argv)
    model = Synthesizer.load(args.model)
    try:
        mach = machines.get(args.machine) if args.machine else model.machine
    except (KeyError, ValueError) as exc:
        ap.error(str(exc))
    jobs = model.sample(args.jobs, seed=args.seed)
    too_big = int((jobs["nodes"] > mach.nodes).sum())
    if too_big:
        ap.error(f"{too_big} of {len(jobs)} sampled jobs need more than the {mach.nodes} nodes of {mach.name!r} "
                 f"(the model was fitted for {model.max_nodes} nodes); omit --machine to use the model's machine")
    if args.out.suffix == ".csv":
        write_table(jobs, args.out)
    else:
        note = f"synthetic: {len(jobs)} jobs sampled by python -m synth.sample from {model.name} with seed {args.seed}"
        write_swf(jobs, args.out, machine=mach, header={"Computer": mach.name, "Note": note})
    fixes = jobs.attrs.get("postprocess") or "none"
    print(f"sampled {len(jobs)} jobs from {model.name} -> {args.out} for {mach.name} ({mach.nodes} nodes x "
          f"{mach.cores_per_node} cores; post-processing: {fixes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
