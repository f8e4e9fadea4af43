"""The rebuild exchanges and the iterated local search of solvers/milp/search/incumbent.py."""

from __future__ import annotations

import numpy as np
import pytest

from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.solvers.milp import MILP
from slackopt.solvers.milp.search.incumbent import Incumbent, _Moves, kick_search
from slackopt.solvers.slackswap import SlackSwap
from tests.helpers import build
from tests.helpers_milp import enumerated, instance

pytestmark = pytest.mark.slow  # every test here takes seconds (a milp solve each)


def _four():
    """a (100 B, rebuilt in 4 s), b (80 B, 1 s), d (50 B, 2 s), e (100 B, no recipe)."""
    names = ["a", "b", "d", "e"]
    fwd = [(f"f{i}", 1.0) for i in range(4)]
    bwd = [(f"g{i}", 1.0) for i in reversed(range(4))]
    sizes, cost = [100, 80, 50, 100], [4.0, 1.0, 2.0, None]
    rebuild = [(f"r{i}", c) for i, c in enumerate(cost) if c is not None]
    tensors = [(n, sizes[i], f"f{i}", [f"g{i}"], None if cost[i] is None else ([f"r{i}"], []))
               for i, n in enumerate(names)]
    return build(fwd, bwd, tensors, rebuild_ops=rebuild)


def test_exchanges_trade_a_dear_rebuild_for_a_cheaper_one_of_about_its_size():
    inst = _four()
    assert list(inst.c[:3]) == [4.0, 1.0, 2.0] and not np.isfinite(inst.c[3])
    mv = _Moves(inst, np.random.default_rng(0))
    # a recomp: its partner is b (cheaper, 80 >= 0.6 x 100 B); d is too small (50 B),
    # e has no recipe
    got = [m.tolist() for m in mv.exchanges(np.array([RECOMP, KEEP, SWAP, KEEP], np.int8))]
    assert got == [[KEEP, RECOMP, SWAP, KEEP], [SWAP, RECOMP, SWAP, KEEP]]
    # a and d recomp: dearest first (a, 4 s, then d, 2 s), b the partner of both
    got = [m.tolist() for m in mv.exchanges(np.array([RECOMP, KEEP, RECOMP, KEEP], np.int8))]
    assert got == [[KEEP, RECOMP, RECOMP, KEEP], [SWAP, RECOMP, RECOMP, KEEP],
                   [RECOMP, RECOMP, KEEP, KEEP], [RECOMP, RECOMP, SWAP, KEEP]]
    # nothing recomp, or no cheaper partner: no exchange
    assert list(mv.exchanges(np.array([KEEP, SWAP, KEEP, KEEP], np.int8))) == []
    assert list(mv.exchanges(np.array([KEEP, RECOMP, KEEP, KEEP], np.int8))) == []


def test_kicks_reach_the_enumerated_optimum_and_are_deterministic():
    """On unet2 (b16, PCIe 5) at 0.8 P, SlackSwap's plan is three changes from the
    optimum (no single or paired change improves it); the kicks reach it, within their
    plan budget, and the same seed gives the same plan."""
    inst = instance("unet2-b16-pcie5")
    M = int(0.8 * inst.P)
    start_dec = SlackSwap(min_budget_search=False).solve(inst, M).plan.decisions
    runs = []
    for _ in range(2):
        inc = Incumbent(inst, M)
        start = inc.consider(start_dec, "slackswap")
        made = kick_search(inc, 3000, seed=0, deadline=float("inf"))
        assert made <= 3000 and made == inc.evaluations - 1
        assert inc.step_s <= start
        runs.append((inc.step_s, inc.dec.tobytes()))
    assert runs[0] == runs[1]
    assert runs[0][0] == pytest.approx(min(enumerated("unet2-b16-pcie5", 0.8).values()))
    assert runs[0][0] < start


def test_kicks_stop_when_nothing_new_is_left():
    # four tensors, 54 plans: every plan is simulated within a few hundred kicks; the
    # search then stops on KICK_STALE kicks in a row that simulate nothing new, far
    # below its plan budget
    inst = _four()
    M = int(inst.P)
    inc = Incumbent(inst, M)
    start = inc.consider(np.array([RECOMP, RECOMP, RECOMP, KEEP], np.int8), "recompute")
    assert start > inst.ideal_time_s    # 7 s of rebuilds
    made = kick_search(inc, 10**9, seed=0, deadline=float("inf"))
    assert made == inc.evaluations - 1 <= 3 * 3 * 3 * 2 - 1
    assert inc.step_s == pytest.approx(inst.ideal_time_s)   # keep all: it fits


def test_milp_runs_the_kicks_as_a_phase_and_kick_plans_0_turns_them_off():
    inst = instance("unet2-b16-pcie5")
    M = int(0.8 * inst.P)
    on = MILP(time_limit_s=20, enum_plans=0, lns_plans=0).solve(inst, M)
    off = MILP(time_limit_s=20, enum_plans=0, lns_plans=0, kick_plans=0).solve(inst, M)
    phases_on = [p["phase"] for p in on.info["phases"]]
    phases_off = [p["phase"] for p in off.info["phases"]]
    assert "kicks" in phases_on and "kicks" not in phases_off
    assert 0 < on.info["kick_plans"] <= 20_000 and "kick_plans" not in off.info
    assert phases_on.index("kicks") == phases_on.index("local_search") + 1
