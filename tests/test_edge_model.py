"""Issue 7, cases 1, 2, 6, 7 and 9: storage aliasing, views over unsaved bases, RNG capture,
in-place mutation and the host pinned-memory limit.

Every expected number is worked out by hand in the docstring or comment beside it. The
instances are the files under instances/edge/ (written by instances/edge/make_edge_model.py)
or built here with tests/helpers.py. Units: bytes, seconds; every op lasts 1 s unless noted
and no copy has latency.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slackopt import Instance, Plan, simulate, solve
from slackopt.errors import FileFormatError, InstanceError, PlanError
from slackopt.instance import Recipe, Tensor
from slackopt.io import instance_from_dict, instance_to_dict, load_instance
from slackopt.plan import KEEP, RECOMP
from slackopt.solver import registered_solvers
from tests.helpers import assert_user_error, build, lane, run, solver_params

EDGE = Path(__file__).resolve().parents[1] / "instances" / "edge"
approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-12)  # noqa: E731


def edge(name: str) -> Instance:
    return load_instance(EDGE / f"{name}.json")


def both_engines(inst: Instance, plan: Plan, M: int):
    """The evaluation, after checking the compiled engine equals the reference bit for bit."""
    ref = simulate(inst, plan, M, engine="reference")
    fast = simulate(inst, plan, M, engine="compiled")
    assert fast.to_dict() == ref.to_dict()
    return ref


def with_flags(inst: Instance, **kw) -> Instance:
    return Instance(inst.name, inst.ops, inst.tensors, inst.link, inst.meta, **kw)


def cli_json(capsys, *args):
    rc, out, err = run(capsys, *args, "--json")
    assert rc == 0, err
    return json.loads(out)


# ============================================================================ case 1: aliasing
def test_views_of_one_storage_are_counted_once():
    """aliasing.json: x (100 B, f1 -> f2, b1), its transpose xT (view of x, f2 -> b2) and
    y (100 B, f3 -> f4, b4). Ops f1..f4, b4..b1, 1 s each.

    Storage x lives [0, 8] (f1 start to b1 end), y lives [2, 5] (f3 start to b4 end):
    P = 100 + 100 = 200 B. Counting xT as its own 100 B would give 300 B.
    """
    inst = edge("aliasing")
    assert inst.aliased and inst.saved_names == ("x", "xT", "y")
    assert inst.P == 200 and inst.A == 200
    low = inst.lowered
    assert low.saved_names == ("x", "y") and not low.aliased and low.lowered is low
    assert low.tensor("x").readers == ("f2", "b2", "b1")  # union, in schedule order
    assert low.tensor("x").size_bytes == 100
    assert inst.saved_unit.tolist() == [0, 0, 1]
    assert inst.storage_of("xT") == "x" and inst.storage_of("x") == "x"
    assert inst.summary()["saved_storages"] == 2
    # Bytes per decision count the storage once: x + xT swapped move 100 B.
    plan = Plan.from_mapping(inst, {"x": "swap", "xT": "swap"})
    assert plan.bytes_by_decision(inst) == {"keep": 100, "swap": 100, "recomp": 0}


def test_instance_without_views_is_its_own_lowered_instance():
    inst = build([("f1", 1)], [("b1", 1)], [("a", 10, "f1", ["b1"], None)])
    assert inst.lowered is inst and not inst.aliased and inst.saved_unit is None
    plan = Plan.keep_all(inst)
    assert plan.lowered(inst) is plan and Plan.from_lowered(inst, plan) is plan


def test_swapping_a_storage_moves_its_bytes_once():
    """Swap x and xT at M = 110 B (W = 100 B/s, duplex 0.5).

    f1 [0,1] allocates x (100). One D2H of storage x: [1, 2] (100 B / 100 B/s). At 2 the
    D2H and x's last forward reader f2 end: x leaves the device (used 0). f3 [2,3]
    allocates y (100). T_F = 4. The H2D of x (first need b2, task 6) waits: used 100 +
    100 > 110 while y is resident. b4 [4,5] releases y; at 5 the H2D starts (0 + 100 <=
    110) and ends at 6, when b2 needs it: no stall. b1 [7,8]. T = T* = 8, D2H = H2D =
    100 B (not 200), peak 100 B.
    """
    inst = edge("aliasing")
    plan = Plan.from_mapping(inst, {"x": "swap", "xT": "swap"})
    ev = simulate(inst, plan, 110, trace=True)
    assert lane(ev, "d2h") == {"x": (approx(1.0), approx(2.0))}
    assert lane(ev, "h2d") == {"x": (approx(5.0), approx(6.0))}
    assert ev.feasible and ev.step_time_s == approx(8.0)
    assert ev.d2h_bytes == 100 and ev.h2d_bytes == 100 and ev.peak_bytes == 100
    assert both_engines(inst, plan, 110).to_dict() == ev.to_dict()


def test_a_plan_that_splits_a_storage_is_rejected_naming_both_views():
    inst = edge("aliasing")
    plan = Plan.from_mapping(inst, {"x": "swap", "xT": "keep"})
    with pytest.raises(PlanError) as e:
        simulate(inst, plan, 10_000)
    msg = str(e.value)
    assert "'x' (swap)" in msg and "'xT' (keep)" in msg and "storage 'x'" in msg


@pytest.mark.parametrize("name", solver_params(sorted(registered_solvers())))
def test_every_registered_solver_plans_views_consistently(name):
    """solve() plans the lowered instance and expands the plan: x and xT get one decision,
    and the evaluation is that of the storage-level plan."""
    inst = edge("aliasing")
    res = solve(inst, name, 110, time_limit_s=5, seed=0)
    assert res.plan is not None and res.plan.names == inst.saved_names
    d = res.plan.decisions
    assert d[0] == d[1]
    assert res.evaluation.to_dict() == simulate(inst.lowered, res.plan.lowered(inst),
                                                110).to_dict()


def test_slackswap_swaps_the_storage_of_aliasing_instance(capsys):
    """Pass 1 at M = 110 (D = 200 - 110 = 90): candidates x, y (rho = inf, production
    order). x: D2H [1, 2] ends before 0.98 T_F = 3.92; H2D from the release of y at 5
    (y's 100 B cover x's 100 B) ends at 6 <= d_x = 6: x joins S, 100 >= 90, stop. The
    evaluated plan is the timeline of test_swapping_a_storage_moves_its_bytes_once: T = 8,
    no stall, so the first round is kept."""
    doc = cli_json(capsys, "solve", EDGE / "aliasing.json", "--solver", "slackswap",
                   "--budget", "110B")
    assert doc["status"] == "feasible"
    assert doc["decisions"] == {"keep": 1, "swap": 2, "recomp": 0}
    assert doc["bytes_by_decision"] == {"keep": 100, "swap": 100, "recomp": 0}
    ev = doc["evaluation"]
    assert ev["feasible"] and ev["step_time_s"] == 8.0 and ev["peak_bytes"] == 100
    assert ev["d2h_bytes"] == 100 and ev["h2d_bytes"] == 100


def test_cli_simulate_rejects_a_split_storage_plan(capsys, tmp_path):
    plan = {"format": "slackopt-plan", "schema_version": 1, "instance": "aliasing",
            "policy": "barrier_free", "decisions": {"x": "swap", "xT": "recomp", "y": "keep"}}
    p = tmp_path / "split.json"
    p.write_text(json.dumps(plan))
    assert_user_error(*run(capsys, "simulate", EDGE / "aliasing.json", p, "--json"),
                      "'x' (swap)", "'xT' (recomp)", "same decision")


def test_storage_field_round_trips_and_bad_values_name_the_field():
    inst = edge("aliasing")
    doc = instance_to_dict(inst)
    assert doc["tensors"][1]["storage"] == "x" and "storage" not in doc["tensors"][0]
    back = instance_from_dict(doc)
    assert back.tensors == inst.tensors and back.P == 200
    for value, field, words in [
        (5, "tensors[1].storage", "string"),
        ("nope", "tensors[1].storage", "does not exist"),
        ("xT", "tensors[1].storage", "itself"),
    ]:
        bad = json.loads(json.dumps(doc))
        bad["tensors"][1]["storage"] = value
        with pytest.raises(FileFormatError) as e:
            instance_from_dict(bad, "f.json")
        assert e.value.field == field and words in str(e.value), str(e.value)
    chain = json.loads(json.dumps(doc))   # a view of a view
    chain["tensors"][2]["storage"] = "xT"
    chain["tensors"][2]["producer"] = "f3"
    with pytest.raises(FileFormatError, match="itself a view of 'x'") as e:
        instance_from_dict(chain, "f.json")
    assert e.value.field == "tensors[2].storage"


def test_views_must_follow_their_base_in_the_same_pass():
    base = build([("f1", 1), ("f2", 1)], [("b2", 1), ("b1", 1)], [])
    with pytest.raises(InstanceError, match="'v': .*no earlier than its base"):
        Instance("h", base.ops, [Tensor("a", 10, "f2", ("b1",)),
                                 Tensor("v", 10, "f1", ("b1",), storage="a")], base.link)
    with pytest.raises(InstanceError, match="'v': .*fwd pass but the view in the bwd pass"):
        Instance("h", base.ops, [Tensor("a", 10, "f1", ("f2",)),
                                 Tensor("v", 10, "b2", ("b1",), storage="a")], base.link)


def test_views_with_different_recipes_make_the_storage_unrebuildable():
    """x's recipe re-runs f1, xT's re-runs f1 and f2 (as an ordinary tensor it would
    reject f2, which runs after x's producer; here f2 is xT's producer): the group declares
    two recipes, so the storage has none: c = inf and a recomp plan is refused."""
    ops = build([("f1", 1), ("f2", 1)], [("b2", 1), ("b1", 1)], []).ops
    link = build([("f1", 1)], [], []).link
    inst = Instance("h", ops, [Tensor("x", 100, "f1", ("f2", "b1"), Recipe(("f1",))),
                               Tensor("xT", 100, "f2", ("b2",), Recipe(("f1", "f2")),
                                      storage="x")], link)
    assert np.isinf(inst.lowered.c).all()
    assert Plan.uniform(inst, RECOMP).decisions.tolist() == [KEEP, KEEP]
    with pytest.raises(PlanError, match="'x' is planned recomp but cannot be rebuilt: the "
                                        "views of storage 'x' declare different recipes"):
        simulate(inst, Plan.from_mapping(inst, {"x": "recomp", "xT": "recomp"}), 1000)


# ==================================================== case 2: a view over an unsaved base
def test_view_over_unsaved_base_frees_and_moves_the_whole_storage():
    """view_of_unsaved_base.json: buf (1000 B) made by f1 and read by f2 only; slice (10 B)
    is a view of buf made by f2 and read by b1; f3 holds a 900-byte temporary w. Ops f1,
    f2, f3, b2, b1 (1 s each), W = 1000 B/s.

    Lowered: buf is saved (readers f2, b1) and lives [0, 5]; P = 1000 + 900 = 1900 B
    during f3 (counting slice's 10 B on top would give 1910 B).
    Keep at M = 1000: f3 cannot allocate w (1000 + 900 > 1000, 900 B short).
    Swap at M = 1000: D2H of buf [1, 2] moves 1000 B (not 10); at 2 buf leaves the device
    (D2H and f2 done), so f3 fits w (900). T_F = 3; H2D [3, 4] (0 + 1000 <= 1000); b1 at 4
    finds buf: T = T* = 5, peak 1000, 1000 B each way.
    Recomp at M = 1000: buf freed at f2's end (2); rebuild (re-run f1, 1 s) [4, 5] before
    b1 [5, 6]: T = 6, recompute 1 s, peak 1000.
    """
    inst = edge("view_of_unsaved_base")
    assert inst.saved_names == ("slice",) and inst.lowered.saved_names == ("buf",)
    assert inst.P == 1900 and inst.A == 1000
    keep = both_engines(inst, Plan.keep_all(inst), 1000)
    assert not keep.feasible and "task 'f3'" in keep.failure and "900 B short" in keep.failure
    sw = Plan.from_mapping(inst, {"slice": "swap"})
    ev = simulate(inst, sw, 1000, trace=True)
    assert lane(ev, "d2h") == {"buf": (approx(1.0), approx(2.0))}
    assert lane(ev, "h2d") == {"buf": (approx(3.0), approx(4.0))}
    assert ev.feasible and ev.step_time_s == approx(5.0) and ev.peak_bytes == 1000
    assert ev.d2h_bytes == 1000 and ev.h2d_bytes == 1000
    both_engines(inst, sw, 1000)
    rc = both_engines(inst, Plan.from_mapping(inst, {"slice": "recomp"}), 1000)
    assert rc.feasible and rc.step_time_s == 6.0 and rc.recompute_s == 1.0
    assert rc.peak_bytes == 1000


def test_slackswap_on_view_of_unsaved_base(capsys):
    """P = 1900, M = 1000 (D = 900). Pass 1: buf's H2D needs kept releases covering 1000 B
    and no other saved tensor exists, so S stays empty. Pass 2: at f3 m = 1900 > 1000 and
    buf (resident, unused, c = 1 s) becomes recomp. Evaluated: T = 6, recompute 1 s (see
    the test above): feasible without stall, so that plan is returned."""
    doc = cli_json(capsys, "solve", EDGE / "view_of_unsaved_base.json", "--solver",
                   "slackswap", "--budget", "1000B")
    assert doc["status"] == "feasible"
    assert doc["decisions"] == {"keep": 0, "swap": 0, "recomp": 1}
    assert doc["bytes_by_decision"] == {"keep": 0, "swap": 0, "recomp": 1000}
    ev = doc["evaluation"]
    assert ev["step_time_s"] == 6.0 and ev["recompute_s"] == 1.0 and ev["peak_bytes"] == 1000


# ================================================================= case 6: RNG capture
def test_rng_capture_false_makes_random_recipes_invalid():
    """rng_unsupported.json: x (100, f1), mask (50, recipe: regen 0.5 s from drop.rng),
    drop.rng (8), out (100, recipe: re-run drop 1 s from x). With RNG capture c = (inf,
    0.5, inf, 1.0); without it every recipe passes through randomness: c = inf."""
    inst = edge("rng_unsupported")
    assert not inst.rng_capture and np.isinf(inst.c).all()
    cap = with_flags(inst, rng_capture=True)
    assert cap.c.tolist() == [np.inf, 0.5, np.inf, 1.0]
    assert Plan.uniform(inst, RECOMP).decisions.tolist() == [KEEP] * 4
    with pytest.raises(PlanError, match="'mask' is planned recomp .* op 'regen', which needs "
                                        "saved RNG state.*rng_capture = false"):
        simulate(inst, Plan.from_mapping(inst, {"mask": "recomp"}), 10_000)
    with pytest.raises(PlanError, match="'out' .* op 'drop'"):
        simulate(inst, Plan.from_mapping(inst, {"out": "recomp"}), 10_000)
    assert inst.rebuild_blocker("x") == "it has no recipe"
    assert cap.rebuild_blocker("mask") is None


def test_rng_capture_true_recomputes_from_saved_state():
    """With capture, recomp mask at M = 308: f1 [0,1] x (100); drop [1,2] allocates mask +
    rng + out = 158 (258); mask has no forward reader: freed at drop's end (208); f3 [2,3]
    allocates w (100): 308 <= 308. b3 [3,4] frees out (108); rebuild mask [4, 4.5] (+50,
    158); bdrop [4.5, 5.5]; b1 [5.5, 6.5]. T = 6.5 = T* + 0.5, peak 308."""
    cap = with_flags(edge("rng_unsupported"), rng_capture=True)
    ev = both_engines(cap, Plan.from_mapping(cap, {"mask": "recomp"}), 308)
    assert ev.feasible and ev.step_time_s == 6.5 and ev.recompute_s == 0.5
    assert ev.peak_bytes == 308
    res = solve(cap, "slackswap", 308)
    assert res.plan.to_dict()["decisions"] == {"x": "keep", "mask": "recomp",
                                               "drop.rng": "keep", "out": "keep"}
    assert res.evaluation.step_time_s == 6.5


def test_cli_slackswap_without_rng_capture_is_infeasible(capsys):
    """Without capture nothing is rebuildable and the 1 B/s link cannot swap in time; at
    f3 keep-all needs 358 B: infeasible at 308 B, and the smallest budget is P = 358 B."""
    doc = cli_json(capsys, "solve", EDGE / "rng_unsupported.json", "--solver", "slackswap",
                   "--budget", "308B")
    assert doc["status"] == "infeasible" and doc["min_budget_bytes"] == 358
    assert doc["decisions"]["recomp"] == 0
    assert "task 'f3'" in doc["evaluation"]["failure"]
    d = cli_json(capsys, "describe", EDGE / "rng_unsupported.json")
    assert d["rng_capture"] is False and d["rebuildable_tensors"] == 0


def test_rng_capture_round_trips_and_is_checked():
    inst = edge("rng_unsupported")
    doc = instance_to_dict(inst)
    assert doc["rng_capture"] is False
    assert "rng_capture" not in instance_to_dict(with_flags(inst, rng_capture=True))
    assert not instance_from_dict(doc).rng_capture
    doc["rng_capture"] = "no"
    with pytest.raises(FileFormatError) as e:
        instance_from_dict(doc, "f.json")
    assert e.value.field == "rng_capture"


# ============================================================= case 7: in-place mutation
def test_recipe_that_replays_the_mutation_is_valid():
    """inplace.json: f2 (0.5 s) mutates x in place; x's recipe re-runs f1 and f2: c = 1.5.
    Recomp x at M = 150: f1 [0,1] x (100); f2 [1, 1.5] mutates it, x freed at 1.5; f3
    [1.5, 2.5] y (100); b2 [2.5, 3.5] frees y; rebuild x [3.5, 5] (100); b1 [5, 6].
    T = 6 = T* + 1.5, peak 100."""
    inst = edge("inplace")
    assert inst.c.tolist() == [1.5, np.inf] and inst.tensor("x").mutated_by == ("f2",)
    ev = both_engines(inst, Plan.from_mapping(inst, {"x": "recomp"}), 150)
    assert ev.feasible and ev.step_time_s == 6.0 and ev.recompute_s == 1.5
    assert ev.peak_bytes == 100


def test_a_swapped_mutated_tensor_is_copied_after_its_last_mutation():
    """inplace.json on a 100 B/s link, swap x: x is ready when f2 (its in-place mutation)
    ends at 1.5, so r_x = 1.5 and the D2H runs [1.5, 2.5] (not [1, 2], which would copy
    the pre-mutation value). At 2.5 the D2H ends and f3 ends (T_F): x leaves the device,
    its H2D runs [2.5, 3.5] while b2 runs, and b1 [3.5, 4.5] does not wait: T = T* = 4.5."""
    from slackopt import Link

    src = edge("inplace")
    inst = Instance("inplace-fast", src.ops, src.tensors, Link("edge-100", 100.0, 0.5, 0.0))
    assert inst.r.tolist() == [1.5, 2.5] and inst.saved_ready_idx.tolist() == [1, 2]
    plan = Plan.from_mapping(inst, {"x": "swap"})
    ev = simulate(inst, plan, 10_000, trace=True)
    assert lane(ev, "d2h") == {"x": (approx(1.5), approx(2.5))}
    assert lane(ev, "h2d") == {"x": (approx(2.5), approx(3.5))}
    assert ev.step_time_s == 4.5 and ev.stall_bwd_s == 0.0
    assert both_engines(inst, plan, 10_000).to_dict() == ev.to_dict()


def test_recipe_missing_the_mutating_op_is_rejected():
    inst = edge("inplace")
    x = inst.tensor("x")
    bad = Tensor("x", 100, "f1", x.readers, Recipe(("f1",)), mutated_by=("f2",))
    with pytest.raises(InstanceError) as e:
        Instance("h", inst.ops, [bad, inst.tensor("y")], inst.link)
    msg = str(e.value)
    assert "tensor 'x'" in msg and "op 'f2'" in msg and "pre-mutation" in msg
    assert "add the op to the recipe, or drop the recipe" in msg
    # Dropping the recipe is the other fix: x is then simply not rebuildable.
    ok = Instance("h", inst.ops, [Tensor("x", 100, "f1", x.readers, None, mutated_by=("f2",)),
                                  inst.tensor("y")], inst.link)
    assert np.isinf(ok.c[0])
    with pytest.raises(InstanceError, match="mutated_by op 'f2' is not one of its readers"):
        Instance("h", inst.ops, [Tensor("x", 100, "f1", ("b1",), None, mutated_by=("f2",)),
                                 inst.tensor("y")], inst.link)
    with pytest.raises(InstanceError, match="must be a forward op that runs after"):
        Instance("h", inst.ops, [Tensor("x", 100, "f1", ("f2", "b1"), None,
                                        mutated_by=("b1",)), inst.tensor("y")], inst.link)


def test_cli_inplace_files(capsys):
    """inplace.json at M = 150 (P = 200, D = 50): the 1 B/s link swaps nothing; Pass 2
    recomputes x at f3 (m = 200 > 150): T = 6 (timeline above). inplace_invalid.json
    (recipe [f1]) cannot load: exit 2 naming the field and the fix."""
    doc = cli_json(capsys, "solve", EDGE / "inplace.json", "--solver", "slackswap",
                   "--budget", "150B")
    assert doc["status"] == "feasible" and doc["decisions"] == {"keep": 1, "swap": 0,
                                                                 "recomp": 1}
    assert doc["evaluation"]["step_time_s"] == 6.0
    assert_user_error(*run(capsys, "describe", EDGE / "inplace_invalid.json", "--json"),
                      "tensors[0].recipe.ops", "'x'", "'f2'",
                      "add the op to the recipe, or drop the recipe")


def test_mutated_by_round_trips_and_bad_values_name_the_field():
    doc = instance_to_dict(edge("inplace"))
    assert doc["tensors"][0]["mutated_by"] == ["f2"] and "mutated_by" not in doc["tensors"][1]
    assert instance_from_dict(doc).tensor("x").mutated_by == ("f2",)
    for value, field in [("f2", "tensors[0].mutated_by"), (["nope"], "tensors[0].mutated_by[0]")]:
        bad = json.loads(json.dumps(doc))
        bad["tensors"][0]["mutated_by"] = value
        with pytest.raises(FileFormatError) as e:
            instance_from_dict(bad, "f.json")
        assert e.value.field == field, str(e.value)


# ========================================================== case 9: host pinned memory
def test_host_limit_refuses_the_d2h_that_would_exceed_it():
    """host_limit.json (limit 100 B): swap a (f1) and b (f2), 100 B each, W = 100 B/s.
    D2H a [1, 2] holds 100 B of host memory; at 2 the D2H of b would bring it to 200 >
    100: infeasible at t = 2 s, naming b, 100 B in use and the limit."""
    inst = edge("host_limit")
    ev = both_engines(inst, Plan.from_mapping(inst, {"a": "swap", "b": "swap"}), 200)
    assert not ev.feasible and ev.step_time_s == 2.0 and ev.d2h_bytes == 100
    assert ev.failure == ("the D2H copy of 'b' (100 B) at t = 2000 ms would exceed the host "
                          "pinned-memory limit: 100 B of host_memory_bytes = 100 B in use, "
                          "100 B over")
    unlimited = with_flags(inst)
    assert both_engines(unlimited, Plan.from_mapping(unlimited, {"a": "swap", "b": "swap"}),
                        200).feasible


def _release_instance(limit):
    # f1, f2, f3 make a (100 B), b (500 B), c (100 B); bA, bB, bC (2 s) read them.
    # W = 100 B/s, duplex 1.0 (no slowdown), no latency.
    inst = build([("f1", 1), ("f2", 1), ("f3", 1)], [("bA", 1), ("bB", 1), ("bC", 2)],
                 [("a", 100, "f1", ["bA"], None), ("b", 500, "f2", ["bB"], None),
                  ("c", 100, "f3", ["bC"], None)], duplex=1.0)
    return with_flags(inst, host_memory_bytes=limit)


def test_host_memory_is_released_after_the_last_backward_use():
    """Swap a, b, c. D2H a [1, 2]; D2H b [2, 7] (500 B): host 600 B from t = 2. H2D a
    [3, 4]; bA [4, 5] (stall 1 s) ends a's last use: host 500. bB at 5 uses b's device copy
    (its D2H lags) [5, 6]; b's host copy is held until its D2H ends at 7: host 0. bC [6, 8]
    uses c's device copy; c's D2H is queued behind b's and starts at 7 (bC still reads c, so
    it is not dropped) with 0 + 100 B, [7, 8]. Host peak 600 B: a limit of 600 is feasible
    (T = 8, stall 1 s, 700 B copied out); 599 fails at b's D2H (t = 2 s, 100 B in use).
    Without releases c would need 700 B. (With bC lasting 1 s, c's reader would end at 7,
    before its D2H could start, and the D2H would be dropped.)"""
    for limit, ok in ((600, True), (599, False)):
        inst = _release_instance(limit)
        ev = both_engines(inst, Plan.uniform(inst, 1), 10_000)
        assert ev.feasible is ok
        if ok:
            assert ev.step_time_s == 8.0 and ev.stall_bwd_s == 1.0 and ev.d2h_bytes == 700
        else:
            assert ev.step_time_s == 2.0 and "'b' (500 B)" in ev.failure
            assert "100 B of host_memory_bytes = 599 B in use" in ev.failure


def test_slackswap_respects_the_host_limit(capsys):
    """host_limit.json at M = 200 (P = 400: a [0, 10], b [1, 9], k [3, 6]; D = 200).
    Without a limit Pass 1 swaps a then b (D2Hs [1,2], [2,3] end before 4.9; both H2Ds
    start at 6, when k's 200 B are released, and end at 7 and 8, by their deadlines 8 and
    9): T = T* = 10. With the 100 B limit b no longer fits on the host; Pass 2 recomputes
    b at f4 (m = 300 > 200). Timeline: D2H a [1,2]; b freed at 2; k [3, 6]; H2D a [6,7];
    rebuild b [8, 9]; b2 [9, 10]; b1 [10, 11]: T = 11, recompute 1 s, 100 B swapped."""
    inst = edge("host_limit")
    res = solve(inst, "slackswap", 200)
    assert res.plan.to_dict()["decisions"] == {"a": "swap", "b": "recomp", "k": "keep"}
    assert res.evaluation.feasible and res.evaluation.step_time_s == 11.0
    assert res.plan.bytes_by_decision(inst)["swap"] <= inst.host_memory_bytes
    free = solve(with_flags(inst), "slackswap", 200)
    assert free.plan.to_dict()["decisions"] == {"a": "swap", "b": "swap", "k": "keep"}
    assert free.evaluation.step_time_s == 10.0
    doc = cli_json(capsys, "solve", EDGE / "host_limit.json", "--solver", "slackswap",
                   "--budget", "200B")
    assert doc["status"] == "feasible" and doc["evaluation"]["step_time_s"] == 11.0
    assert doc["decisions"] == {"keep": 1, "swap": 1, "recomp": 1}
    assert doc["evaluation"]["d2h_bytes"] == 100
    d = cli_json(capsys, "describe", EDGE / "host_limit.json")
    assert d["host_memory_bytes"] == 100
    rc, out, _ = run(capsys, "describe", EDGE / "host_limit.json")
    assert rc == 0 and "host pinned-memory limit" in out


def test_slackswap_host_limit_on_a_transformer():
    """GPT-2 XL (2 layers) at 0.7 P with a host limit of 5% of A (unlimited, SlackSwap
    swaps about 15% of A there): it swaps at most the limit's worth (host occupancy never
    exceeds the swapped bytes) and stays feasible."""
    from slackopt.workloads import make

    base = make("gpt2-xl", layers=2)
    limit = int(0.05 * base.A)
    inst = with_flags(base, host_memory_bytes=limit)
    res = solve(inst, "slackswap", 0.7)
    free = solve(base, "slackswap", 0.7)
    assert free.plan.bytes_by_decision(base)["swap"] > limit  # the limit binds
    assert 0 < res.plan.bytes_by_decision(inst)["swap"] <= limit
    assert res.evaluation.feasible


def test_host_limit_round_trips_and_is_checked():
    inst = edge("host_limit")
    doc = instance_to_dict(inst)
    keys = list(doc)
    assert doc["host_memory_bytes"] == 100 and keys.index("host_memory_bytes") < keys.index("ops")
    assert instance_from_dict(doc).host_memory_bytes == 100
    assert "host_memory_bytes" not in instance_to_dict(with_flags(inst))
    for value, words in [(-1, "[0, 2**62], got -1"), (1.5, "integer"),
                         (2**63, "2**62")]:
        bad = dict(doc, host_memory_bytes=value)
        with pytest.raises(FileFormatError) as e:
            instance_from_dict(bad, "f.json")
        assert e.value.field == "host_memory_bytes" and words in str(e.value), str(e.value)
    assert instance_from_dict(dict(doc, host_memory_bytes=None)).host_memory_bytes is None
