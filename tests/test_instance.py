"""Instance validation, derived arrays in the paper's notation, budgets and plans."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slackopt import Instance, Link, Op, Plan, Recipe, Tensor, budget_bytes
from slackopt.errors import BudgetError, InstanceError, PlanError
from tests.helpers import build


def small():
    # f0 [0,1] makes x (c = inf); f1 [1,3] makes a = f1(x); temp u (f1 -> f2);
    # f2 [3,3.5]; backward bA [3.5,4.5] reads a, bX [4.5,5] reads x.
    return build([("f0", 1), ("f1", 2), ("f2", 0.5)], [("bA", 1), ("bX", 0.5)],
                 [("x", 10, "f0", ["f1", "bX"], None),
                  ("a", 40, "f1", ["f2", "bA"], (["f1"], ["x"])),
                  ("u", 7, "f1", ["f2"], None)])


def test_derived_arrays_in_paper_notation():
    inst = small()
    assert inst.saved_names == ("x", "a")
    assert inst.s.tolist() == [10, 40]
    assert inst.r.tolist() == [1.0, 3.0]        # end of producer
    assert inst.d.tolist() == [4.5, 3.5]        # start of first backward reader
    assert inst.c[0] == math.inf and inst.c[1] == 2.0
    assert inst.rho[1] == 2.0 / 40 and inst.rho[0] == math.inf
    assert inst.forward_time_s == 3.5 and inst.ideal_time_s == 5.0
    # Keep-all memory per op: f0 10, f1 10+40+7, f2 57, bA 50, bX 10.
    assert inst.keep_all_profile.tolist() == [10, 57, 57, 50, 10]
    assert inst.P == 57 and inst.A == 50
    assert set(inst.graph.edges) == {("f0", "f1"), ("f0", "bX"), ("f1", "f2"), ("f1", "bA")}


@pytest.mark.parametrize("mutate, message", [
    (lambda o, t: (o + [Op("f0", "fwd", 1.0)], t), "op 'f0': duplicate op name"),
    (lambda o, t: ([Op("b", "bwd", 1.0)] + o, t), "phase 'fwd' after a 'bwd' op"),
    (lambda o, t: ([Op("n", "fwd", float("nan"))] + o, t), "duration_s must be finite"),
    (lambda o, t: ([Op("n", "fwd", -1.0)] + o, t), "duration_s must be finite, >= 0"),
    (lambda o, t: ([Op("n", "fwd", 1e300)] + o, t), "<= 1e\\+09 s"),
    (lambda o, t: ([Op("n\x1b[2J", "fwd", 1.0)] + o, t), "printable"),
    (lambda o, t: ([Op("n", "fwd", 1.0, workspace_bytes=2**63)] + o, t), "workspace_bytes"),
    (lambda o, t: (o, t + [Tensor("z", -5, "f0", ("bX",))]), "size_bytes must be an integer"),
    (lambda o, t: (o, t + [Tensor("z", 2**63 - 1, "f0", ("bX",))]), "in \\[0, 2\\*\\*53\\]"),
    (lambda o, t: (o, t + [Tensor(f"z{i}", 2**53, "f0", ("bX",)) for i in range(1024)]),
     "add up to"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f0", "bX")]), "readers must be a list"),
    (lambda o, t: (o, t + [Tensor("z", 5, "nope", ("bX",))]), "producer op 'nope'"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("f0",))]), "reader 'f0' runs before"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("ghost",))]), "reader op 'ghost'"),
    (lambda o, t: (o, t + [Tensor("x", 5, "f1", ("bX",))]), "tensor 'x': duplicate"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",), Recipe(("bA",)))]),
     "recipe op 'bA' is a backward op"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",), Recipe(("f1",), ("u",)))]),
     "recipe input 'u' is not a saved tensor"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f0", ("bX",), Recipe(("f1",)))]),
     "runs after the producer"),
])
def test_validation_names_the_culprit(mutate, message):
    inst = small()
    ops, tensors = mutate(list(inst.ops), list(inst.tensors))
    with pytest.raises(InstanceError, match=message):
        Instance("bad", ops, tensors, inst.link)


def test_recipe_cycle_is_rejected():
    ops = [Op("f0", "fwd", 1.0), Op("b0", "bwd", 1.0)]
    ts = [Tensor("p", 1, "f0", ("b0",), Recipe(("f0",), ("q",))),
          Tensor("q", 1, "f0", ("b0",), Recipe(("f0",), ("p",)))]
    with pytest.raises(InstanceError, match="cycle"):
        Instance("cyc", ops, ts, Link("l", 1.0))


def test_never_recompute_op_makes_c_infinite():
    ops = [Op("f0", "fwd", 1.0, never_recompute=True), Op("b0", "bwd", 1.0)]
    inst = Instance("nr", ops, [Tensor("p", 4, "f0", ("b0",), Recipe(("f0",)))], Link("l", 1.0))
    assert inst.c[0] == math.inf
    with pytest.raises(PlanError, match="cannot be rebuilt"):
        Plan.from_mapping(inst, {"p": "recomp"}).check(inst)


def test_bad_link_is_rejected():
    with pytest.raises(InstanceError, match="bandwidth"):
        Instance("l", [Op("f", "fwd", 1.0)], [], Link("zero", 0.0))


def test_arrays_are_read_only():
    inst = small()
    with pytest.raises(ValueError):
        inst.s[0] = 1


@pytest.mark.parametrize("budget, expected", [
    (0.5, 28), ("0.5", 28), (1.0, 57), ("57B", 57), ("1KB", 1000), ("1KiB", 1024),
    (1000, 1000), ("0", 0), ("2P", 114), ("10p", 570), (np.int64(7), 7), ("50%", 28),
    ("100%", 57), (" 12.5 % ", 7), ("1", 57), ("0.25P", 14), ("200%", 114),
])
def test_budget_parsing(budget, expected):
    # small(): P = 57 bytes; fractions are floored.
    assert small().P == 57
    assert budget_bytes(small(), budget) == expected


TINY_GPT = "instances/teaching/tiny-gpt_a100-pcie4.json"


def test_an_int_budget_that_is_a_slip_is_refused_with_the_fix():
    # solve(inst, "slackswap", 1) planned for 1 byte; compare(..., [1, 0.5]) gave rows at
    # 1e-9 of P. An int below 1 MB and below 0.1% of P is refused, through every entry.
    from pathlib import Path

    import slackopt
    from slackopt.compare import compare
    from slackopt.io import load_instance
    from slackopt.solvers.baselines import KeepAll

    inst = load_instance(Path(__file__).resolve().parents[1] / TINY_GPT)
    P = int(inst.P)
    assert P == 432_168  # so 0.1% of P is 432.168 B
    for call in (lambda: slackopt.solve(inst, KeepAll(), 1),
                 lambda: compare([inst], [KeepAll()], [1, 0.5], progress=False),
                 lambda: budget_bytes(inst, np.int64(432))):
        with pytest.raises(BudgetError) as e:
            call()
        msg = str(e.value)
        assert "reads as bytes" in msg and "1.0 for all of it" in msg and "'11.5GB'" in msg
    assert "write '1B'" in str(pytest.raises(BudgetError, budget_bytes, inst, 1).value)
    # the explicit forms, a fraction, and ints that are not slips are taken as given
    assert budget_bytes(inst, "1B") == 1 and budget_bytes(inst, "432B") == 432
    assert budget_bytes(inst, 433) == 433 and budget_bytes(inst, 0) == 0
    assert budget_bytes(inst, 1.0) == P and budget_bytes(inst, P) == P
    assert slackopt.solve(inst, KeepAll(), "1B").status == "infeasible"
    # a budget read once is taken as given when it is passed on (solve_budgets, the CLI)
    m = budget_bytes(inst, "100B")
    assert m == 100 and budget_bytes(inst, m) == 100 and budget_bytes(inst, 1e-4) == 43
    assert slackopt.solve(inst, KeepAll(), m).evaluation.budget_bytes == 100
    from slackopt.solver import solve_budgets
    assert [r.evaluation.budget_bytes for r in solve_budgets(inst, KeepAll(), ["100B", 1e-4])
            ] == [100, 43]


@pytest.mark.parametrize("budget", [-0.5, "abc", float("nan"), "-1GB", float("inf"), True,
                                    "inf", "12", "10.5", 11.0, 10**30, "1e30GB", None,
                                    "1001%", "11P", "-5%", "%", "P"])
def test_bad_budgets(budget):
    with pytest.raises(BudgetError):
        budget_bytes(small(), budget)


@pytest.mark.parametrize("budget", ["8", "1.2", 2.0, 8.0])
def test_a_bare_number_above_one_names_the_fix(budget):
    # "--budget 8" used to mean 8 x P silently (185 GB on GPT-2 XL).
    with pytest.raises(BudgetError) as e:
        budget_bytes(small(), budget)
    msg = str(e.value)
    assert "fraction of P" in msg and "<= 1" in msg
    assert f"'{budget}P'" in msg and "GB" in msg


def test_plan_round_trip_and_checks():
    inst = small()
    plan = Plan.from_mapping(inst, {"a": "recomp", "x": "swap"})
    assert plan.counts() == {"keep": 0, "swap": 1, "recomp": 1}
    assert plan.bytes_by_decision(inst) == {"keep": 0, "swap": 10, "recomp": 40}
    assert Plan.from_mapping(inst, plan.to_dict()["decisions"]) == plan
    assert Plan.uniform(inst, 2).decisions.tolist() == [0, 2]  # x cannot be rebuilt
    with pytest.raises(PlanError, match="not a saved tensor"):
        Plan.from_mapping(inst, {"u": "keep"})
    with pytest.raises(PlanError, match="not keep, swap or recomp"):
        Plan.from_mapping(inst, {"a": "drop"})
    with pytest.raises(PlanError, match="decisions for"):
        Plan(np.zeros(3), inst.saved_names)
    with pytest.raises(PlanError, match="runtime policy"):
        Plan(np.zeros(2), inst.saved_names, "magic")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_a_bad_duration_after_good_ones_is_named(bad):
    # The bulk checks (min/max over all ops) must not let a NaN through: min() and max()
    # skip a NaN that is not first.
    ops = [Op("f0", "fwd", 1.0), Op("f1", "fwd", 2.0), Op("f2", "fwd", bad),
           Op("b0", "bwd", 1.0)]
    with pytest.raises(InstanceError, match="op 'f2': duration_s"):
        Instance("x", ops, [Tensor("t", 8, "f0", ("b0",))], Link("l", 1e9))


@pytest.mark.parametrize("mutate, field, fix", [
    (lambda o, t: (o + [Op("f0", "fwd", 1.0)], t), "ops[5].name", "unique name"),
    (lambda o, t: ([Op("b", "bwd", 1.0)] + o, t), "ops[1].phase", "then all backward"),
    (lambda o, t: (o, t + [Tensor("z", -5, "f0", ("bX",))]), "tensors[3].size_bytes",
     "bytes >= 0"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("f2", "f0"))]), "tensors[3].readers[1]",
     "after the producer"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",), Recipe(("f1",), ("x", "u")))]),
     "tensors[3].recipe.inputs[1]", "saved tensors"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",), Recipe(("f0", "bA")))]),
     "tensors[3].recipe.ops[1]", "forward or rebuild-only"),
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",), Recipe(("f1", "f0", "f1")))]),
     "tensors[3].recipe.ops[2]", "once"),
])
def test_validation_error_carries_field_and_fix(mutate, field, fix):
    """The field is a path into the Instance's argument lists (a file's order), set where
    the check fails, not recovered from the message."""
    inst = small()
    ops, tensors = mutate(list(inst.ops), list(inst.tensors))
    with pytest.raises(InstanceError) as e:
        Instance("bad", ops, tensors, inst.link)
    assert e.value.field == field and fix in e.value.fix, (e.value.field, e.value.fix)
    assert str(e.value) == f"{e.value.problem}. Fix: {e.value.fix}"


def test_cycle_and_storage_group_errors_name_the_field_in_the_given_list():
    ops = [Op("f0", "fwd", 1.0), Op("b0", "bwd", 1.0)]
    ts = [Tensor("o", 1, "f0", ("b0",)),
          Tensor("p", 1, "f0", ("b0",), Recipe(("f0",), ("q",))),
          Tensor("q", 1, "f0", ("b0",), Recipe(("f0",), ("p",)))]
    with pytest.raises(InstanceError) as e:
        Instance("cyc", ops, ts, Link("l", 1.0))
    assert e.value.field == "tensors[1].recipe.inputs" and "break the cycle" in e.value.fix
    # The view's recipe re-runs f2, which is valid for the view but not for its storage
    # (produced by f1): the lowered instance refuses it, and the field is the base's
    # position in this list (2), not in the lowered one (1).
    base = small()
    ops = [Op("f1", "fwd", 1.0), Op("f2", "fwd", 1.0), Op("b1", "bwd", 1.0),
           Op("b2", "bwd", 1.0)]
    ts = [Tensor("u", 5, "f1", ("b1",)),
          Tensor("v", 10, "f2", ("b2",), Recipe(("f2",)), storage="a"),
          Tensor("a", 10, "f1", ("f2", "b1"))]
    with pytest.raises(InstanceError) as e:
        Instance("views", ops, ts, base.link)
    assert e.value.field == "tensors[2]"
    assert e.value.problem.startswith("tensor 'a': as the storage of views 'v': recipe op 'f2'")


@pytest.mark.parametrize("mutate, field", [
    # an early op's last-checked field beats a later op's first-checked one
    (lambda o, t: (o[:1] + [Op("f1", "fwd", 2.0, flops=-1.0)] + o[2:3]
                   + [Op("", "fwd", 1.0)] + o[3:], t), "ops[1].flops"),
    # within one op, the first field in check order (name before duration)
    (lambda o, t: ([Op("", "fwd", -1.0)] + o, t), "ops[0].name"),
    # a tensor's readers are checked after its own fields, before the next tensor
    (lambda o, t: (o, t[:1] + [Tensor("z", 5, "f1", ("bA", "ghost"))]
                   + [Tensor("w", -1, "f0", ("bX",))] + t[1:]), "tensors[1].readers[1]"),
    (lambda o, t: (o, t[:1] + [Tensor("z", -5, "f1", ("ghost",))] + t[1:]),
     "tensors[1].size_bytes"),
    # recipes in production order, not file order: 'late' (f1) is listed first
    (lambda o, t: (o, [Tensor("late", 5, "f1", ("bX",), Recipe(("f1",), ("gone",))),
                       Tensor("early", 5, "f0", ("bX",), Recipe(("bA",)))] + t),
     "tensors[1].recipe.ops[0]"),
    # within a recipe: ops before inputs before transient_bytes
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",),
                                  Recipe(("f1",), ("gone",), transient_bytes=-1))]),
     "tensors[3].recipe.inputs[0]"),
    # a repeated recipe op is named at its second listing, before a later missing op
    (lambda o, t: (o, t + [Tensor("z", 5, "f1", ("bX",), Recipe(("f1", "f0", "f1", "no")))]),
     "tensors[3].recipe.ops[2]"),
])
def test_the_first_bad_field_in_reading_order_is_named(mutate, field):
    """Every check runs over all items at once; the error is that of the first failure a
    reader meets: items in order (recipes in production order), fields in check order,
    list elements (readers, recipe ops and inputs) in order."""
    inst = small()
    ops, tensors = mutate(list(inst.ops), list(inst.tensors))
    with pytest.raises(InstanceError) as e:
        Instance("bad", ops, tensors, inst.link)
    assert e.value.field == field, str(e.value)


def test_rebuild_time_adds_recipe_ops_left_to_right():
    """c is the recipe's op durations added in recipe order (float addition is not
    associative: 0.1 + 0.2 + 0.3 != 0.1 + (0.2 + 0.3))."""
    ops = [Op("a", "fwd", 0.1), Op("b", "fwd", 0.2), Op("c", "fwd", 0.3),
           Op("g", "bwd", 1.0)]
    ts = [Tensor("x", 8, "c", ("g",), Recipe(("a", "b", "c"))),
          Tensor("y", 8, "c", ("g",), Recipe(("c", "b", "a")))]
    inst = Instance("sum", ops, ts, Link("l", 1e9))
    assert inst.c.tolist() == [(0.1 + 0.2) + 0.3, (0.3 + 0.2) + 0.1]
    assert inst.c[0] != inst.c[1]
