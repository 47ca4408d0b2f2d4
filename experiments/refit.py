"""Refit every suite log's fits: its learned runtime model, ``tuned`` and ``tuned-learned`` (EASY).

Examples::

    python -m experiments.refit                           # every suite log with requested times, into ./
    python -m experiments.refit --traces ricc --into-package   # remake the shipped files of one log
    python -m experiments.refit --traces theta --check    # refit in a scratch folder, compare with what ships

Each log gets, in order (each the command a user would type, with its defaults):

1. ``python -m baselines.learn --trace LOG --quiet`` -> ``predictors/LOG.npz``;
2. ``python -m baselines.tune --trace LOG --backfill easy --quiet`` -> ``tuned/LOG-easy.json``;
3. ``python -m baselines.tune --trace LOG --backfill easy --predictors learned:LOG --quiet`` ->
   ``tuned/LOG-easy-learned.json`` (tuned on step 1's model, which every tool finds by the log's name).

The logs are the suite's (:mod:`experiments.suite`: their test windows queue) that have requested times (a log
without them cannot judge predictions, so no fit of its is read). Files go to ``./predictors/`` and ``./tuned/``,
which every tool reads before the shipped ones; ``--into-package`` writes the shipped folders instead
(``hpcgym/data/predictors/``, ``baselines/tuned/``). ``--check`` refits in a scratch folder and compares with the
shipped files: the model's trees and the fit's weights must be equal (the files' timings and commands may differ).
A fit is deterministic for a given version of scikit-learn, numpy and cma.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from baselines import learn, tune, tuned
from experiments import suite
from experiments.arguments import flag, parse, parser
from hpcgym import cli
from hpcgym.sim import predict

PACKAGE_MODELS = predict.BUNDLED_MODELS
PACKAGE_TUNED = tuned.BUNDLED
#: the fits made for each log, by what they are called in messages
KINDS = ("learned", "tuned", "tuned-learned")


@dataclass
class Args:
    """The refit's settings."""

    traces: list[str] = flag([], "catalogued logs (default: the suite's logs with requested times)")
    only: list[str] = flag(list(KINDS), "which fits: learned, tuned, tuned-learned")
    into_package: bool = flag(False, "write the shipped files (hpcgym/data/predictors, baselines/tuned)")
    check: bool = flag(False, "refit in a scratch folder and compare with the shipped files; writes nothing")


def suite_logs() -> list[str]:
    """The suite's logs that have requested times, in the catalog's order (rule: :func:`experiments.suite.admit`)."""
    from experiments.bench_log import BASELINE, Row, Task, run_log

    names = []
    for spec in suite.catalog():
        info = spec.info
        if info is None or not info.requested_times:
            continue
        with tempfile.TemporaryDirectory() as cache:
            result = run_log(Task(spec, (Row.parse(BASELINE),), (), draws=0, stream=False, cache=cache))
        if result.admission.status == suite.IN_SUITE:
            names.append(spec.name)
    return names


def commands(log: str, kinds: Sequence[str], models: Path, fits: Path) -> list[tuple[str, list[str]]]:
    """The ``(kind, argv)`` of each fit of ``log``, writing models to ``models`` and fits to ``fits``."""
    out = []
    if "learned" in kinds:
        out.append(("learned", ["--trace", log, "--quiet", "--out", str(models / predict.model_file(log))]))
    if "tuned" in kinds:
        out.append(("tuned", ["--trace", log, "--backfill", "easy", "--quiet", "--out",
                              str(fits / tuned.file_name(log, "easy"))]))
    if "tuned-learned" in kinds:
        out.append(("tuned-learned", ["--trace", log, "--backfill", "easy", "--predictors", f"learned:{log}",
                                      "--quiet", "--out", str(fits / tuned.file_name(log, "easy",
                                                                                    tuned.LEARNED_VARIANT))]))
    return out


@contextlib.contextmanager
def models_first(folder: Path) -> Iterator[None]:
    """Make ``learned:LOG`` read ``folder`` before the shipped models (the refit's own model, for its tuning)."""
    saved = predict.LOCAL_MODELS
    predict.LOCAL_MODELS = folder
    try:
        yield
    finally:
        predict.LOCAL_MODELS = saved


def refit(logs: Sequence[str], kinds: Sequence[str], models: Path, fits: Path, progress: bool = True) -> list[Path]:
    """Every fit of ``kinds`` for every log; returns the files written."""
    models.mkdir(parents=True, exist_ok=True)
    fits.mkdir(parents=True, exist_ok=True)
    todo = [(log, kind, argv) for log in logs for kind, argv in commands(log, kinds, models, fits)]
    written = []
    with models_first(models):
        for _, kind, argv in tqdm(todo, desc="fits", unit="fit", disable=not progress):
            (learn if kind == "learned" else tune).main(argv)
            written.append(Path(argv[argv.index("--out") + 1]))
    return written


def same_fit(made: Path, shipped: Path) -> str | None:
    """None when two fit files hold the same model or weights, else what differs."""
    if not shipped.is_file():
        return f"{shipped} is not shipped"
    if made.suffix == ".npz":
        with np.load(made) as a, np.load(shipped) as b:
            if a["model"].shape != b["model"].shape or not np.array_equal(a["model"], b["model"]):
                return f"{made.name}: the trees differ from the shipped model's"
        return None
    a, b = json.loads(made.read_text()), json.loads(shipped.read_text())
    for key in ("predictor", "weights", "tuning_bsld"):
        if a[key] != b[key]:
            return f"{made.name}: {key} {a[key]} != shipped {b[key]}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line."""
    ap = parser(Args, "python -m experiments.refit", __doc__)
    args, _ = parse(Args, ap, argv)
    unknown = sorted(set(args.only) - set(KINDS))
    if unknown:
        raise cli.UsageError(f"--only takes {', '.join(KINDS)}, not {', '.join(unknown)}")
    if args.into_package and args.check:
        raise cli.UsageError("--check writes nothing: drop --into-package")
    specs = suite.named(args.traces) if args.traces else None
    bare = [s.name for s in specs or () if s.info is not None and not s.info.requested_times]
    if bare:
        raise cli.UsageError(f"{', '.join(bare)} record no requested times: no tool reads a fit of theirs")
    logs = [s.name for s in specs] if specs else suite_logs()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            made = refit(logs, args.only, Path(tmp) / "predictors", Path(tmp) / "tuned")
            problems = [p for m in made if (p := same_fit(m, _shipped(m))) is not None]
        for p in problems:
            print(f"differs: {p}")
        print(f"{len(made) - len(problems)} of {len(made)} refits reproduce the shipped files")
        return 1 if problems else 0
    if args.into_package:
        local = [predict.LOCAL_MODELS / predict.model_file(log) for log in logs if "learned" in args.only]
        shadow = [str(p) for p in local if p.exists()]
        if shadow:
            raise cli.UsageError(f"{', '.join(shadow)} would shadow the new shipped models: remove them, or run "
                                 "from another folder")
        models, fits = PACKAGE_MODELS, PACKAGE_TUNED
    else:
        models, fits = Path(os.curdir) / predict.LOCAL_MODELS, Path(os.curdir) / tuned.LOCAL
    for path in refit(logs, args.only, models, fits):
        print(f"wrote {path}")
    return 0


def _shipped(made: Path) -> Path:
    return (PACKAGE_MODELS if made.suffix == ".npz" else PACKAGE_TUNED) / made.name


if __name__ == "__main__":
    raise SystemExit(cli.run(main))
