"""The arrivals generator: its sub-models fitted in order, sampled in order, and saved in one flat state.

:class:`ArrivalAwareSynthesizer` holds one object per sub-model: the arrival process
(:class:`~synth.arrivals.process.ArrivalProcess`), the load governor (:class:`~synth.arrivals.governor.Governor`),
the request mix (:class:`~synth.arrivals.requests.RequestMix`), sessions and users
(:class:`~synth.arrivals.sessions.Sessions`), outcomes (:class:`~synth.arrivals.outcomes.Outcomes`) and runtimes
(:class:`~synth.arrivals.runtimes.Runtimes`); :mod:`synth.arrivals.calibration` tunes them by sampling at fit time.
A save pickles the sub-models' attributes under the names the single-module code (revision 7) used, so a fit saved
before the split loads, and its samples are the same.
"""

from __future__ import annotations

import pickle
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from synth.arrivals.calibration import calibrate_mix, calibrate_phi, calibrate_slow
from synth.arrivals.context import arrival_context, lag1
from synth.arrivals.governor import Governor
from synth.arrivals.outcomes import Outcomes
from synth.arrivals.process import CHUNK, ArrivalProcess, Draws
from synth.arrivals.requests import RequestMix
from synth.arrivals.runtimes import Runtimes
from synth.arrivals.sessions import Sessions, repeats
from synth.base import Synthesizer

T = TypeVar("T")
#: the sub-models, by attribute, in the order a save lists their state
PARTS = {"process": ArrivalProcess, "mix": RequestMix, "sessions": Sessions, "outcomes": Outcomes,
         "runtimes": Runtimes}


def _from_state(cls: type[T], state: dict[str, Any], **extra: Any) -> T:
    """A sub-model (a dataclass) from a save's flat state: its fields by name, the absent ones at their defaults."""
    return cls(**{f.name: state[f.name] for f in fields(cls) if f.name in state}, **extra)


class ArrivalAwareSynthesizer(Synthesizer):
    """The arrival-aware generator (see :mod:`synth.arrivals`).

    Args:
        max_nodes: machine size (default: the largest job seen).
        load: the samples' offered load, outages included (None: the training jobs').
        machine_nodes: nodes of the machine the load refers to (default ``max_nodes``).
        jitter: the smallest kernel bandwidth of the runtime densities (on ``log`` seconds).
        smoothing: pseudo-count of the shrinkage of the conditional request and outcome distributions.
        slow: the slow arrival component's share of the normal scores' variance (None: calibrated at fit time,
            :func:`~synth.arrivals.calibration.calibrate_slow`).
    """

    name = "arrivals"
    packages = ("numpy", "pandas", "scipy")
    revision = 7  # 2: runtime kernels shrink at the walltime; 3: the request mix is calibrated; 4: load governor;
    # 5: outages stratified; 6: a slow arrival component, and long samples hold their load exactly; 7: users own
    # their requests, sessions keep their outcome, returning users run as long as last time, no gap becomes an outage
    # (the split into sub-models kept every sample bit for bit, and the saves' state: still revision 7)

    process: ArrivalProcess
    governor: Governor
    mix: RequestMix
    sessions: Sessions
    outcomes: Outcomes
    runtimes: Runtimes

    def __init__(self, max_nodes: int | None = None, load: float | None = None, machine_nodes: int | None = None,
                 jitter: float = 0.3, smoothing: float = 20.0, slow: float | None = None, **params: Any):
        if slow is not None and not 0.0 <= slow < 1.0:
            raise ValueError(f"arrivals: slow must be in [0, 1), not {slow!r}")
        super().__init__(max_nodes=max_nodes, load=load, machine_nodes=machine_nodes, jitter=jitter,
                         smoothing=smoothing, slow=slow, **params)
        self.load, self.machine_nodes, self.jitter, self.smoothing = load, machine_nodes, jitter, smoothing
        self.slow = slow
        self.perfect = False  # whether the data had no walltime estimates

    @property
    def nodes(self) -> int:
        """The nodes of the machine the load refers to."""
        return int(self.machine_nodes or self.max_nodes)

    # ---- fitting ---------------------------------------------------------------------------------------------
    def _fit(self, table: pd.DataFrame, jobs: pd.DataFrame, rng: np.random.Generator) -> None:
        x = np.log1p(table["interarrival"].to_numpy(np.float64))
        self.process = ArrivalProcess.fit(table)
        self.process.phi_seed = int(rng.integers(2**31))
        target = lag1(x)
        self.process.phi = calibrate_phi(self.process, target, self.unix_start_time)
        self.perfect = bool((~jobs["walltime_known"].to_numpy(bool)).mean() > 0.5)  # no estimates in the data
        ctx = arrival_context(table["hour"].to_numpy(), table["dow"].to_numpy(), x)
        user, run, wall = (table[c].to_numpy(np.int64) for c in ("user", "run", "walltime"))
        self.mix, request = RequestMix.fit(table["nodes"].to_numpy(np.int64), wall, ctx, self.smoothing)
        self.sessions = Sessions.fit(request, user, x, len(self.mix))
        self.outcomes, outcome = Outcomes.fit(table["status"].astype(str).to_numpy(), run > wall, request,
                                              repeats(request, user), self.mix, self.smoothing)
        self.runtimes = Runtimes.fit(run, wall, request, outcome, user, self.mix, self.outcomes.n_outcomes,
                                     self.jitter)
        calibrate_mix(self.mix, request, lambda n, r: self.requests(n, r)[0], rng)
        self.governor = Governor.fit(jobs, self.nodes, self.load)
        calibrate_slow(self.process, self.governor, self.slow, jobs, target, self.jobs, rng)

    # ---- sampling --------------------------------------------------------------------------------------------
    def requests(self, n: int, rng: np.random.Generator, governor: Governor | None = None,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...], Draws, dict | None]:
        """Arrivals, sessions and requests of ``n`` jobs (the clock's first, ungoverned pass).

        Args:
            n: jobs.
            rng: the random numbers.
            governor: scales the gaps (None: unscaled, as during the fit's calibrations).

        Returns:
            ``(request, session, starts, (gaps, hours, dows), draws, rows)``: each job's request (menu index) and
            session, the jobs that open a session, the clock, the arrival process's randomness, and the clock's gaps
            per hour class (``None`` past :data:`~synth.arrivals.process.CHUNK` jobs), to run the clock again governed.
        """
        draws = self.process.draws(n, rng, 1.0 if governor is None else governor.gap_scale)
        rows = {} if n <= CHUNK else None
        gaps, hours, dows = self.process.clock(*draws, self.unix_start_time, governor, cache=rows)
        x = np.log1p(gaps.astype(np.float64))
        session, starts = self.sessions.split(x, rng)
        request = self.mix.draw(arrival_context(hours, dows, x)[starts], rng)[session]
        return request, session, starts, (gaps, hours, dows), draws, rows

    def jobs(self, n: int, rng: np.random.Generator, governor: Governor | None) -> pd.DataFrame:
        """``n`` raw jobs (the training table's columns), the clock governed by ``governor`` where it has a target."""
        request, session, starts, (gaps, hours, dows), draws, rows = self.requests(n, rng, governor)
        rank = self.sessions.users(request, session, starts, rng)
        outcome = self.outcomes.draw(request, session, rng)
        run = self.runtimes.draw(request, outcome, starts[session], rank, self.mix, self.outcomes.n_outcomes, rng)
        nodes, wall = self.mix.menu_nodes[request], self.mix.menu_wall[request]
        if self.perfect:  # the data has no estimates (walltime = run): smoothed, and kept equal
            wall = np.maximum(np.round(wall * np.exp(self.jitter * rng.standard_normal(n))), 1).astype(np.int64)
            run = wall
        if governor is not None and governor.target_load is not None:  # the clock again, governed by the jobs' work
            work = nodes * run.astype(np.float64)
            gaps, hours, dows = self.process.governed_clock(governor, draws, work, self.unix_start_time, rows)
        return pd.DataFrame({"interarrival": gaps, "nodes": nodes, "run": run, "walltime": wall,
                             "user": self.sessions.ids(rank), "status": self.outcomes.statuses[outcome // 2],
                             "hour": hours, "dow": dows})

    def _sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        return self.jobs(n, rng, self.governor)

    def sample(self, n_jobs: int, seed: int | np.random.Generator | None = None) -> pd.DataFrame:
        """``n_jobs`` jobs (see :meth:`synth.base.Synthesizer.sample`).

        Where the data had no walltimes, the jobs are flagged as the readers flag such jobs: ``walltime_known``
        false, ``walltime = run`` (perfect estimates).
        """
        out = super().sample(n_jobs, seed)
        if self.perfect:
            out["walltime_known"] = False
        return out

    # ---- the sub-models' numbers that tests and reports read ---------------------------------------------------
    @property
    def target_load(self) -> float | None:
        """The governor's target load between outages (None: ungoverned; set it to None to sample ungoverned)."""
        return self.governor.target_load

    @target_load.setter
    def target_load(self, value: float | None) -> None:
        self.governor.target_load = value

    @property
    def mix_tv(self) -> float:
        """The request-mix calibration's last total-variation distance (:mod:`synth.arrivals.calibration`)."""
        return self.mix.mix_tv

    @property
    def slow_share(self) -> float:
        """The slow arrival component's share of the normal scores' variance."""
        return self.process.slow_share

    @property
    def slow_scores(self) -> dict[float, float]:
        """Each candidate slow share's calibration score; absent (AttributeError) where the share was given."""
        if self.process.slow_scores is None:
            raise AttributeError("slow_scores: the slow share was given, not calibrated")
        return self.process.slow_scores

    # ---- saving ----------------------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """The sub-models' attributes in one flat dict, named as revision 7's single-module code named them."""
        state: dict[str, Any] = {"perfect": self.perfect}
        for attr in PARTS:
            part = getattr(self, attr)
            state |= {f.name: getattr(part, f.name) for f in fields(part)}
        if state["slow_scores"] is None:
            del state["slow_scores"]  # the old saves have none where the share was given
        g = self.governor
        state |= {"target_load": g.target_load, "own_load": g.own_load, "gap_scale": g.gap_scale,
                  "mean_gap": g.mean_gap}
        return state

    def _load(self, path: Path) -> None:
        with open(path / "state.pkl", "rb") as fh:
            state = pickle.load(fh)
        self.perfect = bool(state.get("perfect", False))
        for attr, cls in PARTS.items():
            setattr(self, attr, _from_state(cls, state))
        self.governor = _from_state(Governor, state, nodes=self.nodes)
