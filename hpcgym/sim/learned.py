"""The learned runtime predictor's compiled half: its features, and its tree ensemble as plain arrays.

A learned predictor (:mod:`hpcgym.sim.predict`, code ``LEARNED``) predicts a job's log runtime from
:data:`FEATURES`, computed when the job arrives from what a scheduler has then: the job's request and the jobs of
its user that *finished* (were released) at or before its arrival, the last :data:`K` of them in the order they
finished (ties in end time: the later row is the more recent). The features of job ``j`` (user ``u``, walltime
``W``, nodes ``N``) arriving at ``t``, with ``h_1 .. h_m`` the hold times (``min(run, walltime)``) of the user's
last ``m = min(K, finished)`` finished jobs, oldest first, ``w_i`` their walltimes, ``e_m`` the end of the most
recent, NaN where a value needs a finished job and there is none (and for every history feature of an unknown
user, -1, who counts as a user with no finished job):

=================  ============================================================================================
``walltime``       ``W``
``nodes``          ``N``
``finished``       how many of the user's jobs have finished (all of them, not only the last ``K``)
``last``           ``h_m``
``last2``          ``(h_{m-1} + h_m) / 2`` (``h_m`` when ``m = 1``)
``median5``        the median of the last ``min(m, 5)`` holds (the mean of the two middle ones for an even count)
``longest``        ``max(h_1 .. h_m)``
``shortest``       ``min(h_1 .. h_m)``
``last_ratio``     ``h_m / w_m``
``mean_ratio``     ``(h_1 / w_1 + ... + h_m / w_m) / m``, summed oldest first
``scaled``         ``h_m / w_m * W``
``same_request``   ``h_i`` of the most recent ``i`` with ``w_i == W`` (NaN if none)
``same_count``     how many of ``w_1 .. w_m`` equal ``W``
``since``          ``t - e_m``
=================  ============================================================================================

Every value is an integer or one IEEE division of integers (no logarithm), so that the compiled loop, the
training rows (:func:`replay`) and the independent reference (:mod:`hpcgym.sim.reference`) agree to the bit; a
tree ensemble does not care about monotone transforms of its inputs.

**The model as arrays.** A fitted ensemble of regression trees (``baselines.learned`` fits scikit-learn's
``HistGradientBoostingRegressor``) is packed into one float64 array of shape ``(rows, 6)``:

- row 0: ``[trees, baseline, features, FORMAT, 0, 0]``;
- rows ``1 .. trees``: each tree's root row in column 0;
- then one row per node: ``[feature, threshold, missing_left, left, right, value]``, ``feature = -1`` for a leaf.

In memory (:func:`with_since_bins`, which :class:`hpcgym.sim.predict.Predictor` applies; files never hold it) the
sorted distinct thresholds on ``since`` follow the nodes, six to a row, and row 0 ends with their first row and
their count. Two arrivals whose features differ only in ``since`` and have as many of those thresholds below it
take the same path through every tree: :func:`estimate` then reuses the user's last estimate (the memo after the
history rings, :data:`hpcgym.sim.state.MEMO`) instead of computing the features and walking the trees again.

A sample goes left when its feature is ``<= threshold``, and a NaN goes left when ``missing_left`` is 1 (the
scikit-learn rule); the right child is always the row after the left one. The raw prediction is
``baseline + value_1 + ... + value_trees``, added in tree order (the order scikit-learn adds them, so both give the
same float): the log runtime in seconds. The estimate is ``ceil(exp(raw))``, at least 1 s and at most the walltime.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from hpcgym.sim.state import MEMO, borrowing

#: How many of a user's finished jobs the features read (the history ring of the engine).
K = 8
FEATURES = ("walltime", "nodes", "finished", "last", "last2", "median5", "longest", "shortest", "last_ratio",
            "mean_ratio", "scaled", "same_request", "same_count", "since")
N_FEATURES = len(FEATURES)
#: The one feature that changes with the arrival time alone (the others with the job and its user's history).
SINCE = FEATURES.index("since")
#: The version of the packed layout (row 0, column 3).
FORMAT = 1
#: A model for predictors that have none (the engine's arrays need a shape).
EMPTY = np.zeros((1, 6))


def pack(trees: list[np.ndarray], baseline: float) -> np.ndarray:
    """Pack trees given as ``(nodes, 6)`` arrays of ``[feature, threshold, missing_left, left, right, value]``.

    Each tree's ``left`` and ``right`` are node indices within that tree (node 0 is its root); they become rows of
    the packed array, renumbered breadth first so that every right child is the row after its left child (the
    walker then steps without a branch).
    """
    header = np.zeros((1 + len(trees), 6))
    header[0, :4] = len(trees), baseline, N_FEATURES, FORMAT
    parts, row = [header], 1 + len(trees)
    for i, tree in enumerate(trees):
        tree = np.asarray(tree, np.float64)
        order = [0]
        for r in order:  # breadth first: the list grows while it is walked
            if tree[r, 0] >= 0:
                order += [int(tree[r, 3]), int(tree[r, 4])]
        where = np.empty(len(tree), np.int64)
        where[order] = row + np.arange(len(order))
        out = tree[order].copy()
        inner = out[:, 0] >= 0
        out[inner, 3] = where[out[inner, 3].astype(np.int64)]
        out[inner, 4] = where[out[inner, 4].astype(np.int64)]
        header[1 + i, 0] = row
        parts.append(out)
        row += len(order)
    return np.concatenate(parts)


def check_model(model: np.ndarray) -> None:
    """Raise ``ValueError`` unless ``model`` is a packed ensemble this engine can read."""
    model = np.asarray(model)
    if model.ndim != 2 or model.shape[1] != 6 or len(model) < 1:
        raise ValueError(f"a packed runtime model is a (rows, 6) array, not one of shape {model.shape}")
    trees, _, features, version = model[0, :4]
    if int(version) != FORMAT or int(features) != N_FEATURES:
        raise ValueError(f"this runtime model was packed for format {int(version)} with {int(features)} features; "
                         f"this hpcgym reads format {FORMAT} with {N_FEATURES}: fit it again "
                         "(python -m baselines.learn)")
    nodes = model[1 + int(trees):tree_rows(model)]
    inner = nodes[:, 0] >= 0
    if (nodes[inner, 0] >= N_FEATURES).any() or (nodes[inner, 3:5] >= len(model)).any():
        raise ValueError("a packed runtime model has a node that points outside it")
    if (nodes[inner, 4] != nodes[inner, 3] + 1).any():
        raise ValueError("a packed runtime model has a right child that is not the row after its left one (pack it "
                         "with hpcgym.sim.learned.pack)")


def tree_rows(model: np.ndarray) -> int:
    """Where the trees' rows end: the first row of the ``since`` thresholds, or the model's length without them."""
    return int(model[0, 4]) if model[0, 5] > 0 else len(model)


def with_since_bins(model: np.ndarray) -> np.ndarray:
    """``model`` with its sorted distinct thresholds on ``since`` after its rows (module docstring).

    A model that has them already, or has no split on ``since``, comes back as it is.
    """
    model = np.asarray(model, np.float64)
    if model[0, 5] > 0 or len(model) < 2:
        return model
    nodes = model[1 + int(model[0, 0]):]
    cuts = np.unique(nodes[nodes[:, 0] == SINCE, 1])
    if not len(cuts):
        return model
    rows = np.full((-(-len(cuts) // 6), 6), np.inf)
    rows.flat[:len(cuts)] = cuts
    out = np.concatenate([model, rows])
    out[0, 4], out[0, 5] = len(model), len(cuts)
    return out


# ---- compiled ----------------------------------------------------------------------------------------------
@borrowing
def _step(model, x, r):  # pragma: no cover - compiled
    """One level down from row ``r`` (a leaf stays): left child, or the row after it."""
    f = model[r, 0]
    if f < 0:
        return r
    v = x[int(f)]
    left = (v <= model[r, 1]) | (math.isnan(v) & (model[r, 2] == 1.0))
    return int(model[r, 3]) + 1 - int(left)


@borrowing
def _leaf(model, r):  # pragma: no cover - compiled
    return model[r, 0] < 0


@borrowing
def raw_value(model, x):  # pragma: no cover - compiled
    """The ensemble's raw prediction (log seconds) for the feature row ``x``.

    Four trees are walked side by side (their loads do not wait for each other, which about halves the time of a
    walk that is bound by memory latency); their leaves are still added one by one in tree order.
    """
    total = model[0, 1]
    trees = int(model[0, 0])
    i = 0
    while i + 4 <= trees:
        a, b, c, d = int(model[1 + i, 0]), int(model[2 + i, 0]), int(model[3 + i, 0]), int(model[4 + i, 0])
        while not (_leaf(model, a) and _leaf(model, b) and _leaf(model, c) and _leaf(model, d)):
            a, b, c, d = _step(model, x, a), _step(model, x, b), _step(model, x, c), _step(model, x, d)
        total += model[a, 5]
        total += model[b, 5]
        total += model[c, 5]
        total += model[d, 5]
        i += 4
    while i < trees:
        a = int(model[1 + i, 0])
        while not _leaf(model, a):
            a = _step(model, x, a)
        total += model[a, 5]
        i += 1
    return total


@borrowing
def seconds(raw, limit):  # pragma: no cover - compiled
    """``ceil(exp(raw))`` seconds, at least 1 and at most ``limit``."""
    v = math.exp(raw)
    if v >= limit:
        return limit
    return max(1, int(math.ceil(v)))


@borrowing
def ranked_hold(hist, base, first, m, k, hold, r):  # pragma: no cover - compiled
    """The ``r``-th smallest (0-based) hold of the jobs at ring positions ``first .. first + m - 1``.

    The ring holds ``k`` entries from ``hist[base]``; ties go by ring order; nothing is allocated. The median of
    ``median5`` and the learned predictor's ``median5`` feature read it.
    """
    for a in range(m):
        v = hold[hist[base + (first + a) % k]]
        below = 0
        equal_before = 0
        for b in range(m):
            w = hold[hist[base + (first + b) % k]]
            if w < v:
                below += 1
            elif w == v and b < a:
                equal_before += 1
        if below + equal_before == r:
            return v
    return hold[hist[base + first % k]]


@borrowing
def ring_stats(j, hist, hcount, user, hold, limit):  # pragma: no cover - compiled
    """What job ``j``'s user's last ``m = min(finished, K)`` finished jobs say.

    Returns (finished, m, the most recent job, longest hold, shortest hold, sum of hold / walltime oldest first, the
    most recent job that asked for ``j``'s walltime or -1, how many did); ``m = 0`` (and -1 jobs) without a finished
    job or a known user.
    """
    u = user[j]
    count = hcount[u] if u >= 0 else 0
    if count == 0:
        return 0, 0, -1, 0, 0, 0.0, -1, 0
    m = min(count, K)
    base = u * K
    latest = hist[base + (count - 1) % K]
    longest = hold[latest]
    shortest = hold[latest]
    ratios = 0.0
    same = -1
    same_count = 0
    for i in range(m):
        g = hist[base + (count - m + i) % K]
        longest = max(longest, hold[g])
        shortest = min(shortest, hold[g])
        ratios += hold[g] / limit[g]
        if limit[g] == limit[j]:
            same = g
            same_count += 1
    return count, m, latest, longest, shortest, ratios, same, same_count


@borrowing
def features(j, t, hist, hcount, user, begin, hold, limit, nodes):  # pragma: no cover - compiled
    """Job ``j``'s features at its arrival ``t`` (module docstring), as a tuple of :data:`N_FEATURES` floats.

    ``hist``/``hcount`` are the history ring (:data:`K` entries per user, as :func:`hpcgym.sim.predict.remember`
    keeps it). A tuple, not an array: the engine's helpers must not allocate.
    """
    nan = np.nan
    w = limit[j]
    count, m, latest, longest, shortest, ratios, same, same_count = ring_stats(j, hist, hcount, user, hold, limit)
    if m == 0:
        return (float(w), float(nodes[j]), 0.0, nan, nan, nan, nan, nan, nan, nan, nan, nan, 0.0, nan)
    base = user[j] * K
    h = hold[latest]
    last2 = float(h) if m == 1 else (hold[hist[base + (count - 2) % K]] + h) / 2.0
    m5 = min(m, 5)
    lo = ranked_hold(hist, base, count - m5, m5, K, hold, (m5 - 1) // 2)
    hi = ranked_hold(hist, base, count - m5, m5, K, hold, m5 // 2)
    ratio = h / limit[latest]
    return (float(w), float(nodes[j]), float(count), float(h), last2, (lo + hi) / 2.0, float(longest),
            float(shortest), ratio, ratios / m, ratio * w, float(hold[same]) if same >= 0 else nan,
            float(same_count), float(t - (begin[latest] + h)))


@nb.njit(cache=True)
def replay(submit, begin, hold, limit, nodes, user, users):  # pragma: no cover - compiled
    """Every job's features at its arrival, given a schedule (``begin``: start times; ``user``: dense indices).

    Events in the engine's order: at one timestamp the releases (by end, then row) come before the arrivals, so a
    job's features read exactly the history the engine reads at its arrival under this schedule. Returns an
    ``(n, N_FEATURES)`` float64 array (the training rows of ``baselines.learned``).
    """
    n = len(submit)
    out = np.empty((n, N_FEATURES))
    ends = np.empty(n, np.int64)
    for j in range(n):
        ends[j] = (begin[j] + hold[j]) * n + j
    order = np.argsort(ends)
    hist = np.zeros(max(users, 1) * K, np.int64)
    hcount = np.zeros(max(users, 1), np.int64)
    e = 0
    for j in range(n):
        t = submit[j]
        while e < n and ends[order[e]] // n <= t:
            g = order[e]
            u = user[g]
            if u >= 0:
                hist[u * K + hcount[u] % K] = g
                hcount[u] += 1
            e += 1
        x = features(j, t, hist, hcount, user, begin, hold, limit, nodes)
        for f in range(N_FEATURES):
            out[j, f] = x[f]
    return out


@borrowing
def since_bin(model, hist, hcount, u, t, begin, hold):  # pragma: no cover - compiled
    """How many of the model's ``since`` thresholds lie below user ``u``'s ``since`` at ``t`` (-1: no history)."""
    count = hcount[u]
    if count == 0:
        return -1
    latest = hist[u * K + (count - 1) % K]
    since = float(t - (begin[latest] + hold[latest]))
    first, n = int(model[0, 4]), int(model[0, 5])
    lo, hi = 0, n
    while lo < hi:  # the first threshold >= since
        mid = (lo + hi) >> 1
        if model[first + mid // 6, mid % 6] < since:
            lo = mid + 1
        else:
            hi = mid
    return lo


@borrowing
def estimate(j, t, model, hist, hcount, user, begin, hold, limit, nodes):  # pragma: no cover - compiled
    """Job ``j``'s learned estimate at its arrival ``t`` (seconds).

    With the model's ``since`` thresholds (:func:`with_since_bins`) and a known user, the user's memo (``MEMO``
    slots after the rings: finished count + 1, walltime, nodes, ``since`` bin, estimate) answers an arrival that
    matches it in all four: its features can differ from the memo's only in ``since``, within one bin, so every
    tree takes the same path.
    """
    u = user[j]
    if u < 0 or model[0, 5] == 0:
        return seconds(raw_value(model, features(j, t, hist, hcount, user, begin, hold, limit, nodes)), limit[j])
    memo = len(hist) - len(hcount) * MEMO + u * MEMO
    b = since_bin(model, hist, hcount, u, t, begin, hold)
    if hist[memo] == hcount[u] + 1 and hist[memo + 1] == limit[j] and hist[memo + 2] == nodes[j] \
            and hist[memo + 3] == b:
        return hist[memo + 4]
    value = seconds(raw_value(model, features(j, t, hist, hcount, user, begin, hold, limit, nodes)), limit[j])
    hist[memo], hist[memo + 1], hist[memo + 2], hist[memo + 3], hist[memo + 4] = hcount[u] + 1, limit[j], nodes[j], \
        b, value
    return value


__all__ = ["EMPTY", "FEATURES", "FORMAT", "K", "N_FEATURES", "SINCE", "check_model", "estimate", "features", "pack",
           "ranked_hold", "raw_value", "replay", "ring_stats", "seconds", "since_bin", "tree_rows", "with_since_bins"]
