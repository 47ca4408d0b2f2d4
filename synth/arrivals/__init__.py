"""hpcgym's own generator: an explicit arrival process, with job attributes drawn from a model conditioned on it.

Rows generated independently (as tabular GANs do) lose what makes a trace schedule like the real one: bursts, the
daily and weekly cycle, users resubmitting the same job, the walltime menu, and the killed jobs that overrun their
walltime. This model keeps each of them by construction, and it never hands back a training row: every attribute is
drawn from a fitted distribution, runtimes from a smoothed density, and users are fresh synthetic identities.

A sample is drawn in this order, one sub-model (one module) per step:

1. **Arrivals** (:mod:`~synth.arrivals.process`): the log gap ``log1p(gap)`` from its quantile function in the hour
   class (hour of day x weekday/weekend) the clock is in, smoothed; serial dependence from normal scores that mix a
   fast AR(1) and a slow one (bursts, and stretches of short gaps that build a queue); the data's outage time per
   gap, placed as stratified outages.
2. **Sessions** (:mod:`~synth.arrivals.sessions`): with a probability fitted per gap bin, a job continues the
   previous job's session (same user, same request); a new session's user is drawn given its request, from the
   users who opened that request's sessions in the data. Users are synthetic ids above every real one.
3. **Requests** (:mod:`~synth.arrivals.requests`): a new session's ``(nodes, walltime)`` from the training menu, given
   its arrival context (period of the day x the gap before it), calibrated so that the sampled jobs' mix is the
   data's.
4. **Outcomes** (:mod:`~synth.arrivals.outcomes`): status and overrun given the request; a session keeps its outcome
   as often as the data's sessions do.
5. **Runtimes** (:mod:`~synth.arrivals.runtimes`): a smoothed bootstrap of ``log(run / walltime)`` per request and
   outcome, below the walltime; a session's jobs, and a user returning to a request, run about as long as before;
   overruns from their own kernel.
6. **Load** (:mod:`~synth.arrivals.governor`): the clock runs again with each gap stretched by the work submitted
   ahead of the target load (the training jobs' load between outages, or ``load``), so samples offer the data's
   load; a sample longer than the governor's horizon holds it exactly.

The fit estimates each sub-model from the training table, then calibrates by sampling
(:mod:`~synth.arrivals.calibration`): the AR(1) coefficient (the data's lag-1 autocorrelation of log gaps), the
request mix, and the slow component's share (the candidate whose replayed waits are closest to the data's). Where
most jobs have no walltime estimate, a request is ``(nodes, run)`` and ``run`` equals the smoothed walltime
(perfect estimates, flagged as the readers flag them). The model's revisions, what each fixed and the measurements
behind them: ``docs/journal/arrivals-revisions.md``.

This package keeps the single module's public names: :class:`ArrivalAwareSynthesizer` (registered as
``"arrivals"``; ``fit``/``sample``/``save``/``load``), :func:`arrival_context` and :func:`edge_noise`.
"""

from __future__ import annotations

from synth.arrivals.context import GAP_BINS, arrival_context
from synth.arrivals.model import ArrivalAwareSynthesizer
from synth.arrivals.runtimes import Kernel, edge_noise

#: the kernel class under its name in the single module: saves written before the split pickled it as
#: ``synth.arrivals._Kernel``, and unpickling looks it up here
_Kernel = Kernel

__all__ = ["GAP_BINS", "ArrivalAwareSynthesizer", "Kernel", "arrival_context", "edge_noise"]
