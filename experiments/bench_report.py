"""The bench's tables and figure, from its per-window scores: per log, pooled, the leaderboard and the forest plot.

:func:`tables` turns the scores of every row on every log (``per_window.csv``, read through
:class:`experiments.results.Windows`, and ``per_block.csv`` for the whole-split streams) into two tables, for each
reference and each row:

- ``per_log``: the log's paired ratio with its one-log 95% CI (windows resampled:
  :func:`hpcgym.metrics.paired_ratio_ci`), the log's noise floor (its largest near-copy distance from 1), the outcome
  (:func:`experiments.pooled.outcome`) and the share of the log's headroom the row takes:
  ``(FCFS+EASY - row) / (FCFS+EASY - clairvoyant)`` on the log's mean bsld;
- ``pooled``: :func:`experiments.pooled.pool` over the logs where both the row and the reference ran, the noise
  floor over the same logs, wins, ties and losses over logs, the median headroom share, the same pooled ratio on the
  whole-split streams (blocks of 1,024 consecutive jobs resampled), and the verdict
  (:func:`experiments.pooled.verdict`).

:func:`leaderboard` writes the Markdown, :func:`forest` the figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from experiments import pooled
from experiments.bench_log import BASELINE, CLAIRVOYANT_ROW, NEAR_COPY, near_copy_label
from experiments.results import Windows
from hpcgym import metrics

#: the columns of ``pooled.csv`` (the first ten are the issue's contract; the rest add to them)
POOLED = ["scheduler", "reference", "ratio", "lo", "hi", "lo_logs", "hi_logs", "logs", "windows", "noise_floor",
          "wins", "ties", "losses", "headroom", "headroom_pooled", "stream_ratio", "stream_lo", "stream_hi",
          "stream_lo_logs", "stream_hi_logs", "stream_noise_floor", "verdict", "stream_verdict", "skipped"]
PER_LOG = ["log", "scheduler", "reference", "windows", "bsld", "reference_bsld", "ratio", "lo", "hi", "noise_floor",
           "outcome", "headroom", "stream_ratio", "stream_lo", "stream_hi", "fcfs_bsld", "clairvoyant_bsld"]


def _scores(results: Windows, log: str, scheduler: str) -> np.ndarray | None:
    rows = results.table[(results.table["log"] == log) & (results.table["scheduler"] == scheduler)]
    return rows.sort_values("window")["bsld"].to_numpy(np.float64) if len(rows) else None


def _blocks(blocks: pd.DataFrame, log: str, scheduler: str) -> np.ndarray | None:
    if blocks.empty:
        return None
    rows = blocks[(blocks["log"] == log) & (blocks["scheduler"] == scheduler)]
    return rows.sort_values("block")["bsld_sum"].to_numpy(np.float64) if len(rows) else None


def _copies(results: Windows, log: str, reference: str) -> list[np.ndarray]:
    out, j = [], 0
    while (found := _scores(results, log, near_copy_label(reference, j))) is not None:
        out.append(found)
        j += 1
    return out


def _copy_blocks(blocks: pd.DataFrame, log: str, reference: str, draws: int) -> list[np.ndarray]:
    found = [_blocks(blocks, log, near_copy_label(reference, j)) for j in range(draws)]
    return [f for f in found if f is not None]


def rows_of(results: Windows) -> list[str]:
    """The rows a table ranks: every scheduler but the near-copies, in order of appearance."""
    table = results.table
    return list(dict.fromkeys(table.loc[table["kind"] != NEAR_COPY, "scheduler"]))


def tables(per_window: pd.DataFrame, blocks: pd.DataFrame, logs: Sequence[str], references: Sequence[str],
           n_boot: int = pooled.N_BOOT, seed: int = 0,
           skipped: dict[str, dict[str, str]] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_log, pooled)`` for every row against every reference over ``logs`` (module docstring).

    ``skipped`` maps a log to the rows that did not run there and why; ``pooled``'s ``skipped`` column counts them.
    """
    results = Windows(per_window)
    per_log, pooled_rows = [], []
    for reference in references:
        for row in rows_of(results):
            found = [_pair(results, blocks, log, row, reference, n_boot, seed) for log in logs]
            found = [f for f in found if f is not None]
            per_log += [f[0] for f in found]
            if found:
                pooled_rows.append(_pooled_row(found, row, reference, n_boot, seed, skipped or {}))
    return (pd.DataFrame(per_log, columns=PER_LOG),
            pd.DataFrame(pooled_rows, columns=POOLED))


def _pair(results: Windows, blocks: pd.DataFrame, log: str, row: str, reference: str, n_boot: int,
          seed: int) -> tuple[dict, np.ndarray, np.ndarray, list[np.ndarray], tuple] | None:
    """One log's line of ``per_log`` and what pooling needs from it (None where either row is missing)."""
    mine, ref = _scores(results, log, row), _scores(results, log, reference)
    if mine is None or ref is None or len(mine) != len(ref):
        return None
    ratio, lo, hi = metrics.paired_ratio_ci(mine, ref, n_boot=n_boot, seed=seed)
    copies = _copies(results, log, reference)
    floor = max((abs(math.log(pooled.log_ratio(c, ref))) for c in copies), default=float("nan"))
    floor = math.expm1(floor) if copies else float("nan")
    fcfs, clair = _scores(results, log, BASELINE), _scores(results, log, CLAIRVOYANT_ROW)
    room = float("nan")
    if fcfs is not None and clair is not None and fcfs.mean() > clair.mean():
        room = (fcfs.mean() - mine.mean()) / (fcfs.mean() - clair.mean())
    streams = (_blocks(blocks, log, row), _blocks(blocks, log, reference), [])
    s_ratio = (np.nan,) * 3
    if streams[0] is not None and streams[1] is not None and len(streams[0]) == len(streams[1]):
        s_ratio = metrics.paired_ratio_ci(streams[0], streams[1], n_boot=n_boot, seed=seed)
        streams = (*streams[:2], _copy_blocks(blocks, log, reference, len(copies)))
    else:
        streams = (None, None, [])
    line = {"log": log, "scheduler": row, "reference": reference, "windows": len(mine), "bsld": mine.mean(),
            "reference_bsld": ref.mean(), "ratio": ratio, "lo": lo, "hi": hi, "noise_floor": floor,
            "outcome": pooled.outcome(ratio, lo, hi, floor), "headroom": room, "stream_ratio": s_ratio[0],
            "stream_lo": s_ratio[1], "stream_hi": s_ratio[2],
            "fcfs_bsld": fcfs.mean() if fcfs is not None else np.nan,
            "clairvoyant_bsld": clair.mean() if clair is not None else np.nan}
    return line, mine, ref, copies, streams


def _pooled_row(found: list, row: str, reference: str, n_boot: int, seed: int,
                skipped: dict[str, dict[str, str]]) -> dict:
    lines = [f[0] for f in found]
    p = pooled.pool([f[1] for f in found], [f[2] for f in found], n_boot, seed=seed)
    with_copies = [f for f in found if f[3]]
    floor = float("nan")
    if with_copies and len(with_copies) == len(found):
        draws = min(len(f[3]) for f in found)
        floor = pooled.noise_floor([[f[3][j] for f in found] for j in range(draws)], [f[2] for f in found])
    streamed = [f for f in found if f[4][0] is not None]
    s = pooled.pool([f[4][0] for f in streamed], [f[4][1] for f in streamed], n_boot, seed=seed) if streamed \
        else None
    s_floor = float("nan")
    if streamed and all(f[4][2] for f in streamed):
        draws = min(len(f[4][2]) for f in streamed)
        s_floor = pooled.noise_floor([[f[4][2][j] for f in streamed] for j in range(draws)],
                                     [f[4][1] for f in streamed])
    outcomes = [line["outcome"] for line in lines]
    rooms = [line["headroom"] for line in lines if not math.isnan(line["headroom"])]
    return {"scheduler": row, "reference": reference, "ratio": p.ratio, "lo": p.lo, "hi": p.hi,
            "lo_logs": p.lo_logs, "hi_logs": p.hi_logs, "logs": p.logs, "windows": p.windows, "noise_floor": floor,
            "wins": outcomes.count("win"), "ties": outcomes.count("tie"), "losses": outcomes.count("loss"),
            "headroom": float(np.median(rooms)) if rooms else float("nan"),
            "headroom_pooled": pooled_headroom(lines),
            "stream_ratio": s.ratio if s else np.nan, "stream_lo": s.lo if s else np.nan,
            "stream_hi": s.hi if s else np.nan, "stream_lo_logs": s.lo_logs if s else np.nan,
            "stream_hi_logs": s.hi_logs if s else np.nan, "stream_noise_floor": s_floor,
            "verdict": pooled.verdict(p, floor) if row != reference else "the reference itself",
            "stream_verdict": "-" if s is None else pooled.verdict(s, s_floor) if row != reference else
            "the reference itself",
            "skipped": sum(row in rows for rows in skipped.values())}


def pooled_headroom(lines: Sequence[dict]) -> float:
    """The headroom share on the pooled (geometric) scale: ``mean log(F / row) / mean log(F / C)`` over the logs.

    ``F`` is FCFS+EASY's mean bsld on a log, ``C`` the clairvoyant row's; NaN where a log lacks either.

    >>> pooled_headroom([{"fcfs_bsld": 4.0, "bsld": 2.0, "clairvoyant_bsld": 1.0}])
    0.5
    """
    rows = [(line["fcfs_bsld"], line["bsld"], line["clairvoyant_bsld"]) for line in lines]
    if not rows or any(np.isnan(v) for r in rows for v in r):
        return float("nan")
    room = np.mean([math.log(f / c) for f, _, c in rows])
    return float(np.mean([math.log(f / x) for f, x, _ in rows]) / room) if room > 0 else float("nan")


def forest(per_log: pd.DataFrame, pooled_table: pd.DataFrame, reference: str, path: Path,
           rows: Sequence[str] | None = None) -> Path:
    """Each row's per-log ratios to ``reference`` with their CIs, the pooled diamond and the noise floor's band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    from hpcgym import io as hpcgym_io

    mine = pooled_table[(pooled_table["reference"] == reference) & (pooled_table["scheduler"] != reference)]
    if rows is not None:
        mine = mine[mine["scheduler"].isin(rows)]
    logs = list(dict.fromkeys(per_log.loc[per_log["reference"] == reference, "log"]))
    fig, axes = plt.subplots(1, max(len(mine), 1), figsize=(2.4 * max(len(mine), 1) + 1.2, 0.28 * len(logs) + 1.6),
                             sharey=True, squeeze=False)
    for ax, (_, p) in zip(axes[0], mine.iterrows(), strict=False):
        lines = per_log[(per_log["reference"] == reference) & (per_log["scheduler"] == p["scheduler"])]
        lines = lines.set_index("log").reindex(logs)
        ratio, lo, hi = (lines[c].to_numpy(np.float64) for c in ("ratio", "lo", "hi"))
        y = np.arange(len(logs))[::-1] + 2
        if not math.isnan(p["noise_floor"]):
            ax.axvspan(1 / (1 + p["noise_floor"]), 1 + p["noise_floor"], color="#DDDDDD", zorder=0)
        ax.axvline(1, color="#888888", lw=0.8)
        ax.errorbar(ratio, y, xerr=[ratio - lo, hi - ratio], fmt="o", ms=3, color="#332288", ecolor="#88CCEE", lw=1)
        ax.fill([p["lo"], p["ratio"], p["hi"], p["ratio"]], [0.5, 0.85, 0.5, 0.15], color="#882255")
        ax.plot([p["lo_logs"], p["hi_logs"]], [0.5, 0.5], color="#882255", lw=0.8)
        ax.set_xscale("log")
        ax.set_xticks(_ticks(*ax.get_xlim()), [f"{t:g}" for t in _ticks(*ax.get_xlim())])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{p['scheduler']}\n{p['ratio']:.3f} ({p['lo']:.3f}-{p['hi']:.3f})", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_yticks([*(np.arange(len(logs))[::-1] + 2), 0.5], [*logs, "pooled"], fontsize=7)
    fig.supxlabel(f"mean bsld / {reference}'s on the same windows (log scale; grey: noise floor; line: logs "
                  "resampled)", fontsize=8)
    fig.tight_layout()
    hpcgym_io.atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)
    return path


def _ticks(low: float, high: float, most: int = 6) -> list[float]:
    """Round ratios between ``low`` and ``high`` for a log axis, 1 among them where it fits, at most ``most``.

    >>> _ticks(0.85, 1.2), _ticks(0.04, 20), _ticks(0.5, 0.6)
    ([0.9, 1.0, 1.1], [0.05, 0.2, 1.0, 5.0, 20.0], [0.5, 0.6])
    """
    wide = high / low > 4
    grid = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0] if wide else \
        [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0]
    inside = [t for t in grid if low <= t <= high] or [grid[min(range(len(grid)), key=lambda i: abs(grid[i] - low))]]
    step = -(-len(inside) // most)
    at = inside.index(1.0) if 1.0 in inside else 0
    return sorted({*inside[at::step], *inside[at::-step]})


def leaderboard(pooled_table: pd.DataFrame, logs: pd.DataFrame, skipped: dict[str, dict[str, str]],
                command: str) -> str:
    """The Markdown leaderboard: each reference's pooled table, the verdicts, the logs in and out, rows skipped."""
    from experiments.tables import markdown

    suite_logs = logs[logs["status"] == "suite"]
    parts = [f"# Bench: {len(suite_logs)} logs, {int(suite_logs['windows'].sum()):,} disjoint test windows",
             f"Command: `{command}`",
             "Mean bsld paired with the reference's on the same windows, per log; pooled: the geometric mean over "
             "logs, 95% CIs by bootstrap (this suite: windows resampled within each log; logs like these: logs "
             "resampled too). Noise floor: the farthest any near-copy of the reference (each job's runtime estimate x "
             "exp(0.05 N(0,1)) in its priority) gets from 1, pooled over the same logs. Headroom: the median over logs "
             "of the share of FCFS+EASY to "
             "clairvoyant that the row takes. Stream: the same pooled over the whole test splits, blocks of 1,024 "
             "jobs resampled."]
    for reference, table in pooled_table.groupby("reference", sort=False):
        shown = pd.DataFrame({
            "scheduler": table["scheduler"],
            "vs " + reference + " (this suite)": [f"{r:.3f} ({lo:.3f}-{hi:.3f})" for r, lo, hi in
                                                  zip(table["ratio"], table["lo"], table["hi"], strict=True)],
            "logs resampled": [f"{lo:.3f}-{hi:.3f}" for lo, hi in zip(table["lo_logs"], table["hi_logs"],
                                                                     strict=True)],
            "noise floor": [f"±{f:.1%}" if not math.isnan(f) else "-" for f in table["noise_floor"]],
            "logs": table["logs"], "windows": table["windows"],
            "wins/ties/losses": [f"{w}/{t}/{lo}" for w, t, lo in zip(table["wins"], table["ties"], table["losses"],
                                                                    strict=True)],
            "headroom (median; pooled)": [f"{h:.0%}; {g:.0%}" if not math.isnan(h) else "-" for h, g in
                                          zip(table["headroom"], table["headroom_pooled"], strict=True)],
            "whole split (this suite)": [f"{r:.3f} ({lo:.3f}-{hi:.3f})" if not math.isnan(r) else "-" for r, lo, hi in
                                         zip(table["stream_ratio"], table["stream_lo"], table["stream_hi"],
                                             strict=True)],
            "whole split floor": [f"±{f:.1%}" if not math.isnan(f) else "-" for f in table["stream_noise_floor"]],
            "verdict": [v.split(":")[0] for v in table["verdict"]]})
        parts += [f"## Against {reference}", markdown(shown, digits=2)]
        parts.append("Verdicts:\n" + "\n".join(f"- {r}: {v}" for r, v in zip(table["scheduler"], table["verdict"],
                                                                              strict=True) if r != reference))
    shown = logs[["log", "status", "reason", "windows", "machine", "requested_times"]]
    parts += ["## Logs", markdown(shown, digits=2)]
    if any(skipped.values()):
        parts += ["## Rows skipped", "\n".join(f"- {log}, {row}: {why}" for log, rows in skipped.items()
                                                for row, why in rows.items())]
    return "\n\n".join(parts) + "\n"
