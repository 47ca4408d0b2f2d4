"""The hand-worked scheduling cases, run against every implementation of the semantics.

Each case runs on the SimPy reference (:mod:`hpcgym.sim.reference`), the compiled engine's batch mode
(:func:`hpcgym.sim.start_times`) and, for the modes agents can play, its step mode with the policy choosing its own
head at every decision (:class:`hpcgym.sim.Simulator`). The expected start times are worked out by hand in the
comments, so a change to a rule (EASY's shadow time, its extra nodes, the bound of rule (a), conservative's
compression...) fails here in the fast suite, not only in the slow differential test. Every case runs on the
4-node toy machine; rows are (submit, run, walltime, nodes) and job ids count from 1.
"""

from __future__ import annotations

import math

import pytest
from conftest import make_jobs
from simcheck import heuristic_through_steps

from hpcgym.sim import heuristics, start_times
from hpcgym.sim.policy import priority
from hpcgym.sim.reference import priority_score, simulate_reference

N = 4


def reference(rows, policy="fcfs", backfill="none", kill=True):
    return simulate_reference(make_jobs(rows), N, policy, backfill, kill).tolist()


def engine(rows, policy="fcfs", backfill="none", kill=True):
    return start_times(make_jobs(rows), N, policy, backfill, kill).tolist()


def steps(rows, policy="fcfs", backfill="none", kill=True):
    """Step mode: the policy picks its own head at each decision (conservative has no head: not a step mode)."""
    sim = heuristic_through_steps(make_jobs(rows), N, heuristics.get(policy), backfill, kill)
    assert sim.done
    return sim.start.tolist()


# Module-scoped, so that pytest runs every case on one implementation before the next: the compiled engine's batch
# mode first (the conservative cases come first in the file for the same reason), which a broken rule then fails after
# one compilation (benchmarks/mutations.py times it), not after two.
@pytest.fixture(scope="module", params=[engine, steps, reference], ids=lambda f: f.__name__)
def starts(request):
    return request.param


@pytest.fixture(scope="module", params=[engine, reference], ids=lambda f: f.__name__)
def batch_starts(request):
    """The implementations that run conservative backfilling (step mode has no conservative)."""
    return request.param


def compiled_score(name, now, submit, wall, nodes):
    return priority(heuristics.get(name).code, now, submit, wall, nodes, 0.0)


@pytest.fixture(params=[priority_score, compiled_score], ids=["reference", "engine"])
def score_of(request):
    return request.param


# --- conservative --------------------------------------------------------------------------------------------

def test_conservative_protects_later_reservations(batch_starts):
    rows = [(0, 100, 100, 2), (1, 50, 50, 3), (2, 100, 100, 4), (3, 200, 200, 1)]
    # t=1: J2 (3 nodes) reserved [100, 150) (1 node left there). t=2: J3 (4 nodes) reserved [150, 250).
    # t=3: J4 (1 node, 200 s) fits at 3 over [3, 150) but would overlap J3's [150, 250) -> earliest slot 250.
    assert batch_starts(rows, backfill="conservative") == [0, 100, 150, 250]
    # EASY only protects the head J2: S = 100, X = 1 -> J4 starts at 3 under rule (b), delaying J3 to 203.
    assert batch_starts(rows, backfill="easy") == [0, 100, 203, 3]


def test_conservative_compresses_in_reservation_order(batch_starts):
    rows = [(0, 10, 100, 4), (1, 100, 100, 2), (2, 50, 50, 4), (3, 20, 20, 2)]
    # Reservations: J2 [100, 200), J3 [200, 250), J4 [100, 120) (2 nodes free beside J2).
    # t=10: J1 ends 90 s early -> compress by current reservation (J2 and J4 at 100, then J3 at 200).
    # FCFS breaks the tie: J2 -> 10 ([10, 110)); J4 -> 10 ([10, 30), beside J2); J3 (4 nodes) -> 110.
    assert batch_starts(rows, backfill="conservative") == [0, 10, 110, 10]
    # SJF breaks it the other way (J4, then J2): the same slots.
    assert batch_starts(rows, "sjf", "conservative") == [0, 10, 110, 10]
    # In priority order instead, J3 would be re-placed at 120 (behind J4's *old* slot), which J4 then leaves:
    # it would wait for a time at which nothing ends or arrives. docs/simulation.md explains the choice.


def test_conservative_without_early_ends_is_fcfs_with_holes(batch_starts):
    rows = [(0, 100, 100, 3), (1, 50, 50, 2), (2, 40, 40, 1), (3, 10, 10, 1)]
    # J1 holds 3 nodes until 100. J2 (2 nodes) -> [100, 150). J3 (1 node, 40 s) -> [2, 42) now.
    # J4 (1 node) at 3: J3 holds the last node until 42 -> [42, 52), which ends before J2's reservation.
    # t=42: J3 ends exactly at its estimate: no compression; J4's reservation is 42 -> starts.
    assert batch_starts(rows, backfill="conservative") == [0, 100, 2, 42]


# --- no backfilling ------------------------------------------------------------------------------------------

def test_fcfs_head_blocks_without_backfill(starts):
    rows = [(0, 10, 10, 3), (1, 10, 10, 4), (2, 5, 5, 1)]
    # t=0: J1 starts (free 1). t=1: J2 (4 nodes) blocks. t=2: J3 fits but waits behind J2.
    # t=10: J1 ends, J2 starts (ends 20). t=20: J3 starts.
    assert starts(rows) == [0, 10, 20]
    # EASY: at t=2 the shadow is J1's end 10 (1 + 3 >= 4), X = 0; J3 ends at 7 <= 10 (rule a).
    assert starts(rows, backfill="easy") == [0, 10, 2]


# --- EASY ----------------------------------------------------------------------------------------------------

def test_easy_rule_a_first_then_rule_b(starts):
    rows = [(0, 100, 100, 2), (5, 10, 10, 3), (5, 50, 50, 1), (5, 300, 300, 1)]
    # t=5: free 2, head J2 (3 nodes) blocks. Shadow: J1 ends 100, 2 + 2 = 4 >= 3, S = 100, X = 1.
    # J3: 5 + 50 = 55 <= 100 -> rule (a), X stays 1. J4: 305 > 100, but 1 <= X -> rule (b), X = 0.
    # t=100: J1 ends, free 4 - 1 (J4) = 3 -> J2 starts.
    # (Trying rule (b) first would spend X on J3 and refuse J4.)
    assert starts(rows, backfill="easy") == [0, 100, 5, 5]


def test_easy_refuses_a_job_that_would_delay_the_head(starts):
    rows = [(0, 100, 100, 2), (5, 10, 10, 4), (5, 300, 300, 1), (5, 95, 95, 2)]
    # t=5: free 2, head J2 (4 nodes) blocks. S = 100, X = 4 - 4 = 0.
    # J3: 305 > 100 and 1 > X -> refused. J4: 5 + 95 = 100 <= 100 -> starts (rule a is inclusive).
    # t=100: J1 and J4 end, J2 starts (ends 110). t=110: J3 starts.
    assert starts(rows, backfill="easy") == [0, 100, 110, 5]


def test_easy_extra_nodes_count_every_job_ending_at_the_shadow_time(starts):
    rows = [(0, 100, 100, 1), (0, 100, 100, 2), (5, 10, 10, 2), (5, 300, 300, 1)]
    # t=5: free 1, head J3 (2 nodes) blocks. Walk: J1 (ends 100) -> 1 + 1 = 2 covers it, S = 100. J2 also ends
    # at 100, so the nodes free at S are 1 + 1 + 2 = 4 and X = 4 - 2 = 2 (not the walk's 2 - 2 = 0).
    # J4: 305 > 100, but 1 <= X -> starts at 5. t=100: J1, J2 end, free 3 -> J3 starts.
    assert starts(rows, backfill="easy") == [0, 0, 100, 5]


def test_easy_jobs_under_rule_b_use_the_extra_nodes_up(starts):
    rows = [(0, 100, 100, 2), (5, 10, 10, 3), (5, 300, 300, 1), (5, 300, 300, 1)]
    # t=5: free 2, head J2 (3 nodes) blocks: S = 100, X = 4 - 3 = 1. J3: 305 > 100, 1 <= X -> rule (b), X = 0.
    # J4 fits now (1 free) but 305 > 100 and 1 > X = 0 -> refused. t=100: J1 ends, J2 starts (ends 110).
    # t=110: J4 starts. (Had J3 not used X up, J4 would start at 5 and J2 wait until 305.)
    assert starts(rows, backfill="easy") == [0, 100, 5, 110]


def test_easy_overrunning_job_is_estimated_to_end_now(starts):
    rows = [(0, 1000, 50, 2), (0, 1000, 40, 1), (60, 10, 10, 2), (60, 500, 500, 1)]
    # Without kill: at t=60 J1 and J2 are past their estimates, so both are estimated to end now: S = 60 and
    # X = 1 + 2 + 1 - 2 = 2. J4: (a) fails, (b) 1 <= 2 -> starts at 60.
    # (With the stale estimates, J2 (40) alone would cover J3: S = 40, X = 0, and J4 would wait.)
    # t=1000: J1, J2 end -> J3 starts.
    assert starts(rows, backfill="easy", kill=False) == [0, 0, 1000, 60]


# --- rlscheduler ---------------------------------------------------------------------------------------------

def test_rlscheduler_is_strict_and_has_no_extra_nodes(starts):
    rows = [(0, 100, 100, 2), (5, 10, 10, 4), (5, 300, 300, 1), (5, 95, 95, 2)]
    # As the EASY refusal case, but J4 ends exactly at S = 100: 100 < 100 fails, so it waits.
    # t=100: J2 starts (ends 110). t=110: J3 then J4 start as heads.
    assert starts(rows, backfill="rlscheduler") == [0, 100, 110, 110]
    rows = [(0, 100, 100, 3), (5, 10, 10, 2), (5, 300, 300, 1)]
    # EASY: S = 100, X = 4 - 2 = 2, J3 starts under rule (b). rlscheduler has no rule (b): J3 starts at 100
    # as the head once J2 has started.
    assert starts(rows, backfill="easy") == [0, 100, 5]
    assert starts(rows, backfill="rlscheduler") == [0, 100, 100]


def test_rlscheduler_keeps_the_shadow_of_the_same_head(starts):
    rows = [(0, 10, 100, 2), (0, 50, 50, 1), (1, 10, 10, 4), (10, 60, 60, 1)]
    # t=0: J1 (est 100), J2 (est 50) start; free 1. t=1: head J3 (4 nodes) blocks: walk J2 (50): 2, J1 (100): 4
    # -> S = 100, kept. t=10: J1 ends early, J4 arrives: J3 still the head, S stays 100; 10 + 60 = 70 < 100 -> J4
    # starts. t=50: J2 ends, free 3. t=70: J4 ends, J3 starts.
    assert starts(rows, backfill="rlscheduler") == [0, 0, 70, 10]
    # EASY recomputes at t=10: free 3, J2 (50) -> S = 50, X = 0; J4 ends 70 > 50 -> refused. J3 at 50, J4 at 60.
    assert starts(rows, backfill="easy") == [0, 0, 50, 60]


def test_rlscheduler_keeps_the_shadow_when_a_head_started_in_between(starts):
    rows = [(0, 10, 100, 2), (0, 50, 50, 1), (1, 500, 500, 4), (10, 5, 5, 1), (10, 60, 60, 1)]
    # SJF. t=1: J3 (4 nodes) is the blocked head: walk J2 (50): 2, J1 (100): 4 -> S = 100, kept.
    # t=10: J1 ends early; J4 (walltime 5) comes first and starts in step 1; J3 is the blocked head again, as at
    # the previous pass, so S stays 100 (recomputed it would be 50). FCFS candidates: J5: 10 + 60 = 70 < 100.
    # t=15: J4 ends, t=50: J2 ends, t=70: J5 ends -> J3 starts.
    assert starts(rows, "sjf", "rlscheduler") == [0, 0, 70, 10, 10]


def test_rlscheduler_recomputes_the_shadow_for_a_new_head(starts):
    rows = [(0, 100, 100, 2), (0, 200, 200, 1), (1, 500, 500, 2), (2, 10, 10, 4), (3, 150, 150, 1)]
    # SJF. t=0: J1 (est 100), J2 (est 200) start, free 1. t=1: head J3 (2 nodes): S = 100.
    # t=2: J4 (walltime 10) is the new head (4 nodes): S recomputed = 200.
    # t=3: FCFS candidates: J3 does not fit; J5: 3 + 150 = 153 < 200 -> starts. (With J3's S = 100 it would not.)
    # t=200: J2 ends, free 4 -> J4 starts (ends 210); J3 is head, blocked. t=210: J3 starts.
    assert starts(rows, "sjf", "rlscheduler") == [0, 0, 210, 200, 3]


# --- priorities and walltime kills ---------------------------------------------------------------------------

def test_sjf_and_wfp3_orders(starts):
    rows = [(0, 100, 100, 4), (1, 10, 10, 1), (2, 15, 15, 4)]
    # At t=100 the queue is J2 (w 99, r 10, n 1) and J3 (w 98, r 15, n 4).
    # FCFS and SJF: J2 first (1 node, starts 100), J3 (4 nodes) waits for it -> 110.
    assert starts(rows, "fcfs") == [0, 100, 110]
    assert starts(rows, "sjf") == [0, 100, 110]
    # WFP3: J2 -(9.9)^3 * 1 = -970.3; J3 -(98/15)^3 * 4 = -1115.5 -> J3 first (100, ends 115), J2 blocks -> 115.
    assert starts(rows, "wfp3") == [0, 115, 100]
    # LJF: J3 first too.
    assert starts(rows, "ljf") == [0, 115, 100]


def test_sjf_orders_a_queue(starts):
    rows = [(0, 100, 100, 4), (1, 50, 50, 2), (2, 10, 10, 2), (3, 30, 30, 4)]
    # t=100: SJF order J3 (10), J4 (30), J2 (50). J3 starts (2 nodes), J4 (4) blocks J2.
    # t=110: J4 starts (ends 140). t=140: J2.
    assert starts(rows, "sjf") == [0, 140, 100, 110]
    # FCFS: J2 and J3 start at 100; J4 once both ended, at 150.
    assert starts(rows, "fcfs") == [0, 100, 100, 150]

def test_priority_scores(score_of):
    assert score_of("fcfs", 50, 7, 10, 3) == 7
    assert score_of("sjf", 50, 7, 10, 3) == 10
    assert score_of("ljf", 50, 7, 10, 3) == -10
    assert score_of("saf", 50, 7, 10, 3) == 30
    x = 43 / 10
    assert score_of("wfp3", 50, 7, 10, 3) == -(x * x * x) * 3
    assert score_of("unicep", 50, 7, 10, 1) == -43 / 10  # log2(1) taken as 1
    assert score_of("unicep", 50, 7, 10, 4) == -43 / 20
    assert score_of("f1", 50, 0, 100, 3) == 6.0  # log10(max(0, 1)) = 0
    assert score_of("f1", 50, 10, 100, 3) == math.log10(100) * 3 + 870 * math.log10(10)


def test_kill_at_walltime(starts):
    rows = [(0, 100, 50, 4), (1, 10, 10, 4)]
    # Killed: J1 holds its nodes min(100, 50) = 50 s. Not killed: 100 s.
    assert starts(rows, kill=True) == [0, 50]
    assert starts(rows, kill=False) == [0, 100]
