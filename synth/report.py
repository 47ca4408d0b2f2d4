"""The fidelity report's command line: fit or load a synthetic trace, score it, write ``report.md`` and plots.

Command line::

    python -m synth.report --real theta --synthetic <trace file | saved model dir | model name> --out report/

``--real`` is a bundled trace name or a trace file; it is split chronologically: the **test split** (last 30%) is
the reference, the **train split** the noise floor and the source of the bootstrap baseline (and what a model named
by ``--synthetic`` is fitted on). ``--synthetic`` is a trace file (SWF/CSV), a directory written by
:meth:`synth.base.Synthesizer.save`, or a name from :func:`synth.names`. By default as many synthetic jobs as the
test split holds are compared. A model is sampled ``--samples`` times (default 3, seeds ``--seed``, ``--seed + 1``,
...): the summary and the targets are the mean over the samples, with their range (:func:`synth.fidelity.pool`),
because one sample is too noisy to judge a generator by; a trace file is one sample. The metrics are computed by
:mod:`synth.fidelity` and drawn by :mod:`synth.report_writer`; this module only wires them to the command line.
Files are written atomically.

Both sides must describe one machine: the replays and the validity checks run on ``--real``'s. A saved model
fitted for another machine size (its manifest's ``max_nodes``) is refused with one ``error:`` line, since every
section would then measure the machines' difference, not the model's; a trace file is read as ``--real``'s
machine, and the reader warns when its header names another.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hpcgym import cli, machines
from hpcgym import traces as tracelib
from hpcgym.traces.split import head
from synth import fidelity, report_writer

#: samples of a model the report scores unless told (a figure a claim rests on is the mean of three or more)
DEFAULT_SAMPLES = 3


def load_real(spec: str, jobs: int | None = None, **read: Any) -> pd.DataFrame:
    """The real trace: a trace file if ``spec`` is an existing path, else a bundled trace name.

    Args:
        spec: path or bundled name.
        jobs: keep only the first ``jobs`` jobs (chronological), if given.
        **read: ``format``, ``machine``, ``columns`` for :func:`hpcgym.traces.read`.

    Returns:
        The canonical job table (with ``attrs["machine"]``).
    """
    real = tracelib.read(spec, **read) if Path(spec).exists() else tracelib.load(spec)
    return real if jobs is None else head(real, jobs)


def load_synthetic(spec: str, train: pd.DataFrame, n: int, seed: int = 0,
                   samples: int = 1) -> tuple[list[pd.DataFrame], str]:
    """The synthetic job tables from a trace file, a saved model directory or a model name.

    A trace file is read for the real machine and cut to its first ``n`` jobs when longer (one sample); a saved
    model (:meth:`synth.base.Synthesizer.load`) samples ``n`` jobs ``samples`` times, with seeds ``seed``,
    ``seed + 1``, ...; a name from :func:`synth.names` is fitted on ``train`` (with ``seed``) first.

    Args:
        spec: the ``--synthetic`` argument.
        train: the real train split (its machine is used, and name models are fitted on it).
        n: jobs per sample (and the cap for files).
        seed: seed of fitting and of the first sample.
        samples: samples to draw from a model (a trace file is one sample).

    Returns:
        ``(tables, description)``.

    Raises:
        ValueError: ``spec`` is none of the three, or ``samples`` is above 1 for a trace file.
    """
    import synth
    from synth.base import MANIFEST, Synthesizer

    path = Path(spec)
    if path.is_dir():
        try:
            path = synth.resolve(path)
        except KeyError:
            raise ValueError(f"--synthetic {spec}: a directory without {MANIFEST} is not a saved model") from None
        model = Synthesizer.load(path)
        check_machine(model, train.attrs["machine"], spec)
        return _draw(model, n, seed, samples), f"saved model `{path}` ({model.name}), {_drawn(n, seed, samples)}"
    if path.exists():
        if samples > 1:
            raise ValueError(f"--samples {samples}: the trace file {spec} is one sample (--samples applies to "
                             "models); leave --samples out, or pass a model")
        table = tracelib.read(path, machine=train.attrs["machine"])
        total = len(table)
        table = head(table, n)
        kept = f" (the first {n:,} of {total:,} jobs)" if total > n else ""
        return [table], f"trace file `{path}`{kept}"
    try:
        cls = synth.resolve(spec)
    except KeyError:
        raise ValueError(f"--synthetic {spec!r} is not a trace file, a saved model directory or a model name "
                         f"({', '.join(synth.names())})") from None
    # the real machine's size, not the train split's largest job (issue 11: lublin's size model needs it)
    model = cls(max_nodes=machines.get(train.attrs["machine"]).nodes).fit(train, seed=seed)
    return _draw(model, n, seed, samples), f"model `{spec}` fitted on the train split, {_drawn(n, seed, samples)}"


def _draw(model: Any, n: int, seed: int, samples: int) -> list[pd.DataFrame]:
    return [model.sample(n, seed + k) for k in range(samples)]


def _drawn(n: int, seed: int, samples: int) -> str:
    if samples == 1:
        return f"{n:,} jobs sampled with seed {seed}"
    return f"{samples} samples of {n:,} jobs (seeds {seed}-{seed + samples - 1})"


def check_machine(model: Any, real: Any, spec: str) -> None:
    """Refuse a saved model fitted for a machine of another size than the real trace's.

    Args:
        model: a loaded :class:`synth.base.Synthesizer`.
        real: the real trace's machine (a catalog name or :class:`~hpcgym.machines.Machine`).
        spec: the ``--synthetic`` argument, for the message.

    Raises:
        ValueError: the sizes differ.
    """
    real = machines.get(real)
    if model.max_nodes is not None and int(model.max_nodes) != real.nodes:
        raise ValueError(f"--synthetic {spec}: the model was fitted for a {int(model.max_nodes):,}-node machine, and "
                         f"--real's machine {real.name} has {real.nodes:,} nodes; compare it with a trace of its own "
                         "machine, or fit a model on --real's trace (python -m synth.fit --trace <that trace>)")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        The namespace.
    """
    p = cli.ArgumentParser(prog="python -m synth.report", description=__doc__.split("\n")[0])
    p.add_argument("--real", required=True, help="bundled trace name (e.g. theta) or a trace file (read with "
                                                 "--format/--machine/--columns)")
    cli.add_trace_args(p)
    p.add_argument("--synthetic", required=True,
                   help="trace file (SWF/CSV), saved model directory, or model name (synth.names()); a saved model "
                        "must have been fitted for --real's machine (the same node count)")
    p.add_argument("--out", required=True, help="output directory for report.md and the PNGs")
    p.add_argument("--jobs", type=int, default=None, help="use only the first N jobs of the real trace")
    p.add_argument("--n-synthetic", type=int, default=None,
                   help="synthetic jobs to sample (and the cap for trace files); default: the test split's size")
    p.add_argument("--seed", type=cli.seed_arg, default=0, help="seed of fitting, sampling and every subsample")
    p.add_argument("--samples", type=int, default=None,
                   help="samples of a model to score (seeds SEED, SEED+1, ...); the summary and the targets are their "
                        f"mean (default {DEFAULT_SAMPLES} for a model, 1 for a trace file, which is one sample)")
    args = p.parse_args(argv)
    if args.jobs is not None and args.jobs < 20:
        p.error("--jobs must be at least 20")
    if args.samples is not None and args.samples < 1:
        p.error("--samples must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; print the path of ``report.md``.

    Args:
        argv: arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    args = parse_args(argv)
    try:
        real = load_real(args.real, args.jobs, **cli.read_options(args))
    except (KeyError, OSError, ValueError) as exc:
        raise ValueError(f"--real {args.real!r}: {exc}") from None
    machines.get(real.attrs["machine"])  # fail early on a trace without a machine
    train = tracelib.split(real, "train")
    n = args.n_synthetic or len(tracelib.split(real, "test"))
    is_file = Path(args.synthetic).is_file()
    samples = args.samples or (1 if is_file else DEFAULT_SAMPLES)
    try:
        synthetic, source = load_synthetic(args.synthetic, train, n, args.seed, samples)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    results = fidelity.evaluate(real, synthetic, seed=args.seed, progress=True, source=source)
    results["report"] = report_writer.write_report(results, args.out)
    print(results["report"])  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
