"""Learning-curve plots: validation bounded slowdown against training steps, one line per run or seed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd


def plot_learning_curves(curves: Mapping[str, Path], out: Path, title: str = "",
                         references: Mapping[str, float] | None = None) -> Path:
    """Plot each ``label -> learning_curve.csv`` (``timesteps, val_bsld``) and save a PNG to ``out``.

    ``references`` draws horizontal lines (e.g. heuristics on the same validation windows).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, path in curves.items():
        if Path(path).exists():
            df = pd.read_csv(path)
            ax.plot(df["timesteps"], df["val_bsld"], marker="o", ms=3, label=label)
    for label, value in (references or {}).items():
        ax.axhline(value, ls="--", lw=1, color="grey")
        ax.annotate(label, (0, value), fontsize=8, color="grey", va="bottom")
    ax.set_xlabel("training steps (agent decisions)")
    ax.set_ylabel("mean bounded slowdown (validation)")
    ax.set_title(title or "learning curves", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
