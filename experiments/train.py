"""Train an RL batch scheduler on real or synthetic job streams, then evaluate it on held-out real windows.

Examples::

    python -m experiments.train --workload synthetic            # the defaults: Theta, PPO, about 10 min on a laptop
    python -m experiments.train --workload real --trace sdsc-sp2 --timesteps 300000
    python -m experiments.train --workload synthetic --synthesizer tvae --algo dqn
    python -m experiments.train --run-name my-run --resume       # continue a killed run from its last checkpoint

The script reads top to bottom from :class:`Args`. The honest protocol (DESIGN.md): the real trace is split
chronologically; training sees only the train split (its windows, or samples of a synthesizer fitted on it), and
the final evaluation runs the agent and every heuristic on identical windows of the *test* split. Everything goes
to ``runs/<run name>/``: ``args.json``, TensorBoard logs (``tb/``: SB3's ``rollout/`` and ``train/`` keys plus
``sched/bsld``, ``sched/wait`` and ``sched/fcfs``, the FCFS objective on the same windows), checkpoints,
``model.zip``, and ``eval/`` (per-window and per-job CSVs, and ``summary.csv``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class Args:
    """Every knob of a training run (each one is a command-line flag)."""

    workload: str = field(default="synthetic", metadata={"help": "real | synthetic | mixed (real and synthetic "
                                                                 "windows alternately): what the agent trains on"})
    trace: str = field(default="theta", metadata={"help": "real trace: its train split is the training data, its "
                                                          "test split the evaluation"})
    synthesizer: str = field(default="arrivals", metadata={"help": "synthesizer for --workload synthetic|mixed"})
    algo: str = field(default="ppo", metadata={"help": "ppo (sb3-contrib MaskablePPO) | dqn (masked DQN)"})
    policy: str = field(default="scorer", metadata={"help": "scorer (shared per-slot job scorer) | mlp"})
    timesteps: int = field(default=60_000, metadata={"help": "agent decisions to train for"})
    backfill: str = field(default="none", metadata={"help": "none | easy: the simulator's backfilling"})
    window: int = field(default=256, metadata={"help": "jobs per training episode"})
    slots: int = field(default=128, metadata={"help": "visible queue slots (the action space)"})
    objective: str = field(default="bsld", metadata={"help": "bsld | wait | turnaround | util"})
    learning_rate: float = field(default=3e-4, metadata={"help": "optimizer learning rate"})
    n_steps: int = field(default=2048, metadata={"help": "PPO rollout length"})
    gamma: float = field(default=1.0, metadata={"help": "discount: 1, since the only reward comes at the episode's "
                                                        "end (RLScheduler's choice)"})
    gae_lambda: float = field(default=0.97, metadata={"help": "GAE lambda (PPO)"})
    ent_coef: float = field(default=0.0, metadata={"help": "entropy bonus (PPO)"})
    clone: str = field(default="", metadata={"help": "PPO warm start: behaviour-clone this heuristic first (e.g. "
                                                     "saf); empty: none"})
    clone_episodes: int = field(default=40, metadata={"help": "episodes of demonstrations for --clone"})
    batch_size: int = field(default=256, metadata={"help": "minibatch size"})
    seed: int = field(default=0, metadata={"help": "seed of the agent, the environment and the synthesizer"})
    eval_windows: int = field(default=10, metadata={"help": "test windows in the final evaluation (0: none)"})
    eval_length: int = field(default=1024, metadata={"help": "jobs per test window"})
    checkpoint_every: int = field(default=10_000, metadata={"help": "timesteps between checkpoints"})
    runs_dir: str = field(default="runs", metadata={"help": "where run folders go"})
    run_name: str = field(default="", metadata={"help": "run folder name (default: trace-workload-algo-sSEED)"})
    resume: bool = field(default=False, metadata={"help": "continue from the run folder's last checkpoint"})
    threads: int = field(default=1, metadata={"help": "torch threads (1 is fastest for these tiny networks)"})


def parse_args(argv: list[str] | None = None) -> Args:
    """Build the command line from :class:`Args` (one flag per field, with its help and default)."""
    ap = argparse.ArgumentParser(prog="python -m experiments.train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            ap.add_argument(flag, action="store_true", help=f.metadata["help"])
        else:
            kind = {"int": int, "float": float}.get(str(f.type), str)
            ap.add_argument(flag, type=kind, default=f.default, help=f"{f.metadata['help']} (default: {f.default})")
    args = Args(**vars(ap.parse_args(argv)))
    for name, allowed in (("workload", ("real", "synthetic", "mixed")), ("algo", ("ppo", "dqn")),
                          ("policy", ("scorer", "mlp")), ("backfill", ("none", "easy"))):
        if getattr(args, name) not in allowed:
            ap.error(f"--{name} must be one of {allowed}")
    return args


class MixedWorkload:
    """Real train windows and synthetic samples, alternately (``sample(n_jobs, seed)``)."""

    def __init__(self, real: pd.DataFrame, model: Any):
        self.real, self.model, self.calls = real, model, 0

    def sample(self, n_jobs: int, seed: int) -> pd.DataFrame:
        """Even calls: a real window; odd calls: a synthetic sample."""
        from hpcgym import traces

        self.calls += 1
        if self.calls % 2:
            return traces.window(self.real, n_jobs, rng=seed)
        return self.model.sample(n_jobs, seed=seed)


def fitted_synthesizer(args: Args, train: pd.DataFrame, nodes: int, cache: Path) -> Any:
    """The synthesizer fitted on the train split, from the cache when the same fit was done before."""
    import synth
    from synth.base import Synthesizer, table_hash

    where = cache / f"{args.trace}-{args.synthesizer}-s{args.seed}-{table_hash(train)}"
    if (where / "manifest.json").exists():
        return Synthesizer.load(where)
    model = synth.get(args.synthesizer, max_nodes=nodes).fit(train, seed=args.seed)
    model.save(where)
    return model


def make_env(args: Args, run_dir: Path) -> Any:
    """The training environment: train split only, FCFS reported on the same windows."""
    from stable_baselines3.common.monitor import Monitor

    from hpcgym import machines, traces
    from hpcgym.env import SchedulingEnv

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        real = traces.read(args.trace)
    machine = machines.get(real.attrs["machine"])
    train = traces.split(real, "train")
    if args.workload == "real":
        workload = train
    else:
        model = fitted_synthesizer(args, train, machine.nodes, Path(args.runs_dir) / "cache")
        workload = model if args.workload == "synthetic" else MixedWorkload(train, model)
    env = SchedulingEnv(machine, workload, backfill=args.backfill, window=args.window, slots=args.slots,
                        split="all", objective=args.objective, compare_with=("fcfs",))
    env.reset(seed=args.seed)
    return Monitor(env, str(run_dir / "monitor.csv"), info_keywords=("compare",))


def make_model(args: Args, env: Any, run_dir: Path) -> Any:
    """A new agent, or the last checkpoint's when resuming."""
    from agents.callbacks import latest_checkpoint, replay_buffer_for

    found = latest_checkpoint(run_dir / "checkpoints") if args.resume else None
    tb = str(run_dir / "tb")
    if args.algo == "ppo":
        from sb3_contrib import MaskablePPO

        from agents.policies import ScorerPolicy

        if found:
            return MaskablePPO.load(found[0], env=env, device="cpu", tensorboard_log=tb)
        policy = ScorerPolicy if args.policy == "scorer" else "MlpPolicy"
        return MaskablePPO(policy, env, learning_rate=args.learning_rate, n_steps=args.n_steps,
                           batch_size=args.batch_size, gamma=args.gamma, gae_lambda=args.gae_lambda,
                           ent_coef=args.ent_coef, seed=args.seed, tensorboard_log=tb, device="cpu", verbose=0)
    from agents.dqn import MaskedDQN

    if found:
        model = MaskedDQN.load(found[0], env=env, device="cpu", tensorboard_log=tb)
        buffer = replay_buffer_for(found[0])
        if buffer:
            model.load_replay_buffer(buffer)
        return model
    return MaskedDQN(env=env, learning_rate=args.learning_rate, batch_size=args.batch_size, seed=args.seed,
                     gamma=args.gamma,
                     buffer_size=100_000, learning_starts=1_000, exploration_fraction=0.3,
                     policy_kwargs={"scorer": args.policy == "scorer"}, tensorboard_log=tb, device="cpu", verbose=0)


def train(args: Args) -> Path:
    """Train (or resume) and save ``model.zip``; return the run folder."""
    import torch
    from stable_baselines3.common.callbacks import CheckpointCallback

    from agents.callbacks import ProgressBarCallback, SchedulingMetricsCallback

    torch.set_num_threads(args.threads)
    run_dir = Path(args.runs_dir) / (args.run_name or f"{args.trace}-{args.workload}-{args.algo}-s{args.seed}")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "args.json").write_text(json.dumps(dataclasses.asdict(args), indent=2))
    env = make_env(args, run_dir)
    model = make_model(args, env, run_dir)
    if args.clone and args.algo == "ppo" and model.num_timesteps == 0:
        from agents.pretrain import behaviour_clone
        from baselines import priorities

        accuracy = behaviour_clone(model, env, priorities.get(args.clone), args.clone_episodes, seed=args.seed)
        print(f"behaviour-cloned {args.clone}: {accuracy:.1%} of its choices reproduced")
    remaining = args.timesteps - model.num_timesteps
    if remaining > 0:
        checkpoints = CheckpointCallback(max(args.checkpoint_every, 1), str(run_dir / "checkpoints"), "model",
                                         save_replay_buffer=args.algo == "dqn")
        model.learn(remaining, callback=[checkpoints, SchedulingMetricsCallback(), ProgressBarCallback(remaining)],
                    reset_num_timesteps=model.num_timesteps == 0, tb_log_name="run")
    model.save(run_dir / "model.zip")
    print(f"trained {args.algo} for {model.num_timesteps} timesteps; saved {run_dir / 'model.zip'}")
    return run_dir


def evaluate_run(args: Args, run_dir: Path) -> pd.DataFrame:
    """Agent vs every heuristic x backfill on the same test windows; writes ``eval/`` and returns the summary."""
    from experiments import evaluate

    model, _ = evaluate.load_agent(run_dir)
    per_window, per_job = evaluate.evaluate(args.trace, {run_dir.name: (model, args.backfill, args.slots)},
                                            args.eval_windows, args.eval_length, seed=0)
    return evaluate.write_results(run_dir / "eval", per_window, per_job)


def run(args: Args) -> tuple[Path, pd.DataFrame | None]:
    """Train, then (unless ``eval_windows`` is 0) evaluate; return the run folder and the summary."""
    run_dir = train(args)
    return run_dir, (evaluate_run(args, run_dir) if args.eval_windows > 0 else None)


def main(argv: list[str] | None = None) -> int:
    """Train, then evaluate on the test windows."""
    args = parse_args(argv)
    started = time.time()
    run_dir, table = run(args)
    if table is not None:
        print(table.to_string(index=False, float_format=lambda v: f"{v:,.2f}"))
    print(f"done in {time.time() - started:.0f} s: {run_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
