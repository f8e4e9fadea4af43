"""The exact tier's microbatch phase on pipeline stages (solvers/milp/bounds/groups.py,
solvers/milp/search/microbatch.py): which microbatches are contiguous groups, the
single-pass instance of each, the stage plan composed from a pass's plan, the bound
added up along the schedule less the bubbles (hand-computed), and the phase in a solve.
Soundness of the bound for every plan: tests/test_bound_point.py
(``test_microbatch_groups_of_stages``) and tests/test_milp_soundness_cases.py."""

from __future__ import annotations

import numpy as np
import pytest

from slackopt import Instance, Link, Op, Tensor
from slackopt.plan import KEEP, RECOMP, SWAP
from slackopt.solvers.milp import MILP
from slackopt.solvers.milp.bounds.groups import combine, microbatch_bound, microbatch_groups
from slackopt.solvers.milp.search.microbatch import compose, splits
from slackopt.stage import build_stage

ms = 1e-3


def base() -> Instance:
    """Two forward ops of 1 ms, two backward ops of 1 and 3 ms; a (3 MB, f0 -> b1, no
    recipe) and r (1 MB, f1 -> b0, rebuilt by f1); 1 GB/s link."""
    from slackopt import Recipe

    return Instance("base", [Op("f0", "fwd", 1 * ms), Op("f1", "fwd", 1 * ms),
                             Op("b0", "bwd", 1 * ms), Op("b1", "bwd", 3 * ms)],
                    [Tensor("a", 3_000_000, "f0", ("b1",)),
                     Tensor("r", 1_000_000, "f1", ("b0",), Recipe(("f1",)))],
                    Link("l", 1e9, 1.0, 0.0))


def test_groups_of_the_last_and_the_first_stage():
    """Under 1F1B the last stage's microbatches run back to back: contiguous groups, one
    pass up to names, each the profiled pass (same T*, P and saved tensors); the first
    stage's interleave (none contiguous; all found for planning)."""
    b = base()
    last = build_stage(b, "1f1b", 1, 2, 3, hop_s=1 * ms)
    groups = microbatch_groups(last)
    assert [g.microbatch for g in groups] == [0, 1, 2]
    assert len({g.key for g in groups}) == 1
    for g in groups:
        assert g.sub.single_pass and g.sub.n_saved == 2
        assert g.sub.ideal_time_s == pytest.approx(b.ideal_time_s) and g.sub.P == b.P
        assert [last.saved_names[t] for t in g.saved] == [f"a@{g.microbatch}",
                                                           f"r@{g.microbatch}"]
    assert splits(last, groups) == [1]
    first = build_stage(b, "1f1b", 0, 2, 3, hop_s=1 * ms)
    assert microbatch_groups(first) == []
    loose = microbatch_groups(first, contiguous=False)
    assert [g.microbatch for g in loose] == [0, 1, 2]
    assert splits(first, loose) == [1, 2]   # two microbatches in flight at stage 0
    assert microbatch_groups(b) == []       # a single pass has no stage groups


def test_compose_gives_every_microbatch_the_plan():
    last = build_stage(base(), "1f1b", 1, 2, 3)
    groups = microbatch_groups(last)
    dec = compose(last, groups, {groups[0].key: np.array([SWAP, RECOMP], dtype=np.int8)})
    assert dec.tolist() == [SWAP, RECOMP] * 3
    assert KEEP not in dec.tolist()


def test_combine_adds_up_along_the_schedule_less_the_bubbles():
    """Three back-to-back microbatches (F 2 ms, B 4 ms) at the last of 2 stages, hops of
    h = 1 ms: F1 waits for nothing (its input, at 5 ms, is there before B0 ends at 6 ms),
    F2's input comes at 14 ms, 2 ms after B1 ends. With each group's extra e the bound
    is T* plus the largest of 3e - 2h (from F0: the 2 ms idle absorbs), 2e - 2h (from
    F1) and e (from F2: nothing after it absorbs)."""
    h = 1 * ms
    last = build_stage(base(), "1f1b", 1, 2, 3, hop_s=h)
    assert [u.earliest_start_s for u in last.units] == pytest.approx(
        [0, 2 * ms, 6 * ms, 8 * ms, 14 * ms, 16 * ms])
    groups = microbatch_groups(last)
    T = float(last.ideal_time_s)
    assert T == pytest.approx(20 * ms)
    for e in (1 * ms, 2.5 * ms, 4 * ms):
        want = T + max(e, 2 * e - 2 * h, 3 * e - 2 * h)
        assert combine(last, groups, [e] * 3) == pytest.approx(want, rel=1e-9)
        assert combine(last, groups, [e] * 3) <= want
    # a pass bound above its T* by e, less the group's idle (none here)
    b, extra = microbatch_bound(last, groups, {groups[0].key: groups[0].sub.ideal_time_s + h})
    assert extra == pytest.approx([h] * 3) and b == pytest.approx(T + h, rel=1e-9)


def test_the_phase_in_a_solve():
    """The milp on a last stage at M = 3.5 MB (keep-all holds 4 MB during f1, so a must
    be offloaded by then): the microbatch phase plans the pass once (k = 1), its plan for
    every microbatch is simulated, and its bound is certified."""
    last = build_stage(base(), "1f1b", 1, 2, 3, hop_s=1 * ms)
    M = 3_500_000
    r = MILP(time_limit_s=10, enum_plans=0).solve(last, M, seed=0)
    mb = r.info["microbatch"]
    assert mb["groups"] == mb["contiguous"] == 3 and mb["splits"] == [1]
    assert [s["k"] for s in mb["solves"]] == [1]
    assert "microbatch" in [p["phase"] for p in r.info["phases"]]
    assert r.lower_bound_s <= r.evaluation.step_time_s
