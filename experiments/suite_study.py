"""The synthetic-vs-real study on every log of the suite: ``python -m experiments.study --suite``.

Examples::

    python -m experiments.study --suite --workers 2                       # 12 logs, 4 sources, tuned + learned
    python -m experiments.study --suite --sources all --traces sdsc-sp2 hpc2n
    python -m experiments.study --suite --quick --traces theta mustang --out /tmp/s   # smoke size, about a minute
    python -m experiments.study --suite --backend ray --address auto      # on a running Ray cluster

Does a scheduler trained on *synthetic* jobs schedule *real* held-out jobs as well as one trained on the real log?
For every suite log with requested times (:mod:`experiments.suite`), each source gives a job table:

- ``real``: the log's train split (the first 70%) itself;
- each generator (``arrivals``, ``lublin``, ``gaussiancopula`` by default; ``--sources all`` adds ``ctgan``,
  ``tvae``, ``copulagan`` and ``realtabformer``): a sample of ``--sample-jobs`` jobs (at most the train split's
  length) of the model fitted on the train split, through the fit cache the other studies share.

Each *learner* is then trained on each source's table exactly as on the real train split:

- ``tuned``: the weighted priority's CMA-ES fit (:func:`baselines.tuned.fit`, ``baselines.tune``'s defaults);
- ``learned``: the learned runtime model (:func:`baselines.learned.fit`), judged as SAF on its predictions, and
  ``tuned`` fitted on it (``tuned-learned``, out-of-fold as ``baselines.tune`` does).

With the default settings the ``real`` fits are the shipped ones (a refit reproduces them:
``python -m experiments.refit --check``). Every learner is then judged by the bench (:mod:`experiments.bench`) on
the log's disjoint test windows and whole test split: each source's row against the same learner trained on
``real``, pooled over the logs, with both CIs and the real row's noise floor. The answer, per learner and source
(``answer.csv``): *as good as real* where the *this suite* CI lies inside [0.95, 1.05], *worse* where it lies above
1, *better* where below, *can't tell* otherwise.

**Fidelity against usefulness.** Each generator's sample is scored by the fidelity report (:mod:`synth.fidelity`:
the first ``--fidelity-jobs`` jobs against as many of the test split, held out) and each metric's Spearman rank
correlation with the usefulness ratio across logs x generators is given with a 95% bootstrap CI over logs
(``fidelity_vs_usefulness.csv``): positive ``rho_oriented`` means better fidelity went with more useful learners.

Outputs in ``--out``: ``fits/<log>/<source>*`` (the learners' fits, with a manifest each), ``samples/``,
``bench/`` (the bench's files), ``answer.csv``, ``per_log.csv``, ``fidelity.csv``, ``fidelity_vs_usefulness.csv``,
``timing.json`` and ``report.md``. Everything is cached: a re-run redoes only what changed, an interrupted study
resumes. ``--workers`` and ``--backend ray`` fan the fits, the bench and the fidelity scores out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from experiments import bench, suite
from experiments.arguments import flag, parse, parser
from experiments.fanout import Executor
from experiments.results import Windows
from hpcgym import cli
from hpcgym import io as hpcgym_io
from hpcgym.jobs import offered_load

FAST_SOURCES = ("real", "arrivals", "lublin", "gaussiancopula")
ALL_SOURCES = (*FAST_SOURCES, "ctgan", "tvae", "copulagan", "realtabformer")
LEARNERS = ("tuned", "learned")
#: the bench rows of each learner: (row name, spec on the study's fit files, the shipped spec for real)
ROWS = {"tuned": [("tuned", "tuned:{fits}/{log}/{source}-easy.json", "tuned")],
        "learned": [("saf-learned", "saf@learned:{fits}/{log}/{source}.npz", "saf-learned"),
                    ("tuned-learned", "tuned:{fits}/{log}/{source}-easy-learned.json", "tuned-learned")]}
#: the answer's band of equivalence
EQUIVALENT = (0.95, 1.05)
QUICK = {"sample_jobs": 4096, "evaluations": 6, "tune_windows": 2, "fidelity_jobs": 1000, "draws": 2, "boot": 200,
         "no_whole_split": True, "timesteps": 256, "seeds": [0]}
#: the residual recipe on ``tuned`` (docs/training.md); the study adds the source, its tuned fit and the seed
RESIDUAL = ["--features", "v1", "--order", "tuned", "--baseline", "tuned", "--prior", "tuned", "--clone", "",
            "--prior-temperature", "0.03", "--eval-windows", "0", "--no-whole-split", "--quiet"]
#: ``--quick``'s smoke-size training (the study's other presets leave experiments.train's defaults)
QUICK_TRAIN = ["--envs", "4", "--n-steps", "64", "--batch-size", "64", "--window", "64", "--slots", "32",
               "--val-windows", "2", "--val-window", "256", "--val-every", "256", "--clone-episodes", "4",
               "--clone-window", "256", "--clone-epochs", "5", "--checkpoint-every", "256"]
DEFAULTS = {"evaluations": 300, "tune_windows": 64}


@dataclass
class Args:
    """The suite study's settings (one flag each)."""

    traces: list[str] = flag([], "suite logs (default: every suite log with requested times)")
    sources: str = flag(",".join(FAST_SOURCES), "comma-separated sources: real and generators; 'all' adds "
                                                 "ctgan,tvae,copulagan,realtabformer")
    learners: str = flag(",".join(LEARNERS), "comma-separated learners: tuned, learned")
    out: str = flag("studies/suite", "study folder")
    cache: str = flag("", "fitted-generator cache shared with the other studies (default: synth-cache/ beside OUT)")
    sample_jobs: int = flag(50_000, "jobs each generator samples (at most the train split's length)")
    fit_seed: int = flag(0, "seed of every generator fit and sample, of CMA-ES and of the boosting")
    evaluations: int = flag(300, "CMA-ES evaluations per predictor of each tuned fit (baselines.tune's default)")
    tune_windows: int = flag(64, "windows of 1,024 jobs each tuned fit scores (baselines.tune's default)")
    fidelity_jobs: int = flag(10_000, "jobs of each sample, and of the test split, that the fidelity report scores")
    no_fidelity: bool = flag(False, "skip the fidelity scores (and the correlation)")
    draws: int = flag(20, "the bench's near-copies of each real row (the noise floor)")
    boot: int = flag(2000, "bootstrap draws of every CI")
    no_whole_split: bool = flag(False, "judge on the windows only")
    workers: int = flag(1, "tasks at once (processes, or Ray CPUs)")
    backend: str = flag("local", "local or ray")
    address: str = flag("", "with --backend ray: the cluster's address (empty: a local instance)")
    agents: bool = flag(False, "also train the residual agent on each of --agent-sources' own tuned, --seeds each "
                               "(experiments.train), and judge it against the one trained on real")
    agent_sources: str = flag("real,arrivals", "with --agents: the sources the agents train on (real first)")
    seeds: list[int] = flag([0, 1, 2], "with --agents: the agents' seeds")
    timesteps: int = flag(100_000, "with --agents: training steps per agent")
    quick: bool = flag(False, "the smoke preset (4,096-job samples, 6 CMA-ES evaluations on 2 windows, 2 near-copies, "
                              "no streams); explicit flags win")

    @property
    def source_list(self) -> list[str]:
        """The sources, ``real`` first."""
        given = [s.strip().lower() for s in self.sources.split(",") if s.strip()]
        if "all" in given:
            given = list(ALL_SOURCES)
        return ["real", *dict.fromkeys(s for s in given if s != "real")]

    @property
    def learner_list(self) -> list[str]:
        """The learners asked for."""
        return [s.strip().lower() for s in self.learners.split(",") if s.strip()]

    @property
    def folder(self) -> Path:
        """The study folder (absolute: the fits' specs name their files by it)."""
        return Path(self.out).resolve()

    @property
    def defaults(self) -> bool:
        """Whether the learners' settings are the shipped fits' (so that ``real`` reuses them)."""
        return self.evaluations == DEFAULTS["evaluations"] and self.tune_windows == DEFAULTS["tune_windows"]


# ---- stage 1: a source's table, and every learner fitted on it --------------------------------------------------
@dataclass(frozen=True)
class LearnTask:
    """Fit the learners of one log on one source (run in a worker)."""

    log: str
    source: str
    learners: tuple[str, ...]
    fits: str
    samples: str
    cache: str
    sample_jobs: int
    seed: int
    evaluations: int
    tune_windows: int
    shipped: bool  #: use the shipped fits for ``real``


def learn(task: LearnTask) -> dict[str, Any]:
    """The source's table (cached), each learner's fits (cached by a manifest); returns what it did and how long.

    A source that fails (a generator that cannot fit this log) is reported with its error, never fatal: its rows
    are skipped by the bench, which says so.
    """
    try:
        return _learn(task)
    except Exception as exc:  # noqa: BLE001 - reported in timing.json and report.md
        return {"log": task.log, "source": task.source, "error": f"{type(exc).__name__}: {exc}"}


def _learn(task: LearnTask) -> dict[str, Any]:
    from hpcgym import machines, traces

    began = time.perf_counter()
    split = suite.Split.of(suite.LogSpec(task.log, task.log))
    train = traces.split(split.jobs, "train")
    nodes = machines.get(split.jobs.attrs["machine"]).nodes
    folder = Path(task.fits) / task.log
    folder.mkdir(parents=True, exist_ok=True)
    table, sampled = _table(task, train, nodes)
    key = hashlib.sha256(repr((_table_key(table), task.evaluations, task.tune_windows, task.seed,
                               task.shipped)).encode()).hexdigest()[:16]
    manifest = folder / f"{task.source}.json"
    done = json.loads(manifest.read_text()) if manifest.is_file() else {}
    out = {"log": task.log, "source": task.source, "jobs": len(table), "sample_seconds": sampled,
           "load": float(offered_load(table, nodes)), "fits": {}}
    for learner in task.learners:
        if done.get("key") == key and learner in done.get("fits", {}):
            out["fits"][learner] = done["fits"][learner]
            continue
        started = time.perf_counter()
        _fit(learner, task, table, nodes, folder)
        out["fits"][learner] = {"seconds": time.perf_counter() - started}
    out["key"], out["seconds"] = key, time.perf_counter() - began
    hpcgym_io.write_text(manifest, json.dumps(out, indent=2) + "\n")
    return out


def _table(task: LearnTask, train: pd.DataFrame, nodes: int) -> tuple[pd.DataFrame, float]:
    """The real train split, or the generator's sample (cached as a file); and the seconds sampling took."""
    if task.source == "real":
        return train, 0.0
    path = Path(task.samples) / f"{task.log}-{task.source}-{task.seed}-{task.sample_jobs}.pkl.gz"
    if path.is_file():
        return pd.read_pickle(path), 0.0
    from synth.cache import FitCache

    started = time.perf_counter()
    model = FitCache(task.cache).fitted(task.log, task.source, train, task.seed, nodes)
    sample = model.sample(min(task.sample_jobs, len(train)), seed=task.seed)
    sample.attrs = {"name": f"{task.log}/{task.source}", "machine": train.attrs["machine"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    hpcgym_io.atomic_write(path, lambda tmp: sample.to_pickle(tmp, compression="gzip"))
    return sample, time.perf_counter() - started


def _table_key(table: pd.DataFrame) -> str:
    cols = ["submit", "run", "walltime", "nodes", "user"]
    return hashlib.sha256(pd.util.hash_pandas_object(table[cols], index=False).to_numpy().tobytes()).hexdigest()


def _fit(learner: str, task: LearnTask, table: pd.DataFrame, nodes: int, folder: Path) -> None:
    """One learner's fit files for the source (the shipped ones for ``real`` at the default settings)."""
    from baselines import learned, tuned
    from hpcgym.sim import predict

    name = f"{task.log}/{task.source}"
    if learner == "tuned":
        if task.source == "real" and task.shipped:
            shutil.copyfile(tuned.BUNDLED / tuned.file_name(task.log, "easy"), folder / "real-easy.json")
            return
        fit = tuned.fit(table, nodes, "easy", windows=task.tune_windows, evaluations=task.evaluations,
                        seed=task.seed, trace=name, progress=False)
        tuned.save(fit, folder / f"{task.source}-easy.json")
        return
    model = folder / f"{task.source}.npz"
    if task.source == "real" and task.shipped:
        shutil.copyfile(predict.model_path(task.log), model)
        shutil.copyfile(tuned.BUNDLED / tuned.file_name(task.log, "easy", tuned.LEARNED_VARIANT),
                        folder / "real-easy-learned.json")
        return
    packed, info = learned.fit(table, nodes, seed=task.seed, progress=False)
    info.trace = name
    learned.save(packed, info, model)
    held = learned.out_of_fold(table, nodes, info.loss)
    fit = tuned.fit(table, nodes, "easy", (f"learned:{model}",), task.tune_windows, evaluations=task.evaluations,
                    seed=task.seed, trace=name, progress=False, held_out=held)
    tuned.save(fit, folder / f"{task.source}-easy-learned.json")


# ---- stage 2 (--agents): the residual agent on each source's own tuned ------------------------------------------
@dataclass(frozen=True)
class AgentTask:
    """Train one residual agent (run in a worker: ``experiments.train`` in a subprocess)."""

    log: str
    source: str
    seed: int
    argv: tuple[str, ...]
    folder: str


def agent_tasks(args: Args, logs: Sequence[str]) -> list[AgentTask]:
    """One training run per log, agent source and seed, on the source's own ``tuned`` fit from stage 1."""
    tasks = []
    for log in logs:
        for source in args.agent_sources.split(","):
            fit = args.folder / "fits" / log / f"{source}-easy.json"
            workload = ["--workload", "real"] if source == "real" else ["--workload", "synthetic", "--synthesizer",
                                                                        source]
            for seed in args.seeds:
                name = f"{log}-{source}-s{seed}"
                argv = ("--trace", log, *workload, "--tuned", str(fit), "--seed", str(seed), "--timesteps",
                        str(args.timesteps), "--runs-dir", str(args.folder / "runs"), "--run-name", name, *RESIDUAL,
                        *(QUICK_TRAIN if args.quick else ()))
                tasks.append(AgentTask(log, source, seed, argv, str(args.folder / "runs" / name)))
    return tasks


def train_agent(task: AgentTask) -> dict[str, Any]:
    """Train the run unless its kept network exists (a run stopped midway resumes from its last checkpoint)."""
    import subprocess

    folder = Path(task.folder)
    if (folder / "model.zip").is_file():
        return {"log": task.log, "source": task.source, "seed": task.seed, "seconds": 0.0, "cached": True}
    resume = ["--resume"] if (folder / "args.json").is_file() else []
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "experiments.train", *task.argv, *resume], capture_output=True,
                          text=True)
    out = {"log": task.log, "source": task.source, "seed": task.seed, "seconds": time.perf_counter() - started}
    if done.returncode != 0:
        out["error"] = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
    return out


def agent_models(tasks: Sequence[AgentTask]) -> list[str]:
    """The bench's ``--model`` specs: one row per source and seed, each run judged on the log it trained on."""
    return [f"residual/{t.source}/s{t.seed}={t.folder}" for t in tasks if (Path(t.folder) / "model.zip").is_file()]


def answer_agents(per_window: pd.DataFrame, sources: Sequence[str], seeds: Sequence[int], n_boot: int = 2000,
                  seed: int = 0, floor: float = float("nan")) -> pd.DataFrame:
    """Per agent source: the pooled ratio of its agents to the real agents, window by window.

    Each window's score is the mean over the seeds (both sides), so the ratio compares the recipes, not single
    seeds; ``median_seed`` and ``worst_seed`` give the seeds' own pooled ratios (seed k against real seed k).
    ``floor`` is the noise floor shown beside it: the real ``tuned``'s (the agents start from it).
    """
    from experiments import pooled

    agents = per_window[per_window["kind"] == "agent"]
    rows = []
    for source in [s for s in sources if s != "real"]:
        mine, real, per_seed = [], [], {k: ([], []) for k in seeds}
        for _, g in agents.groupby("log", sort=False):
            table = g.pivot_table(index="window", columns="scheduler", values="bsld")
            names = {k: (f"residual/{source}/s{k}", f"residual/real/s{k}") for k in seeds}
            if not all(a in table and b in table for a, b in names.values()):
                continue
            mine.append(table[[a for a, _ in names.values()]].mean(axis=1).to_numpy())
            real.append(table[[b for _, b in names.values()]].mean(axis=1).to_numpy())
            for k, (a, b) in names.items():
                per_seed[k][0].append(table[a].to_numpy())
                per_seed[k][1].append(table[b].to_numpy())
        if not mine:
            continue
        p = pooled.pool(mine, real, n_boot, seed=seed)
        ratios = [pooled.pool(a, b, 200, seed=seed).ratio for a, b in per_seed.values()]
        rows.append({"learner": "residual agent", "source": source, "seeds": len(seeds), "ratio": p.ratio,
                     "lo": p.lo, "hi": p.hi, "lo_logs": p.lo_logs, "hi_logs": p.hi_logs, "noise_floor": floor,
                     "logs": p.logs,
                     "windows": p.windows, "median_seed": float(np.median(ratios)),
                     "worst_seed": float(max(ratios)), "answer": verdict(p.ratio, p.lo, p.hi)})
    return pd.DataFrame(rows)


# ---- stage 3: the bench --------------------------------------------------------------------------------------------
def rows(args: Args) -> tuple[list[str], list[str]]:
    """The bench's rows (``learner/source=spec+easy``) and references (each learner's ``real`` row)."""
    fits = args.folder / "fits"
    out, refs = [], []
    for learner in args.learner_list:
        for row, spec, _ in ROWS[learner]:
            refs.append(f"{row}/real")
            out += [f"{row}/{source}={spec.format(fits=fits, log='{log}', source=source)}+easy"
                    for source in args.source_list]
    return out, refs


def judge(args: Args, logs: Sequence[str], models: Sequence[str] = ()) -> pd.DataFrame:
    """The bench on the study's logs (and the trained agents); returns its pooled table."""
    schedulers, references = rows(args)
    settings = bench.Args(schedulers=schedulers, reference=references, traces=list(logs), model=list(models),
                          out=str(args.folder / "bench"), draws=args.draws, boot=args.boot, seed=args.fit_seed,
                          workers=args.workers, backend=args.backend, address=args.address,
                          no_whole_split=args.no_whole_split)
    return bench.run(settings, "python -m experiments.study --suite (its bench stage)")


def answer(pooled_table: pd.DataFrame) -> pd.DataFrame:
    """Per learner and generator: the pooled ratio to the same learner on ``real``, both CIs, the floor, the answer."""
    mine = pooled_table[pooled_table["scheduler"].str.contains("/") & pooled_table["reference"].str.endswith("/real")]
    mine = mine[mine["scheduler"].str.split("/").str[0] == mine["reference"].str.split("/").str[0]]
    mine = mine[~mine["scheduler"].str.endswith("/real")].copy()
    mine.insert(0, "learner", mine["scheduler"].str.split("/").str[0])
    mine.insert(1, "source", mine["scheduler"].str.split("/").str[1])
    mine["answer"] = [verdict(r.ratio, r.lo, r.hi, floor=r.noise_floor) for r in mine.itertuples()]
    mine["stream_answer"] = [verdict(r.stream_ratio, r.stream_lo, r.stream_hi, floor=r.stream_noise_floor)
                             for r in mine.itertuples()]
    keep = ["learner", "source", "ratio", "lo", "hi", "lo_logs", "hi_logs", "noise_floor", "logs", "windows", "wins",
            "ties", "losses", "answer", "stream_ratio", "stream_lo", "stream_hi", "stream_noise_floor",
            "stream_answer", "verdict"]
    return mine[keep].reset_index(drop=True)


def verdict(ratio: float, lo: float, hi: float, band: tuple[float, float] = EQUIVALENT,
            floor: float = float("nan")) -> str:
    """The answer for a pooled ratio of *trained on synthetic* to *trained on real* (lower is better).

    A "worse" or "better" whose ratio lies inside the real row's noise floor ``floor`` says so.

    >>> verdict(1.01, 0.97, 1.04), verdict(1.1, 1.06, 1.2), verdict(1.0, 0.9, 1.1), verdict(0.9, 0.85, 0.94)
    ('as good as real', 'worse', "can't tell", 'better')
    >>> verdict(1.06, 1.01, 1.11, floor=0.08)
    'worse, inside the ±8.0% noise floor'
    """
    from experiments import pooled

    if np.isnan(ratio):
        return "-"
    if band[0] <= lo and hi <= band[1]:
        return "as good as real"
    found = "worse" if lo > 1 else "better" if hi < 1 else "can't tell"
    if found != "can't tell" and pooled.inside(ratio, floor):
        found += f", inside the ±{floor:.1%} noise floor"
    return found


# ---- stage 4: fidelity, and whether it predicts usefulness -------------------------------------------------------
@dataclass(frozen=True)
class FidelityTask:
    """Score every generator's sample of one log against its test split (run in a worker)."""

    log: str
    samples: tuple[tuple[str, str], ...]  #: (source, sample file)
    jobs: int
    seed: int
    out: str


def score_fidelity(task: FidelityTask) -> str:
    """Write one log's fidelity values (``source, metric, section, better, value, floor``); return the file."""
    from experiments.training.study import fidelity_tables
    from hpcgym import traces
    from hpcgym.traces.split import head, tail

    out = Path(task.out)
    if out.is_file():
        return str(out)
    split = suite.Split.of(suite.LogSpec(task.log, task.log))
    train = tail(traces.split(split.jobs, "train"), task.jobs)
    test = head(split.test, task.jobs)
    samples = {source: head(pd.read_pickle(path), task.jobs) for source, path in task.samples}
    found = fidelity_tables(train, test, samples, task.seed)
    frames = [t.assign(source=s, log=task.log) for s, t in found.items() if isinstance(t, pd.DataFrame)]
    errors = {s: t.strip().splitlines()[-1] for s, t in found.items() if isinstance(t, str)}
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["metric", "source", "log"])
    if errors:  # a generator whose sample could not be scored: said, never fatal
        hpcgym_io.write_text(out.with_suffix(".errors.json"), json.dumps(errors, indent=2) + "\n")
    hpcgym_io.write_table(table, out)
    return str(out)


def fidelity_vs_usefulness(fidelity: pd.DataFrame, per_log: pd.DataFrame, n_boot: int = 2000,
                           seed: int = 0) -> pd.DataFrame:
    """Per learner and metric: Spearman's rho, across logs x generators, of the metric with the usefulness ratio.

    Usefulness is the log's ratio of the learner trained on the generator to the learner trained on ``real`` (lower
    is better). ``rho_oriented`` is signed so that a positive value means better fidelity went with a lower (better)
    ratio; its 95% CI resamples the logs (all of a log's generators together).
    """
    useful = per_log[per_log["scheduler"].str.contains("/") & per_log["reference"].str.endswith("/real")].copy()
    useful = useful[useful["scheduler"].str.split("/").str[0] == useful["reference"].str.split("/").str[0]]
    useful["learner"] = useful["scheduler"].str.split("/").str[0]
    useful["source"] = useful["scheduler"].str.split("/").str[1]
    rows = []
    for learner, u in useful[useful["source"] != "real"].groupby("learner", sort=False):
        for metric, f in fidelity.groupby("metric", sort=False):
            both = u.merge(f[["log", "source", "value", "better"]], on=["log", "source"]).dropna(subset=["value"])
            sign = {"lower": 1.0, "higher": -1.0}.get(str(f["better"].iat[0]))
            if sign is None or len(both) < 4 or both["value"].nunique() < 2:
                continue
            rho, lo, hi = _spearman_by_logs(both, n_boot, seed)
            rows.append({"learner": learner, "metric": metric, "section": f["section"].iat[0], "pairs": len(both),
                         "logs": both["log"].nunique(), "rho_oriented": sign * rho,
                         "lo": min(sign * lo, sign * hi), "hi": max(sign * lo, sign * hi)})
    table = pd.DataFrame(rows, columns=["learner", "metric", "section", "pairs", "logs", "rho_oriented", "lo", "hi"])
    return table.sort_values(["learner", "rho_oriented"], ascending=[True, False]).reset_index(drop=True)


def _spearman_by_logs(both: pd.DataFrame, n_boot: int, seed: int) -> tuple[float, float, float]:
    """Spearman's rho of ``value`` with ``ratio``, and its 95% CI by resampling the logs (their rows together)."""
    from scipy.stats import rankdata

    def rho(x: np.ndarray, y: np.ndarray) -> float:
        rx, ry = rankdata(x), rankdata(y)
        if rx.std() == 0 or ry.std() == 0:
            return float("nan")
        return float(np.corrcoef(rx, ry)[0, 1])

    value, ratio = both["value"].to_numpy(np.float64), both["ratio"].to_numpy(np.float64)
    groups = [np.flatnonzero(both["log"].to_numpy() == log) for log in both["log"].unique()]
    rng = np.random.default_rng(seed)
    draws = []
    for pick in rng.integers(0, len(groups), size=(n_boot, len(groups))):
        idx = np.concatenate([groups[i] for i in pick])
        draws.append(rho(value[idx], ratio[idx]))
    lo, hi = np.nanquantile(draws, (0.025, 0.975)) if np.isfinite(draws).any() else (np.nan, np.nan)
    return rho(value, ratio), float(lo), float(hi)


# ---- the driver ----------------------------------------------------------------------------------------------------
def study_logs(args: Args) -> list[str]:
    """The logs: those named, else the suite's logs with requested times (:func:`experiments.refit.suite_logs`).

    Raises:
        cli.UsageError: a named log has no requested times (no learner can be judged on it).
    """
    if not args.traces:
        from experiments.refit import suite_logs

        return suite_logs()
    specs = suite.named(args.traces)
    bare = [s.name for s in specs if s.info is not None and not s.info.requested_times]
    if bare:
        raise cli.UsageError(f"{', '.join(bare)} record no requested times: the learners cannot be judged there")
    return [s.name for s in specs]


def _stage(name: str, fn: Any, tasks: list, args: Args, say: Any) -> list:
    """``fn`` over ``tasks`` on the executor, with a progress bar (and its time estimate); the results in order."""
    started = time.perf_counter()
    with tqdm(total=len(tasks), desc=name, unit="task") as bar, \
            Executor(fn, args.backend, args.workers, args.address) as ex:
        results = ex.map(tasks, lambda i, r: bar.update())
    say(f"{name}: {len(tasks)} tasks in {time.perf_counter() - started:,.0f} s")
    return results


def run(args: Args, command: str = "python -m experiments.study --suite") -> dict[str, Any]:
    """Every stage (module docstring); returns the timing; ``command`` is recorded in ``study.json``."""
    started = time.perf_counter()
    folder = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    timing: dict[str, Any] = {}
    lines: list[str] = []

    def say(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    logs = study_logs(args)
    say(f"study on {len(logs)} logs ({', '.join(logs)}); sources {', '.join(args.source_list)}; learners "
        f"{', '.join(args.learner_list)}")
    cache = Path(args.cache).resolve() if args.cache else folder.parent / "synth-cache"
    tasks = [LearnTask(log, source, tuple(args.learner_list), str(folder / "fits"), str(folder / "samples"),
                       str(cache), args.sample_jobs, args.fit_seed, args.evaluations, args.tune_windows,
                       args.defaults) for log in logs for source in args.source_list]
    began = time.perf_counter()
    learned = _stage("fits", learn, tasks, args, say)
    timing["fits"] = time.perf_counter() - began
    models: list[str] = []
    if args.agents:
        began = time.perf_counter()
        trained = agent_tasks(args, logs)
        timing["per_agent"] = _stage("agents", train_agent, trained, args, say)
        timing["agents"] = time.perf_counter() - began
        models = agent_models(trained)
    began = time.perf_counter()
    pooled_table = judge(args, logs, models)
    timing["bench"] = time.perf_counter() - began
    say(f"bench: {timing['bench']:,.0f} s")
    table = answer(pooled_table)
    if args.agents:
        real_tuned = pooled_table[(pooled_table["scheduler"] == "tuned/real")
                                  & (pooled_table["reference"] == "tuned/real")]["noise_floor"]
        agents = answer_agents(Windows.read(folder / "bench").table, args.agent_sources.split(","),
                               args.seeds, args.boot, args.fit_seed,
                               float(real_tuned.iat[0]) if len(real_tuned) else float("nan"))
        hpcgym_io.write_table(agents, folder / "answer_agents.csv")
        table = pd.concat([table, agents], ignore_index=True)
    per_log = pd.read_csv(folder / "bench" / "per_log.csv")
    hpcgym_io.write_table(table, folder / "answer.csv")
    hpcgym_io.write_table(per_log[per_log["reference"].str.endswith("/real")], folder / "per_log.csv")
    if not args.no_fidelity and len(args.source_list) > 1:
        began = time.perf_counter()
        fid_tasks = [FidelityTask(log, tuple((s, str(folder / "samples" / f"{log}-{s}-{args.fit_seed}-"
                                                                          f"{args.sample_jobs}.pkl.gz"))
                                             for s in args.source_list if s != "real"),
                                  args.fidelity_jobs, args.fit_seed, str(folder / "fidelity" / f"{log}.csv"))
                     for log in logs]
        files = _stage("fidelity", score_fidelity, fid_tasks, args, say)
        fidelity = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
        hpcgym_io.write_table(fidelity, folder / "fidelity.csv")
        correlation = fidelity_vs_usefulness(fidelity, per_log, args.boot, args.fit_seed)
        hpcgym_io.write_table(correlation, folder / "fidelity_vs_usefulness.csv")
        timing["fidelity"] = time.perf_counter() - began
    timing["per_fit"] = learned
    loads = pd.DataFrame([{k: r[k] for k in ("log", "source", "jobs", "load")} for r in learned if "error" not in r])
    hpcgym_io.write_table(loads, folder / "loads.csv")
    failed = [f"{r['log']}/{r['source']}: {r['error']}" for r in learned if "error" in r]
    for line in failed:
        say(f"failed: {line}")
    hpcgym_io.write_text(folder / "timing.json", json.dumps(timing, indent=2, default=float) + "\n")
    wall = time.perf_counter() - started
    about = {"command": command, "date": time.strftime("%Y-%m-%d"), "logs": len(logs), "seconds": round(wall),
             "wall": f"{wall / 60:,.0f} min with {args.workers} workers ({args.backend})"}
    hpcgym_io.write_text(folder / "study.json", json.dumps(about, indent=2) + "\n")
    hpcgym_io.write_text(folder / "report.md", report(table, logs, args, timing, failed, loads))
    say(summary(table))
    return timing


def summary(table: pd.DataFrame) -> str:
    """One line per learner and generator: the pooled ratio to real and the answer."""
    def floor(value: float) -> str:
        return "no noise floor" if pd.isna(value) else f"noise floor ±{value:.1%}"

    return "\n".join(f"{r.learner} trained on {r.source}: {r.ratio:.3f} ({r.lo:.3f}-{r.hi:.3f}) x trained on real, "
                     f"{r.logs} logs, {floor(r.noise_floor)}: {r.answer}" for r in table.itertuples())


def report(table: pd.DataFrame, logs: Sequence[str], args: Args, timing: dict[str, Any],
           failed: Sequence[str] = (), loads: pd.DataFrame | None = None) -> str:
    """``report.md``: the answer table, the logs, the settings, the time, the samples' loads, what failed."""
    from experiments.tables import markdown

    shown = table.reindex(columns=["learner", "source", "ratio", "lo", "hi", "lo_logs", "hi_logs", "noise_floor",
                                   "logs", "windows", "answer", "stream_ratio", "stream_answer"])
    return "\n\n".join([
        "# Synthetic or real training data, on the suite",
        f"{len(logs)} logs: {', '.join(logs)}. Sources: {', '.join(args.source_list)}; learners: "
        f"{', '.join(args.learner_list)}. Ratio: the learner trained on the source over the same learner trained on "
        "real, pooled (geometric mean over logs) on the disjoint test windows; lo-hi: 95% CI with windows "
        "resampled within logs, lo_logs-hi_logs: logs resampled too; the noise floor is the real row's. Answer: as "
        "good as real where the CI lies inside [0.95, 1.05], worse above 1, better below, can't tell otherwise.",
        markdown(shown, digits=3),
        *(["Offered load of each source's table over the real train split's (median over logs, range): "
           + load_text(loads)] if loads is not None and not loads.empty else []),
        f"Time: fits {timing.get('fits', 0):,.0f} s, bench {timing.get('bench', 0):,.0f} s, fidelity "
        f"{timing.get('fidelity', 0):,.0f} s ({args.workers} workers, backend {args.backend}).",
        *(["Failed (their rows are skipped):\n" + "\n".join(f"- {f}" for f in failed)] if failed else [])]) + "\n"


def load_text(loads: pd.DataFrame) -> str:
    """Each source's offered load relative to the real train split's: the median over logs and the range.

    >>> load_text(pd.DataFrame({"log": ["a", "a", "b", "b"], "source": ["real", "x"] * 2, "load": [1, 1.1, 2, 1.6]}))
    'x 0.95 (0.80-1.10)'
    """
    real = loads[loads["source"] == "real"].set_index("log")["load"]
    parts = []
    for source, g in loads[loads["source"] != "real"].groupby("source", sort=False):
        ratio = g.set_index("log")["load"] / real
        parts.append(f"{source} {ratio.median():.2f} ({ratio.min():.2f}-{ratio.max():.2f})")
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``python -m experiments.study --suite ...`` lands here without ``--suite``)."""
    ap = parser(Args, "python -m experiments.study --suite", __doc__)
    args, given = parse(Args, ap, argv)
    if args.quick:
        args = dataclasses.replace(args, **{k: v for k, v in QUICK.items() if k not in given})
    unknown = [s for s in args.source_list if s not in ALL_SOURCES]
    if unknown:
        raise cli.UsageError(f"--sources: unknown {unknown}; choose from {', '.join(ALL_SOURCES)} (or all)")
    bad = [learner for learner in args.learner_list if learner not in LEARNERS] or \
        ([] if args.learner_list else ["(none)"])
    if bad:
        raise cli.UsageError(f"--learners: unknown {bad}; choose from {', '.join(LEARNERS)}")
    if args.backend not in ("local", "ray") or args.workers < 1 or args.sample_jobs < 1024:
        raise cli.UsageError("--backend local|ray, --workers >= 1 and --sample-jobs >= 1024, please")
    started = time.perf_counter()
    given = sys.argv[1:] if argv is None else list(argv)
    run(args, "python -m experiments.study --suite " + shlex.join(a for a in given if a != "--suite"))
    print(f"study done in {time.perf_counter() - started:,.0f} s: {args.folder}")
    return 0


# ---- the notebook's suite view -------------------------------------------------------------------------------------
#: the small suite study the notebook makes when there is none (a fresh clone): two small logs, one generator
SMALL = ["--quick", "--traces", "theta", "mustang", "--sources", "real,lublin", "--no-fidelity"]


def find(root: Path | None = None, env: dict[str, str] | None = None) -> tuple[Path, str]:
    """The suite study to draw, and how it was chosen (``experiments/notebooks/compare_slowdown.ipynb``).

    ``HPCGYM_SUITE_STUDY`` if set; else ``studies/suite`` under the repository root when it holds an ``answer.csv``;
    else a small study (:data:`SMALL`) made now in ``studies/suite-small``, so that the notebook runs from a fresh
    clone.
    """
    import os

    from experiments.figures import repo_root

    env = dict(os.environ) if env is None else env
    if env.get("HPCGYM_SUITE_STUDY"):
        folder = Path(env["HPCGYM_SUITE_STUDY"]).expanduser().resolve()
        if not (folder / "answer.csv").is_file():
            raise FileNotFoundError(f"HPCGYM_SUITE_STUDY={folder} holds no answer.csv: point it at a folder that "
                                    "python -m experiments.study --suite wrote")
        return folder, "the environment variable HPCGYM_SUITE_STUDY"
    base = (root or repo_root() or Path.cwd()) / "studies"
    if (base / "suite" / "answer.csv").is_file():
        return base / "suite", f"{base / 'suite'}"
    out = base / "suite-small"
    if not (out / "answer.csv").is_file():
        main([*SMALL, "--out", str(out)])
    return out, f"no suite study under {base}: a small one made now (python -m experiments.study --suite " \
                f"{' '.join(SMALL)})"


def slowdown_tails(folder: Path, log: str, learner: str = "tuned") -> dict[str, np.ndarray]:
    """Per source: the per-job bounded slowdowns of ``learner`` trained on it, on every disjoint test window of ``log``.

    The rows are re-simulated from the study's fit files (the bench keeps per-window means only); FCFS+EASY is
    added as the baseline.
    """
    from baselines.grid import window_records
    from hpcgym.sim import heuristics

    split = suite.Split.of(suite.LogSpec(log, log))
    windows = split.windows()
    spec = dict((row, spec) for row, spec, _ in ROWS["tuned"] + ROWS["learned"])[learner]
    sources = sorted({p.name.split("-")[0].split(".")[0] for p in (folder / "fits" / log).glob("*.json")},
                     key=lambda s: (s != "real", s))
    out = {}
    for source in ["fcfs", *sources]:
        text = "fcfs" if source == "fcfs" else spec.format(fits=folder / "fits", log=log, source=source)
        policy = heuristics.resolve(text, log, "easy")
        out[source if source != "fcfs" else "fcfs+easy (baseline)"] = np.concatenate(
            [window_records(w, split.machine, policy, "easy")["bsld"] for w in windows])
    return out
