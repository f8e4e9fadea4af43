"""The audit's cases (issue 22) as tests: each instance where a bound of the exact tier
once exceeded the optimum, or `optimal` was said of a slower plan, is solved by the
default milp and by the variants that reach each model alone, and checked against brute
force (every decision vector simulated).

What each case broke (the instance files are in tests/data/milp_soundness/):

- ``rebuild_gaps_same_producer``, ``full_tier_cuts_off_optimum``,
  ``exact_tier_cuts_off_optimum`` (+ ``_pad``: 14 zero-byte tensors, so the enumeration
  does not run): a recipe that reads another output of its own op; the models' rebuild
  gaps forbade recomputing both (solvers/milp/model/steps.py, ``rebuild_gaps``).
- ``full_tier_fifo_inplace``: the full tier chained D2H copies in production order, the
  runtime queues each when the tensor is ready (after its last in-place mutation).
- ``timing_bound_above_opt`` (+ ``_big``: 30 zero-byte tensors): a numerically wrong LP
  (a 137 MB tensor on a 50 MB/s link beside 8-byte tensors) gave a timing bound above the
  optimum; only certified bounds may decide a status now.
- ``min_budget_host_limit``: the smallest budget stated with ``infeasible`` assumed the
  all-swap plan, which a host pinned-memory limit forbids.

Zero-byte tensors cost nothing (spec invariant 6), so a padded instance has the optimum of
the instance it pads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import slackopt
from slackopt import Instance
from slackopt.io import load_instance
from slackopt.solver import OPTIMAL_REL_TOL
from tests.helpers_milp import enumerate_plans, same_producer

pytestmark = pytest.mark.slow  # every test here takes seconds (a milp solve each)

DATA = Path(__file__).parent / "data" / "milp_soundness"


# case -> (instance file or builder, budget in bytes, the unpadded file its optimum is from)
CASES = {
    "rebuild_gaps_same_producer": (same_producer, 3_000_000, None),
    "full_tier_cuts_off_optimum": ("full_tier_cuts_off_optimum", 25_974_030, None),
    "full_tier_fifo_inplace": ("full_tier_fifo_inplace", 26_172_517, None),
    "exact_tier_cuts_off_optimum": ("exact_tier_cuts_off_optimum", 16_029_776, None),
    "exact_tier_cuts_off_optimum_pad": ("exact_tier_cuts_off_optimum_pad", 16_029_776,
                                        "exact_tier_cuts_off_optimum"),
    "timing_bound_above_opt": ("timing_bound_above_opt", 146_632_682, None),
    "timing_bound_above_opt_big": ("timing_bound_above_opt_big", 146_632_682,
                                   "timing_bound_above_opt"),
    # found by tests/strategies.py (budget in the file's meta): an in-place mutation that
    # delays a D2H past its first backward reader (full tier priced the reader waiting);
    # a binding host limit where no seed ran (timeout without a plan)
    "found_1": ("found_1", None, None),
    "found_2": ("found_2", None, None),
    "found_3": ("found_3", None, None),
}
VARIANTS = {
    "default": {},
    "enum_off": dict(enum_plans=0),
    "phases_off": dict(enum_plans=0, lns_plans=0, local_search=False),
    "highs": dict(enum_plans=0, lns_plans=0, local_search=False, backend="highs"),
    "pulp": dict(enum_plans=0, lns_plans=0, local_search=False, backend="pulp"),
    "full": dict(enum_plans=0, lns_plans=0, local_search=False, tier="full"),
    "exact": dict(enum_plans=0, lns_plans=0, local_search=False, tier="exact"),
}
_INST: dict = {}
_OPT: dict = {}


def case(name: str) -> tuple[Instance, int, float]:
    """(instance, budget, brute-force optimum in s)."""
    src, M, base = CASES[name]
    if name not in _INST:
        _INST[name] = src() if callable(src) else load_instance(DATA / f"{src}.json")
    if M is None:
        M = int(_INST[name].meta["budget_bytes"])
    key = base or name
    if key not in _OPT:
        inst = _INST[name] if base is None else load_instance(DATA / f"{base}.json")
        _OPT[key] = min(enumerate_plans(inst.lowered, M).values())
    return _INST[name], M, _OPT[key]


FULL_TIER_CASES = ("rebuild_gaps_same_producer", "full_tier_cuts_off_optimum",
                   "full_tier_fifo_inplace", "timing_bound_above_opt", "found_1", "found_2",
                   "found_3")
"""The cases with at most 10 saved tensors, the full tier's size."""


@pytest.mark.parametrize("name,variant", [
    (n, v) for n in CASES for v in VARIANTS if v != "full" or n in FULL_TIER_CASES])
def test_bound_at_most_the_optimum_and_optimal_only_when_proven(name, variant):
    inst, M, opt = case(name)
    params = VARIANTS[variant]
    r = slackopt.solve(inst, "milp", M, time_limit_s=10, seed=0, **params)
    assert r.evaluation is not None and r.evaluation.feasible
    step = r.evaluation.step_time_s
    assert step >= opt * (1 - 1e-12)
    if r.lower_bound_s is not None:
        assert r.lower_bound_s <= opt * (1 + 1e-12), (r.lower_bound_s, opt, r.info["bounds"])
    assert "bound_error" not in r.info, r.info["bound_error"]
    assert r.info.get("bound_errors") == [], r.info.get("bound_errors")
    if r.status == "optimal":
        assert step <= opt * (1 + OPTIMAL_REL_TOL)
    else:
        assert r.status == "bounded"
    # the gap is what the bound and the plan say, never clamped
    if r.lower_bound_s is not None:
        assert r.info["gap"] == pytest.approx((step - r.lower_bound_s) / r.lower_bound_s)


def test_default_milp_finds_the_optimum_of_the_padded_cases():
    """The default configuration beyond the enumeration's size (25 and 38 saved tensors)
    returns the brute-force optimum and states no bound above it."""
    for name in ("exact_tier_cuts_off_optimum_pad", "timing_bound_above_opt_big"):
        inst, M, opt = case(name)
        assert inst.lowered.n_saved > 24
        r = slackopt.solve(inst, "milp", M, time_limit_s=20, seed=0)
        assert r.evaluation.step_time_s == pytest.approx(opt, rel=1e-9)
        assert r.lower_bound_s <= opt


def test_host_limit_states_the_smallest_budget():
    """Under a host pinned-memory limit the all-swap plan never runs; the smallest budget
    stated with ``infeasible`` is the model floor (13,575,612 B; a plan runs there: swap
    one tensor, recompute two, keep one), not P (21,934,108 B)."""
    inst = load_instance(DATA / "min_budget_host_limit.json")
    floor = 13_575_612
    r = slackopt.solve(inst, "milp", floor - 1, time_limit_s=10)
    assert r.status == "infeasible"
    assert abs(r.info["min_budget_bytes"] - floor) <= 1e-3 * inst.P
    assert r.info["min_budget_exact"] and r.info["min_budget_bytes"] == floor
    at = slackopt.solve(inst, "milp", r.info["min_budget_bytes"], time_limit_s=10)
    assert at.evaluation.feasible
    # brute force: no plan runs one byte below the floor, some plan runs at it
    times = enumerate_plans(inst.lowered, floor)
    assert min(times.values()) < float("inf")
    assert min(enumerate_plans(inst.lowered, floor - 1).values()) == float("inf")


def test_a_bound_source_above_a_simulated_plan_is_dropped(monkeypatch):
    """Self-consistency inside the search: a bound source that claims more than the step of
    a plan the search simulated is proven wrong on this instance; it is dropped into
    ``info["bound_errors"]`` and decides nothing (here the deficit bound, made 10x too
    large, would otherwise close the gap at once and say "optimal")."""
    import slackopt.solvers.milp.bounds.deficit as deficit

    real = deficit.deficit_bound
    monkeypatch.setattr(deficit, "deficit_bound", lambda inst, M: 10 * real(inst, M))
    inst, M, opt = case("full_tier_cuts_off_optimum")
    r = slackopt.solve(inst, "milp", M, time_limit_s=10, seed=0, enum_plans=0)
    errs = r.info["bound_errors"]
    assert [e["source"] for e in errs] == ["deficit"] and errs[0]["kind"] == "certified"
    assert errs[0]["bound_s"] > errs[0]["plan_step_s"]
    assert "deficit" not in r.info["bounds"]
    assert r.lower_bound_s <= r.evaluation.step_time_s


@pytest.mark.torch
def test_anytime_floor_never_worse_than_a_cheap_solver():
    """The milp's plan is never slower than any cheap registered solver's plan with the
    same seed, re-simulated under the barrier-free runtime (issue 22, item 6): chain of 12
    layers at 0.4 P, where SlackSwap finds no plan; the search past the seeds is cut to a
    minimum (no enumeration, one MILP solve, small work limits, a short limit), so the
    floor is what is tested."""
    from slackopt import Plan, simulate
    from slackopt.solver import get_solver
    from slackopt.solvers.seeds import cheap_solver_names
    from slackopt.workloads import make

    inst = make("chain", layers=12).lowered
    M = int(0.4 * inst.P)
    r = slackopt.solve(inst, "milp", M, time_limit_s=30, seed=1, enum_plans=0, lns_plans=20,
                       search_calls=20, max_iterations=1)
    seeds = {e["solver"] for e in r.info["seeds"] if "status" in e}
    assert seeds == set(cheap_solver_names())
    best = float("inf")
    for name in cheap_solver_names():
        res = get_solver(name).solve(inst, M, time_limit_s=10, seed=1)
        if res.plan is not None:
            ev = simulate(inst, Plan(res.plan.decisions, inst.saved_names), M)
            if ev.feasible:
                best = min(best, ev.step_time_s)
    assert best < float("inf")
    assert r.evaluation.step_time_s <= best


def test_a_backend_failure_does_not_sink_the_solve():
    """An audit instance on which OR-Tools' MathOpt raised inside the HiGHS backend's
    solve (an AttributeError while translating HiGHS's error status, ortools 9.15): the
    solve returns the best plan simulated and a certified bound instead of raising."""
    inst = load_instance(DATA / "highs_error.json")
    M = int(inst.meta["budget_bytes"])
    opt = min(enumerate_plans(inst.lowered, M).values())
    r = slackopt.solve(inst, "milp", M, time_limit_s=10, seed=0, enum_plans=0, lns_plans=0,
                       local_search=False, backend="highs")
    assert r.status in ("optimal", "bounded") and r.evaluation.feasible
    assert r.lower_bound_s <= opt <= r.evaluation.step_time_s


STAGE_VARIANTS = {"default": {}, "enum_off": dict(enum_plans=0),
                  "searches_off": dict(enum_plans=0, lns_plans=0, local_search=False,
                                       warm_start=False)}
"""On a stage: the enumeration proves the optimum; without it the bound is the deficit
bounds' stage form and the microbatch bound; without the searches too, the plans are
the floor plans and the microbatches' plans."""


def _stages() -> list[tuple[str, Instance]]:
    """Small stages (tests/strategies.py): drawn ones (stage_sample) and last stages under
    1F1B whose microbatches run back to back (last_stages: the microbatch bound covers
    them), each with at most 243 plans."""
    from tests.strategies import last_stages, stage_sample

    out = [(f"stage_sample[{i}]", s) for i, s in enumerate(stage_sample(5, salt=3))]
    return out + [(f"last_stages[{i}]", s)
                  for i, s in enumerate(last_stages(6, max_saved=2, max_plans=243))]


STAGES = _stages()


@pytest.mark.slow
@pytest.mark.parametrize("k", range(len(STAGES)))
def test_stages_bound_at_most_the_optimum_and_optimal_only_when_proven(k):
    """Pipeline stages (several microbatches, idle gaps, split backwards): every
    certified bound of every variant is at most the brute-force optimum, none is caught
    above a simulated plan, and `optimal` is said only of the optimum."""
    label, inst = STAGES[k]
    lo, hi = slackopt.solvers.milp.model_floor(inst), int(inst.P)
    for M in sorted({lo, lo + (hi - lo) // 8, lo + (hi - lo) // 2, max(lo, hi - 1)}):
        opt = min(enumerate_plans(inst, M).values())
        for variant, params in STAGE_VARIANTS.items():
            r = slackopt.solve(inst, "milp", M, time_limit_s=3, seed=0, **params)
            where = (label, M, variant, r.status, r.info.get("bounds"), opt)
            if opt == float("inf"):
                assert r.status in ("infeasible", "timeout"), where
                continue
            step = r.evaluation.step_time_s
            assert step >= opt * (1 - 1e-12), where
            assert r.lower_bound_s is not None and r.lower_bound_s <= opt * (1 + 1e-12), where
            assert all(v <= opt * (1 + 1e-12) for v in r.info["bounds"].values()), where
            assert r.info.get("bound_errors") == [], (where, r.info.get("bound_errors"))
            assert r.status in ("optimal", "bounded"), where
            if r.status == "optimal":
                assert step <= opt * (1 + OPTIMAL_REL_TOL), where
