"""The exact tier: the ``milp`` solver, an evaluator-judged search against lower bounds
that floating point cannot lift, and a time-indexed MILP relaxation of the evaluator.

Scope: the lower bounds (``lower_bound_s``) and the status ``optimal`` are proven for plans
run by the barrier-free runtime (``Plan.policy == "barrier_free"``); they say nothing about
plans under ``layer_barriers`` or ``on_demand``, whose runtime rules differ.

Layout, by job (each imports only the ones listed before it):

- ``linear/``: the backend-neutral linear model and the MILP backends (SCIP, HiGHS, CBC).
- ``certify/``: bounds that floating point cannot lift (safe dual bounds, the certified
  LP relaxation, the certified branch and bound) and the reading of a simulated run for
  the plan-by-plan soundness checks.
- ``model/``: the time-indexed relaxation, its tiers and why it is one
  (:mod:`slackopt.solvers.milp.model`).
- ``bounds/``: the bound sources, each behind the protocol of ``bounds/source.py``.
- ``search/``: the solver (:class:`MILP`), its phases (``search/phases.py``:
  ``PHASES``), the search state and the searches that lower the plan.

The phases in the order they run, what each lifts or lowers and how each bound is
certified: the docs page "The exact tier" (docs/exact-tier.md).
"""


from slackopt.solvers.milp.certify.lp import lp_relaxation
from slackopt.solvers.milp.linear.backends import (  # noqa: F401 - re-exported
    _BACKEND_CLASSES,
    BACKENDS,
    _HighsBackend,
    _PulpBackend,
    _ScipBackend,
)
from slackopt.solvers.milp.linear.lin import _Lin  # noqa: F401
from slackopt.solvers.milp.model.build import build_model
from slackopt.solvers.milp.model.builder import _Model  # noqa: F401
from slackopt.solvers.milp.model.steps import model_floor
from slackopt.solvers.milp.search.cpsat_seed import recompute_only_incumbent
from slackopt.solvers.milp.search.solver import MILP, MODEL_OPTIONS, TIERS  # noqa: F401

__all__ = ["MILP", "build_model", "model_floor", "recompute_only_incumbent",
           "lp_relaxation", "BACKENDS", "TIERS", "MODEL_OPTIONS"]
