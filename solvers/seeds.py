"""Seed plans from the cheap registered solvers: the start of the genetic search's
generation 0 and the milp's anytime floor.

A *cheap* solver is any registered solver whose name does not start with one of
:data:`NOT_CHEAP_SOLVERS` (the searches that use these seeds, and the exact tier). Each is
asked for a plan under the same budget and seed; its decisions are what counts (the caller
re-simulates them under the barrier-free runtime), so a seed solver's own runtime policy and
minimum-budget search play no part.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from slackopt.errors import interrupt_cause
from slackopt.instance import Instance
from slackopt.plan import RECOMP
from slackopt.solver import get_solver, registered_solvers

NOT_CHEAP_SOLVERS = ("genetic", "milp")
"""Registered solvers never used as seeds by default: the genetic search and the exact
tier, whose planning time is not small (any name starting with one of these)."""
FIRST_SEEDS = ("slackswap-ls",)
"""Cheap solvers asked first, in this order, with the whole per-solver limit whatever the
seeding share left (:func:`seed_plans`): the fast tier (solvers/slackswap_ls.py), whose plan
is never slower than SlackSwap's and which ends on its own within its 1 s budget."""


def cheap_solver_names() -> list[str]:
    """The registered solvers whose plans seed the searches (module docstring): those of
    :data:`FIRST_SEEDS` that are registered, then the others in the registry's order."""
    names = [n for n in registered_solvers()
             if not any(n.startswith(x) for x in NOT_CHEAP_SOLVERS)]
    first = [n for n in FIRST_SEEDS if n in names]
    return first + [n for n in names if n not in first]


def seed_plans(inst: Instance, M: int, seed: int, names: list[str], limit_s: float,
               end: float | None) -> tuple[list[tuple[str, bytes]], list[dict[str, Any]]]:
    """Ask each solver in `names` for a plan of `inst` under M = `budget` (bytes).

    Args:
        inst: the instance.
        M: the budget (bytes).
        seed: the seed every solver gets.
        names: registered solver names, asked in this order.
        limit_s: time limit (s) passed to each solver.
        end: a perf_counter time after which no further solver is started once at least
            one plan was found (a solver started before it gets at most the time up to
            it, but no less than 1 ms), or None. A solver of :data:`FIRST_SEEDS` is
            always asked, with `limit_s` whatever `end` says: its plan is then the one it
            gives on its own (its own budget and work limit end it), so the search it
            seeds is never slower than it.

    Returns:
        ``(plans, log)``: ``plans`` the (solver name, decision bytes as int8) of each usable
        plan (one decision per saved tensor, recomp only where c is finite), ``log`` one
        dict per solver with ``solver``, ``status``, ``planning_time_s`` and ``error`` or
        ``skipped`` where it gave nothing. A solver that raises is logged, never fatal;
        an interrupt (Ctrl-C) propagates.
    """
    plans: list[tuple[str, bytes]] = []
    log: list[dict[str, Any]] = []
    for nm in names:
        limit = limit_s
        if end is not None and nm not in FIRST_SEEDS:
            left = end - time.perf_counter()
            if left <= 0 and plans:
                log.append({"solver": nm, "skipped": "no time left for seeding"})
                continue
            limit = max(1e-3, min(limit, left))
        entry: dict[str, Any] = {"solver": nm}
        ts = time.perf_counter()
        try:
            solver = get_solver(nm)
            # only the decisions count: no minimum-budget search when the plan does not fit
            try:
                solver.min_budget_search = False
            except AttributeError:  # a protocol solver without the attribute
                pass
            res = solver.solve(inst, M, time_limit_s=limit, seed=seed)
        except Exception as e:  # a broken seed solver must not sink the search
            cause = interrupt_cause(e)
            if cause is not None:  # Ctrl-C inside the compiled evaluator
                raise cause from None
            entry["error"] = f"{type(e).__name__}: {e}"
            log.append(entry)
            continue
        finally:
            entry["planning_time_s"] = time.perf_counter() - ts
        entry["status"] = res.status
        pl = res.plan
        if pl is None or pl.names != inst.saved_names or not np.all(
                (pl.decisions != RECOMP) | np.isfinite(inst.c)):
            entry["error"] = "no usable plan"
        else:
            k = np.asarray(pl.decisions, dtype=np.int8).tobytes()
            plans.append((nm, k))
            entry["_key"] = k
        log.append(entry)
    return plans, log
