"""The recipe is the one typed home of a run's settings (docs/architecture.md, "One definition each").

- A setting added as one field of one section reaches the command line, the environment and ``args.json``, and reads
  back, with no other file edited (checked on a copy of ``experiments/`` with one line added).
- A recipe is a value: building, checking and ``replace``-ing one reads no file; :func:`experiments.recipe.resolve`
  is the step that finds what it names.
- Each setting is checked where it is declared (its field's metadata), and its flag is named when it is refused.
- Nothing in ``experiments/`` reads a setting back out of a mapping, and a run folder's settings and per-window
  results each have one reader.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments import arguments, recipe, train
from experiments.recipe import Recipe, resolve
from experiments.runs import RunFolder
from hpcgym import cli

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"
#: the line a researcher would add to expose an environment argument the recipe does not have yet
NEW_FIELD = '    kill_at_walltime: bool = flag(True, "end each job at its walltime, as real schedulers kill it")\n'

# ---- one field -----------------------------------------------------------------------------------------------------
PROBE = """
import json, sys
from pathlib import Path

import experiments
from experiments import train
from experiments.protocol import run_data
from experiments.recipe import Recipe, agent_env, resolve
from experiments.runs import RunFolder
from experiments.training import parts
from hpcgym.env import SchedulingEnv

runs_dir = Path(sys.argv[1])
out = {"package": experiments.__file__, "help": "--no-kill-at-walltime" in train.parser().format_help()}
recipe = train.parse_args(["--trace", "lublin-256", "--workload", "real", "--no-kill-at-walltime", "--envs", "2",
                           "--window", "64", "--runs-dir", str(runs_dir), "--run-name", "r"]).recipe
out["parsed"] = recipe.environment.kill_at_walltime
folder = RunFolder(recipe.folder)
folder.path.mkdir(parents=True)
folder.args_json.write_text(json.dumps(recipe.settings()))  # what the training loop writes
out["args_json"] = json.loads(folder.args_json.read_text()).get("kill_at_walltime", "missing")
back = folder.recipe()
out["round_trip"] = back == recipe
named = resolve(back)
data = run_data(back.source, back.selection)
training = parts.training_env(back, named, data, data.fit)
out["training_env"] = training.get_attr("kill_at_walltime")
played = SchedulingEnv(machine=data.machine, workload=data.validation, window=64, split="all",
                       **agent_env(back, named))  # validation and evaluation play in this one
out["played_env"] = played.kill_at_walltime
older = {k: v for k, v in recipe.settings().items() if k != "kill_at_walltime"}  # a run folder from before it
out["old_default"] = Recipe.from_settings(older).environment.kill_at_walltime
print(json.dumps(out))
"""


def _with_one_more_field(tmp_path: Path) -> Path:
    """A copy of ``experiments/`` whose recipe's environment section has one more field, and nothing else changed."""
    copy = tmp_path / "experiments"
    shutil.copytree(EXPERIMENTS, copy, ignore=shutil.ignore_patterns("__pycache__", "notebooks"))
    source = (copy / "recipe.py").read_text()
    start = source.index("class Environment")
    at = source.index("\n    def ", start) + 1  # the section's first method: its fields end just before
    edited = source[:at].rstrip("\n") + "\n" + NEW_FIELD + "\n" + source[at:]
    (copy / "recipe.py").write_text(edited)
    return copy


def test_a_field_added_to_one_section_reaches_the_environment_and_args_json(tmp_path):
    copy = _with_one_more_field(tmp_path)
    changed = [p.relative_to(copy) for p in copy.rglob("*.py")
               if p.read_text() != (EXPERIMENTS / p.relative_to(copy)).read_text()]
    before, after = ((folder / "recipe.py").read_text().splitlines() for folder in (EXPERIMENTS, copy))
    added = set(after) - set(before)
    assert changed == [Path("recipe.py")] and added == {NEW_FIELD.rstrip("\n")}  # one line in one file
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "runs")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(out["package"]).parent == copy  # the edited copy ran, not the repository's
    assert out["help"] and out["parsed"] is False  # a flag of experiments.train (--no-...: its default is True)
    assert out["args_json"] is False and out["round_trip"]  # saved in args.json, read back the same
    assert out["training_env"] == [False, False] and out["played_env"] is False  # every environment of the run
    assert out["old_default"] is True  # a run folder written before the field existed loads with its default


def test_the_probe_sees_a_field_the_recipe_does_not_pass_on(tmp_path):
    """The control: a field marked as the run's own (``env=False``) reaches no environment, and the probe says so."""
    copy = _with_one_more_field(tmp_path)
    text = (copy / "recipe.py").read_text().replace(NEW_FIELD, NEW_FIELD.replace('kill it")', 'kill it", env=False)'))
    (copy / "recipe.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "runs")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["args_json"] is False and out["training_env"] == [True, True] and out["played_env"] is True


# ---- a value -------------------------------------------------------------------------------------------------------
class _NoFiles:
    """Fail on any file opened, listed or looked at while on (an audit hook and ``os.stat``)."""

    on = False
    seen: list[str] = []

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if cls.on and event in ("open", "os.listdir", "os.scandir", "glob.glob"):
            cls.seen.append(f"{event} {args[0]!r}")


sys.addaudithook(_NoFiles.hook)


def test_building_checking_and_replacing_a_recipe_reads_no_file(monkeypatch):
    names = {"trace": "/nowhere/log.swf", "tuned": "/nowhere/fit.json", "synthesizer": "/nowhere/fitted",
             "clone": "tuned", "order": "tuned", "baseline": "tuned@exact", "features": "v1"}
    Recipe.from_settings(names)  # imports what the checks import, before the watch starts
    looked: list[str] = []

    def stat(path, *args, **kwargs):
        looked.append(str(path))
        raise FileNotFoundError(path)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "lstat", stat)
    _NoFiles.seen.clear()
    _NoFiles.on = True
    try:
        made = Recipe.from_settings(names)
        again = made.replace(seed=3, time_scale=2.0).replace(run_name="x")
        Recipe()
    finally:
        _NoFiles.on = False
    monkeypatch.undo()
    assert not looked and not _NoFiles.seen, (looked, _NoFiles.seen)
    assert (again.run.seed, again.environment.time_scale, again.source.tuned) == (3, 2.0, "/nowhere/fit.json")
    with pytest.raises(cli.UsageError, match="--synthesizer"):  # the names are found by the one explicit step
        resolve(made)
    with pytest.raises(cli.UsageError, match="--tuned: "):
        resolve(made.replace(workload="real"))


def test_a_trained_runs_networks_play_without_its_training_inputs():
    """Evaluating a finished run needs its heuristics, not the fitted synthesizer or the fit file it trained with."""
    gone = Recipe.from_settings({"trace": "lublin-256", "synthesizer": "/nowhere/fitted", "tuned": "/nowhere/f.json"})
    with pytest.raises(cli.UsageError, match="--synthesizer"):
        resolve(gone)
    named = resolve(gone, playing=True)
    assert (named.order.name, named.predictor) == ("saf", "walltime")
    with pytest.raises(cli.UsageError, match="--order: .*f.json"):  # a heuristic that reads the fit still needs it
        resolve(gone.replace(order="tuned"), playing=True)


def test_resolve_finds_every_name_of_the_recipe():
    made = Recipe.from_settings({"trace": "sdsc-sp2", "workload": "real", "clone": "tuned@exact", "order": "sjbf",
                                 "baseline": "fcfs", "backfill": "easy"})
    named = resolve(made)
    assert (named.clone.name, named.order.name, named.baseline.name, named.prior) == ("tuned@exact", "sjbf", "fcfs",
                                                                                      None)
    assert named.predictor == "last2"  # the clone's estimates are clairvoyant: the scan order's are the environment's
    assert resolve(made.replace(backfill="none")).order is None  # no scan without backfilling


# ---- checked where declared ----------------------------------------------------------------------------------------
def _bad_values(f: dataclasses.Field) -> list:
    m = f.metadata
    out = ["no-such-choice"] if "choices" in m else []
    low = m.get("above", m.get("at_least"))
    high = m.get("below", m.get("at_most"))
    if low is not None:
        out.append(low if "above" in m else (low - 1 if isinstance(low, int) else low - 0.5))
    if high is not None:
        out.append(high if "below" in m else (high + 1 if isinstance(high, int) else high + 0.5))
    return out + ([math.nan] if isinstance(low, float) else [])


CHECKED = [(f, v) for f in recipe.fields() for v in _bad_values(f)]


#: the settings whose values were checked before, in tables or by hand (and the DQN's, new in the recipe)
DECLARED = {"workload", "sample_pool", "backfill", "window", "slots", "time_scale", "objective", "reward", "envs",
            "features", "predictor", "action", "prior_temperature", "algo", "learning_rate", "n_steps", "n_epochs",
            "batch_size", "clip_range", "target_kl", "gamma", "gae_lambda", "ent_coef", "kl_coef", "buffer_size",
            "learning_starts", "exploration_fraction", "teach", "clone_episodes", "clone_window", "clone_epochs",
            "start", "val_fraction", "val_periods", "val_windows", "val_length", "val_every", "timesteps", "seed",
            "eval_windows", "eval_length", "checkpoint_every", "threads"}


def test_every_checked_setting_declares_its_values_on_its_field():
    assert {f.name for f, _ in CHECKED} == DECLARED


@pytest.mark.parametrize(("field", "value"), CHECKED, ids=[f"{f.name}={v}" for f, v in CHECKED])
def test_a_value_outside_its_fields_declaration_is_refused_naming_the_flag(field, value):
    with pytest.raises(cli.UsageError, match=re.escape(arguments.flag_of(field)) + " must be"):
        Recipe.from_settings({field.name: value})


@pytest.mark.parametrize(("metadata", "value", "words"), [
    ({"at_least": 2}, 1, "--x must be at least 2, not 1"),
    ({"at_least": 0.0}, -1.0, "--x must be >= 0, not -1.0"),
    ({"above": 0.0}, 0.0, "--x must be > 0, not 0.0"),
    ({"at_least": 0.0, "at_most": 1.0}, 1.5, "--x must be between 0 and 1, not 1.5"),
    ({"above": 0.0, "below": 1.0}, 1.0, "--x must be between 0 and 1 \\(both excluded\\), not 1.0"),
    ({"at_least": 0, "at_most": 2**32 - 1}, -1, "--x must be between 0 and 4294967295, not -1"),
    ({"choices": ("a", "b")}, "c", "--x must be one of \\('a', 'b'\\)"),
])
def test_the_declared_checks_say_what_the_value_must_be(metadata, value, words):
    @dataclasses.dataclass
    class Probe:
        x: float = arguments.flag(value, "a setting", **metadata)

        def __post_init__(self) -> None:
            arguments.check(self)

    with pytest.raises(cli.UsageError, match=words):
        Probe()
    if "choices" not in metadata:  # the bounds themselves pass
        Probe(x=metadata.get("at_least", metadata.get("at_most", 0.5)))


def _module_tables(path: Path) -> list[str]:
    """Module-level dicts keyed by settings' names whose values are tuples or lists: validation tables."""
    names = {f.name for f in recipe.fields()} | {f.name for f in dataclasses.fields(_study_args())}
    found = []
    for node in ast.parse(path.read_text()).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict) and value.keys and all(
                isinstance(k, ast.Constant) and k.value in names for k in value.keys) and all(
                isinstance(v, (ast.Tuple, ast.List)) for v in value.values):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def _study_args() -> type:
    from experiments.study import Args

    return Args


def test_no_string_keyed_validation_table_is_left():
    tables = [t for path in sorted(EXPERIMENTS.rglob("*.py")) for t in _module_tables(path)]
    assert not tables
    for gone in ("CHOICES", "AT_LEAST", "RANGES", "FLAGS"):
        assert not hasattr(recipe, gone)
    from experiments import study

    assert not hasattr(study, "CHOICES")
    with pytest.raises(cli.UsageError, match="--device must be one of"):  # the study's own flags: the same checks
        study.parse_args(["--device", "tpu"])


# ---- nothing reads settings out of a mapping -----------------------------------------------------------------------
#: the one function allowed to read a setting out of a mapping: the loader's version upgrade (``args.json`` v1)
LOADER = {("experiments/recipe.py", "upgrade")}


def _mapping_reads(path: Path, root: Path = REPO) -> list[str]:
    """Functions that take a ``Mapping``/``dict`` parameter and read a setting of the recipe out of it by name."""
    names = {f.name for f in recipe.fields()}
    rel = str(path.relative_to(root))
    out = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or (rel, fn.name) in LOADER:
            continue
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs
                  if a.annotation is not None and re.match(r"(Mapping|dict)\b", ast.unparse(a.annotation))}
        for node in ast.walk(fn):
            target, key = None, None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                target, key = node.value, node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                target, key = node.func.value, node.args[0].value
            if isinstance(target, ast.Name) and target.id in params and key in names:
                out.append(f"{rel}:{node.lineno} {fn.name}() reads {key!r} from {target.id}")
    return out


def test_nothing_in_experiments_reads_a_setting_out_of_a_mapping():
    reads = [r for path in sorted(EXPERIMENTS.rglob("*.py")) for r in _mapping_reads(path)]
    assert not reads
    untyped = [f"{p.relative_to(REPO)}:{i}" for p in sorted(EXPERIMENTS.rglob("*.py"))
               for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"(?<!\*)\bargs: Any\b", line)]
    assert not untyped


def test_the_mapping_check_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        from typing import Any, Mapping
        def env_of(settings: Mapping[str, Any]) -> dict:
            return {"slots": settings.get("slots", 128), "backfill": settings["backfill"]}
    """))
    assert len(_mapping_reads(bad, tmp_path)) == 2


def test_a_run_folders_settings_and_per_window_results_have_one_reader_each():
    sources = {p: p.read_text() for p in EXPERIMENTS.rglob("*.py")}
    settings = [p.name for p, text in sources.items() if "args_json.read_text" in text]
    assert settings == ["runs.py"] and not hasattr(RunFolder, "settings")  # RunFolder.recipe
    raw = [f"{p.relative_to(REPO)}:{i}" for p, text in sources.items()
           for i, line in enumerate(text.splitlines(), 1) if re.search(r"read_csv\([^)]*(per_window|PER_WINDOW)", line)]
    assert [r.split(":")[0] for r in raw] == ["experiments/results.py"]  # results.Windows.read
    named = [p.name for p, text in sources.items() if '"per_window.csv"' in text]
    assert named == ["runs.py"]  # one name


def test_the_algorithms_hyper_parameters_reach_sb3(tmp_path):
    """Every ``Algorithm`` field with ``sb3=`` is the constructor's; the DQN's were hard-coded before."""
    from experiments.protocol import run_data
    from experiments.training import parts

    base = {"trace": "lublin-256", "workload": "real", "envs": 1, "window": 64, "clone": "", "batch_size": 32}
    dqn = Recipe.from_settings({**base, "algo": "dqn", "buffer_size": 5000, "learning_starts": 10,
                                "exploration_fraction": 0.5, "gamma": 0.9})
    data = run_data(dqn.source, dqn.selection)
    env = parts.training_env(dqn, resolve(dqn), data, data.fit)
    model = parts.make_model(dqn.algorithm, parts.dqn_policy(dqn.network), 0, env, RunFolder(tmp_path / "d"))
    assert (model.buffer_size, model.learning_starts, model.exploration_fraction, model.gamma, model.batch_size) == (
        5000, 10, 0.5, 0.9, 32)
    ppo = Recipe.from_settings({**base, "kl_coef": 0.5, "n_steps": 32, "n_epochs": 2, "clip_range": 0.1})
    policy = parts.network(ppo.network, None, True, 1000.0, data.machine.nodes)
    model = parts.make_model(ppo.algorithm, policy, 0, env, RunFolder(tmp_path / "p"))
    assert (model.n_steps, model.n_epochs, model.batch_size, model.target_kl) == (32, 2, 32, None)
    assert model.clip_range(1.0) == 0.1 and model.ent_coef == 0.5  # the KL's weight: PPO's one regularizer term


def test_the_architecture_page_states_the_claims_these_tests_keep():
    page = (REPO / "docs" / "architecture.md").read_text()
    row = {line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `experiments/")}
    assert "the one home of run settings" in row["`experiments/recipe.py`"]
    assert "validated where defined" in row["`experiments/recipe.py`"]
    assert "the one reader of per-window results" in row["`experiments/results.py`"]
    assert "`experiments.runs.RunFolder.recipe`" in page  # the one reader of a run's settings


def test_train_args_are_the_recipe_and_the_seeds():
    fields = [f.name for f in dataclasses.fields(train.Args)]
    assert fields == ["recipe", "seeds", "jobs"]
    flags = [f.name for f, _ in arguments.leaves(train.Args)]
    assert flags == [f.name for f in recipe.fields()] + ["seeds", "jobs"]  # every setting, flat, once
