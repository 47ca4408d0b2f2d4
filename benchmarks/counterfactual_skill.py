"""Go/no-go for the counterfactual reward: can the agent's observation predict which choices beat ``tuned``?

Usage: ``python benchmarks/counterfactual_skill.py [--decisions 20000] [--k 6] [--traces theta sdsc-sp2 hpc2n]``.

On random 256-job windows of each trace's train split (EASY), the environment follows ``tuned`` (the trace's fit, as
baseline and order, on its runtime predictor), exploring with probability ``--explore`` (a random one of the
candidates instead of ``tuned``'s head). At each decision the ``K`` candidates are ``tuned``'s ``K`` best visible jobs;
each one's *advantage* is forked (:mod:`hpcgym.sim.fork`): ``A = (V(s) - Q(s, a)) / V(s_0)``, the share of the
window's ``tuned`` bsld that choosing ``a`` instead of ``tuned``'s head saves (the counterfactual reward's units; 0 for
the head itself, positive: better than ``tuned``).

A model then regresses ``A`` on what the agent sees of each candidate: its observation row and the machine row
(``v1``: 12 columns each), plus the candidate's rank in ``tuned``'s order. ``v2`` is the same with the learned
runtime predictor (``tuned-learned`` as the baseline, features ``v2``: 14 columns, ``v1``'s 12 and 2 learned-history
columns), so the two rows of that setting differ only in the columns. Windows are split in time: those that start
in the last 20% of the split are held out, and those that overlap them are not fitted on; the model is
scikit-learn's ``HistGradientBoostingRegressor`` (and ridge, for a linear reference).

Held-out figures, per trace and feature set (``results/counterfactual_skill/skill.csv``):
``r2`` (over the non-head candidates); ``pick_positive`` / ``pick_negative``: the share of decisions where the
candidate with the highest predicted advantage (the head excluded) has a positive / negative true advantage;
``pick_mean``: its mean true advantage (acting on it at every decision); ``gated_mean``: the mean true advantage of
deviating only where the predicted advantage is positive (else ``tuned``'s head: 0), ``gated_share`` how often it
deviates; ``oracle_mean``: the mean best advantage among the candidates (0 if none beats the head), the ceiling;
``nonzero``: the share of decisions where some candidate's advantage is not 0.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

OUT = Path("results/counterfactual_skill/skill.csv")


def make_env(trace: str, variant: str):
    """The environment of a setting: ``tuned`` (v1) or ``tuned-learned`` (v2) as baseline and order."""
    from baselines import priorities
    from hpcgym.env import SchedulingEnv

    name = "tuned" if variant == "v1" else "tuned-learned"
    base = priorities.resolve(name, trace, "easy")
    return SchedulingEnv(trace, trace, backfill="easy", window=256, split="train", baseline=base,
                         order=base, predictor=base.predictor, features=variant,
                         invalid_action="raise")


def collect(env, decisions: int, k: int, explore: float, seed: int) -> pd.DataFrame:
    """One row per (decision, candidate): the episode, the decision, the rank, the advantage and the features."""
    from hpcgym.sim import fork
    from hpcgym.sim.backfill import BACKFILL_MODES

    rng = np.random.default_rng(seed)
    sim, base = env.sim, env.baseline
    mode, code, scan = BACKFILL_MODES["easy"], base.code, -1
    rows, episode, done, v0, decision = [], -1, True, 0.0, 0
    bar = tqdm(total=decisions, desc=env.trace, leave=False)
    while decision < decisions:
        if done:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
            episode += 1
            custom = fork.custom_keys(base, env.source.keys(env._window, base), len(sim.start))
            jobs, st = sim.arrays
            v0 = fork.value(jobs, st, code, mode, custom, scan, 0, sim.nodes)
        visible = np.flatnonzero(env.action_masks())
        queue = sim.queue[:env.slots]
        ranked = visible[np.argsort(sim.key[queue[visible]], kind="stable")][:k]  # tuned's order, ties by arrival
        jobs, st = sim.arrays
        q = np.array([fork.q_value(jobs, st, sim.order.code, mode, int(queue[s]), code, custom, scan, 0, sim.nodes)
                      for s in ranked])
        adv = (q[0] - q) / v0
        for r, s in enumerate(ranked):
            rows.append((episode, env._window.start_row, decision, r, adv[r], *obs[s], *obs[-1]))
        slot = int(rng.choice(ranked)) if rng.random() < explore else int(ranked[0])
        obs, _, done, _, _ = env.step(slot)
        decision += 1
        bar.update()
    bar.close()
    width = obs.shape[1]
    cols = ["episode", "start", "decision", "rank", "advantage", *(f"job{i}" for i in range(width)),
            *(f"machine{i}" for i in range(width))]
    return pd.DataFrame(rows, columns=cols)


def features(df: pd.DataFrame, width: int) -> np.ndarray:
    """The rank, and the first ``width`` columns of the job row and of the machine row."""
    return df[["rank", *(f"job{i}" for i in range(width)), *(f"machine{i}" for i in range(width))]].to_numpy()


def skill(df: pd.DataFrame, width: int, model, cut: int, window: int = 256) -> dict[str, float]:
    """Fit on the windows before row ``cut`` of the split, score on those from it on (see the module docstring)."""
    from sklearn.metrics import r2_score

    test = (df["start"] >= cut).to_numpy()
    train = df[(df["start"] + window <= cut).to_numpy() & (df["rank"] > 0).to_numpy()]
    held = df[test].copy()
    if train.empty or held.empty:
        raise ValueError(f"of {df['episode'].nunique()} collected windows, {train['episode'].nunique()} end before "
                         f"row {cut:,} (fitted on) and {held['episode'].nunique()} start from it (held out); both "
                         "need some: collect more decisions (--decisions)")
    model.fit(features(train, width), train["advantage"])
    held["pred"] = np.where(held["rank"] > 0, model.predict(features(held, width)), 0.0)
    others = held[held["rank"] > 0]
    best = others.loc[others.groupby("decision")["pred"].idxmax()]
    gated = np.where(best["pred"] > 0, best["advantage"], 0.0)
    per_decision = held.groupby("decision")["advantage"]
    return {"r2": r2_score(others["advantage"], others["pred"]), "pick_positive": float((best["advantage"] > 0).mean()),
            "pick_negative": float((best["advantage"] < 0).mean()), "pick_mean": float(best["advantage"].mean()),
            "gated_mean": float(gated.mean()), "gated_share": float((best["pred"] > 0).mean()),
            "oracle_mean": float(per_decision.max().clip(lower=0).mean()),
            "nonzero": float((per_decision.apply(lambda a: (a != 0).any())).mean()),
            "held_out_decisions": int(held["decision"].nunique())}


def models():
    """The two regressors: gradient-boosted trees, and ridge on standardised columns."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {"hgb": HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=0),
            "ridge": make_pipeline(StandardScaler(), Ridge(alpha=1.0))}


def main() -> None:
    """Collect, fit, write the CSV, print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", nargs="+", default=["theta", "sdsc-sp2", "hpc2n"])
    ap.add_argument("--decisions", type=int, default=20_000, help="decisions per trace and setting")
    ap.add_argument("--k", type=int, default=6, help="candidates per decision (tuned's best K)")
    ap.add_argument("--explore", type=float, default=0.2, help="chance of playing a random candidate")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    out = []
    for trace in args.traces:
        for variant in ("v1", "v2"):
            t0 = time.perf_counter()
            env = make_env(trace, variant)
            df = collect(env, args.decisions, args.k, args.explore, args.seed)
            cut = int(0.8 * len(env.source.table))
            seconds = time.perf_counter() - t0
            widths = {"v1": 12} if variant == "v1" else {"v1 (learned)": 12, "v2": 14}
            for label, width in widths.items():
                for name, model in models().items():
                    row = {"trace": trace, "features": label, "model": name, "decisions": args.decisions,
                           "windows": int(df["episode"].max()) + 1, "k": args.k,
                           "collect_seconds": round(seconds, 1), **skill(df, width, model, cut)}
                    out.append(row)
                    print({key: round(v, 4) if isinstance(v, float) else v for key, v in row.items()})
    table = pd.DataFrame(out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    table.to_csv(tmp, index=False, float_format="%.5g")
    tmp.replace(args.out)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
