"""The synthetic-vs-real study as one command: does an agent trained on synthetic jobs schedule real ones well?

Examples::

    python -m experiments.study --trace theta --backfill easy --seeds 0 1 2 --out studies/theta
    python -m experiments.study --quick --seeds 0 1 --out /tmp/study --workers 2  # smoke preset, about 2 minutes
    python -m experiments.study --sources real,arrivals,tvae --workers 2
    python -m experiments.study --backend ray --address auto                       # on a running Ray cluster
    python -m experiments.study --seeds 0 1 2 3 4 -- --envs 8 --val-windows 8      # flags for every training run

``--suite`` asks the same question on every log of the benchmark suite at once, with ``tuned`` and the learned
runtime predictor as the learners (``python -m experiments.study --suite --help``; :mod:`experiments.suite_study`).

Sources (``--sources``, default all nine): ``real`` trains on the real training part; the generators
``arrivals``, ``lublin``, ``gaussiancopula``, ``ctgan``, ``tvae``, ``copulagan`` and ``realtabformer`` train on
samples of that model fitted on the training part; ``mixed`` trains on real windows and samples of
``--mixed-with`` alternately (``experiments.train --workload mixed``). Any other synthesizer's name
(``synth.register``, or the ``hpcgym.synthesizers`` entry points) is a source too. The training part is the
train split (first 70% of the trace) minus its validation tail, exactly as in ``experiments.train``.

Stages (one progress line per item with its wall time, and a total per stage):

1. fit: every generator once, on the training part, cached under ``--cache`` by a hash of the table, the model's
   name, its settings and the fit seed, so the seeds and other studies share it.
2. train: one ``experiments.train`` run per source x seed, in ``<out>/runs/<source>-s<seed>/`` (its settings,
   checkpoints, ``learning_curve.csv``). A synthetic run samples ``--sample-pool`` jobs once, with its seed, and
   trains on windows of them: sampling a window per episode made a realtabformer run take hours. A source whose
   windows need no decision (every job starts on arrival: :class:`hpcgym.errors.NoDecisionError`) is recorded
   as untrainable, with the load of the windows it drew, and is no failure: it has no agent and no score, the
   others go on.
3. evaluate: each run's agent, untrained and cloned networks, and every heuristic with and without backfilling,
   on the same test windows of the real trace (``experiments.evaluate``, window seed 0; ``<run>/eval/``).
4. fidelity: the fidelity report of ``synth.fidelity`` for each generator (a sample of ``--fidelity-jobs`` jobs
   against the held-out test split). A failure here is reported, and loses no training result.
5. report: ``study.csv`` (one row per source x seed x test window: the agent's bsld, wait and utilization, with
   FCFS+EASY, the untrained and the cloned network on the same window), ``heuristics.csv``, ``sources.csv``,
   ``starts.csv`` (per run: the network RL started from and the one it kept, on validation and on test),
   ``fidelity.csv``, ``fidelity_vs_usefulness.csv``, ``timing.json``, ``report.md`` and ``figures/``.

Resumable: fits in the cache, trained and evaluated runs and fidelity scores are skipped (a line says so); a run
killed in the middle continues from its last checkpoint (``experiments.train --resume``). A run folder whose
settings differ from the study's, or that sampled another fit of its generator than the cache holds now (a new
revision, a refit), is refused (``--overwrite`` redoes it).

Fit settings. Default: the synthesizers' own CPU defaults: gaussiancopula has no epochs; ctgan and copulagan 100
epochs of batch 500; tvae 300 epochs of batch 500; realtabformer a 2-layer GPT-2 (n_embd 128, 4 heads), 10 epochs
of batch 32. On Theta's train split (16k jobs), two fits at a time on 2 CPU cores (one torch thread each),
they took 163 s (ctgan), 201 s (copulagan), 218 s (tvae), 249 s (realtabformer), 3.5 s (gaussiancopula) and under
a second (arrivals, lublin) on 2026-11-24: all within the target of 10 minutes on 2 CPU cores. See docs/study.md.
``--full``: SDV's own 300 epochs for ctgan and copulagan, and REaLTabFormer's 6-layer GPT-2 (n_embd 768, 12 heads)
for 100 epochs: hours on a CPU, meant for a GPU (``--device cuda``). ``--fit-params MODEL=JSON`` overrides any
model's settings. ``--quick``: fits on the last 1,000 training jobs, 1 epoch; pools of 2,048 jobs; 256 training
steps of 4 windows of 64 jobs (32 slots), 2 validation windows of 256 jobs, 4 cloning episodes of 256 jobs (20
epochs); 2 test windows of 256 jobs and no whole-split stream (``--no-whole-split``); fidelity on 1,000 jobs. Flags
given explicitly win over the preset.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from experiments import arguments
from experiments.study_tables import StudyFolder
from experiments.training.study import GENERATORS, QUICK, SOURCES, STAGES, Args, Study, fit_params, synth_names
from hpcgym import cli

__all__ = ["GENERATORS", "QUICK", "SOURCES", "STAGES", "Args", "Study", "find_study", "main", "parse_args"]
#: the study ``experiments/notebooks/study_slowdown.ipynb`` makes when it finds none (:func:`find_study`): the quick
#: preset on three sources that fit in seconds, one seed, no fidelity stage (19 s on 2 busy cores, 2026-11-29)
SMALL_STUDY = ("--quick", "--sources", "real,arrivals,lublin", "--seeds", "0", "--no-fidelity")


def parse_args(argv: Sequence[str] | None = None) -> Args:
    """The command line as :class:`Args`, with the ``--quick`` preset under the flags given explicitly."""
    ap = arguments.parser(Args, "python -m experiments.study", __doc__)
    args, given = arguments.parse(Args, ap, argv)
    if args.quick:
        args = dataclasses.replace(args, **{k: v for k, v in QUICK.items() if k not in given})
    unknown = [s for s in args.source_list if s not in SOURCES and s not in synth_names()]
    if unknown or not args.source_list:
        ap.error(f"--sources: unknown {unknown}; choose from {','.join(SOURCES)}, or another synthesizer's name "
                 "(synth.register, or the hpcgym.synthesizers entry points)")
    fit_params(args)  # fails early on a bad --fit-params
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study; exit 1 when a fit, run or fidelity score failed (the rest is still reported).

    ``--suite`` runs the study on every suite log instead (:mod:`experiments.suite_study`, its own flags).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--suite" in argv:
        from experiments import suite_study

        return suite_study.main([a for a in argv if a != "--suite"])
    args = parse_args(argv)
    started = time.time()
    study = Study(args)
    report = study.run()
    print(f"study done in {time.time() - started:,.0f} s: {report}")
    if study.failures:
        print("failures:\n" + "\n".join(f"  {f}" for f in study.failures), file=sys.stderr)
        return 1
    return 0


def find_study(root: Path | None = None, env: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """The study folder to draw, and how it was chosen (``experiments/notebooks/study_slowdown.ipynb``).

    ``HPCGYM_STUDY`` if set; else the newest ``studies/*/study.csv`` under the repository root (found from the
    current directory); else a small study (:data:`SMALL_STUDY`) made now in ``studies/small``, so that the
    notebook runs from a fresh clone.
    """
    from experiments.figures import repo_root

    env = os.environ if env is None else env
    if env.get("HPCGYM_STUDY"):
        folder = Path(env["HPCGYM_STUDY"]).expanduser().resolve()
        if not StudyFolder(folder).table("study").is_file():
            raise FileNotFoundError(f"HPCGYM_STUDY={env['HPCGYM_STUDY']} holds no study.csv: point it at a folder "
                                    "that python -m experiments.study wrote")
        return folder, "the environment variable HPCGYM_STUDY"
    base = (root or repo_root() or Path.cwd()) / "studies"
    found = sorted(base.glob("*/study.csv"), key=lambda p: p.stat().st_mtime)
    if found:
        return found[-1].parent, f"the newest of {len(found)} studies under {base}"
    out = base / "small"
    if main([*SMALL_STUDY, "--out", str(out)]) != 0:
        raise RuntimeError(f"the small study in {out} failed: see its errors/ folder")
    return out, f"no study under {base}: a small one made now (python -m experiments.study {' '.join(SMALL_STUDY)})"


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
