"""Time limits kept where a seed or a phase is slow (the contract "a solve given t seconds
returns within 1.5 t + 1 s", slackopt.solverbase.hard_deadline_s).

No test here measures wall time: a fake clock (``time.perf_counter`` plus one second for
every CBC program PuLP solves) makes titan-auto's programs the slow step, as on a graph
of hundreds of blocks (one program each), and the checks are on that clock: when each
program started, the planning time reported, what the solvers do once the time is up.
"""

from __future__ import annotations

import time

import numpy as np
import pulp
import pytest

from slackopt.importers.checkmate import checkmate_instance
from slackopt.plan import KEEP
from slackopt.solver import get_solver
from slackopt.solverbase import Run, hard_deadline_s
from slackopt.solvers.seeds import seed_plans
from slackopt.solvers.titan_auto import TitanAuto, outer_lp
from tests.test_import_checkmate import training_graph

PROGRAM_S = 1.0
"""Seconds the fake clock charges for one CBC program."""


class FakeClock:
    """``time.perf_counter`` that runs :data:`PROGRAM_S` fast for every PuLP solve;
    ``starts`` holds the clock at the start of each program."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = time.perf_counter
        self.offset = 0.0
        self.starts: list[float] = []
        solve = pulp.LpProblem.solve
        clock = self

        def counted(prob, *a, **k):
            clock.starts.append(clock())
            try:
                return solve(prob, *a, **k)
            finally:
                clock.offset += PROGRAM_S

        monkeypatch.setattr(pulp.LpProblem, "solve", counted)
        monkeypatch.setattr(time, "perf_counter", self)

    def __call__(self) -> float:
        return self.real() + self.offset


@pytest.fixture(scope="module")
def blocks30():
    """A Checkmate chain of 30 forward nodes (30 blocks of one saved tensor, sizes drawn
    from seed 0, so every block has its own inner program)."""
    return checkmate_instance(training_graph(30), cost_unit="1us", gpu="a100")


BUDGET = 0.6
"""Share of P at which titan-auto's outer LP is feasible on `blocks30`."""


def test_every_block_has_its_own_program(blocks30):
    res = TitanAuto().solve(blocks30, int(BUDGET * blocks30.P))
    assert len(blocks30.blocks) == 30
    assert res.info["model_fits"] and res.info["inner_solves"] == 30


def test_titan_auto_starts_no_program_after_its_limit(blocks30, monkeypatch):
    """One outer LP, then inner programs only while time is left: with 1 s per program and
    4.5 s, programs start at about 0, 1, 2, 3, 4 s and none after; the untagged blocks
    keep every tensor and the note says how many blocks were tagged."""
    M = int(BUDGET * blocks30.P)
    full = TitanAuto().solve(blocks30, M)
    clock = FakeClock(monkeypatch)
    run = Run(time_limit_s=4.5, seed=None, started=clock())
    out = TitanAuto().plan(blocks30, M, run)
    starts = [t - run.started for t in clock.starts]
    assert 2 <= len(starts) <= 6 and all(t < 4.5 for t in starts), starts
    assert run.elapsed() <= hard_deadline_s(4.5)
    tagged = out.info["tagged_bytes"]
    assert len(tagged) == len(starts) - 1 < 30
    assert out.info["note"] == (f"the time limit ended the tagging after {len(tagged)} of 30 "
                                "blocks; the other blocks keep their tensors")
    layers = np.asarray(blocks30.saved_layers)
    untagged = ~np.isin(layers, list(tagged))
    assert untagged.any() and np.all(out.plan.decisions[untagged] == KEEP)
    tagged_pos = np.isin(layers, list(tagged))
    assert np.array_equal(out.plan.decisions[tagged_pos], full.plan.decisions[tagged_pos])
    # the plan's own evaluation decides: "timeout" unless it runs under M
    assert out.evaluation is not None and out.objective_s is None
    assert out.status == (None if out.evaluation.feasible else "timeout")


def test_titan_auto_outer_lp_build_stops_at_its_limit(blocks30, monkeypatch):
    clock = FakeClock(monkeypatch)
    fr, info = outer_lp(blocks30, int(BUDGET * blocks30.P), time_limit_s=1e-9)
    assert fr is None and info["status"] == "Not Solved" and clock.starts == []
    assert info["note"] == "the time limit ended the build after 1 of 30 blocks"


def test_titan_auto_keeps_its_plan_when_the_limit_does_not_bind(blocks30):
    M = int(BUDGET * blocks30.P)
    a = TitanAuto().solve(blocks30, M)
    b = TitanAuto().solve(blocks30, M, time_limit_s=600)
    assert a.plan == b.plan and a.objective_s == b.objective_s and "note" not in b.info


def test_seeding_ends_titan_auto_at_the_seeding_end(blocks30, monkeypatch):
    """seed_plans gives a solver started before `end` at most the time up to it: titan-auto
    started with 3 s left starts no program past `end`, and the next solver is skipped."""
    clock = FakeClock(monkeypatch)
    t0 = clock()
    plans, log = seed_plans(blocks30, int(BUDGET * blocks30.P), 0,
                            ["titan-auto", "slackswap"], 10.0, t0 + 3.0)
    assert all(t - t0 < 3.0 for t in clock.starts), clock.starts
    assert log[0]["solver"] == "titan-auto" and log[0]["planning_time_s"] <= 3.0 + PROGRAM_S + 1
    assert log[0]["status"] in ("timeout", "infeasible", "feasible")
    assert log[1] == {"solver": "slackswap", "skipped": "no time left for seeding"}
    assert [n for n, _ in plans] == ["titan-auto"]


@pytest.mark.parametrize("limit", [4.0, 8.0])
def test_genetic_seeded_by_titan_auto_keeps_its_limit(blocks30, monkeypatch, limit):
    """The genetic search seeded by titan-auto alone, 1 s per CBC program: seeding gets
    half the limit and the whole solve returns within 1.5 t + 1 s on that clock."""
    clock = FakeClock(monkeypatch)
    t0 = clock()
    g = get_solver("genetic", seed_solvers=["titan-auto"], generations=3, population=8)
    res = g.solve(blocks30, int(BUDGET * blocks30.P), time_limit_s=limit, seed=0)
    # seeding ends at half the time left when it starts, a moment after t0
    assert all(t - t0 < limit / 2 + 0.5 for t in clock.starts), clock.starts
    assert res.planning_time_s <= hard_deadline_s(limit)
    assert [s["solver"] for s in res.info["seeds"]] == ["titan-auto"]


@pytest.mark.parametrize("n", [12, 1100])
def test_timing_model_rebuilt_early_walks_a_deep_recipe_chain(n):
    """The milp's timing model marks tensor t "rebuilt before backward op j" when a
    chain of recipe readers leads from t to a tensor first read by j. On a Checkmate chain
    with one backward reader per node, tensor t's only rebuildable reader is t + 1 and
    the last tensor is the first one read (by Loss, op n): at j = n every tensor but
    the last gets its indicator and 3 rows, built by walking
    the chain to its end, 1,099 readers deep on the larger graph (deeper than Python's
    recursion allows)."""
    from slackopt.solvers.milp.bounds.checkpoint import bound_arrays
    from slackopt.solvers.milp.bounds.timing_model import _TimingBuilder

    inst = checkmate_instance(training_graph(n, readers=1), cost_unit="1us", gpu="a100")
    a_ = bound_arrays(inst, int(0.5 * inst.P))
    b = _TimingBuilder(inst, a_, integer=False, z_binary=False, deadline=None)
    b.decisions()
    assert b.readers_any == {t: [t + 1] for t in range(n - 1)}
    assert a_.firstb[n - 1] == n and all(a_.firstb[t] > n for t in range(n - 1))
    rows = len(b.lin.rows)
    assert sorted(b.early(n)) == list(range(n - 1))
    assert len(b.lin.rows) - rows == 3 * (n - 1)
    assert sorted(b.early(n + 2)) == list(range(n - 2))    # f_{n-2}'s backward op


# ------------------------------------------------------------- past the deadline: no work
def test_model_build_looks_at_the_clock_every_64_rows():
    """A row family can hold a term per saved tensor: the build reads the clock every
    ROWS_PER_LOOK rows, so a deadline that passes mid-build ends it within 64 rows."""
    from slackopt.solvers.milp.linear.lin import ROWS_PER_LOOK, ModelTimeout, _Lin

    lin = _Lin()
    x = lin.var(0, 1)
    lin.row([(x, 1.0)], hi=1.0)
    lin.deadline = time.perf_counter() - 1.0
    with pytest.raises(ModelTimeout, match=f"after {ROWS_PER_LOOK} rows"):
        for _ in range(10_000):
            lin.row([(x, 1.0)], hi=1.0)
    assert len(lin.rows) == ROWS_PER_LOOK == 64


def _refuse(*a, **k):
    raise AssertionError("built after the deadline")


def test_bounds_and_lns_past_the_deadline_build_nothing(blocks30, monkeypatch):
    """Past its deadline a phase of milp returns at once: the checkpoint LP and the
    timing model are not built (no bound: the certified bound only weakens), the
    large-neighbourhood search prepares no branch and bound."""
    from slackopt.solvers.milp.bounds import checkpoint, timing
    from slackopt.solvers.milp.search import lns
    from slackopt.solvers.milp.search.incumbent import Incumbent

    M = int(0.5 * blocks30.P)
    past = time.perf_counter() - 1.0
    monkeypatch.setattr(checkpoint, "build_checkpoint_model", _refuse)
    monkeypatch.setattr(timing, "build_timing_model", _refuse)
    monkeypatch.setattr(lns, "BranchAndBound", _refuse)
    assert checkpoint.checkpoint_bound(blocks30, M, 10.0, deadline=past) is None
    tb, info = timing.timing_bound(blocks30, M, 10.0, deadline=past)
    assert tb is None and info["status"] == "no time left to build the model"
    inc = Incumbent(blocks30, M)
    inc.consider(np.full(blocks30.n_saved, 1, dtype=np.int8), "all swap")
    out = lns.lns(inc, 1000, 0, past)
    assert (out.windows, out.simulated) == (0, 0)


def test_checkpoint_scan_stops_at_the_limit(blocks30):
    """The checkpoint baseline scans k = 1, 2, ... (one simulation each); at 0.5 P no k
    fits (its smallest peak is k = 15's). A limit that expires at the 4th look at the
    clock (before k = 5) ends the scan: status timeout, the smallest peak of k = 1..4."""
    from slackopt.solvers.baselines import Checkpoint

    M = int(0.5 * blocks30.P)
    full = Checkpoint().solve(blocks30, M)
    assert full.status == "infeasible" and full.info["evaluations"] == 30
    run = Run(time_limit_s=1.0, seed=None, started=time.perf_counter())
    looks = []
    run.expired = lambda: looks.append(1) or len(looks) >= 4
    out = Checkpoint().plan(blocks30, M, run)
    assert out.status == "timeout" and out.info["evaluations"] == 4
    assert out.info["note"] == ("the time limit ended the scan after k = 4 of 30 blocks; "
                                "none of those plans fits")
    peaks = [Checkpoint(blocks=k).solve(blocks30, M).info["peak_bytes"] for k in range(1, 5)]
    assert out.info["peak_bytes"] == min(peaks) and out.min_budget_bytes is None
