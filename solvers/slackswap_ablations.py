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

import time
from typing import Any

from slackopt.instance import Instance
from slackopt.simulate import simulate
from slackopt.solver import SolveResult
from solvers.baselines import min_budget_by_bisection
from solvers.slackswap import SlackSwap


class SlackSwapSwapFirst(SlackSwap):
    """SlackSwap with swap candidates in production order (ablation, sec. 4.4)."""

    name = "slackswap-swap-first"

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6,
                 min_budget_search: bool = True) -> None:
        super().__init__(g=g, max_rounds=max_rounds, swap_order="production",
                         min_budget_search=min_budget_search)


class SlackSwapRecomputeOnly(SlackSwap):
    """SlackSwap without Pass 1: recomputation only (ablation, sec. 4.4)."""

    name = "slackswap-recompute-only"

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6,
                 min_budget_search: bool = True) -> None:
        super().__init__(g=g, max_rounds=max_rounds, use_link=False,
                         min_budget_search=min_budget_search)


class SlackSwapBarriers:
    """SlackSwap's plan under vDNN's per-layer barriers (ablation, sec. 4.4).

    Plans with :class:`~solvers.slackswap.SlackSwap` (same hyperparameters), then returns
    the plan with policy ``layer_barriers``. If that plan does not fit under barriers the
    status is "infeasible" and ``info["min_budget_bytes"]`` is the smallest budget (within
    0.5% of P, by bisection) at which SlackSwap's plan fits under barriers.
    ``info`` also holds SlackSwap's own ``info`` under ``"slackswap"``.
    """

    name = "slackswap-barriers"
    policy = "layer_barriers"

    def __init__(self, *, g: float = 0.02, max_rounds: int = 6,
                 min_budget_search: bool = True) -> None:
        self.inner = SlackSwap(g=g, max_rounds=max_rounds, min_budget_search=False)
        self.min_budget_search = bool(min_budget_search)

    @property
    def params(self) -> dict[str, Any]:
        return self.inner.params

    def _plan(self, instance: Instance, M: int) -> tuple[SolveResult, Any]:
        res = self.inner.solve(instance, M)
        return res, (res.plan.with_policy(self.policy) if res.plan is not None else None)

    def _feasible_at(self, instance: Instance, m: int) -> bool:
        _, pl = self._plan(instance, m)
        return pl is not None and simulate(instance, pl, m).feasible

    def solve(self, instance: Instance, budget_bytes: int, *, time_limit_s: float | None = None,
              seed: int | None = None) -> SolveResult:
        """Plan `instance` under `budget_bytes` (M); deterministic (`seed` unused)."""
        t0 = time.perf_counter()
        M = int(budget_bytes)
        res, pl = self._plan(instance, M)
        ev = simulate(instance, pl, M) if pl is not None else None
        ok = ev is not None and ev.feasible
        info: dict[str, Any] = {"slackswap": res.info}
        if not ok:
            info["min_budget_bytes"] = (
                min_budget_by_bisection(instance, lambda m: self._feasible_at(instance, m), M)
                if self.min_budget_search else None)
        return SolveResult(
            plan=pl, solver=self.name, params=self.params,
            status="feasible" if ok else "infeasible",
            objective_s=float(ev.step_time_s) if ok else None,
            planning_time_s=time.perf_counter() - t0, seed=seed, info=info)


__all__ = ["SlackSwapSwapFirst", "SlackSwapRecomputeOnly", "SlackSwapBarriers"]
