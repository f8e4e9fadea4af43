"""The production planners (issue 14): torch-knapsack, titan-auto, module-offload,
offload-all, ckpt-offload.

Hand-checked plans on ``planner_instances.blocks(4)``: four residual blocks, block i
saves x{i} (block input, 4 B, c = inf), a{i} (2 B, rebuilt by f{i}.0 in 1 s) and b{i}
(6 B, rebuilt by f{i}.1 in 1 s); x4 (block output, read by the head H) and the logits z
(3 B) are saved outside the blocks; W = 1 B/s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import slackopt
from slackopt.errors import SolverError
from slackopt.plan import DECISION_NAMES, KEEP, RECOMP, SWAP
from slackopt.simulate import simulate
from slackopt.solvers.ckpt_offload import CkptOffload, block_inputs, ckpt_offload_plan
from slackopt.solvers.module_offload import ModuleOffload, module_offload_plan
from slackopt.solvers.offload_all import OffloadAll, offload_all_plan, output_head_tensors
from slackopt.solvers.titan_auto import TitanAuto, inner_tags, outer_lp
from slackopt.solvers.torch_knapsack import (
    TorchKnapsack,
    knapsack_inputs,
    knapsack_plan,
    memory_budget_ratio,
)
from slackopt.testing import check_solver
from slackopt.workloads import make
from tests.planner_instances import blocks

PRODUCTION = ("torch-knapsack", "titan-auto", "module-offload", "offload-all", "ckpt-offload")


def decisions(inst, plan) -> dict[str, str]:
    return {n: DECISION_NAMES[int(d)] for n, d in zip(inst.saved_names, plan.decisions,
                                                      strict=True)}


def names_with(inst, plan, code) -> set[str]:
    return {n for n, d in zip(inst.saved_names, plan.decisions, strict=True) if d == code}


@pytest.fixture(scope="module")
def inst4():
    return blocks(4)


# ----------------------------------------------------------------------- torch-knapsack
def test_knapsack_items_and_budget_translation(inst4):
    """Items: the 8 rebuildable tensors, largest first (b0..b3 then a0..a3), memory s /
    (A - A_fixed) = s / 32, runtime c = 1 s; A_fixed = x0..x3 + x4 + z = 23 B. At M =
    P - A + 23 + 16 the ratio b is 16 / 32."""
    items, memory, runtimes, fixed = knapsack_inputs(inst4)
    assert [inst4.saved_names[k] for k in items] == ["b0", "b1", "b2", "b3",
                                                     "a0", "a1", "a2", "a3"]
    assert fixed == 23 and inst4.A == 55
    assert memory == [6 / 32] * 4 + [2 / 32] * 4
    assert runtimes == [1.0] * 8
    M = inst4.P - inst4.A + 23 + 16
    assert memory_budget_ratio(inst4, M) == pytest.approx(0.5)
    assert memory_budget_ratio(inst4, inst4.P - inst4.A + 23 - 8) == pytest.approx(-0.25)


@pytest.mark.torch
@pytest.mark.parametrize("method", ["dp", "greedy", "dp_knapsack_sliding_hirschberg"])
def test_knapsack_hand_checked_plan(inst4, method):
    """Capacity 16 of the 32 rebuildable bytes, every item 1 s: the most runtime kept is
    the four 2-byte a's (8 B, 4 s) plus one 6-byte b (14 B, 5 s); two b's and two a's fill
    16 B for only 4 s. Greedy (runtime per byte) and both DPs keep b0 (first of the ties);
    b1..b3 are recomputed, the unrebuildable x's, x4 and z kept."""
    pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    M = inst4.P - inst4.A + 23 + 16
    plan, info = knapsack_plan(inst4, M, method)
    assert names_with(inst4, plan, RECOMP) == {"b1", "b2", "b3"}
    assert names_with(inst4, plan, SWAP) == set()
    assert info["model_fits"] and info["memory_budget"] == pytest.approx(0.5)
    assert info["knapsack_runtime_saved_s"] == pytest.approx(5.0)
    assert info["model_saved_bytes"] == 23 + 8 + 6
    assert info["model_peak_bytes"] == 37 + inst4.P - inst4.A


@pytest.mark.torch
@pytest.mark.parametrize("method", ["dp", "greedy", "dp_knapsack_sliding_hirschberg"])
@pytest.mark.parametrize("frac", [0.95, 0.7, 0.5, 0.3])
def test_knapsack_equals_pytorch_called_directly(method, frac):
    """On the tiny transformer, the recomputed set is exactly the complement of what
    PyTorch's function keeps when called by hand on the items (s / (A - A_fixed), c) with
    capacity b."""
    torch_knapsack = pytest.importorskip(
        "torch._functorch._activation_checkpointing.knapsack",
        reason="torch-knapsack calls PyTorch (the [torch] extra)")
    inst = make("tiny")
    M = int(frac * inst.P)
    plan, info = knapsack_plan(inst, M, method)
    s, c = np.asarray(inst.s), np.asarray(inst.c)
    fixed = int(s[~np.isfinite(c)].sum())
    cand = [k for k in range(inst.n_saved) if np.isfinite(c[k]) and s[k] > 0]
    cand.sort(key=lambda k: -s[k])                  # stable: production order on ties
    mem = [s[k] / (inst.A - fixed) for k in cand]
    run = [float(c[k]) for k in cand]
    b = min(1.0, max(0.0, (M - (inst.P - inst.A) - fixed) / (inst.A - fixed)))
    fn = getattr(torch_knapsack, {"dp": "dp_knapsack", "greedy": "greedy_knapsack"}
                 .get(method, method))
    if b <= 0:                  # PyTorch saves only what cannot be recomputed
        recomputed = list(range(len(cand)))
    else:
        _, _, recomputed = fn(mem, run, b) if b < 1 else (0, [], [])
    assert names_with(inst, plan, RECOMP) == {inst.saved_names[cand[i]] for i in recomputed}
    assert info["memory_budget"] == pytest.approx(b)


def test_knapsack_without_torch_names_the_extra(inst4, monkeypatch):
    """torch absent: the import fails and the error names the extra."""
    for mod in ("torch", "torch._functorch._activation_checkpointing.knapsack"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(SolverError, match=r"slackopt\[torch\]"):
        TorchKnapsack().solve(inst4, inst4.P)


def test_knapsack_bad_method():
    with pytest.raises(SolverError, match="method must be str one of.*valid keys: method"):
        TorchKnapsack(method="annealing")


@pytest.mark.torch
def test_knapsack_model_says_no_below_recompute_all(inst4):
    """M below what even recompute-all saves (by the model): infeasible, no objective."""
    pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    res = TorchKnapsack().solve(inst4, inst4.P - inst4.A + 23 - 8)
    assert res.status == "infeasible" and res.objective_s is None
    assert names_with(inst4, res.plan, RECOMP) == {f"{v}{i}" for v in "ab" for i in range(4)}


# ----------------------------------------------------------------------- offload-all
def test_offload_all_hand_checked(inst4):
    """Every saved tensor is offloaded except the output head's: the logits z and x4, the
    saved input of H (the op producing z); with torchtune's 1024-byte minimum nothing of
    this byte-sized instance moves."""
    assert [inst4.saved_names[k] for k in output_head_tensors(inst4)] == ["x4", "z"]
    plan = offload_all_plan(inst4, min_offload_size=0)
    assert names_with(inst4, plan, KEEP) == {"x4", "z"}
    assert names_with(inst4, plan, RECOMP) == set()
    assert names_with(inst4, offload_all_plan(inst4), SWAP) == set()
    res = OffloadAll(min_offload_size=0).solve(inst4, inst4.P)
    assert res.status == "feasible" and res.info["offloaded_bytes"] == 55 - 7


def test_offload_all_transformer_head_kept():
    inst = make("tiny")
    plan = offload_all_plan(inst)
    d = decisions(inst, plan)
    assert d["logits"] == "keep" and d["lnf_out"] == "keep"
    assert d["L0.qkv_out"] == "swap" and d["L1.gelu_out"] == "swap"
    assert d["L0.attn.drop.rng"] == "keep" if "L0.attn.drop.rng" in d else True
    small = [n for n, s in zip(inst.saved_names, inst.s, strict=True) if s < 1024]
    assert small and all(d[n] == "keep" for n in small)


# ----------------------------------------------------------------------- module-offload
def test_module_offload_hand_checked(inst4):
    """offload=block_input, recompute=act: x1..x3 (produced inside blocks 0..2) are
    offloaded, x0 (produced by the embedding, layer -1) stays, as do x4 and z; every a and
    b is recomputed."""
    plan = module_offload_plan(inst4, ["block_input"], ["act"])
    assert names_with(inst4, plan, SWAP) == {"x1", "x2", "x3"}
    assert names_with(inst4, plan, RECOMP) == {f"{v}{i}" for v in "ab" for i in range(4)}
    assert names_with(inst4, plan, KEEP) == {"x0", "x4", "z"}
    res = ModuleOffload(offload="block_input", recompute="act").solve(inst4, inst4.P)
    assert res.plan == plan and res.params == {"offload": "block_input", "recompute": "act"}


def test_module_offload_megatron_defaults_on_a_transformer():
    """Defaults: offload Q/K/V and the attention output (core_attn, attn_proj inputs),
    recompute the block norms (layernorm); the final norm (layer -1) is kept."""
    inst = make("tiny")
    d = decisions(inst, ModuleOffload().solve(inst, inst.P).plan)
    for i in range(2):
        assert d[f"L{i}.qkv_out"] == d[f"L{i}.attn_out"] == "swap"
        assert d[f"L{i}.ln1_out"] == d[f"L{i}.ln2_out"] == "recomp"
        assert d[f"L{i}.gelu_out"] == d[f"L{i}.fc1_out"] == "keep"
    assert d["lnf_out"] == "keep"


def test_module_offload_refuses_overlap_and_unknown(inst4):
    with pytest.raises(SolverError, match="share categories act.*valid keys"):
        ModuleOffload(offload="qkv,act", recompute="act")
    with pytest.raises(SolverError, match="categories qkv name no saved tensor.*act, "
                                          "block_input"):
        ModuleOffload(offload="qkv").solve(inst4, inst4.P)
    with pytest.raises(SolverError, match="offload must be str"):
        slackopt.solve(inst4, "module-offload", 1.0, offload=3)


MEGATRON_HINT = "block_input, norm_out, qkv, attn_out, residual"


@pytest.mark.parametrize("kwargs, message", [
    ({"offload": "qkv,,attn_out"}, "offload='qkv,,attn_out' has an empty item"),
    ({"offload": ","}, "offload=',' has an empty item"),
    ({"offload": "qkv,attn_out,qkv"}, "offload='qkv,attn_out,qkv' names qkv more than once"),
    ({"recompute": "norm_out, norm_out"}, "recompute='norm_out, norm_out' names norm_out "
                                          "more than once"),
    ({"offload": ""}, "offload='' names no category"),
])
def test_module_offload_refuses_empty_and_repeated_categories(kwargs, message):
    """An empty item, a repeated category or nothing to offload is refused at
    construction, naming the parameter and the categories Megatron's modules map to."""
    with pytest.raises(SolverError) as e:
        ModuleOffload(**kwargs)
    text = str(e.value)
    assert message in text and MEGATRON_HINT in text and "valid keys: offload" in text


def test_module_offload_without_recompute(inst4):
    """recompute="" is Megatron without selective recompute: no tensor is recomputed."""
    plan = ModuleOffload(offload="act", recompute="").solve(inst4, inst4.P).plan
    assert not names_with(inst4, plan, RECOMP)
    assert names_with(inst4, plan, SWAP) == {f"{v}{i}" for v in "ab" for i in range(4)}


def test_knapsack_ilp_without_scipy_gives_the_install(inst4, monkeypatch):
    """method=ilp without scipy: refused before PyTorch is called, naming the extra."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scipy" else real(name, *a))
    with pytest.raises(SolverError, match=r"needs scipy .*pip install 'slackopt\[torch\]' "
                                          r"\(it includes scipy\)"):
        TorchKnapsack(method="ilp").solve(inst4, inst4.P - 1)


# ----------------------------------------------------------------------- ckpt-offload
def test_ckpt_offload_hand_checked(inst4):
    """All four blocks checkpointed: a, b recomputed, the block inputs x0..x3 offloaded,
    x4 (head input) and z kept. With blocks=2 only blocks 0 and 1."""
    assert block_inputs(inst4) == {i: inst4.saved_position(f"x{i}") for i in range(4)}
    plan = ckpt_offload_plan(inst4)
    assert names_with(inst4, plan, SWAP) == {"x0", "x1", "x2", "x3"}
    assert names_with(inst4, plan, RECOMP) == {f"{v}{i}" for v in "ab" for i in range(4)}
    assert names_with(inst4, plan, KEEP) == {"x4", "z"}
    two = CkptOffload(blocks=2).solve(inst4, inst4.P).plan
    assert names_with(inst4, two, SWAP) == {"x0", "x1"}
    assert names_with(inst4, two, RECOMP) == {"a0", "b0", "a1", "b1"}


# ----------------------------------------------------------------------- titan-auto
def test_titan_inner_program_hand_checked(inst4):
    """Block 1 holds a1 (2 B), b1 (6 B) and x2 (4 B, c = inf: kept). Fractions keep 1/3,
    offload 1/4 (3 B, 3.15 B with the 5% overshoot): only a1 fits the offload, and b1 is
    recomputed (1 s) rather than a1 too (2 s in all)."""
    m = np.flatnonzero(np.asarray(inst4.saved_layers) == 1)
    assert [inst4.saved_names[k] for k in m] == ["a1", "b1", "x2"]
    tags = inner_tags(inst4, m, (1 / 3, 5 / 12, 1 / 4), offload_min_bytes=0)
    assert tags.tolist() == [SWAP, RECOMP, KEEP]
    # with offload barred below 1 MiB (torchtitan's default) both are recomputed
    assert inner_tags(inst4, m, (1 / 3, 5 / 12, 1 / 4)).tolist() == [RECOMP, RECOMP, KEEP]
    # an LP keep share under the must-keep bytes (CBC's tolerance on GB blocks, shown
    # here as 0) still keeps x2 instead of failing the program
    assert inner_tags(inst4, m, (0.0, 1.0, 0.0)).tolist() == [
        RECOMP, RECOMP, KEEP]


@pytest.mark.parametrize("frac", [0.9, 0.75, 0.6])
def test_titan_fractions_sum_to_one_and_tags_respect_them(inst4, frac):
    M = int(frac * inst4.P)
    fr, lp = outer_lp(inst4, M)
    res = TitanAuto(offload_min_bytes=0).solve(inst4, M)
    assert fr is not None, "the budgets of this test leave the LP feasible"
    assert res.info["fractions"] == {b: list(v) for b, v in fr.items()}
    layers = np.asarray(inst4.saved_layers)
    s = np.asarray(inst4.s)
    for b, (k, r, o) in fr.items():
        assert k + r + o == pytest.approx(1, abs=1e-6) and min(k, r, o) >= -1e-9
        m = layers == b
        a = int(s[m].sum())
        assert k * a >= 4 - 1e-6                      # x_{b+1} cannot be rebuilt
        assert o * a <= 1.0 * 3 + 1e-6                # D2H window: W F = 3 B
        dec = res.plan.decisions[m]
        assert s[m][dec == KEEP].sum() <= k * a * (1 + 1e-6) + 1
        assert s[m][dec == SWAP].sum() <= 1.05 * o * a + 1e-6
    assert fr[3][2] == 0                              # the last block offloads nothing
    assert res.objective_s == pytest.approx(inst4.ideal_time_s + lp["added_runtime_s"])


@pytest.mark.slow
def test_the_pulp_models_raise_no_warning(inst4):
    # PuLP 3.3 deprecates LpVariable(...) construction and the bundled CBC command for
    # PuLP 4.0 (25,818 DeprecationWarnings in a test run): titan-auto's two programs and
    # the milp's PuLP backend use prob.add_variable and pulp_cbc (silenced there only).
    import warnings

    from slackopt.solvers.milp import MILP

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = TitanAuto().solve(inst4, int(0.7 * inst4.P))
        milp = MILP(backend="pulp", enum_plans=0, lns_plans=0, local_search=False,
                    warm_start=False, time_limit_s=20).solve(inst4, int(0.7 * inst4.P))
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []
    assert res.plan is not None and milp.plan is not None
    assert milp.info["log"], "the PuLP backend ran"


def test_titan_infeasible_budget_reports_model_minimum(inst4):
    """Below the model's floor (E + every block's unrebuildable bytes + the loss row's
    gradients) the LP is infeasible: keep-all, status infeasible, and the elastic LP's
    smallest budget, at which the LP is feasible again."""
    res = TitanAuto().solve(inst4, 10)
    assert res.status == "infeasible" and res.objective_s is None
    assert names_with(inst4, res.plan, KEEP) == set(inst4.saved_names)   # nothing tagged
    mb = res.info["model_min_budget_bytes"]
    assert mb > 10
    assert outer_lp(inst4, mb)[0] is not None
    assert outer_lp(inst4, mb - 2)[0] is None


# ----------------------------------------------------------------------- all five
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.torch)
                                  if n == "torch-knapsack" else n for n in PRODUCTION])
@pytest.mark.parametrize("frac", [1.0, 0.7, 0.5, 0.3])
def test_every_plan_resimulated_never_feasible_over_m(name, frac):
    """slackopt.solve re-simulates each plan: a feasible status always comes with a
    feasible evaluation whose peak is within M, and a second simulation agrees."""
    if name == "torch-knapsack":
        pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    inst = make("tiny")
    M = int(frac * inst.P)
    res = slackopt.solve(inst, name, M)
    ev = simulate(inst, res.plan, M)
    assert ev.feasible == res.evaluation.feasible and ev.peak_bytes == res.evaluation.peak_bytes
    assert ev.peak_bytes <= M
    if res.status in ("feasible", "optimal"):
        assert ev.feasible
    else:
        assert res.status == "infeasible"


def test_solvers_listed():
    names = set(slackopt.solver.registered_solvers())
    assert set(PRODUCTION) <= names


@pytest.mark.slow
@pytest.mark.parametrize("cls", [pytest.param(TorchKnapsack, marks=pytest.mark.torch),
                                 TitanAuto, ModuleOffload, OffloadAll, CkptOffload])
def test_contract(cls):
    """The solver contract's conformance checks (slackopt.testing)."""
    if cls is TorchKnapsack:
        pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    check_solver(cls)


@pytest.mark.torch
def test_knapsack_ilp_needs_scipy(inst4):
    """method=ilp runs PyTorch's ilp_knapsack (scipy's milp): without scipy the error says
    so; with it, the choice is the hand-checked optimum (a0..a3 and one b kept)."""
    pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    M = inst4.P - inst4.A + 23 + 16
    try:
        import scipy  # noqa: F401
    except ImportError:
        with pytest.raises(SolverError, match="scipy"):
            knapsack_plan(inst4, M, "ilp")
        return
    plan, _ = knapsack_plan(inst4, M, "ilp")
    assert len(names_with(inst4, plan, RECOMP) & {"b0", "b1", "b2", "b3"}) == 3
    assert not names_with(inst4, plan, RECOMP) & {"a0", "a1", "a2", "a3"}


@pytest.mark.torch
def test_production_suite_from_the_cli_and_in_compare():
    """--solvers production expands to the suite (also inside a JSON list, beside a
    solver with parameters); compare runs it on the tiny
    transformer: one row per planner, every status a shared word, and no feasible row
    over M."""
    pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    from slackopt.cli._options import solver_specs as _solver_specs
    from slackopt.compare import SUITES, compare

    assert _solver_specs("production") == list(SUITES["production"])
    assert _solver_specs("production,slackswap") == [*SUITES["production"], "slackswap"]
    assert _solver_specs('["production", ["genetic", {"generations": null}]]') == \
        [*SUITES["production"], ("genetic", {"generations": None})]
    df = compare([make("tiny")], list(SUITES["production"]), [0.7], progress=False)
    assert len(df) == len(SUITES["production"])
    assert set(df["solver"]) == set(PRODUCTION) | {"slackswap"}
    assert set(df["status"]) <= {"feasible", "infeasible"}
    feas = df[df["feasible"]]
    assert (feas["peak_bytes"] <= feas["budget_bytes"]).all()


@pytest.mark.torch
def test_dp_rounding_lets_the_kept_set_pass_the_capacity():
    """The README's finding on GPT-2 XL at 0.99 P: PyTorch's dp_knapsack rounds each item
    to 1/10,000 of the ratio range, and over 435 items the kept bytes pass the capacity
    b (A - A_fixed) (179 MB here); greedy_knapsack works on the exact sizes and stays
    within it. The evaluator finds the DP's plan over M at the loss backward."""
    pytest.importorskip("torch", reason="torch-knapsack calls PyTorch (the [torch] extra)")
    from slackopt.io import load_instance

    inst = load_instance(Path(__file__).resolve().parents[1] / "instances" / "paper"
                         / "gpt2-xl_a100-pcie4.json")
    M = int(0.99 * inst.P)
    room = M - (inst.P - inst.A)                  # what the model lets the saved bytes use
    dp, info_dp = knapsack_plan(inst, M, "dp")
    _, info_greedy = knapsack_plan(inst, M, "greedy")
    assert len(knapsack_inputs(inst)[0]) == 435
    assert info_dp["model_fits"] and info_dp["model_saved_bytes"] > room
    assert info_greedy["model_saved_bytes"] <= room
    ev = simulate(inst, dp, M)
    assert not ev.feasible and "'loss.bwd'" in ev.failure
