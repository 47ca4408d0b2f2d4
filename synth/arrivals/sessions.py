"""Sessions and users: which jobs continue the previous job's session, and who opens each session.

A user often resubmits the same job. With a probability fitted per gap bin (short gaps: high), the next job
continues the previous job's *session*: same user, same request. Users are synthetic: the ``k``-th is
``user_base + k``, where ``user_base`` is a power of ten (at least 10^6) above every training id. The training users
are ranked by their session counts (the activity profile; the ids are dropped), and users own their requests: a
session's user is drawn given its request, from the ranks of the users who opened that request's sessions in the
data, with :data:`OWNER_PRIOR` pseudo-sessions of the activity profile beside them. A log without user ids gives
samples without them (``-1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.arrivals.context import GAP_BINS, MIN_POOL, gap_bin

OWNER_PRIOR = 1.0  # pseudo-sessions of the activity profile beside a request's own users (revision 7)


def repeats(request: np.ndarray, user: np.ndarray) -> np.ndarray:
    """For each job but the first, whether it repeats the previous job's user and request (continues its session)."""
    return (request[1:] == request[:-1]) & (user[1:] == user[:-1])


def previous_same(key: np.ndarray) -> np.ndarray:
    """For each entry, the position of the last earlier entry with the same key (-1: none)."""
    order = np.argsort(key, kind="stable")  # positions ascending within each key
    back = np.full(len(key), -1, np.int64)
    same = key[order[1:]] == key[order[:-1]]
    back[order[1:][same]] = order[:-1][same]
    return back


def returns(starts: np.ndarray, user: np.ndarray, request: np.ndarray,
            n_requests: int) -> tuple[np.ndarray, np.ndarray]:
    """Session starts of known users that return to a request: ``(j, i)``, ``i`` the user's last start of it."""
    starts = starts[user[starts] >= 0]
    back = previous_same(user[starts].astype(np.int64) * n_requests + request[starts])
    return starts[back >= 0], starts[back[back >= 0]]


@dataclass
class Sessions:
    """The session model.

    Attributes:
        p_same: per gap bin, the probability that a job continues the previous job's session.
        users_known: whether the data had user ids.
        user_weights: the activity profile: cumulative session shares of the users by rank.
        owner_ranks: the ranks of the users who opened each request's sessions, grouped by request.
        owner_start: where each request's group starts in ``owner_ranks`` (one more entry than requests).
        user_base: the synthetic ids' offset, above every training id.
    """

    p_same: np.ndarray
    users_known: bool
    user_weights: np.ndarray
    owner_ranks: np.ndarray
    owner_start: np.ndarray
    user_base: int

    @classmethod
    def fit(cls, request: np.ndarray, user: np.ndarray, x: np.ndarray, n_requests: int) -> Sessions:
        """Fit on the training jobs' requests (menu indices), users and log gaps ``x = log1p(gap)``."""
        same = repeats(request, user)
        b = gap_bin(x[1:])
        p_same = np.array([same[b == k].mean() if (b == k).sum() >= MIN_POOL else same.mean()
                           for k in range(len(GAP_BINS))])
        # sessions per user, sorted: an activity profile without the ids (rank 0: the most sessions)
        starts = np.concatenate([[True], ~same])
        _, user_of = np.unique(user[starts], return_inverse=True)
        sessions = np.bincount(user_of.ravel()).astype(np.float64)
        by_rank = np.argsort(-sessions, kind="stable")
        rank_of = np.empty_like(by_rank)
        rank_of[by_rank] = np.arange(len(by_rank))
        # who opened each request's sessions (their ranks, grouped by request): a session's user is drawn from them
        opened, rank = request[starts], rank_of[user_of.ravel()]
        order = np.lexsort((rank, opened))
        top = int(max(np.max(np.abs(user)), 1))
        return cls(p_same=p_same, users_known=bool((user >= 0).any()),
                   user_weights=np.cumsum(sessions[by_rank] / sessions.sum()),
                   owner_ranks=rank[order].astype(np.int64),
                   owner_start=np.searchsorted(opened[order], np.arange(n_requests + 1)),
                   user_base=10 ** max(6, len(str(top))))  # above every training id: never a real one

    def split(self, x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each job's session index and the jobs that open one, given the log gaps ``x`` before the jobs."""
        repeat = rng.random(len(x)) < self.p_same[gap_bin(x)]
        repeat[0] = False
        return np.cumsum(~repeat) - 1, np.flatnonzero(~repeat)

    def owners(self, request: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Each session's user rank, given its request and one uniform draw ``u`` per session.

        With probability ``k / (k + OWNER_PRIOR)`` (``k >= 1``: the request's sessions in the training data; a
        request's first job opens one) one of the users who opened them, else a user of the activity profile; one
        uniform per session does both (its low part picks the owner, the rest is rescaled for the profile).
        """
        lo, hi = self.owner_start[request], self.owner_start[request + 1]
        k = hi - lo
        w = k / (k + OWNER_PRIOR)
        owner = self.owner_ranks[np.minimum(lo + (u / w * k).astype(np.int64), hi - 1)]
        rest = np.clip((u - w) / (1.0 - w), 0.0, 1.0 - 1e-12)
        profile = np.searchsorted(self.user_weights, rest * self.user_weights[-1], side="right")
        return np.where(u < w, owner, profile)

    def users(self, request: np.ndarray, session: np.ndarray, starts: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
        """Each job's user rank (-1 where the data had no user ids): its session's owner."""
        rank = self.owners(request[starts], rng.random(len(starts)))
        return rank[session] if self.users_known else np.full(len(session), -1, np.int64)

    def ids(self, rank: np.ndarray) -> np.ndarray:
        """The synthetic user ids of user ranks (-1 stays -1)."""
        return np.where(rank >= 0, self.user_base + 1 + rank, -1)
