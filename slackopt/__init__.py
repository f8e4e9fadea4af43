"""slackopt: activation-memory planning for DNN training.

Every saved activation of one training iteration is kept, swapped to host memory or
recomputed under a device-memory budget; solvers plan, one evaluator scores.
"""

from slackopt.errors import SlackoptError
from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor, UnitSpan, budget_bytes
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import Evaluation, simulate
from slackopt.solver import (
    Solver,
    SolveResult,
    get_solver,
    register_solver,
    registered_solvers,
    solve,
    solve_budgets,
    unregister_solver,
)
from slackopt.solverbase import BaseSolver, Outcome, Param, Run, SolverParamError

__all__ = [
    "BaseSolver", "Evaluation", "Instance", "KEEP", "Link", "Op", "Outcome", "Param", "Plan",
    "RECOMP", "Recipe", "Run", "SWAP", "SlackoptError", "SolveResult", "Solver",
    "SolverParamError", "Tensor", "UnitSpan", "budget_bytes", "get_solver", "register_solver",
    "registered_solvers", "simulate", "solve", "solve_budgets", "unregister_solver",
]
__version__ = "0.1.0"
