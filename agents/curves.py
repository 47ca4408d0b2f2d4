"""Learning-curve plots: validation bounded slowdown against training steps, one line per run or seed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from hpcgym.io import write_figure


def plot_learning_curves(curves: Mapping[str, Path], out: Path, title: str = "",
                         references: Mapping[str, float] | None = None) -> Path:
    """Plot each ``label -> learning_curve.csv`` (``timesteps, val_bsld, network``) and save a PNG to ``out``.

    The line follows the networks RL trained; a warm-start candidate it did not start from is a cross at step 0,
    named as the CSV names it (``untrained (not kept)``). ``references`` draws horizontal lines (e.g. heuristics on
    the same windows).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, path in curves.items():
        if Path(path).exists():
            df = pd.read_csv(path)
            aside = df["network"].astype(str).str.contains("not kept")
            line = ax.plot(df.loc[~aside, "timesteps"], df.loc[~aside, "val_bsld"], marker="o", ms=3, label=label)
            for network, points in df[aside].groupby("network", sort=False):  # named as the CSV and summary name it
                ax.scatter(points["timesteps"], points["val_bsld"], marker="x", color=line[0].get_color(),
                           label=f"{label}: {network}")
    for label, value in (references or {}).items():
        ax.axhline(value, ls="--", lw=1, color="grey")
        ax.annotate(label, (0, value), fontsize=8, color="grey", va="bottom")
    ys = [y for line in ax.get_lines() for y in line.get_ydata()] + list((references or {}).values())
    if ys and min(ys) > 0 and max(ys) / min(ys) > 20:  # a far-off reference (FCFS) would flatten the curves
        ax.set_yscale("log")
    ax.set_xlabel("training steps (agent decisions)")
    ax.set_ylabel("mean bounded slowdown (validation)")
    ax.set_title(title or "learning curves", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    write_figure(fig, out, dpi=110)  # atomic: a link in the run folder is replaced, not written through
    plt.close(fig)
    return out
