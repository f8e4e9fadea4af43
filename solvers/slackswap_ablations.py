"""SlackSwap ablations of section 4.4 (Table 3) of the SlackSwap paper, as registered
solvers. Each removes one idea; none copies planner code (:mod:`solvers.slackswap`).

- ``slackswap-swap-first``: Pass 1 ranks swap candidates by production time (the
  Belady-like order) instead of recompute cost per byte (``swap_order="production"``).
- ``slackswap-recompute-only``: no Pass 1; the deficit is covered by recomputation alone
  (``use_link=False``), "the value of the link".
- ``slackswap-barriers``: SlackSwap's plan (planned and repaired for the barrier-free
  runtime) run under vDNN's per-layer synchronization (policy ``layer_barriers``,
  :mod:`slackopt.simulate.layer_barriers`).
"""

from __future__ import annotations

from slackopt.instance import Instance
from slackopt.simulate import simulate
from slackopt.solverbase import BaseSolver, Outcome, Run
from solvers.slackswap import SlackSwap

_SPECS = {k: SlackSwap.param_specs[k] for k in ("g", "max_rounds", "min_budget_search")}


class SlackSwapSwapFirst(SlackSwap):
    """SlackSwap with swap candidates in production order (ablation, sec. 4.4)."""

    name = "slackswap-swap-first"
    param_specs = _SPECS

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6,
                 min_budget_search: bool = True) -> None:
        super().__init__(g=g, max_rounds=max_rounds, swap_order="production",
                         min_budget_search=min_budget_search)


class SlackSwapRecomputeOnly(SlackSwap):
    """SlackSwap without Pass 1: recomputation only (ablation, sec. 4.4)."""

    name = "slackswap-recompute-only"
    param_specs = _SPECS

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6,
                 min_budget_search: bool = True) -> None:
        super().__init__(g=g, max_rounds=max_rounds, use_link=False,
                         min_budget_search=min_budget_search)


class SlackSwapBarriers(BaseSolver):
    """SlackSwap's plan under vDNN's per-layer barriers (ablation, sec. 4.4).

    Plans with :class:`~solvers.slackswap.SlackSwap` (same hyperparameters), then returns
    the plan with policy ``layer_barriers``. If that plan does not fit under barriers the
    status is "infeasible" and ``info["min_budget_bytes"]`` is the smallest budget (within
    0.5% of P, by bisection) at which SlackSwap's plan fits under barriers.
    ``info`` also holds SlackSwap's own ``info`` under ``"slackswap"``.
    """

    name = "slackswap-barriers"
    param_specs = _SPECS
    policy = "layer_barriers"

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6,
                 min_budget_search: bool = True) -> None:
        self.g = g
        self.max_rounds = max_rounds
        self.min_budget_search = min_budget_search

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        M = int(budget_bytes)
        res = SlackSwap(g=self.g, max_rounds=self.max_rounds, min_budget_search=False).solve(
            instance, M, time_limit_s=max(0.0, run.remaining()) if run.time_limit_s is not None
            else None)
        pl = res.plan.with_policy(self.policy) if res.plan is not None else None
        return Outcome(pl, evaluation=simulate(instance, pl, M) if pl is not None else None,
                       info={"slackswap": res.info})


__all__ = ["SlackSwapSwapFirst", "SlackSwapRecomputeOnly", "SlackSwapBarriers"]
