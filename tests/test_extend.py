"""The ways in (docs/extend.md), through the public door: an installed package's heuristic, trace format,
generator, network and agent, used by name by the command-line tools, as a user would.

The package is ``examples/hpcgym_example_plugin``. It is "installed" on a temporary path: a ``.dist-info`` folder
whose ``entry_points.txt`` is written from the package's own ``pyproject.toml``, which is how pip records entry
points, so the tools find it through ``importlib.metadata`` exactly as after ``pip install``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGIN = REPO / "examples" / "hpcgym_example_plugin"


def entry_points_txt(pyproject: str) -> str:
    """The ``entry_points.txt`` pip writes for a ``pyproject.toml``'s ``[project.entry-points."group"]`` tables."""
    out, group = [], None
    for line in pyproject.splitlines():
        header = re.fullmatch(r'\[project\.entry-points\."([\w.]+)"\]', line.strip())
        if header:
            group = header.group(1)
            out.append(f"\n[{group}]")
        elif line.startswith("["):
            group = None
        elif group and "=" in line:
            name, value = (part.strip().strip('"') for part in line.split("=", 1))
            out.append(f"{name} = {value}")
    return "\n".join(out).strip() + "\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that, on the path, makes the example package an installed distribution."""
    root = tmp_path_factory.mktemp("site")
    info = root / "hpcgym_example_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hpcgym-example-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points_txt((PLUGIN / "pyproject.toml").read_text()))
    return root


def tool(site: Path, cwd: Path, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m <argv>`` with the example package installed (on the path) and hpcgym from this checkout."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PLUGIN), str(site)])}
    done = subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    if check:
        assert done.returncode == 0, f"python -m {' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def write_joblog(path: Path, jobs: pd.DataFrame, unix_start: int = 1_709_280_000) -> None:
    """A job table as the example's ``joblog`` format (each job starts at its submit: only the runtime matters)."""
    lines = ["# written by tests/test_extend.py"]
    for j in jobs.itertuples():
        submit = unix_start + int(j.submit)
        lines.append(f"JOB id={j.job_id} user=u{j.user} submit={submit} start={submit} end={submit + int(j.run)} "
                     f"nodes={j.nodes} limit={j.walltime}")
    path.write_text("\n".join(lines) + "\n")


def test_the_guide_quotes_the_example_files_as_they_are():
    """docs/extend.md quotes each file of the example after a ``<!-- file: PATH -->`` line: word for word."""
    text = (REPO / "docs" / "extend.md").read_text()
    quoted = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```\n", text, flags=re.S)
    files = {str(p.relative_to(REPO)) for p in PLUGIN.rglob("*") if p.suffix in (".py", ".toml")}
    assert {path for path, _ in quoted} == files - {"examples/hpcgym_example_plugin/hpcgym_example_plugin/__init__.py"}
    for path, body in quoted:
        assert body == (REPO / path).read_text(), f"docs/extend.md quotes an old version of {path}"


def test_entry_points_come_from_the_packages_pyproject():
    text = entry_points_txt((PLUGIN / "pyproject.toml").read_text())
    assert "[hpcgym.heuristics]\nbigfirst = hpcgym_example_plugin.heuristics:BIGFIRST" in text
    assert "[hpcgym.readers]\njoblog = hpcgym_example_plugin.joblog:FORMAT" in text
    assert "[hpcgym.synthesizers]\nresample = hpcgym_example_plugin.generator:ResampleSynthesizer" in text


def test_a_package_heuristic_and_format_run_in_baselines_run(site, tmp_path):
    """A hand-made 4-node case: the biggest waiting job first, without backfilling (docs/extend.md's example)."""
    # job 1 takes 2 of 4 nodes at t=0 for 10 s; at t=1 jobs 2 (1 node), 3 (4 nodes), 4 (2 nodes) arrive. Biggest
    # first puts job 3 at the head: it waits for job 1 (t=10) and blocks the others until it ends (t=15). FCFS
    # would start job 2 at once (t=1).
    jobs = pd.DataFrame({"job_id": [1, 2, 3, 4], "submit": [0, 1, 1, 1], "run": [10, 5, 5, 5],
                         "walltime": [10, 5, 5, 5], "nodes": [2, 1, 4, 2], "user": [1, 2, 3, 4]})
    write_joblog(tmp_path / "tiny.joblog", jobs)
    for policy, expected in (("bigfirst", {1: 0, 2: 15, 3: 10, 4: 15}), ("fcfs", {1: 0, 2: 1, 3: 10, 4: 15})):
        out = tmp_path / f"{policy}.csv"
        tool(site, tmp_path, "baselines.run", "--trace", "tiny.joblog", "--machine", "4", "--policy", policy,
             "--backfill", "none", "--out", str(out), "--quiet")
        records = pd.read_csv(out)
        assert dict(zip(records["job_id"], records["start"], strict=True)) == expected


def test_a_package_format_reads_back_its_jobs_and_is_detected(site, tmp_path):
    from hpcgym import traces

    source = traces.load("lublin-256").iloc[:300]
    write_joblog(tmp_path / "jobs.joblog", source)
    (tmp_path / "unnamed.txt").write_text((tmp_path / "jobs.joblog").read_text().split("\n", 1)[1])
    listing = tool(site, tmp_path, "hpcgym.traces", "formats").stdout
    assert re.search(r"^joblog\s+one JOB line", listing, re.M), listing
    for name in ("jobs.joblog", "unnamed.txt"):  # by its suffix; by its first line
        info = tool(site, tmp_path, "hpcgym.traces", "info", name, "--machine", "256").stdout
        assert re.search(r"jobs\s+300\b", info), info
    script = ("from hpcgym import traces; t = traces.read('jobs.joblog', machine='256'); "
              "t[['job_id', 'submit', 'run', 'walltime', 'nodes']].to_csv('back.csv', index=False)")
    tool(site, tmp_path, "hpcgym.traces", "list")  # the plugin path imports cleanly alongside the bundled traces
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PLUGIN), str(site)])}
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, check=True, timeout=120)
    back = pd.read_csv(tmp_path / "back.csv")
    expected = source[["job_id", "submit", "run", "walltime", "nodes"]].reset_index(drop=True)
    expected["submit"] -= expected["submit"].iat[0]  # Unix times are rebased to the first submit
    pd.testing.assert_frame_equal(back, expected.astype(back.dtypes.to_dict()))


def test_a_package_format_names_the_line_of_a_bad_value(site, tmp_path):
    (tmp_path / "bad.joblog").write_text("# a comment\nJOB id=1 user=a submit=100 start=100 end=160 nodes=2 limit=60\n"
                                         "JOB id=2 user=a submit=soon start=100 end=160 nodes=2 limit=60\n")
    done = tool(site, tmp_path, "hpcgym.traces", "info", "bad.joblog", "--machine", "4", check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "error: bad.joblog, line 3: field submit: 'soon' is not a number"


def test_a_package_generator_fits_and_samples_by_name(site, tmp_path):
    from hpcgym import traces

    write_joblog(tmp_path / "jobs.joblog", traces.load("lublin-256").iloc[:400])
    tool(site, tmp_path, "synth.fit", "--trace", "jobs.joblog", "--machine", "256", "--model", "resample",
         "--out", "fitted")
    assert json.loads((tmp_path / "fitted" / "manifest.json").read_text())["name"] == "resample"
    tool(site, tmp_path, "synth.sample", "--model", "fitted", "--jobs", "200", "--out", "sample.csv")
    sample = pd.read_csv(tmp_path / "sample.csv")
    train = traces.split(traces.load("lublin-256").iloc[:400], "train")
    shapes = set(map(tuple, train[["nodes", "run", "walltime"]].to_numpy()))
    assert len(sample) == 200 and set(map(tuple, sample[["nodes", "run", "walltime"]].to_numpy())) <= shapes


def _agent_commands() -> list[list[str]]:
    """The ``experiments.evaluate --agent`` commands of docs/extend.md's agent section, as written."""
    text = (REPO / "docs" / "extend.md").read_text()
    section = text[text.index("## An agent of your own"):text.index("## The environments from your own code")]
    block = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[-1]
    return [line.split()[2:] for line in block.strip().splitlines()]  # after "python -m"


def _longest_queue(rec: pd.DataFrame) -> int:
    """The most jobs waiting at once in a window's records (submitted, not started), counted at each submit."""
    submit, start = rec["submit"].to_numpy(), rec["start"].to_numpy()
    return max(int(((submit <= t) & (start > t)).sum()) for t in submit)


def test_the_guides_agent_commands_say_what_they_measure(site, tmp_path):
    """The example agent (biggest job first, through the environment's 128 slots) and the example heuristic (the same
    rule, in the simulator's compiled loop, over the whole queue): docs/extend.md's two commands, run as written."""
    default, small = _agent_commands()
    assert default == ["experiments.evaluate", "--agent", "biggest=hpcgym_example_plugin.agent:BiggestFirst",
                       "--trace", "lublin-256"]
    tool(site, tmp_path, *default)
    per_window, per_job = (pd.read_csv(tmp_path / "eval" / f) for f in ("per_window.csv", "per_job.csv"))
    mean = per_window.groupby("scheduler")["bsld"].mean()
    text = (REPO / "docs" / "extend.md").read_text()
    assert f"{mean['biggest']:,.2f} for `biggest` against {mean['bigfirst+none']:,.2f} for `bigfirst+none`" in text
    for w, rec in per_job.groupby("window"):
        agent, rule = (per_window.query(f"scheduler == '{s}' and window == {w}")["bsld"].iat[0]
                       for s in ("biggest", "bigfirst+none"))
        if not np.isclose(agent, rule, rtol=1e-12):  # a window where they differ queued more than the 128 slots
            assert _longest_queue(rec[rec["scheduler"] == "bigfirst+none"]) > 128, w
    tool(site, tmp_path, *small)
    per_window = pd.read_csv(tmp_path / "eval-128" / "per_window.csv")
    agent = per_window[per_window["scheduler"] == "biggest"].sort_values("window")
    rule = per_window[per_window["scheduler"] == "bigfirst+none"].sort_values("window")
    assert len(agent) == len(rule) == 20 and (agent["kind"] == "agent").all()
    np.testing.assert_allclose(agent["bsld"].to_numpy(), rule["bsld"].to_numpy(), rtol=1e-12)
    fcfs = per_window[per_window["scheduler"] == "fcfs+none"].sort_values("window")
    assert not np.allclose(rule["bsld"].to_numpy(), fcfs["bsld"].to_numpy())  # the windows tell the rules apart


def test_in_python_evaluate_takes_a_bare_agent_object():
    from experiments import evaluate
    from experiments.runs import Agent

    class Oldest:
        def predict(self, observation, deterministic=True):  # no masks: slot 0 always holds a job
            return np.zeros(len(observation), np.int64), None

    per_window, _ = evaluate.evaluate_on_test("lublin-256", {"oldest": Oldest(), "also": Agent(Oldest())},
                                              windows=2, length=64, progress=False)
    mine = per_window[per_window["scheduler"] == "oldest"].sort_values("window")["bsld"].to_numpy()
    fcfs = per_window[per_window["scheduler"] == "fcfs+none"].sort_values("window")["bsld"].to_numpy()
    np.testing.assert_allclose(mine, fcfs, rtol=1e-12)  # the oldest job first is FCFS without backfilling


def test_evaluate_refuses_an_object_that_is_no_agent(site, tmp_path):
    done = tool(site, tmp_path, "experiments.evaluate", "--agent", "hpcgym_example_plugin.heuristics:BIGFIRST",
                check=False)
    assert done.returncode == 2
    assert "needs a predict(obs" in done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_train_uses_a_package_format_generator_heuristic_and_network(site, tmp_path):
    from hpcgym import traces

    write_joblog(tmp_path / "jobs.joblog", traces.load("lublin-256").iloc[:2000])
    tool(site, tmp_path, "synth.fit", "--trace", "jobs.joblog", "--machine", "256", "--model", "resample",
         "--out", "fitted")
    tiny = ["--timesteps", "64", "--envs", "2", "--n-steps", "32", "--batch-size", "32", "--window", "64",
            "--slots", "32", "--val-windows", "1", "--val-window", "128", "--val-every", "64", "--clone-episodes",
            "2", "--clone-window", "64", "--clone-epochs", "1", "--eval-windows", "2", "--eval-window", "128",
            "--checkpoint-every", "64", "--quiet"]
    tool(site, tmp_path, "experiments.train", "--trace", "jobs.joblog", "--machine", "256", "--workload",
         "synthetic", "--synthesizer", "fitted", "--clone", "bigfirst", "--network",
         "hpcgym_example_plugin.network:PooledPolicy", "--policy-kwargs", '{"hidden": 8}', "--run-name", "mine",
         *tiny)
    run = tmp_path / "runs" / "mine"
    summary = pd.read_csv(run / "eval" / "summary.csv")
    assert {"bigfirst+none", "bigfirst+easy", "mine", "mine (cloned, no RL)"} <= set(summary["scheduler"])
    from sb3_contrib import MaskablePPO

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PLUGIN), str(site)])}
    probe = ("from sb3_contrib import MaskablePPO; m = MaskablePPO.load('runs/mine/model.zip', device='cpu'); "
             "print(type(m.policy).__name__, m.policy.features_extractor.slot[0].out_features)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.split() == ["PooledPolicy", "8"]
    assert MaskablePPO  # the [rl] extra is installed (CI installs [all])
    # the name of an installed generator is accepted as well as a fitted folder
    check = ("from experiments import train; a = train.parse_args(['--synthesizer', 'resample']); "
             "print(a.recipe.source.synthesizer)")
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.strip() == "resample"
