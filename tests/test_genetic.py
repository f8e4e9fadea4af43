"""Genetic search (solvers/genetic.py; SlackSwap paper sec. 4.4).

The optimum checks enumerate all plans (3 decisions per rebuildable saved tensor, 2 for
c = inf) of instances with 8 saved tensors through the evaluator and compare with the
GA's best plan.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from slackopt import get_solver, simulate, solve
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.solvers.baselines import checkpoint_blocks, checkpoint_plan
from slackopt.solvers.genetic import (
    UNBOUNDED_BUDGET_BYTES,
    Genetic,
    Individual,
    mutate,
    random_individual,
    score,
)
from slackopt.solvers.milp import MILP
from slackopt.workloads import make
from slackopt.workloads.synthetic import unet
from tests.planner_instances import blocks
from tests.planner_instances import chain as hand_chain

SEARCH = dict(population=24, generations=60)
"""Search size of the optimum tests: at most ~1,500 plans of the 4,374 (or fewer) there."""


def _hand_chain():
    return hand_chain([3, 5, 2, 4, 6, 1, 3], [2, None, 1.5, 3, 0.5, 2, 1], head=2, W=2.0)


ENUM_INSTANCES = {
    "blocks2": lambda: blocks(L=2),
    "hand_chain7": _hand_chain,
    "chain7": lambda: make("chain", n_layers=7),
}
ENUM_CASES = [("blocks2", f) for f in (0.6, 0.75, 0.9)] + [
    ("hand_chain7", f) for f in (0.55, 0.65, 0.8)] + [
    ("chain7", f) for f in (0.55, 0.6, 0.85)] + [("chain7", 0.4)]  # last: nothing fits


@pytest.fixture(scope="module")
def enum_instances():
    return {k: f() for k, f in ENUM_INSTANCES.items()}


@pytest.fixture(scope="module")
def tiny():
    return make("tiny")


def all_plans(inst):
    allowed = [(KEEP, SWAP, RECOMP) if np.isfinite(c) else (KEEP, SWAP) for c in inst.c]
    for dec in itertools.product(*allowed):
        yield Plan(np.array(dec, dtype=np.int8), inst.saved_names)


_OPTIMA: dict = {}


def enumerated_optimum(inst, M):
    """Fastest feasible step time over all plans (None if no plan fits); memoized."""
    if (id(inst), M) in _OPTIMA:
        return _OPTIMA[id(inst), M]
    best = None
    for pl in all_plans(inst):
        ev = simulate(inst, pl, M)
        if ev.feasible and (best is None or ev.step_time_s < best):
            best = ev.step_time_s
    _OPTIMA[id(inst), M] = best
    return best


def test_registered():
    g = get_solver("genetic", population=10)
    assert isinstance(g, Genetic) and g.params["population"] == 10


@pytest.mark.slow
@pytest.mark.parametrize("seeding", ["slackswap+baselines", "random"])
@pytest.mark.parametrize(("name", "frac"), ENUM_CASES)
def test_finds_the_enumerated_optimum(enum_instances, name, frac, seeding):
    inst = enum_instances[name]
    assert inst.n_saved <= 8
    M = int(frac * inst.P)
    opt = enumerated_optimum(inst, M)
    res = Genetic(seeding=seeding, **SEARCH).solve(inst, M, seed=1)
    if opt is None:
        assert res.status == "infeasible"
        assert res.info["history"][-1]["best_over_bytes"] > 0
        return
    # T* bounds every plan: "optimal" within 1e-4 of it, else "bounded" with the gap
    assert res.status in ("bounded", "optimal")
    step = simulate(inst, res.plan, M).step_time_s
    assert res.info["gap"] == pytest.approx((step - res.lower_bound_s) / res.lower_bound_s,
                                            abs=1e-12)
    assert res.objective_s == pytest.approx(opt, rel=1e-12, abs=0)
    ev = simulate(inst, res.plan, M)
    assert ev.feasible and ev.step_time_s == res.objective_s


@pytest.mark.parametrize("frac", [0.5, 0.7])
def test_never_worse_than_the_best_seed(tiny, frac):
    M = int(frac * tiny.P)
    named = {n: solve(tiny, n, M).evaluation for n in ("slackswap", "checkpoint", "keep-all")}
    for gens in (0, 4):
        res = solve(tiny, "genetic", M, population=12, generations=gens)
        seeds = res.info["seeds"]
        assert {s["solver"] for s in seeds} >= set(named)
        # Every registered solver but the excluded ones seeds; each is scored as planned.
        for s in seeds:
            if s["solver"] in named:
                assert s["feasible"] == named[s["solver"]].feasible
                if s["feasible"]:
                    assert s["step_time_s"] == named[s["solver"]].step_time_s
        best_seed = min(s["step_time_s"] for s in seeds if s.get("feasible"))
        assert res.evaluation.feasible
        assert res.evaluation.step_time_s <= best_seed
        assert res.evaluation.step_time_s <= min(ev.step_time_s for ev in named.values()
                                                 if ev.feasible)
        hist = [h["best_throughput"] for h in res.info["history"]]
        assert hist == sorted(hist)
        assert len(hist) == gens + 1 or res.info["stopped_by"] == "ideal"
        if gens == 0:  # generation 0 alone returns the best seed itself
            assert res.objective_s == best_seed
            assert res.info["improvement_over_best_seed"] == 0.0


@pytest.mark.slow
def test_deterministic_for_a_seed_and_any_worker_count(tiny):
    M = int(0.5 * tiny.P)
    kw = dict(population=12, generations=5)
    a = Genetic(**kw).solve(tiny, M, seed=7)
    b = Genetic(**kw).solve(tiny, M, seed=7)
    c = Genetic(workers=2, **kw).solve(tiny, M, seed=7)
    assert a.plan == b.plan == c.plan
    assert a.info["history"] == b.info["history"] == c.info["history"]
    assert a.info["evaluations"] == c.info["evaluations"] and c.info["workers"] == 2
    # The deprecated constructor seed (a FutureWarning) is the fallback for seed=None
    # only: the solve() seed wins over it.
    with pytest.warns(FutureWarning, match=r"seed=3: the seed comes from solve\(seed=\)"):
        old = Genetic(population=12, generations=5, seed=3)
    d = old.solve(tiny, M, seed=7)
    assert d.plan == a.plan and d.seed == 7


def test_restores_the_global_random_state(tiny):
    random.seed(123)
    before = random.getstate()
    Genetic(population=6, generations=1).solve(tiny, int(0.5 * tiny.P))
    assert random.getstate() == before


def test_random_start(tiny):
    M = int(0.6 * tiny.P)
    res = Genetic(seeding="random", population=16, generations=15).solve(tiny, M, seed=3)
    assert res.info["seeds"] == [] and "best_seed" not in res.info
    assert res.status == "bounded" and simulate(tiny, res.plan, M).feasible
    hist = res.info["history"]
    assert len(hist) == 16
    evals = [h["evaluations"] for h in hist]
    assert evals == sorted(evals) and evals[-1] == res.info["evaluations"]
    assert hist[-1]["feasible_evaluations"] > 0 and hist[-1]["best_throughput"] > 0


def test_infeasible_plans_rank_by_bytes_over_then_time(tiny, enum_instances):
    M = int(0.05 * tiny.P)
    keep = Plan.keep_all(tiny)
    ckpt = checkpoint_plan(tiny, len(checkpoint_blocks(tiny)))
    sk, sc = score(tiny, keep, M), score(tiny, ckpt, M)
    assert not sk.feasible and not sc.feasible and sk.simulations == 2
    for pl, s in ((keep, sk), (ckpt, sc)):
        peak = simulate(tiny, pl, UNBOUNDED_BUDGET_BYTES).peak_bytes
        assert s.over_bytes == peak - M > 0 and s.peak_bytes == peak
    assert sc.over_bytes < sk.over_bytes and sc.key < sk.key
    assert sc.step_time_s > sk.step_time_s  # bytes over decide before time
    # Any feasible plan beats any infeasible one, however fast.
    sf = score(tiny, ckpt, tiny.P)
    assert sf.feasible and sf.key < sk.key and sf.simulations == 1
    # Equal bytes over: the plan faster with unlimited memory ranks first.
    inst = enum_instances["chain7"]
    M = int(0.3 * inst.P)
    ties = {}
    for pl in itertools.islice(all_plans(inst), 600):
        s = score(inst, pl, M)
        ties.setdefault(s.over_bytes, []).append(s)
    group = next(g for g in ties.values() if len({s.step_time_s for s in g}) > 1)
    assert sorted(group, key=lambda s: s.key)[0].step_time_s == min(s.step_time_s
                                                                    for s in group)


def test_infeasible_only_population_descends_bytes_over(tiny):
    M = int(0.05 * tiny.P)  # below every plan of the instance
    res = Genetic(seeding="random", population=16, generations=10).solve(tiny, M, seed=0)
    assert res.status == "infeasible" and res.objective_s is None
    over = [h["best_over_bytes"] for h in res.info["history"]]
    assert all(o > 0 for o in over)
    assert over == sorted(over, reverse=True) and over[-1] < over[0]
    assert all(h["population_feasible"] == 0 for h in res.info["history"])
    mb = res.info["min_budget_bytes"]
    assert mb is None or simulate(tiny, res.plan, mb).feasible


def test_infeasible_answer_states_its_best_plans_peak_as_such():
    """An infeasible genetic answer states its best plan's peak, marked
    "best_plan_peak": not the smallest budget the search reaches (on unet(2) at 0.3 P the
    exact tier proves a smaller budget where a plan runs)."""
    inst = unet(2).lowered
    M = int(0.3 * inst.P)
    res = Genetic(population=16, generations=5).solve(inst, M, seed=0)
    assert res.status == "infeasible"
    mb = res.info["min_budget_bytes"]
    assert res.info["min_budget_basis"] == "best_plan_peak"
    assert mb == simulate(inst, res.plan, inst.P).peak_bytes
    assert simulate(inst, res.plan, mb).feasible
    witness, _, _ = MILP.min_budget(inst)  # a budget where some plan runs
    assert witness < mb  # so "the smallest budget this solver reaches" would overstate it


def test_mutation_never_proposes_recomp_where_c_is_inf(tiny):
    rebuildable = np.isfinite(tiny.c).tolist()
    assert not all(rebuildable)
    fixed = [i for i, ok in enumerate(rebuildable) if not ok]
    random.seed(0)
    for indpb in (0.0, 0.3, 1.0):
        ind = random_individual(rebuildable)
        for _ in range(200):
            before = list(ind)
            mutate(ind, indpb, rebuildable)
            assert ind != before  # a mutation always changes the plan
            assert all(ind[i] != RECOMP for i in fixed)
            assert all(v in (KEEP, SWAP, RECOMP) for v in ind)
    assert all(random_individual(rebuildable)[i] != RECOMP for i in fixed for _ in range(5))
    Plan(np.array(Individual(ind), dtype=np.int8), tiny.saved_names).check(tiny)


def test_stops_at_the_ideal_step(tiny):
    res = Genetic(population=8, generations=50).solve(tiny, tiny.P)
    assert res.status == "optimal" and res.info["stopped_by"] == "ideal"
    assert res.info["generations"] == 0 and res.objective_s == res.lower_bound_s


def test_time_and_evaluation_limits(tiny):
    M = int(0.4 * tiny.P)  # the GA does not reach the ideal step here
    res = Genetic(population=8, generations=None).solve(tiny, M, time_limit_s=0.5)
    # only the limit stops this run (how closely it holds: benchmarks/timings.py)
    assert res.info["stopped_by"] == "time_limit"
    assert res.info["generations"] == len(res.info["history"]) - 1
    res = Genetic(population=8, generations=None, max_evaluations=40).solve(tiny, M)
    assert res.info["stopped_by"] == "max_evaluations"
    assert 40 <= res.info["evaluations"] < 40 + 8
    with pytest.raises(ValueError, match="limit"):
        Genetic(generations=None).solve(tiny, M)


@pytest.mark.parametrize("bad", [dict(population=1), dict(tournament_size=0),
                                 dict(crossover_rate=1.5), dict(mutation_rate=-0.1),
                                 dict(elites=0), dict(elites=48), dict(generations=-1),
                                 dict(seeding="greedy"), dict(workers=0),
                                 dict(mutation_indpb=2.0), dict(max_evaluations=0),
                                 dict(progress_s=-1.0)])
def test_bad_hyperparameters(bad):
    with pytest.raises(ValueError):
        Genetic(**bad)


# ----------------------------------------------------------------------------- time limit
SLOW_SEED_LIMITS: list[float | None] = []


class SlowSeed:
    """A seed solver that takes 0.3 s whatever limit it is given, then keeps everything."""

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        import time

        SLOW_SEED_LIMITS.append(time_limit_s)
        time.sleep(0.3)
        return get_solver("keep-all").solve(instance, budget_bytes)


class _EP:
    def __init__(self, name, obj):
        self.name, self.value, self._obj = name, f"test_genetic:{obj.__name__}", obj

    def load(self):
        return self._obj


def test_seeding_gets_a_share_of_the_time_limit(tiny, monkeypatch):
    import slackopt.solver as solver_mod
    from slackopt.solvers.genetic import SEEDING_SHARE

    real = solver_mod.registered_solvers()
    monkeypatch.setattr(solver_mod, "registered_solvers",
                        lambda: {**real, "slow_seed": _EP("slow_seed", SlowSeed)})
    SLOW_SEED_LIMITS.clear()
    M = int(0.4 * tiny.P)
    res = Genetic(population=8, generations=None, progress_s=None,
                  seed_solvers=["slow_seed", "slackswap", "keep-all"]).solve(
        tiny, M, time_limit_s=0.4)
    # the first seed solver is given at most the seeding share of the limit ...
    assert len(SLOW_SEED_LIMITS) == 1 and SLOW_SEED_LIMITS[0] <= SEEDING_SHARE * 0.4
    # ... and, as it overran that share, the others are skipped, not started
    seeds = {e["solver"]: e for e in res.info["seeds"]}
    assert seeds["slackswap"] == {"solver": "slackswap", "skipped": "no time left for seeding"}
    assert seeds["keep-all"]["skipped"] == "no time left for seeding"
    assert seeds["slow_seed"]["status"] in ("feasible", "infeasible")
    assert res.info["stopped_by"] == "time_limit"


def test_progress_lines_on_stderr(tiny, capsys):
    M = int(0.4 * tiny.P)
    res = Genetic(population=8, generations=3, progress_s=0).solve(tiny, M)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in err] == [f"genetic: generation {g}"
                                                   for g in range(4)]
    last = res.info["history"][-1]
    assert f"{last['evaluations']} plans scored" in err[-1]
    if last["best_feasible"]:
        gap = last["best_step_time_s"] / tiny.ideal_time_s - 1
        assert f"gap {gap:.2%}" in err[-1] and "bound T*" in err[-1]
    assert Genetic(population=8, generations=3).progress_s == 10.0  # quiet on short runs
    Genetic(population=8, generations=3, progress_s=None).solve(tiny, M)
    assert capsys.readouterr().err == ""
