"""The synthetic-vs-real study's stages (``python -m experiments.study`` parses its flags into :class:`Args`).

fit (every generator once, cached), train (one run per source x seed: a list of recipes on the executor, which
skips or resumes what the run folders hold already: :func:`experiments.training.many.run_state`), evaluate,
fidelity, report (``experiments.study_report``). The presets (``--quick``, ``--full``) are here too.
"""

from __future__ import annotations

import dataclasses
import json
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from experiments import arguments, runs
from experiments.arguments import TRACE_FLAGS, TraceArgs, check, flag
from experiments.fanout import Executor
from experiments.protocol import Data, run_data
from experiments.recipe import Recipe, flag_of
from experiments.study_tables import StudyFolder
from experiments.training import flags, loop, many
from hpcgym import cli
from hpcgym import io as hpcgym_io
from hpcgym.jobs import offered_load
from hpcgym.traces.split import head, tail
from synth.cache import FitCache

SOURCES = ("real", "arrivals", "lublin", "gaussiancopula", "ctgan", "tvae", "copulagan", "realtabformer", "mixed")
GENERATORS = tuple(s for s in SOURCES if s not in ("real", "mixed"))
#: models that train with torch and take a device
SDV_TORCH = ("ctgan", "tvae", "copulagan")
#: ``--full``: settings for a GPU
FULL_FIT = {"ctgan": {"epochs": 300}, "copulagan": {"epochs": 300}, "tvae": {"epochs": 300},
            "realtabformer": {"gpt2": {"n_layer": 6, "n_embd": 768, "n_head": 12}, "epochs": 100}}
#: ``--quick``: the smoke preset
QUICK_FIT = {"ctgan": {"epochs": 1}, "copulagan": {"epochs": 1}, "tvae": {"epochs": 1},
             "realtabformer": {"epochs": 1, "gen_batch": 128}}
QUICK = {"sample_pool": 2048, "timesteps": 256, "eval_windows": 2, "eval_length": 256, "fit_rows": 1000,
         "fidelity_jobs": 1000}
QUICK_TRAIN = {"envs": 4, "n_steps": 64, "batch_size": 64, "window": 64, "slots": 32, "val_windows": 2,
               "val_length": 256, "val_every": 256, "clone_episodes": 4, "clone_window": 256, "clone_epochs": 20,
               "checkpoint_every": 256, "no_whole_split": True}
STAGES = ("fit", "train", "evaluate", "fidelity", "report")



@dataclass
class Args(TraceArgs):
    """Every knob of the study (each one is a command-line flag; ``--`` passes the rest to every training run)."""

    trace: str = flag("theta", "real trace (bundled name or file): its train split feeds the fits and the real "
                               "agents, its test split the evaluation")
    backfill: str = flag("easy", "none | easy: the backfilling the agents train and play with (heuristics run with "
                                 "both)", choices=("none", "easy"))
    seeds: list[int] = flag([0, 1, 2], "training seeds (one run per source and seed)")
    sources: str = flag(",".join(SOURCES), "comma-separated training sources (or other synthesizers' names)")
    out: str = flag("", "study folder; empty: studies/<trace>")
    cache: str = flag("", "fitted-synthesizer cache shared across studies; empty: synth-cache/ next to the study "
                          "folder")
    mixed_with: str = flag("arrivals", "the generator of the 'mixed' source", choices=GENERATORS)
    sample_pool: int = flag(50_000, "jobs each synthetic run samples once (with its seed) and trains on windows of "
                                    "(experiments.train --sample-pool); 0: a new sample every episode")
    timesteps: int = flag(100_000, "training steps per run", at_least=0)
    eval_windows: int = flag(20, "test windows every agent and heuristic plays", at_least=1)
    eval_length: int = flag(1024, "jobs per test window", flag="--eval-window", aliases=("--eval-length",))
    fit_rows: int = flag(0, "fit the generators on the last N jobs of the training part (0: all)")
    fit_seed: int = flag(0, "seed of every fit (one fit serves all training seeds)")
    fit_params: list[str] = flag([], "MODEL=JSON settings over a model's defaults, e.g. 'ctgan={\"epochs\": 300}'")
    full: bool = flag(False, "full-quality fits (ctgan/copulagan 300 epochs, a 6-layer REaLTabFormer for 100 "
                             "epochs): for a GPU")
    device: str = flag("cpu", "cpu | cuda | auto: where the SDV neural models and REaLTabFormer fit (agents always "
                              "train on the CPU)", choices=("cpu", "cuda", "auto"))
    fidelity_jobs: int = flag(0, "jobs sampled per generator for its fidelity report, scored against the test "
                                 "split's first as many jobs (0: the whole test split)")
    no_fidelity: bool = flag(False, "skip the fidelity stage")
    threads: int = flag(1, "torch threads per process (fits and training)")
    jobs: int = flag(1, "fits and runs at once (processes, or Ray CPUs)", flag="--workers", aliases=("--jobs",),
                     at_least=1)
    backend: str = flag("local", "local | ray", choices=("local", "ray"))
    address: str = flag("", "with --backend ray: the cluster address (e.g. auto); empty: a local Ray instance of "
                            "--workers CPUs")
    quick: bool = flag(False, "the smoke preset (see above); explicit flags win")
    overwrite: bool = flag(False, "redo runs whose settings (or generator fit) differ from the study's")
    train_flags: list[str] = flag([], "after --: flags for every experiments.train run", remainder=True)

    def __post_init__(self) -> None:
        check(self)
        if not self.seeds:
            raise cli.UsageError("--seeds: give at least one seed")

    @property
    def source_list(self) -> list[str]:
        """The sources, in the canonical order, then other synthesizers (registered or installed) as given."""
        given = list(dict.fromkeys(s.strip().lower() for s in self.sources.split(",") if s.strip()))
        return [s for s in SOURCES if s in given] + [s for s in given if s not in SOURCES]

    @property
    def out_dir(self) -> Path:
        """The study folder (absolute)."""
        return Path(self.out or Path("studies") / self.trace_label).resolve()

    @property
    def cache_dir(self) -> Path:
        """The fit cache (absolute)."""
        return Path(self.cache).resolve() if self.cache else self.out_dir.parent / "synth-cache"

    @property
    def generators(self) -> list[str]:
        """The generators to fit: the synthetic sources, and ``mixed_with`` for ``mixed``."""
        need = [s for s in self.source_list if s not in ("real", "mixed")]
        if "mixed" in self.source_list and self.mixed_with not in need:
            need.append(self.mixed_with)
        return need


def synth_names() -> list[str]:
    """Every synthesizer's name (:func:`synth.names`: the built-in ones, then the registered and installed ones)."""
    import synth

    return synth.names()


# ---- settings --------------------------------------------------------------------------------------------------
def fit_params(args: Args) -> dict[str, dict[str, Any]]:
    """Each generator's settings over its class defaults: the preset, then ``--fit-params``, then the device."""
    out: dict[str, dict[str, Any]] = {g: {} for g in (*GENERATORS, *args.generators)}
    for preset, on in ((FULL_FIT, args.full), (QUICK_FIT, args.quick)):
        if on:
            for g, p in preset.items():
                out[g].update(p)
    for item in args.fit_params:
        name, sep, text = item.partition("=")
        if not sep or name.strip() not in out:
            raise cli.UsageError(f"--fit-params {item!r}: expected MODEL=JSON with MODEL in {tuple(out)}")
        try:
            extra = json.loads(text)
        except json.JSONDecodeError as exc:
            raise cli.UsageError(f"--fit-params {item!r}: {exc}") from None
        out[name.strip()].update(extra)
    for g in SDV_TORCH:
        out[g].setdefault("enable_gpu", args.device != "cpu")
    out["realtabformer"].setdefault("device", args.device)
    return out


def train_base(args: Args) -> Recipe:
    """The ``experiments.train`` recipe every run shares: its defaults, the ``--quick`` preset, the ``--`` flags."""
    ap = arguments.parser(flags.Args, "python -m experiments.train", None)
    base, given = arguments.parse(flags.Args, ap, args.train_flags)
    preset = {k: v for k, v in QUICK_TRAIN.items() if k not in given} if args.quick else {}
    return base.recipe.replace(**preset)


def quick_fit(args: Args, base: Recipe, data: Data, say: Any) -> tuple[Args, Recipe]:
    """The smoke preset's windows, shortened to a small trace's parts (a Mustang week's validation part: 69 jobs).

    Only ``--quick`` adapts; a full study refuses windows longer than their part
    (``experiments.training.loop.check_inputs``).
    """
    caps = {"val_length": data.shortest_validation, "window": len(data.fit), "clone_window": len(data.fit)}
    changes = {k: cap for k, cap in caps.items() if base.get(k) > cap}
    for key, cap in changes.items():
        say("quick", f"{flag_of(key)} {base.get(key)} -> {cap}: the trace's part has {cap} jobs")
    if args.eval_length > data.test_jobs:
        say("quick", f"--eval-window {args.eval_length} -> {data.test_jobs}: the test split has {data.test_jobs} jobs")
        args = dataclasses.replace(args, eval_length=data.test_jobs)
    return args, base.replace(**changes)


def train_args(args: Args, source: str, seed: int, base: Recipe | None = None) -> Recipe:
    """The recipe of one run: :func:`train_base` (``base``) with the study's own settings, checked."""
    workload = {"real": "real", "mixed": "mixed"}.get(source, "synthetic")
    synthesizer = {"mixed": args.mixed_with, "real": "arrivals"}.get(source, source)
    mine = {"trace": args.trace, "backfill": args.backfill, "workload": workload, "synthesizer": synthesizer,
            "seed": seed, "timesteps": args.timesteps, "eval_windows": args.eval_windows,
            "eval_length": args.eval_length, "runs_dir": str(StudyFolder(args.out_dir).runs),
            "run_name": runs.run_name(source, seed), "threads": args.threads, "quiet": True}
    mine |= {key: getattr(args, key) for key in TRACE_FLAGS if getattr(args, key)}
    if workload != "real":
        mine["sample_pool"] = args.sample_pool
    recipe = (base or train_base(args)).replace(**mine)
    flags.check_args(flags.Args(recipe))
    return recipe


def fit_table(data: Data, rows: int) -> pd.DataFrame:
    """The table the generators learn: the training part, or its last ``rows`` jobs."""
    return tail(data.fit, rows)


# ---- tasks (run in worker processes, Ray tasks, or in this process) -------------------------------------------
@dataclass
class FitTask:
    """Fit one generator and save it to ``where`` (atomically: a temporary folder, then a rename)."""

    model: str
    params: dict[str, Any]
    where: str
    recipe: Recipe  #: the trace and its training part (a run's source and selection)
    rows: int
    seed: int
    threads: int


@dataclass
class FidelityTask:
    """Score generators' samples with the fidelity report; one JSON per generator."""

    items: list[tuple[str, str, str]]  # (source, fitted model folder, output JSON)
    recipe: Recipe  #: the trace and its training part (a run's source and selection)
    rows: int
    jobs: int
    threads: int
    log: str  # the stage's log file


def _set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def do_fit(task: FitTask) -> dict[str, Any]:
    """Fit and save one generator; return its fit seconds."""
    import synth

    where = Path(task.where)
    with many.log_to(where.parent / f"{where.name}.log"):
        _set_threads(task.threads)
        data = run_data(task.recipe.source, task.recipe.selection)
        model = synth.get(task.model, max_nodes=data.machine.nodes, **task.params)
        model.fit(fit_table(data, task.rows), seed=task.seed)
        FitCache(where.parent).save(model, where)  # atomic; another study's save of the same fit is kept
    return {"seconds": model.fit_seconds}


def fidelity_tables(train_table: pd.DataFrame, test: pd.DataFrame, samples: dict[str, pd.DataFrame],
                    seed: int = 0) -> dict[str, pd.DataFrame | str]:
    """Each sample's fidelity table (``metric, section, better, floor, bootstrap, value``), or the error it raised.

    The references (:func:`synth.fidelity.prepare`) are computed once; each sample is scored against them
    (:func:`synth.fidelity.score`, :func:`synth.fidelity.make_table`).
    """
    from synth import fidelity

    try:
        refs = fidelity.prepare(train_table, test, seed=seed)
    except Exception:  # noqa: BLE001 - reported, never fatal
        return {name: traceback.format_exc(limit=3) for name in samples}
    out: dict[str, pd.DataFrame | str] = {}
    for name, sample in samples.items():
        try:
            table = fidelity.make_table(refs, {"value": fidelity.score(refs, sample)})
            out[name] = table[["metric", "section", "better", "floor", "bootstrap", "value"]]
        except Exception:  # noqa: BLE001 - reported, never fatal
            out[name] = traceback.format_exc(limit=3)
    return out


def do_fidelity(task: FidelityTask) -> dict[str, Any]:
    """Sample each generator and score the samples; write one JSON per generator (its table, or its error)."""
    from hpcgym import traces
    from synth.base import Synthesizer

    started = time.perf_counter()
    with many.log_to(Path(task.log)):
        _set_threads(task.threads)
        source = task.recipe.source
        data = run_data(source, task.recipe.selection)
        test = traces.split(traces.read(source.trace, **source.read_kwargs()), "test")
        if task.jobs and task.jobs < len(test):
            test = head(test, task.jobs)
        samples, failed = {}, {}
        for source, folder, _ in task.items:
            try:
                samples[source] = Synthesizer.load(folder).sample(len(test), seed=0)
            except Exception:  # noqa: BLE001 - reported, never fatal
                failed[source] = "sampling failed: " + traceback.format_exc(limit=3)
        tables = {**fidelity_tables(fit_table(data, task.rows), test, samples), **failed}
    seconds = (time.perf_counter() - started) / max(len(task.items), 1)
    for source, _, path in task.items:
        result = tables.get(source, "not computed")
        body = {"source": source, "seconds": seconds, "test_jobs": len(test)}
        if isinstance(result, str):
            body["error"] = result
        else:
            body["table"] = json.loads(result.to_json(orient="records"))
        hpcgym_io.write_text(Path(path), json.dumps(body, indent=1))
    return {"seconds": seconds * len(task.items), "errors": sum(isinstance(t, str) for t in tables.values())}


def run_task(task: FitTask | many.RunTask | FidelityTask) -> dict[str, Any]:
    """Any task, with its error caught and returned as text (one failure does not stop the study)."""
    fn: Callable[[Any], dict[str, Any]] = {FitTask: do_fit, many.RunTask: many.do_run,
                                           FidelityTask: do_fidelity}[type(task)]
    try:
        return fn(task)
    except Exception:  # noqa: BLE001 - reported with the others at the end
        return {"error": traceback.format_exc(limit=6)}


# ---- the study -------------------------------------------------------------------------------------------------
class Study:
    """One study folder: plans each stage from what is on disk, runs what is missing, and writes the report."""

    def __init__(self, args: Args):
        self.args, self.out, self.folder = args, args.out_dir, StudyFolder(args.out_dir)
        self.timing: dict[str, dict[str, Any]] = {}
        self.failures: list[str] = []
        shared = train_base(args)
        real = train_args(args, "real", args.seeds[0], shared)
        self.data = run_data(real.source, real.selection)
        if args.quick:
            args, shared = quick_fit(args, shared, self.data, self.say)
            self.args = args
        self.base = train_args(args, "real", args.seeds[0], shared)
        # before any fit: a window longer than its part is a usage error
        loop.check_inputs(self.base, self.data)
        self.params = fit_params(args)
        self.fits: dict[str, Path] = {}
        self.runs = {(s, seed): train_args(args, s, seed, shared) for s in args.source_list for seed in args.seeds}

    def say(self, stage: str, text: str) -> None:
        """One progress line."""
        print(f"[{stage}] {text}", flush=True)

    def _stage(self, stage: str, tasks: list[Any], labels: list[str], skipped: int,
               on_ok: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        started = time.perf_counter()
        self.say(stage, f"{len(tasks)} to do, {skipped} done earlier (skipped)"
                        + (f", {min(self.args.jobs, len(tasks))} at a time" if tasks else ""))

        def done(i: int, result: dict[str, Any]) -> None:
            if "error" in result:
                self.failures.append(f"{stage} {labels[i]}: {result['error'].strip().splitlines()[-1]}")
                self.say(stage, f"{labels[i]} FAILED after {time.perf_counter() - started:,.1f} s (see the report)")
                hpcgym_io.write_text(self.folder.error(stage, labels[i]), result["error"])
                return
            self.say(stage, f"{labels[i]}: {result['seconds']:,.1f} s")
            if on_ok:
                on_ok(i, result)

        if tasks:
            self.executor.map(tasks, done)
        wall = time.perf_counter() - started
        self.timing[stage] = {"wall_s": wall, "done": len(tasks), "skipped": skipped}
        self.say(stage, f"stage done in {wall:,.1f} s")

    def fit_stage(self) -> None:
        """Fit the generators the cache lacks."""
        table = fit_table(self.data, self.args.fit_rows)
        cache = FitCache(self.args.cache_dir)
        tasks, labels = [], []
        for g in self.args.generators:
            where = cache.folder(self.base.source.trace_label, g, table, self.params[g], self.args.fit_seed)
            self.fits[g] = where
            if cache.holds(where):
                self.say("fit", f"{g}: in the cache ({where.name}), skipped")
                continue
            tasks.append(FitTask(g, self.params[g], str(where), self.base, self.args.fit_rows, self.args.fit_seed,
                                 self.args.threads))
            labels.append(g)
        self._stage("fit", tasks, labels, len(self.args.generators) - len(tasks))

    def _fit_of(self, source: str) -> Path | None:
        """The fit a run of ``source`` samples (None: a real run)."""
        if source == "real":
            return None
        return self.fits.get(self.args.mixed_with if source == "mixed" else source)

    def train_stage(self) -> None:
        """Train the runs not trained yet (resuming the interrupted ones)."""
        states = {k: many.run_state(r, self._fit_of(k[0]), self.args.overwrite) for k, r in self.runs.items()}
        self.evaluated = [k for k, s in states.items() if s == "done"]
        self.to_evaluate = [k for k, s in states.items() if s == "trained"]
        tasks, keys = [], []
        for key, state in states.items():
            if state == many.UNTRAINABLE:
                self.say("train", f"{self.runs[key].name}: untrainable (its samples make no decisions), skipped")
            if state in ("done", "trained", many.UNTRAINABLE):
                continue
            source = key[0]
            recipe = self.runs[key].replace(resume=state == "resume", overwrite=state == "overwrite")
            if state == "resume":
                self.say("train", f"{recipe.name}: continuing an interrupted run from its last checkpoint")
            gen = self.args.mixed_with if source == "mixed" else source
            fitted = self.fits.get(gen) if source != "real" else None
            if source != "real" and not (fitted and FitCache.holds(fitted)):
                self.failures.append(f"train {recipe.name}: its generator {gen} has no fit")
                continue
            tasks.append(many.RunTask("train", recipe, str(fitted) if fitted else None))
            keys.append(key)
        def trained(i: int, result: dict[str, Any]) -> None:
            if many.UNTRAINABLE in result:
                self.say("train", f"{self.runs[keys[i]].name}: untrainable: {result[many.UNTRAINABLE]}")
            else:
                self.to_evaluate.append(keys[i])

        self._stage("train", tasks, [self.runs[k].name for k in keys],
                    sum(s in ("done", "trained", many.UNTRAINABLE) for s in states.values()), trained)

    def evaluate_stage(self) -> None:
        """Evaluate the runs trained but not evaluated."""
        keys = [k for k in self.runs if k in set(self.to_evaluate)]
        tasks = [many.RunTask("evaluate", self.runs[k], None) for k in keys]
        self._stage("evaluate", tasks, [self.runs[k].name for k in keys], len(self.evaluated))

    def fidelity_stage(self) -> None:
        """Score the generators whose fidelity JSON (for this fit and these settings) is missing."""
        if self.args.no_fidelity:
            self.timing["fidelity"] = {"wall_s": 0.0, "done": 0, "skipped": 0}
            self.say("fidelity", "skipped (--no-fidelity)")
            return
        items, have = [], 0
        for g, path in self.fidelity_files().items():
            fitted = self.fits[g]
            if not FitCache.holds(fitted):
                continue
            if path.exists() and "error" not in json.loads(path.read_text()):
                have += 1
                self.say("fidelity", f"{g}: scored earlier, skipped")
                continue
            items.append((g, str(fitted), str(path)))
        tasks = [FidelityTask(items, self.base, self.args.fit_rows, self.args.fidelity_jobs, self.args.threads,
                              str(self.folder.fidelity_log))]
        label = ",".join(i[0] for i in items)
        self._stage("fidelity", tasks if items else [], [label], have)
        for _, _, path in items:
            body = json.loads(Path(path).read_text()) if Path(path).exists() else {}
            if "error" in body:
                self.failures.append(f"fidelity {body['source']}: {body['error'].strip().splitlines()[-1]}")

    def fidelity_files(self) -> dict[str, Path]:
        """Generator source -> its fidelity JSON for the current fit and ``--fidelity-jobs``."""
        return {g: self.folder.fidelity_json(g, self.fits[g], self.args.fidelity_jobs)
                for g in self.args.source_list if g not in ("real", "mixed") and g in self.fits}

    def report_stage(self) -> Path:
        """Collect the results and write the tables, the figures and ``report.md``."""
        from experiments import study_report

        started = time.perf_counter()
        self.timing["report"] = {"wall_s": 0.0, "done": 1, "skipped": 0}
        loads = {"real": offered_load(self.data.fit, self.data.machine.nodes)}
        path = study_report.write(self.out, self.args, self.runs, self.fits, self.fidelity_files(), self.timing,
                                  self.failures, loads)
        self.timing["report"]["wall_s"] = time.perf_counter() - started
        hpcgym_io.write_text(self.folder.timing, json.dumps(study_report.timing_table(
            self.out, self.runs, self.fits, self.timing).to_dict(orient="records"), indent=2))
        self.say("report", f"{path} in {self.timing['report']['wall_s']:,.1f} s")
        return path

    def run(self) -> Path:
        """Every stage, in order."""
        self.out.mkdir(parents=True, exist_ok=True)
        settings = {k: v for k, v in dataclasses.asdict(self.args).items()}
        hpcgym_io.write_text(self.folder.settings, json.dumps(settings, indent=2))
        with Executor(run_task, self.args.backend, self.args.jobs, self.args.address) as self.executor:
            self.fit_stage()
            self.train_stage()
            self.evaluate_stage()
            self.fidelity_stage()
        return self.report_stage()


