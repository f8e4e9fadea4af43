"""Genetic search over per-tensor keep/swap/recomp decisions, the evaluator as fitness.

The paper bounds what its greedy planner leaves on the table with "a genetic search over
per-tensor keep/swap/recomp decisions, POET's search space with SwapAdvisor's search
method, using the simulator as fitness" (SlackSwap paper (2026), sec. 4.4).

- Search space (POET, Patil et al. 2022, "POET: Training Neural Networks on Tiny Devices
  with Integrated Rematerialization and Paging", ICML): one decision per saved tensor,
  KEEP / SWAP ("paging") / RECOMP; RECOMP only where the tensor can be rebuilt (c finite).
  A genome is exactly a :class:`~slackopt.plan.Plan`'s decision vector, in
  ``Instance.saved`` (production) order.
- Search method (SwapAdvisor, Huang et al. 2020, "SwapAdvisor: Pushing Deep Learning
  Beyond the GPU Memory Limit via Smart Swapping", ASPLOS): a generational genetic
  algorithm seeded with heuristic plans, fitness from a simulator of the runtime.
- Machinery: DEAP 1.4 (https://deap.readthedocs.io): :class:`deap.base.Fitness` with
  lexicographic multi-key comparison, ``tools.selTournament``, ``tools.cxTwoPoint``,
  ``tools.selBest``, ``tools.HallOfFame`` and ``algorithms.varAnd`` (crossover *and*
  mutation on cloned offspring). Mutation is our own operator: it re-draws genes among the
  decisions allowed for each tensor, so it never proposes RECOMP where c = inf. The GA is
  repair-free: crossover mixes two valid vectors position by position and mutation keeps
  each gene in its allowed set, so every proposed vector is a valid plan; nothing is ever
  edited after the fact.

Fitness (minimised lexicographically, see :func:`score`): ``(0 if feasible else 1,
bytes over budget, step time)``. A feasible plan scores ``(0, 0, T)`` with T the step
time under M. For an infeasible plan, "bytes over budget" is derived from numbers, never
from the failure message: the plan is simulated a second time under an effectively
unlimited budget (:data:`UNBOUNDED_BUDGET_BYTES`), and the score is ``(1, max(0,
peak_unbounded - M), T_unbounded)``: how far the plan's unconstrained peak is above M, then
how fast it would run with unlimited memory. The unconstrained peak over-states what a
swap-heavy plan needs (under M the runtime delays tasks and prefetches to stay within the
budget), so it is a ranking signal for the search, not a minimum budget.

Determinism: all random draws come from Python's :mod:`random` module (DEAP's operators
draw from it), seeded with the run's seed at the start of :meth:`Genetic.solve` and
restored to its previous state at the end. Evaluation never draws random numbers and a
plan's fitness does not depend on which process computes it or when, so a
generation-limited run gives the same plan and the same history for a given seed with
any number of workers. A time limit is only checked between generations (a generation is
never cut short), so time-limited runs are reproducible generation by generation but may
complete a different number of generations. Do not draw from :mod:`random` in other
threads during a solve.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import random
import threading
import time
from collections.abc import Container, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
from deap import algorithms, base, tools

from slackopt.errors import interrupt_cause
from slackopt.instance import Instance
from slackopt.parentwatch import sigint_blocked
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.solverbase import DEPRECATED_SEED_PARAM, BaseSolver, Outcome, Param, Run
from slackopt.solvers.seeds import NOT_CHEAP_SOLVERS, cheap_solver_names, seed_plans

SEEDINGS = ("slackswap+baselines", "random")
UNBOUNDED_BUDGET_BYTES = 2**53
"""Budget (bytes) of the second simulation of an infeasible plan: far above any instance
(and exactly representable as a float), so memory never binds."""
SEEDING_SHARE = 0.5
"""Under a time limit, the seed solvers share at most this fraction of it."""

_RANDOM_LOCK = threading.Lock()
_IDEAL_RTOL = 1e-12
"""A step time within this relative distance of T* counts as ideal (float rounding)."""


# --------------------------------------------------------------------------- fitness
class Score(NamedTuple):
    """The fitness of one plan.

    Attributes:
        feasible: the plan runs under M.
        over_bytes: 0 if feasible, else max(0, unconstrained peak - M) (bytes).
        step_time_s: step time under M if feasible, else with unlimited memory (s).
        throughput: T* / T if feasible, else 0.
        peak_bytes: peak under M if feasible, else the unconstrained peak (bytes).
        simulations: evaluator runs spent on this score (1 or 2).
    """

    feasible: bool
    over_bytes: int
    step_time_s: float
    throughput: float
    peak_bytes: int
    simulations: int

    @property
    def key(self) -> tuple[int, int, float]:
        """Lexicographic fitness, smaller is better: (infeasible, bytes over, step time)."""
        return (0 if self.feasible else 1, self.over_bytes, self.step_time_s)


def score(instance: Instance, plan: Plan, budget_bytes: int) -> Score:
    """Fitness of `plan` under M = `budget_bytes` (see the module docstring).

    Args:
        instance: the instance.
        plan: a plan for it.
        budget_bytes: M (bytes).

    Returns:
        The :class:`Score`; infeasible plans cost a second simulation at
        :data:`UNBOUNDED_BUDGET_BYTES`.

    Raises:
        PlanError: the plan does not fit the instance. BudgetError: M < 0.
    """
    return _score(instance, plan, budget_bytes)[0]


def _score(instance: Instance, plan: Plan, budget_bytes: int) -> tuple[Score, Evaluation]:
    """:func:`score`, and the plan's evaluation under M it was computed from."""
    try:
        ev = simulate(instance, plan, budget_bytes)
        if ev.feasible:
            return Score(True, 0, float(ev.step_time_s), float(ev.throughput),
                         int(ev.peak_bytes), 1), ev
        un = simulate(instance, plan, UNBOUNDED_BUDGET_BYTES)
    except SystemError as e:  # Ctrl-C that landed inside the compiled evaluator
        cause = interrupt_cause(e)
        if cause is not None:
            raise cause from None
        raise
    return Score(False, max(0, int(un.peak_bytes) - int(budget_bytes)), float(un.step_time_s),
                 0.0, int(un.peak_bytes), 2), ev


# Per-process evaluation context: set in the parent for workers=1, by the pool initializer
# in each worker process otherwise (so the instance is pickled once per worker).
_CTX: dict[str, Any] = {}


def _init_worker(instance: Instance, budget_bytes: int, parent_pid: int | None = None) -> None:
    """Keep the instance and M for :func:`_score_key`; in a pool worker (`parent_pid`
    given) also leave Ctrl-C to the parent and end with it."""
    _CTX["instance"] = instance
    _CTX["M"] = int(budget_bytes)
    if parent_pid is not None:
        from slackopt.parentwatch import exit_with_parent, worker_ignores_sigint

        worker_ignores_sigint()
        exit_with_parent(parent_pid)


def _score_key(key: bytes) -> Score:
    return _scored_key(key)[0]


def _scored_key(key: bytes) -> tuple[Score, Evaluation]:
    inst = _CTX["instance"]
    plan = Plan(np.frombuffer(key, dtype=np.int8), inst.saved_names)
    return _score(inst, plan, _CTX["M"])


def _progress_line(g: int, evaluations: int, best: Score, ideal_s: float, elapsed_s: float,
                   time_limit_s: float | None) -> None:
    """One progress line on stderr: generation, plans scored, the incumbent (best plan),
    the bound T* and the gap to it, time used."""
    import sys

    if best.feasible:
        inc = (f"best {best.step_time_s * 1e3:.4g} ms ({best.throughput:.2%} of ideal), "
               f"bound T* {ideal_s * 1e3:.4g} ms, gap {best.step_time_s / ideal_s - 1:.2%}")
    else:
        inc = f"no feasible plan yet (best {best.over_bytes / 1e6:.4g} MB over budget)"
    limit = f" of {time_limit_s:g} s" if time_limit_s is not None else ""
    sys.stderr.write(f"genetic: generation {g}, {evaluations} plans scored, {inc}, "
                     f"{elapsed_s:.1f} s{limit}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- DEAP types
class _Fitness(base.Fitness):
    """(infeasible, bytes over, step time), all minimised, compared lexicographically."""

    weights = (-1.0, -1.0, -1.0)


class Individual(list):
    """A genome: decision codes (KEEP/SWAP/RECOMP) in ``Instance.saved`` order."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.fitness = _Fitness()

    def key(self) -> bytes:
        """The decision vector as int8 bytes (cache key and plan payload)."""
        return bytes(self)


def mutate(ind: Individual, indpb: float, rebuildable: Sequence[bool]) -> tuple[Individual]:
    """Re-draw each gene with probability `indpb` among the *other* allowed decisions.

    Allowed decisions are KEEP and SWAP, plus RECOMP where ``rebuildable[i]`` (c finite),
    so RECOMP is never proposed for c = inf. If no gene was drawn, one uniformly chosen
    gene is re-drawn, so a mutation always changes the plan. Draws from :mod:`random`.

    Args:
        ind: the individual, modified in place.
        indpb: per-gene probability in [0, 1].
        rebuildable: per saved tensor, whether c is finite.

    Returns:
        ``(ind,)`` (DEAP's convention for mutation operators).
    """
    n = len(ind)
    if n == 0:
        return (ind,)
    changed = False
    # Bernoulli(indpb) per gene, drawn as geometric gaps between the genes hit.
    if indpb >= 1.0:
        hits: Iterable[int] = range(n)
    elif indpb <= 0.0:
        hits = ()
    else:
        hits = _bernoulli_positions(n, indpb)
    for i in hits:
        _redraw(ind, i, rebuildable[i])
        changed = True
    if not changed:
        i = random.randrange(n)
        _redraw(ind, i, rebuildable[i])
    return (ind,)


def _bernoulli_positions(n: int, p: float) -> list[int]:
    """Positions in range(n) each chosen independently with probability 0 < p < 1."""
    out: list[int] = []
    log_q = math.log1p(-p)
    i = -1
    while True:
        i += 1 + int(math.log(1.0 - random.random()) / log_q)
        if i >= n:
            return out
        out.append(i)


def _redraw(ind: Individual, i: int, can_recomp: bool) -> None:
    cur = ind[i]
    if can_recomp:
        ind[i] = random.choice([d for d in (KEEP, SWAP, RECOMP) if d != cur])
    else:
        ind[i] = SWAP if cur == KEEP else KEEP


def _clone(ind: Individual) -> Individual:
    """A copy of `ind` with its fitness (DEAP's default clone, deepcopy, is ~100x slower)."""
    c = Individual(ind)
    c.fitness.wvalues = ind.fitness.wvalues
    return c


def _mate(a: Individual, b: Individual) -> tuple[Individual, Individual]:
    """DEAP's two-point crossover (keeps runs of neighbouring tensors, i.e. layers,
    together); a no-op for genomes shorter than 2."""
    if min(len(a), len(b)) < 2:
        return a, b
    return tools.cxTwoPoint(a, b)


def _diversify(elite: list[Individual], offspring: list[Individual], tb: base.Toolbox,
               scored: Container[bytes], tries: int = 4) -> None:
    """Mutate again (up to `tries` times) each child whose plan was already scored in this
    run or already is in the next generation (the elites or an earlier child), so each
    generation spends its evaluations on new plans."""
    have = {ind.key() for ind in elite}
    for ind in offspring:
        for _ in range(tries):
            k = ind.key()
            if k not in have and k not in scored:
                break
            tb.mutate(ind)
            del ind.fitness.values
        have.add(ind.key())


def random_individual(rebuildable: Sequence[bool]) -> Individual:
    """Each gene uniform among its allowed decisions (RECOMP only if rebuildable)."""
    return Individual(random.choice((KEEP, SWAP, RECOMP)) if ok else random.choice((KEEP, SWAP))
                      for ok in rebuildable)


# --------------------------------------------------------------------------- the solver
class Genetic(BaseSolver):
    """DEAP genetic search over keep/swap/recomp decision vectors (paper sec. 4.4).

    One run (:meth:`solve`):

    1. Generation 0. A start plan (``run.start``, :func:`slackopt.solve`'s
       ``start_plan``) is its first individual, a seed like the others. With
       ``seeding="slackswap+baselines"``: the plans of the seed solvers (by default every
       registered solver except this one and exact MILP solvers, at least ``slackswap``,
       ``keep-all`` and ``checkpoint``; each asked with the run's seed and a time limit
       of ``seed_time_limit_s``), duplicates removed, then mutated copies of the seeds
       (round robin) up to ``population`` individuals. With ``seeding="random"``:
       ``population`` uniformly random vectors (SwapAdvisor's start; the start plan, if
       any, and random vectors for the rest).
       A seed contributes its decisions only: like every plan of the search it is scored
       under the barrier-free runtime, whatever runtime policy its solver chose.
    2. Each later generation: the ``elites`` best individuals survive unchanged; the other
       ``population - elites`` are chosen by tournaments of ``tournament_size``
       (``tools.selTournament``) and varied by ``algorithms.varAnd``: consecutive pairs
       cross over (``tools.cxTwoPoint``) with probability ``crossover_rate``, then each
       child mutates (:func:`mutate`) with probability ``mutation_rate``; with
       ``unique`` a child whose plan was already scored (or is already in the new
       generation) is mutated again, up to four times.
    3. Fitness is :func:`score` (lexicographic: feasible first, then bytes over budget,
       then step time), cached by the decision bytes so a plan is simulated once per run.
       New plans of a generation are scored in parallel by ``workers`` processes (the
       instance is shipped to each worker once, by the pool initializer).
    4. Stops after ``generations`` generations, once ``max_evaluations`` distinct plans
       have been scored, when the time limit would be exceeded by
       one more generation (estimated from the last one; checked only between
       generations), or when the best plan runs at the ideal step time T*: T* is a lower
       bound on every plan's step (docs/model.md, invariant 2), so that plan is a proven
       optimum and the status is "optimal" (equal to T* within 1e-12 relative, float
       rounding). Otherwise the plan's status is "bounded": the search states T* as its
       lower bound (``lower_bound_s``) and :meth:`BaseSolver.solve
       <slackopt.solverbase.BaseSolver.solve>` turns a plan with a bound into "optimal" or
       "bounded" with ``info["gap"]`` = (step - T*) / T*. T* is the trivial bound, no
       proof of quality: compare marks it "T* (trivial)" in its ``bound_source`` column.

    The best plan ever scored (``tools.HallOfFame``) is returned; seeds are part of
    generation 0 and the best individuals always survive, so the result is never worse
    than the best seed (a final check compares them again).

    ``info``: ``history`` (one dict per generation: ``generation``, ``best_throughput``
    (0 while no plan is feasible), ``best_step_time_s``, ``best_over_bytes``,
    ``best_feasible``, ``population_feasible``, ``evaluations`` and ``feasible_evaluations``
    (distinct plans scored so far, and how many of them were feasible)), ``evaluations``,
    ``simulations`` (evaluator runs: two for an infeasible plan), ``cache_hits``,
    ``generations`` (completed after generation 0), ``stopped_by`` ("generations",
    "max_evaluations", "time_limit", "ideal"), ``seeds`` (per seed solver: status,
    planning time, feasibility, throughput, step time, bytes over, or error; the start
    plan first, as solver "start_plan", when there is one),
    ``best_seed``, ``best_seed_throughput``, ``improvement_over_best_seed`` (relative
    throughput gain), ``elapsed_s``, ``evaluations_per_s``, ``workers``, ``counts``.
    When no feasible plan is found the status is "infeasible" and
    ``info["min_budget_bytes"]`` is the best plan's unconstrained peak if the plan is
    feasible under it, else None (``info["min_budget_basis"]`` "best_plan_peak": the
    search tried no smaller budget, and may find a plan below that peak).

    Args:
        population: individuals per generation (>= 2).
        tournament_size: individuals per selection tournament (>= 1).
        crossover_rate: probability that a consecutive pair of parents crosses over.
        mutation_rate: probability that a child is mutated.
        mutation_indpb: per-gene mutation probability; None for 1 / n_saved.
        elites: best individuals copied unchanged into the next generation (>= 1,
            < population).
        generations: generation limit after generation 0 (>= 0), or None for no limit
            (then a time limit must be given to :meth:`solve`).
        max_evaluations: stop once this many distinct plans have been scored (checked
            between generations, so the last generation may overshoot), or None. A
            machine-independent alternative to a time limit.
        seeding: "slackswap+baselines" or "random".
        seed_solvers: names of registered solvers whose plans seed the population, or None
            for every registered solver except those named in :data:`NOT_CHEAP_SOLVERS`.
        seed_time_limit_s: time limit passed to each seed solver (s).
        unique: re-mutate (up to four times) each child whose plan was already scored in
            this run or is already in its generation, so evaluations go to new plans.
        workers: processes scoring plans (1: in this process).
        mp_start_method: multiprocessing start method for workers > 1 ("fork", "spawn",
            "forkserver"), None for the platform default ("spawn" and "forkserver"
            re-import the caller's ``__main__``: guard scripts with ``if __name__ ==
            "__main__"``).
        progress_s: a solve that runs longer than this (s) writes one line to stderr every
            `progress_s` seconds (generation, plans scored, best step and throughput
            (the incumbent), the lower bound T* and the gap to it, time used); 0 after
            every generation, None never.
        seed: deprecated (a FutureWarning when not 0): the seed used when :meth:`solve`
            gets none; pass the seed to ``solve(seed=)`` instead, the one seed source.

    Raises:
        SolverParamError: a hyperparameter out of range (the message lists the valid keys).
    """

    name = "genetic"
    warm_starts = True  # run.start is an individual of generation 0
    param_specs = {
        "population": Param(int, min=2), "tournament_size": Param(int, min=1),
        "crossover_rate": Param(float, min=0.0, max=1.0),
        "mutation_rate": Param(float, min=0.0, max=1.0),
        "mutation_indpb": Param(float, min=0.0, max=1.0, none=True),
        "elites": Param(int, min=1, doc="< population"),
        "generations": Param(int, min=0, none=True),
        "max_evaluations": Param(int, min=1, none=True),
        "seeding": Param(str, choices=SEEDINGS), "seed_solvers": Param(tuple, none=True),
        "seed_time_limit_s": Param(float, positive=True), "unique": Param(bool),
        "workers": Param(int, min=1),
        "mp_start_method": Param(str, choices=("fork", "spawn", "forkserver"), none=True),
        "progress_s": Param(float, min=0.0, none=True),
        "seed": DEPRECATED_SEED_PARAM,
    }
    min_budget_search = False  # infeasible answers state the best plan's peak instead

    def __init__(self, *, population: int = 48, tournament_size: int = 3,
                 crossover_rate: float = 0.6, mutation_rate: float = 0.5,
                 mutation_indpb: float | None = None, elites: int = 2,
                 generations: int | None = 100, max_evaluations: int | None = None,
                 seeding: str = "slackswap+baselines",
                 seed_solvers: Sequence[str] | None = None, seed_time_limit_s: float = 10.0,
                 unique: bool = True, workers: int = 1, mp_start_method: str | None = None,
                 progress_s: float | None = 10.0, seed: int = 0) -> None:
        self.population = population
        self.tournament_size = tournament_size
        self.crossover_rate = crossover_rate
        self.mutation_rate = mutation_rate
        self.mutation_indpb = mutation_indpb
        self.elites = elites
        self.generations = generations
        self.max_evaluations = max_evaluations
        self.seeding = seeding
        self.seed_solvers = seed_solvers
        self.seed_time_limit_s = seed_time_limit_s
        self.unique = unique
        self.workers = workers
        self.mp_start_method = mp_start_method
        self.progress_s = progress_s
        self.seed = seed

    def check_params(self) -> None:
        if not self.elites < self.population:
            raise ValueError(f"elites must be < population, got elites={self.elites}, "
                             f"population={self.population}")

    # ------------------------------------------------------------------ seeds
    def seed_solver_names(self) -> list[str]:
        """The solvers whose plans seed generation 0 (``seeding="slackswap+baselines"``)."""
        if self.seed_solvers is not None:
            return list(self.seed_solvers)
        return cheap_solver_names()

    def _seed_plans(self, inst: Instance, M: int, seed: int,
                    deadline: float | None) -> tuple[list[tuple[str, bytes]], list[dict]]:
        """Plans of the seed solvers (:func:`slackopt.solvers.seeds.seed_plans`); with a
        `deadline` (perf_counter time), seeding gets :data:`SEEDING_SHARE` of the time
        left, each solver at most what remains of it, and solvers not started by then are
        skipped (logged with ``skipped``)."""
        end = None
        if deadline is not None:
            end = time.perf_counter() + SEEDING_SHARE * max(0.0, deadline - time.perf_counter())
        return seed_plans(inst, M, seed, self.seed_solver_names(), self.seed_time_limit_s, end)

    # ------------------------------------------------------------------ solve
    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        """Search plans for `instance` under M = `budget_bytes` (bytes).

        ``run.time_limit_s``: wall-clock limit (s) for the whole run, seeding included:
        the seed solvers share at most :data:`SEEDING_SHARE` of it (each is given what is
        left of that share; those not started when it is spent are skipped); generations
        stop when the next one (estimated from the last) would end past the limit.
        Generation 0 always completes. ``run.seed``: the random seed (None: the
        deprecated ``seed`` hyperparameter, 0 by default, then reported as the result's
        seed).

        Returns:
            The best plan found with status "optimal" (runs at T*), "feasible" or
            "infeasible" and ``lower_bound_s = T*`` (so :meth:`BaseSolver.solve` reports a
            feasible plan slower than T* as "bounded", its gap to T*), ``info`` as in the
            class docstring.

        Raises:
            ValueError: no generation, evaluation or time limit.
        """
        if self.generations is None and self.max_evaluations is None \
                and run.time_limit_s is None:
            raise ValueError("genetic: give a generation limit, an evaluation limit or a "
                             "time limit")
        run.seed = seed = run.seed_or(self.seed)
        with _RANDOM_LOCK:
            state = random.getstate()
            random.seed(seed)
            try:
                return self._run(instance, int(budget_bytes), run)
            finally:
                random.setstate(state)

    def _run(self, inst: Instance, M: int, run: Run) -> Outcome:
        """One GA run (the random module already seeded): generation 0, the generations,
        the final check; the sections are :meth:`_generation0`, :meth:`_evolve` and
        :meth:`_outcome`."""
        t0 = run.started
        time_limit_s, seed = run.time_limit_s, int(run.seed)  # type: ignore[arg-type]
        deadline = None if time_limit_s is None else t0 + float(time_limit_s)
        n = inst.n_saved
        rebuildable = np.isfinite(np.asarray(inst.c, dtype=float)).tolist()
        indpb = self.mutation_indpb if self.mutation_indpb is not None else 1.0 / max(n, 1)

        tb = base.Toolbox()
        tb.register("clone", _clone)
        tb.register("select", tools.selTournament, tournsize=self.tournament_size)
        tb.register("mate", _mate)
        tb.register("mutate", mutate, indpb=indpb, rebuildable=rebuildable)

        ev = _Evaluator(inst, M, self.workers, self.mp_start_method)
        try:
            pop, seed_keys, seed_log = self._generation0(inst, M, seed, deadline, tb,
                                                         rebuildable, ev, run.start)
            hof = tools.HallOfFame(1)
            hof.update(pop)
            ev.keep(hof[0].key())
            g, stopped_by, history = self._evolve(pop, hof, tb, ev, float(inst.ideal_time_s),
                                                  t0, deadline, time_limit_s)
        finally:
            ev.close()
        return self._outcome(inst, M, hof, seed_keys, seed_log, ev, t0, info={
            "history": history, "generations": g, "stopped_by": stopped_by})

    def _generation0(self, inst: Instance, M: int, seed: int, deadline: float | None,
                     tb: base.Toolbox, rebuildable: list[bool], ev: _Evaluator,
                     start: np.ndarray | None = None
                     ) -> tuple[list[Individual], dict[bytes, str], list[dict[str, Any]]]:
        """Generation 0: the start plan (`start`, ``run.start``) if any, the seed plans
        (``seeding="slackswap+baselines"``), each once, then mutants of them (random
        plans with ``seeding="random"``) up to the population, scored; returns the
        population, the seed plans' keys (key -> solver name, "start_plan" for the start
        plan) and the seed log with each seed's score."""
        seed_log: list[dict[str, Any]] = []
        seeds: list[tuple[str, bytes]] = []
        if start is not None:
            k = np.asarray(start, dtype=np.int8).tobytes()
            seeds.append(("start_plan", k))
            seed_log.append({"solver": "start_plan", "planning_time_s": 0.0, "_key": k})
        if self.seeding == "slackswap+baselines":
            more, more_log = self._seed_plans(inst, M, seed, deadline)
            seeds += more
            seed_log += more_log
        pop: list[Individual] = []
        seed_keys: dict[bytes, str] = {}
        for nm, k in seeds:
            if k not in seed_keys:
                seed_keys[k] = nm
                pop.append(Individual(np.frombuffer(k, dtype=np.int8).tolist()))
        bases = list(pop) if self.seeding == "slackswap+baselines" else []
        while len(pop) < self.population:
            if bases:
                child = Individual(bases[len(pop) % len(bases)])
                tb.mutate(child)
            else:
                child = random_individual(rebuildable)
            pop.append(child)
        ev(pop)
        for entry in seed_log:
            if "_key" in entry:
                sc = ev.cache[entry.pop("_key")]
                entry.update(feasible=sc.feasible, throughput=sc.throughput,
                             step_time_s=sc.step_time_s, over_bytes=sc.over_bytes)
        return pop, seed_keys, seed_log

    def _evolve(self, pop: list[Individual], hof: tools.HallOfFame, tb: base.Toolbox,
                ev: _Evaluator, ideal: float, t0: float, deadline: float | None,
                time_limit_s: float | None) -> tuple[int, str, list[dict[str, Any]]]:
        """The generations after generation 0, until the best plan runs at T* (`ideal`,
        s) or a generation, evaluation or time limit stops the run; returns the last
        generation's number, what stopped the run and the per-generation history."""
        cache = ev.cache
        history: list[dict[str, Any]] = []

        def record(g: int) -> None:
            best = cache[hof[0].key()]
            history.append({
                "generation": g,
                "best_throughput": best.throughput,
                "best_step_time_s": best.step_time_s,
                "best_over_bytes": best.over_bytes,
                "best_feasible": best.feasible,
                "population_feasible": sum(1 for i in pop if i.fitness.values[0] == 0),
                "evaluations": len(cache),
                "feasible_evaluations": ev.feasible,
            })

        last_report = [t0]

        def report(g: int) -> None:
            now = time.perf_counter()
            if self.progress_s is None or now - t0 < self.progress_s \
                    or now - last_report[0] < self.progress_s:
                return
            last_report[0] = now
            _progress_line(g, len(cache), cache[hof[0].key()], ideal, now - t0,
                           time_limit_s)

        record(0)
        report(0)
        gen_times: list[float] = []
        stopped_by = "generations"
        g = 0
        while True:
            best = cache[hof[0].key()]
            if best.feasible and best.step_time_s <= ideal * (1 + _IDEAL_RTOL):
                stopped_by = "ideal"
                break
            if self.generations is not None and g >= self.generations:
                stopped_by = "generations"
                break
            if self.max_evaluations is not None and len(cache) >= self.max_evaluations:
                stopped_by = "max_evaluations"
                break
            if deadline is not None:
                est = gen_times[-1] if gen_times else 0.0
                if time.perf_counter() + est > deadline:
                    stopped_by = "time_limit"
                    break
            tg = time.perf_counter()
            g += 1
            elite = tools.selBest(pop, self.elites)
            parents = tb.select(pop, self.population - self.elites)
            offspring = algorithms.varAnd(parents, tb, self.crossover_rate,
                                          self.mutation_rate)
            if self.unique:
                _diversify(elite, offspring, tb, cache)
            ev(offspring)
            pop = elite + offspring
            hof.update(offspring)
            ev.keep(hof[0].key())
            record(g)
            gen_times.append(time.perf_counter() - tg)
            report(g)
        return g, stopped_by, history

    def _outcome(self, inst: Instance, M: int, hof: tools.HallOfFame,
                 seed_keys: dict[bytes, str], seed_log: list[dict[str, Any]],
                 ev: _Evaluator, t0: float, info: dict[str, Any]) -> Outcome:
        """The final check (never worse than the best seed) and the outcome, with the best
        plan's evaluation under M (the search's, when this process scored it; else one
        more simulation); `info`: the run's history, generations and stop reason, to which
        the counters are added."""
        cache = ev.cache
        ideal = float(inst.ideal_time_s)
        best_key = hof[0].key()
        best_seed_key = min(seed_keys, key=lambda k: cache[k].key) if seed_keys else None
        if best_seed_key is not None and cache[best_seed_key].key < cache[best_key].key:
            best_key = best_seed_key  # pragma: no cover - elitism makes this impossible
        plan = Plan(np.frombuffer(best_key, dtype=np.int8), inst.saved_names)
        final = ev.evaluation(best_key) or simulate(inst, plan, M)
        best = cache[best_key]
        if final.feasible != best.feasible:  # pragma: no cover - the evaluator is pure
            raise RuntimeError("genetic: the best plan's re-evaluation disagrees with its "
                               "cached fitness")
        elapsed = time.perf_counter() - t0
        info = {
            "history": info["history"],
            "evaluations": len(cache),
            "simulations": ev.simulations,
            "cache_hits": ev.hits,
            "generations": info["generations"],
            "stopped_by": info["stopped_by"],
            "seeds": seed_log,
            "elapsed_s": elapsed,
            "evaluations_per_s": len(cache) / elapsed if elapsed > 0 else None,
            "workers": self.workers,
            "counts": plan.counts(),
        }
        if best_seed_key is not None:
            bs = cache[best_seed_key]
            info["best_seed"] = seed_keys[best_seed_key]
            info["best_seed_throughput"] = bs.throughput
            info["improvement_over_best_seed"] = (
                best.throughput / bs.throughput - 1.0 if bs.feasible and bs.throughput > 0
                else None)
        if best.feasible:
            status = "optimal" if best.step_time_s <= ideal * (1 + _IDEAL_RTOL) else "feasible"
            return Outcome(plan, status=status, objective_s=best.step_time_s,
                           lower_bound_s=ideal, evaluation=final, info=info)
        m_un = best.peak_bytes
        runs = simulate(inst, plan, int(m_un)).feasible
        if runs:
            info["min_budget_basis"] = "best_plan_peak"
        return Outcome(plan, status="infeasible", lower_bound_s=ideal, evaluation=final,
                       info=info, min_budget_bytes=int(m_un) if runs else None)


class _Evaluator:
    """The fitness cache of a run (plan key -> :class:`Score`) with its counters, and the
    worker pool when ``workers > 1``. Calling it scores the individuals whose plans are
    not cached yet (each distinct plan once, in the pool when more than one) and sets
    every individual's fitness. :meth:`keep` holds on to the evaluation under M of the
    best plan, when this process made it, so the outcome hands it on instead of
    simulating the plan again."""

    def __init__(self, inst: Instance, M: int, workers: int, mp_start_method: str | None
                 ) -> None:
        self.cache: dict[bytes, Score] = {}
        self.last: dict[bytes, Evaluation] = {}   # the last call's, scored in this process
        self.kept: tuple[bytes, Evaluation] | None = None
        self.simulations = self.hits = self.feasible = 0
        self.workers = workers
        _init_worker(inst, M)
        self.pool = None
        if workers > 1:
            ctx = mp.get_context(mp_start_method)
            self.pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                               initializer=_init_worker,
                                               initargs=(inst, M, os.getpid()))

    def __call__(self, inds: list[Individual]) -> None:
        cache, pool = self.cache, self.pool
        todo: list[bytes] = []
        seen: set[bytes] = set()
        for ind in inds:
            k = ind.key()
            if k not in cache and k not in seen:
                seen.add(k)
                todo.append(k)
        if pool is not None and len(todo) > 1:
            chunk = max(1, math.ceil(len(todo) / (4 * self.workers)))
            with sigint_blocked():  # workers start with Ctrl-C blocked
                it = pool.map(_score_key, todo, chunksize=chunk)
            scores = list(it)
            self.last = {}
        else:
            scored = [_scored_key(k) for k in todo]
            scores = [sc for sc, _ in scored]
            self.last = {k: e for k, (_, e) in zip(todo, scored, strict=True)}
        for k, sc in zip(todo, scores, strict=True):
            cache[k] = sc
            self.simulations += sc.simulations
            self.feasible += int(sc.feasible)
        for ind in inds:
            if not ind.fitness.valid:
                ind.fitness.values = cache[ind.key()].key
        self.hits += len(inds) - len(todo)

    def keep(self, key: bytes) -> None:
        """Hold on to the evaluation of plan `key` (the hall of fame's best) if the last
        call scored it in this process; an earlier one is kept otherwise."""
        e = self.last.get(key)
        if e is not None:
            self.kept = (key, e)

    def evaluation(self, key: bytes) -> Evaluation | None:
        """The evaluation under M of plan `key` if :meth:`keep` holds it, else None."""
        return self.kept[1] if self.kept is not None and self.kept[0] == key else None

    def close(self) -> None:
        """Shut the worker pool down (pending work cancelled)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["Genetic", "Score", "score", "mutate", "random_individual", "Individual",
           "UNBOUNDED_BUDGET_BYTES", "SEEDINGS", "NOT_CHEAP_SOLVERS"]
