"""The phases of the search, in the order :data:`PHASES` runs them: each reads and
improves one :class:`~.state._Search` state, lifting the certified bound, lowering the
plan, or both. The bound sources (:mod:`slackopt.solvers.milp.bounds`) enter through
:func:`bound_phase`; the docs page "The exact tier" walks the list."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from slackopt.instance import Instance
from slackopt.solvers.milp.bounds.checkpoint import CheckpointLP
from slackopt.solvers.milp.bounds.deficit import DeficitBound
from slackopt.solvers.milp.bounds.deficit_cover import DeficitCover
from slackopt.solvers.milp.bounds.source import BoundSource
from slackopt.solvers.milp.bounds.timing import TimingLP, TimingMILP
from slackopt.solvers.milp.search.cpsat_seed import recompute_only_incumbent
from slackopt.solvers.milp.search.enumeration import (
    ENUM_GAPS,
    ENUM_MAX_SAVED,
    STAGE_MAX_CELLS,
    BranchAndBound,
)
from slackopt.solvers.milp.search.floor import floor_plans
from slackopt.solvers.milp.search.incumbent import improve, kick_search
from slackopt.solvers.milp.search.lns import lns
from slackopt.solvers.milp.search.microbatch import microbatch_search
from slackopt.solvers.milp.search.nogood import model_phase
from slackopt.solvers.milp.search.state import Settings, _Search
from slackopt.solvers.seeds import cheap_solver_names, seed_plans

SEED_SHARE = 0.2
"""Share of the time limit the cheap seed solvers may use together (phase "seeds"); a
solver not started when it is spent is skipped, unless no plan was found yet."""
SEED_LIMIT_S = 10.0
"""Time limit (s) passed to each cheap seed solver."""
CPSAT_WORK = 5.0
"""CP-SAT's work limit for the recompute-only seed, in its deterministic time units
(about seconds), so that the seed does not depend on machine speed."""
DEFICIT_COVER_SHARE = 0.05
"""Share of the time left that the joint deficit cover's certified branch and bound
(phase "deficit_cover") may use, within ``DEFICIT_COVER_NODES`` node LPs: on the shapes
suite it closes within 500 nodes and a few seconds where it lifts the bound; on the
transformers of the bench it equals the deficit bound, so what it does not close soon
it leaves (a search stopped early keeps a valid bound)."""
DEFICIT_COVER_NODES = 1000
CHECKPOINT_SHARE = 0.4
"""Share of the time left that the checkpoint LP (phase "checkpoint_bound") may use: on
the largest instances its LP does not end in the time a solve has, and the phases after
it need the rest (docs/bounds.md, "Settings and the measurements behind them")."""
TIMING_LP_SHARE = 0.5
"""Share of the time left that the timing model's LP relaxation (phase "timing_lp") may
use: it runs before the searches, whose work limits can outlast a short time limit."""
ENUM_PASS_SHARE = 0.5
"""Share of the time left that each enumeration pass but the last may use."""
MICROBATCH_SHARE = 0.6
"""Share of the time left that the microbatch passes of a pipeline stage (phase
"microbatch": their plans and bounds) may use."""
TIMING_SHARE = 0.7
"""Share of the time left that the timing MILP bound (phase "timing_bound") may use; the
rest is the time-indexed model's."""


@dataclass(frozen=True)
class Phase:
    """One step of the search: `run(settings, state)` improves the state in place and
    returns False when it is off or has nothing to do (then ``info["phases"]`` leaves it
    out); a phase that settles the answer sets ``state.end``.

    `stages`: the phase runs on pipeline stages too (``Instance.single_pass`` False):
    the searches that claim nothing but plans the evaluator scored, and the bound sources
    and exact searches whose argument covers a stage's schedule (docs page "The exact
    tier", "Pipeline stages")."""

    name: str
    run: Callable[[Settings, _Search], bool | None]
    stages: bool = False
    single_pass: bool = True
    """The phase runs on single passes (``Instance.single_pass`` True)."""

    def runs_on(self, inst: Instance) -> bool:
        """Whether the phase runs on `inst` (:attr:`single_pass`, :attr:`stages`)."""
        return self.single_pass if inst.single_pass else self.stages


def bound_phase(source: BoundSource) -> Phase:
    """The phase of a bound source: call it with the search's context, record its
    certified and uncertified bounds and its ``info`` entries, and simulate the plans it
    returns in order (source name as the plan's source), each improvement followed by a
    local search when ``local_search`` is on, so that a longer limit replays these
    steps."""

    def run(solver: Settings, st: _Search) -> bool | None:
        value = source(st.inst, st.M, st.bound_context())
        st.results[source.name] = value
        st.info.update(value.info)
        for dec in value.plans:
            before = st.inc.step_s
            st.inc.consider(dec, source.name)
            if st.inc.step_s < before and solver.local_search:
                improve(st.inc, solver.search_calls, st.seed, st.deadline)
        for key, v in value.bounds.items():
            st.bound(key, v)
        for key, v in value.uncertified.items():
            st.bound(key, v, certified=False)
        return None

    return Phase(source.name, run, stages=source.stages, single_pass=source.single_pass)


def _seeds(solver: Settings, st: _Search) -> bool | None:
    """Seeds, the anytime floor: the start plan (``run.start``, when
    :func:`slackopt.solve` got one), the plans of :func:`~.floor.floor_plans` (all-swap, and
    recompute what can be rebuilt with the rest swapped or kept); with ``warm_start``,
    the plans of the cheap registered solvers
    (:func:`~slackopt.solvers.seeds.cheap_solver_names`: SlackSwap, the baselines, the
    production planners), their decisions re-simulated under the barrier-free runtime,
    sharing at most ``SEED_SHARE`` of the limit, then CP-SAT's best recompute-only plan (a
    work limit, :data:`CPSAT_WORK`). The incumbent is never slower than any of them."""
    inst, M = st.inst, st.M
    if st.start is not None:
        v = st.inc.consider(st.start, "start_plan")
        st.info["start_plan_s"] = v if math.isfinite(v) else None  # None: it does not run
    for source, dec in floor_plans(inst).items():
        st.inc.consider(dec, source)
    if not solver.warm_start:
        return
    end = time.perf_counter() + SEED_SHARE * max(0.0, st.left())
    plans, log = seed_plans(inst, M, st.seed, cheap_solver_names(), SEED_LIMIT_S, end)
    for nm, key in plans:
        st.inc.consider(np.frombuffer(key, dtype=np.int8).copy(), nm)
    st.info["seeds"] = [{k: v for k, v in e.items() if k != "_key"} for e in log]
    if st.tier != "aggregated" and st.left() > 0.5:
        dec = recompute_only_incumbent(inst, M, st.left() - 0.2, st.seed,
                                       deterministic_time=CPSAT_WORK)
        if dec is not None:
            st.inc.consider(dec, "cpsat_recompute_only")
    if st.inc.dec is not None and st.inc.step_s <= st.T_star * (1 + 1e-12):
        st.model_optimal = True
        st.objective = st.T_star
        st.end = ("optimal", "a seed plan runs at the ideal step time T*")


def _microbatch(solver: Settings, st: _Search) -> bool | None:
    """Pipeline stages: :func:`~.microbatch.microbatch_search` within
    ``MICROBATCH_SHARE`` of the time left: its plans (each microbatch's pass planned by
    the exact tier at M / k, given to every microbatch), each improvement followed by a
    local search when ``local_search`` is on and the plan does not meet the bound yet,
    and its certified bound ``microbatch`` (the passes' bounds added up along the
    schedule less the bubbles)."""
    end = time.perf_counter() + MICROBATCH_SHARE * max(0.0, st.left() - 0.3)
    res = microbatch_search(st.inst, st.M, end, st.seed)
    if not res.info:
        return False
    st.info["microbatch"] = res.info
    st.bound("microbatch", res.bound_s)
    for source, dec in res.plans:
        before = st.inc.step_s
        st.inc.consider(dec, source)
        if st.inc.step_s < before and solver.local_search and not st.closed():
            improve(st.inc, solver.search_calls, st.seed, st.deadline)
    return True


def _local_search(solver: Settings, st: _Search) -> bool | None:
    """Local search around the incumbent (:func:`~.incumbent.improve`; fixed work,
    deterministic). The searches that yield plans run to their own work limits and the
    deadline only cuts them short, so a longer limit replays the same steps and adds to
    them; the bound phases before it (the LPs) take wall time, not plans."""
    if not solver.local_search or st.inc.dec is None:
        return False
    improve(st.inc, solver.search_calls, st.seed, st.deadline)
    return True


def _kicks(solver: Settings, st: _Search) -> bool | None:
    """Iterated local search (:func:`~.incumbent.kick_search`): kicks
    of 2 to 5 tensors from the incumbent, each followed by a descent over the 1-flips
    and the rebuild exchanges; fixed work (``kick_plans``), deterministic."""
    if not solver.local_search or solver.kick_plans <= 0 or st.inc.dec is None:
        return False
    st.info["kick_plans"] = kick_search(st.inc, solver.kick_plans, st.seed, st.deadline)
    return True


def _enumeration(solver: Settings, st: _Search) -> bool | None:
    """Exact enumeration on instances with at most ``ENUM_MAX_SAVED`` saved tensors:
    branch and bound over the decision vectors with the evaluator at the leaves (fixed
    work, ``enum_plans`` plans over all passes), in passes of decreasing gap
    (``ENUM_GAPS``, each but the last within ``ENUM_PASS_SHARE`` of the time left). A
    pass that ends within its limits proves that no plan runs faster than the incumbent
    / (1 + gap), a certified bound since every vector was simulated or pruned by a bound
    valid for all its completions; the last pass (gap 0) proves the optimum, or that no
    plan runs."""
    if solver.enum_plans <= 0 or st.inst.n_saved > ENUM_MAX_SAVED:
        return False
    bb = BranchAndBound(st.inst, st.M)
    passes: list[dict[str, Any]] = []
    total = {"complete": False, "simulated": 0, "pruned_time": 0, "pruned_memory": 0,
             "pruned_admission": 0, "space": 0, "passes": passes}
    st.info["enumeration"] = total
    for gap in ENUM_GAPS:
        now = time.perf_counter()
        end = st.deadline if gap == 0.0 else min(
            st.deadline, now + ENUM_PASS_SHARE * max(0.0, st.deadline - now))
        en = bb.run(st.inc, solver.enum_plans - total["simulated"], end, gap=gap)
        passes.append({"gap": gap, "complete": en.complete, "bound_s": en.bound_s,
                       "simulated": en.simulated})
        for key in ("simulated", "pruned_time", "pruned_memory", "pruned_admission"):
            total[key] += getattr(en, key)
        total["space"], total["complete"] = en.space, en.complete and gap == 0.0
        if not en.complete:
            return
        if st.inc.dec is None:
            total["complete"] = True
            st.end = ("infeasible", "every decision vector was simulated or pruned by the "
                                    "memory bound: none runs")
            return
        st.bound("enumeration", en.bound_s)
    st.end = ("optimal", "every decision vector was simulated or pruned by a bound valid "
                         "for all its completions")


def _lns(solver: Settings, st: _Search) -> bool | None:
    """Large-neighbourhood search (:func:`~.lns.lns`): windows of saved tensors
    searched exactly by the enumeration's branch and bound, the other tensors fixed to
    the incumbent; fixed work (``lns_plans``), deterministic. Off on a pipeline stage
    with more than ``STAGE_MAX_CELLS`` saved-tensor x op cells."""
    if solver.lns_plans <= 0 or st.inc.dec is None:
        return False
    if not st.inst.single_pass and st.inst.n_saved * st.inst.n_ops > STAGE_MAX_CELLS:
        return False    # a large stage: its branch and bound's footprints would not fit
    ln = lns(st.inc, solver.lns_plans, st.seed, st.deadline)
    st.info["lns"] = {"windows": ln.windows, "simulated": ln.simulated,
                      "improved": ln.improved, "passes": ln.passes,
                      "window_size": ln.window_size, "converged": ln.converged}



PHASES: tuple[Phase, ...] = (
    Phase("seeds", _seeds, stages=True),
    bound_phase(DeficitBound()),
    bound_phase(DeficitCover(share=DEFICIT_COVER_SHARE, nodes=DEFICIT_COVER_NODES)),
    Phase("microbatch", _microbatch, stages=True, single_pass=False),
    bound_phase(CheckpointLP(share=CHECKPOINT_SHARE)),
    bound_phase(TimingLP(share=TIMING_LP_SHARE)),
    Phase("local_search", _local_search, stages=True),
    Phase("kicks", _kicks, stages=True),
    Phase("enumeration", _enumeration, stages=True),
    Phase("lns", _lns, stages=True),
    bound_phase(TimingMILP(share=TIMING_SHARE)),
    Phase("milp", model_phase),
)
"""The search of :meth:`~.solver.MILP.plan`, in order (``info["phases"]`` names the ones
that ran). The loop stops at the first phase that settles the answer or once the plan
meets the certified bound. The bounds that do not depend on a plan (deficit, deficit
cover, checkpoint LP, timing LP) run right after the seeds, before the searches, whose
work limits can outlast a short time limit on instances with hundreds of saved
tensors."""
