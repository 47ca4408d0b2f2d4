"""One resolver per kind of name: every spelling of a heuristic and a predictor, hand-checked, the errors that list the
known names, and the same name giving the same policy in the environment, ``baselines.run`` and the evaluation."""

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from baselines import references, tuned
from baselines.run import grid_cells
from experiments import protocol
from experiments.recipe import Recipe
from experiments.recipe import resolve as resolve_recipe
from hpcgym import jobs as jobtable
from hpcgym import machines, traces
from hpcgym.env import SchedulingEnv
from hpcgym.errors import UnknownNameError
from hpcgym.sim import heuristics, predict, start_times
from hpcgym.sim import policy as codes
from hpcgym.sim.heuristics import resolve

FITS = Path(tuned.__file__).with_name("tuned")


def table(rows):
    """A job table of ``(submit, run, walltime, nodes, user)`` rows."""
    df = pd.DataFrame(rows, columns=["submit", "run", "walltime", "nodes", "user"])
    df = df.assign(job_id=np.arange(1, len(df) + 1), procs=df["nodes"], group=0, queue=-1, status="completed",
                   walltime_known=True)
    return jobtable.finalize(df)


def weights(path):
    """A fit file's weights ``(a, b, c, d)``, read as plain JSON."""
    w = json.loads(Path(path).read_text())["weights"]
    return w["log_estimate"], w["log_nodes"], w["log_walltime"], w["wait_hours"]


def same(a, b):
    """Two policies that schedule alike: the fields and the key (``PriorityPolicy``'s == leaves the key out)."""
    return (a.name, a.code, a.predictor, a.scan, a.key) == (b.name, b.code, b.predictor, b.scan, b.key)


# ---- spellings ---------------------------------------------------------------------------------------------------
def test_a_plain_name_is_the_registered_heuristic_in_any_case():
    assert resolve("SAF") is heuristics.SAF and resolve("saf") is heuristics.SAF
    assert resolve(heuristics.WFP3) is heuristics.WFP3  # an object passes through
    assert resolve("hpcgym.sim.heuristics:SJBF") is heuristics.SJBF  # module:attribute is imported


def test_at_predictor_puts_the_heuristic_on_that_predictors_estimates():
    pol = resolve("SAF@LAST2")
    assert (pol.name, pol.code, pol.predictor) == ("saf@last2", codes.SAF, "last2")
    # One node. Job 1 (user 1) runs 10 s and is finished before the others arrive; job 2 holds the node until 41.
    # Then job 3 (user 3, no history: estimate = walltime 60) and job 4 (user 1: last2 = its one finished job, 10 s,
    # against a walltime of 100) wait. SAF on walltimes runs job 3 first (60 < 100): starts 41 and 91; on the
    # predictions job 4 first (10 < 60): it runs 20 s, 41-61, then job 3 at 61.
    jobs = table([(0, 10, 100, 1, 1), (11, 30, 40, 1, 2), (12, 50, 60, 1, 3), (13, 20, 100, 1, 1)])
    assert list(start_times(jobs, 1, "saf", "none")) == [0, 11, 41, 91]
    assert list(start_times(jobs, 1, pol, "none")) == [0, 11, 61, 41]


def test_a_bare_learned_after_the_at_is_the_traces_model():
    pol = resolve("sjf@learned", trace="lublin-256")
    assert pol.name == "sjf@learned" and pol.predictor == "learned:lublin-256"
    assert predict.get(pol.predictor).source == str((predict.BUNDLED_MODELS / "lublin-256.npz").resolve())


def test_tuned_is_the_fit_for_the_trace_and_the_backfilling():
    for backfill in ("easy", "none"):
        pol = resolve("tuned", trace="lublin-256", backfill=backfill)
        a, b, c, d = weights(FITS / f"lublin-256-{backfill}.json")
        assert pol.name == "tuned" and pol.code == codes.KEY_PLUS_LOG_R  # a > 0: + log r
        assert (pol.key.nodes, pol.key.walltime, pol.key.wait) == pytest.approx((b / a, c / a, d / a))
    assert resolve("TUNED", trace="/data/lublin-256.swf.gz", backfill="easy").key \
        == resolve("tuned", trace="lublin-256", backfill="easy").key  # a trace file finds the fit of its name


def test_tuned_colon_a_file_is_that_fit_whatever_the_trace(tmp_path):
    path = tmp_path / "mine.json"
    fit = json.loads((FITS / "sdsc-sp2-easy.json").read_text())
    fit["weights"] = {"log_estimate": 2.0, "log_nodes": 4.0, "log_walltime": 0.0, "wait_hours": 1.0}
    path.write_text(json.dumps(fit))
    pol = resolve(f"tuned:{path}")  # no trace needed
    assert pol.name == "tuned" and pol.predictor == fit["predictor"]
    assert (pol.key.nodes, pol.key.walltime, pol.key.wait) == (2.0, 0.0, 0.5)
    teacher = resolve(f"tuned:{path}@exact", trace="theta", backfill="none")
    assert teacher.name == "tuned@exact" and teacher.predictor == "exact" and teacher.key == pol.key


def test_tuned_learned_is_the_fit_on_the_learned_predictions():
    pol = resolve("tuned-learned", trace="theta", backfill="easy")
    a, b, _, _ = weights(FITS / "theta-easy-learned.json")
    assert pol.name == "tuned-learned" and pol.key.nodes == pytest.approx(b / a)
    assert pol.predictor == json.loads((FITS / "theta-easy-learned.json").read_text())["predictor"]


def test_a_registered_family_gets_its_argument_the_trace_and_the_backfilling():
    seen = []

    def fixed(argument, trace, backfill):
        seen.append((argument, trace, backfill))
        return heuristics.SJF

    heuristics.register_family("fixed-test", fixed, "ANY")
    try:
        assert resolve("fixed-test:7@median5", trace="theta", backfill="easy").name == "sjf@median5"
        assert resolve("Fixed-Test").name == "sjf"
        assert seen == [("7", "theta", "easy"), ("", None, "none")]
        assert "fixed-test:ANY" in heuristics.spellings()
        heuristics.register_family("broken-test", lambda *_: "sjf")
        with pytest.raises(TypeError, match="not a PriorityPolicy"):
            resolve("broken-test")
    finally:
        heuristics.FAMILIES.pop("fixed-test"), heuristics.FAMILIES.pop("broken-test", None)
        heuristics.FAMILY_ARGUMENTS.pop("fixed-test")
    with pytest.raises(TypeError, match="register_family takes a function"):
        heuristics.register_family("x", heuristics.SJF)


# ---- errors that list what exists -------------------------------------------------------------------------------
def test_an_unknown_heuristic_names_the_known_spellings():
    with pytest.raises(UnknownNameError) as err:
        resolve("wfp")
    text = str(err.value)
    assert err.value.kind == "policy" and "Did you mean 'wfp3'" in text
    for known in ("fcfs", "saf-last2", "tuned", "tuned:FIT.json", "tuned-learned", "module:ATTRIBUTE",
                  "NAME@PREDICTOR"):
        assert known in text
    with pytest.raises(UnknownNameError, match="Did you mean 'tuned:FIT.json'"):
        resolve("tund:fit.json")  # no family of that name, and not a module's attribute either
    with pytest.raises(UnknownNameError, match="importing it failed"):
        resolve("no_such_module:RULE")


def test_an_unknown_predictor_after_the_at_names_the_known_ones():
    with pytest.raises(UnknownNameError) as err:
        resolve("saf@last3")
    assert err.value.kind == "predictor"
    for known in ("walltime", "last2", "median5", "exact", "learned:TRACE"):
        assert known in str(err.value)
    with pytest.raises(ValueError, match="name a runtime predictor after the @"):
        resolve("saf@")
    with pytest.raises(ValueError, match="needs a model"):
        resolve("saf@learned")  # no trace to take the model of


def test_tuned_without_a_trace_or_a_fit_says_how_to_get_one():
    with pytest.raises(ValueError, match="give the trace .* or name a fit file as tuned:FIT.json"):
        resolve("tuned")
    with pytest.raises(ValueError, match="no tuned fit for lublin-256 with backfill 'conservative'.*baselines.tune"):
        resolve("tuned", trace="lublin-256", backfill="conservative")
    with pytest.raises(ValueError, match="not a tuned-priority fit"):
        resolve(f"tuned:{FITS.parent / 'tuned.py'}")


def test_the_predictor_resolver_reads_every_spelling():
    assert predict.get(None) is predict.WALLTIME_PREDICTOR and predict.get("MEDIAN5") is predict.MEDIAN5
    bundled = str((predict.BUNDLED_MODELS / "theta.npz").resolve())
    assert predict.get("learned:theta").source == bundled == predict.get("learned", trace="theta").source
    assert predict.get(f"learned:{bundled}").source == bundled
    with pytest.raises(UnknownNameError, match="Known: exact, last2, learned:TRACE, median5, walltime"):
        predict.get("last")


# ---- one name, one policy, wherever it is read --------------------------------------------------------------------
def test_the_protocols_call_and_the_heuristics_resolver_agree(tmp_path):
    for name in ("saf", "tuned", "tuned@exact", "sjbf@median5"):
        typed = protocol.resolve_heuristic(name, trace="sdsc-sp2", backfill="easy")
        assert same(typed, resolve(name, trace="sdsc-sp2", backfill="easy"))
    fit = FITS / "theta-none.json"  # a run's --tuned file: its bare "tuned" is that fit
    assert same(protocol.resolve_heuristic("tuned", trace="sdsc-sp2", backfill="easy", tuned_fit=str(fit)),
                resolve(f"tuned:{fit}"))
    workload = protocol.resolve_heuristic("tuned", trace="sdsc-sp2", backfill="easy", tuned_fit="workload")
    assert same(workload, resolve("tuned", trace="sdsc-sp2", backfill="easy"))  # the trace's fit stands in


def test_the_environments_predictor_is_explicit_or_that_of_what_it_imitates():
    context = {"trace": "sdsc-sp2", "tuned_fit": ""}
    chosen = protocol.environment_predictor
    assert chosen("median5", protocol.imitated("saf-last2", "", "", "easy", **context)) == "median5"
    assert chosen("", protocol.imitated("", "saf-last2", "", "easy", **context)) == "last2"
    assert chosen("", protocol.imitated("", "tuned@exact", "sjbf", "easy", **context)) == "last2"  # teacher skipped
    assert chosen("", protocol.imitated("", "", "sjbf", "none", **context)) == "walltime"  # no order without backfill
    assert chosen("", protocol.imitated("", "saf", "", "none", **context)) == "walltime"
    # resolved lazily: a name after the one that decides is not looked up (it could not be here)
    assert chosen("", protocol.imitated("saf-last2", "no-such-heuristic", "", "none", **context)) == "last2"
    recipe = Recipe.from_settings({"trace": "sdsc-sp2", "backfill": "easy", "clone": "tuned@exact", "order": "sjbf"})
    assert resolve_recipe(recipe).predictor == "last2"  # a run's: its clone skipped, its scan order's


def test_the_env_baselines_run_and_the_evaluation_resolve_tuned_alike():
    trace, backfill = "lublin-256", "easy"
    expected = resolve("tuned", trace=trace, backfill=backfill)
    env = SchedulingEnv(workload=trace, backfill=backfill, window=64, baseline="tuned", order="tuned",
                        compare_with="tuned@last2")
    assert same(env.baseline, expected) and same(env.order, expected)
    assert same(env.compare_with[0], resolve("tuned@last2", trace=trace, backfill=backfill))

    jobs = traces.load(trace)
    machine = machines.get(jobs.attrs["machine"])
    windows = [traces.window(jobs, 128, start=s) for s in (0, 500)]
    args = argparse.Namespace(policy="tuned", out=None, no_kill=False, quiet=True)
    run_cell, = grid_cells(args, windows, machine, ["tuned"], [backfill], trace)
    cells, _ = references.reference_cells(windows, machine, trace, [backfill])
    evaluation, = [c for c in cells if c.policy == "tuned"]
    assert run_cell.policy == evaluation.policy == "tuned"
    assert [s["bsld_mean"] for s in run_cell.summaries] == [s["bsld_mean"] for s in evaluation.summaries]
    # and those numbers are the resolved policy's own, not two copies of one mistake: the fit's weights by hand
    a, b, c, d = weights(FITS / "lublin-256-easy.json")
    by_hand = tuned.policy([a, b, c, d], json.loads((FITS / "lublin-256-easy.json").read_text())["predictor"])
    for w, summary in zip(windows, run_cell.summaries, strict=True):
        start = start_times(w, machine.nodes, by_hand, backfill)
        run = np.minimum(w["run"], w["walltime"]).to_numpy()
        wait = start - w["submit"].to_numpy()
        assert summary["bsld_mean"] == pytest.approx(np.maximum((wait + run) / np.maximum(run, 10), 1).mean())


def test_an_environment_finds_tuned_without_importing_baselines():
    """hpcgym imports no other package: ``tuned`` comes from the entry points baselines declares in pyproject.toml
    (``pip install -e .`` writes them; a stale install lacks them)."""
    import subprocess
    import sys

    code = ("import sys, hpcgym; assert 'baselines' not in sys.modules; "
            "env = hpcgym.make('lublin-256-v0', backfill='easy', baseline='tuned'); "
            "print(env.unwrapped.baseline.name, 'baselines.tuned' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.split() == ["tuned", "True"], done.stderr[-2000:]


# --- the synthesizer's and the network's resolvers ---------------------------------------------------------------


def test_a_synthesizer_spec_is_a_class_by_name_or_a_fitted_folder(tmp_path):
    import synth
    from synth.arrivals import ArrivalAwareSynthesizer
    from synth.lublin import LublinSynthesizer

    assert synth.resolve("arrivals") is ArrivalAwareSynthesizer
    assert synth.resolve("LUBLIN") is LublinSynthesizer  # names are case-insensitive
    (tmp_path / "manifest.json").write_text("{}")
    assert synth.resolve(str(tmp_path)) == tmp_path  # a folder with a manifest is a fitted model, not loaded here
    with pytest.raises(KeyError, match=r"Did you mean 'arrivals'"):
        synth.resolve("arival")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(KeyError, match="folder without a fitted model's manifest.json"):
        synth.resolve(str(empty))


def test_a_network_spec_is_the_scorer_sb3s_mlp_or_an_imported_class():
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    from agents.policies import ScorerPolicy, resolve

    assert resolve("scorer") is ScorerPolicy
    assert resolve("mlp") == "MlpPolicy"  # SB3 reads the string itself
    spec = "sb3_contrib.common.maskable.policies:MaskableActorCriticPolicy"
    assert resolve(spec) is MaskableActorCriticPolicy
    with pytest.raises(KeyError, match=r"Did you mean 'mlp'"):
        resolve("mpl")
    with pytest.raises(KeyError, match="No module named 'no_such_module'"):
        resolve("no_such_module:Policy")


def test_the_training_flags_refuse_an_unknown_synthesizer_by_the_resolvers_words(tmp_path):
    from experiments.recipe import check_synthesizer
    from hpcgym import cli

    check_synthesizer("tvae")  # a name, not fitted or imported here
    with pytest.raises(cli.UsageError, match=r"--synthesizer: Unknown synthesizer 'tvea'\. Did you mean 'tvae'"):
        check_synthesizer("tvea")
    with pytest.raises(cli.UsageError, match="folder without a fitted model's manifest.json"):
        check_synthesizer(str(tmp_path))  # empty: no manifest
