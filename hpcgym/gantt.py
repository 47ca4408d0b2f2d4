"""Pictures of a simulation: a Gantt chart of the jobs started so far (matplotlib, imported only here)."""

from __future__ import annotations

import numpy as np

from hpcgym.machines import Machine


def gantt_rgb(sim, machine: Machine, width: int = 640, height: int = 360) -> np.ndarray:
    """An RGB array: node usage over time (each job a bar of its nodes), plus the waiting-queue length."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width / 100, height / 100), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot(111)
    started = np.flatnonzero(sim.start >= 0)
    if started.size:
        order = started[np.argsort(sim.start[started], kind="stable")]
        begin, length, nodes = sim.start[order], sim.hold[order], sim.job_nodes[order]
        ends = begin + length
        # Stack bars in start order, wrapping at the machine size: a picture of load, not of node placement.
        bottom = np.cumsum(nodes) - nodes
        ax.barh((bottom % machine.nodes) + nodes / 2, np.minimum(ends, sim.now + 1) - begin, left=begin,
                height=nodes, color="tab:blue", alpha=0.5, edgecolor="none")
    ax.axvline(sim.now, color="tab:red", linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("nodes")
    ax.set_title(f"{machine.name}: t={sim.now}s, {len(sim.queue)} waiting, {sim.free}/{machine.nodes} free")
    ax.set_ylim(0, machine.nodes)
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()
