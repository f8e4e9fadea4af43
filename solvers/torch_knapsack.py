"""PyTorch's ``activation_memory_budget`` selection (torch.compile's min-cut partitioner),
run by PyTorch's own knapsack solvers on slackopt's saved tensors.

Source: ``torch/_functorch/partitioners.py`` (``choose_saved_values_set``, torch 2.13.0)
and ``torch/_functorch/_activation_checkpointing/knapsack.py`` (``greedy_knapsack``,
``dp_knapsack`` (PyTorch's default, ``config.activation_memory_budget_solver = "dp"``),
``dp_knapsack_sliding_hirschberg``, ``ilp_knapsack`` (needs scipy)). Each takes
``(memory, runtimes, max_memory)`` and returns ``(runtime saved, indices saved, indices
allowed to recompute)``: it keeps the items of largest total runtime whose memory fits.

How PyTorch sets up the knapsack, and what it becomes here:

- The budget b in [0, 1] is a ratio between the least and the most that can be saved:
  b = 0 saves only what cannot be recomputed (PyTorch: the graph inputs; no knapsack
  runs), b = 1 saves
  what the runtime-optimized min-cut saves (here: every saved tensor, since the
  evaluator's keep-all runs at T*). Items are the recomputable saved values, largest first;
  an item's memory is its size divided by (most - least) saved bytes, its runtime its
  recompute time, and the capacity is b itself.
- Here the items are the saved tensors with a recipe (c finite) and s > 0, memory s_t /
  (A - A_fixed), runtime c_t; A is every saved byte, A_fixed the bytes that cannot be
  rebuilt (always kept). Zero-byte tensors are kept (PyTorch's greedy divides by memory).
- **Translation of M.** PyTorch's budget counts saved activations only. A user who wants
  the step to fit M sets b so that the saved bytes plus everything else the keep-all
  peak holds (P - A: the logits gradient in the transformer workloads) fit M::

      b = (M - (P - A) - A_fixed) / (A - A_fixed), clipped to [0, 1]

  The knapsack then keeps rebuildable tensors of at most b (A - A_fixed) bytes. This is
  the planner's own memory model: kept bytes + (P - A) <= M. It ignores when tensors are
  live: rebuilt tensors and their recipe transients in the backward pass, and the
  backward pass's gradient buffers at other positions than the keep-all peak. The
  evaluator can therefore find a plan over M that the model calls fitting; the result
  then says so (status "infeasible" from :func:`slackopt.solve`, ``objective_s`` set:
  ``objective_s`` is set exactly when the model says the plan fits, to T* plus the
  recompute time of the dropped items). A raw b < 0 means even recomputing everything
  is predicted not to fit: status "infeasible", b = 0, ``objective_s`` None.

What is not modelled: PyTorch decides recomputation per FX node through a min-cut with
ban heuristics (``ban_recompute_*``) before the knapsack runs; here the knapsack sees every
rebuildable saved tensor and the recipes of the instance decide what a rebuild reads.
The plan runs under the barrier-free runtime without swaps (it never uses the link).

Needs the ``[torch]`` extra: without torch the solver raises a SolverError saying
``pip install 'slackopt[torch]'``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import numpy as np

from slackopt.errors import SolverError
from slackopt.instance import Instance
from slackopt.plan import KEEP, RECOMP, Plan
from slackopt.solverbase import BaseSolver, Outcome, Param, Run

METHODS = ("dp", "greedy", "dp_knapsack_sliding_hirschberg", "ilp")
"""``--param method=``: PyTorch's solver names (``activation_memory_budget_solver``)."""
KNAPSACK_MODULE = "torch._functorch._activation_checkpointing.knapsack"
_FUNCTIONS = {"dp": "dp_knapsack", "greedy": "greedy_knapsack",
              "dp_knapsack_sliding_hirschberg": "dp_knapsack_sliding_hirschberg",
              "ilp": "ilp_knapsack"}


def knapsack_function(method: str) -> Any:
    """PyTorch's knapsack solver for `method` (one of :data:`METHODS`).

    Raises:
        SolverError: torch is not installed (names the ``[torch]`` extra), scipy is not
            installed for ``"ilp"`` (names the extra, which includes it), the installed
            torch has no such function, or `method` is unknown.
    """
    if method not in _FUNCTIONS:
        raise SolverError(f"torch-knapsack: method {method!r} is not one of "
                          f"{', '.join(METHODS)}")
    if method == "ilp" and importlib.util.find_spec("scipy") is None:
        raise SolverError("torch-knapsack: method 'ilp' runs PyTorch's ilp_knapsack, which "
                          "needs scipy (scipy.optimize.milp): pip install 'slackopt[torch]' "
                          "(it includes scipy) or pip install scipy; or use method=dp")
    try:
        knapsack = importlib.import_module(KNAPSACK_MODULE)
    except ImportError as e:
        raise SolverError(
            "torch-knapsack calls PyTorch's knapsack solvers and needs torch: pip install "
            f"'slackopt[torch]' (import failed: {e})") from None
    fn = getattr(knapsack, _FUNCTIONS[method], None)
    if fn is None:
        raise SolverError(f"torch-knapsack: the installed torch has no knapsack."
                          f"{_FUNCTIONS[method]}; install torch >= 2.8 (pip install "
                          "'slackopt[torch]')")
    return fn


def knapsack_inputs(instance: Instance) -> tuple[np.ndarray, list[float], list[float], int]:
    """The knapsack items PyTorch's partitioner would build from `instance`.

    Returns:
        (items, memory, runtimes, fixed_bytes): ``items`` the saved positions of the
        rebuildable tensors with s > 0, largest first (ties in production order);
        ``memory[i] = s / (A - fixed_bytes)`` (dimensionless); ``runtimes[i] = c`` (s);
        ``fixed_bytes`` the saved bytes that cannot be rebuilt (A_fixed).
    """
    s = np.asarray(instance.s, dtype=np.int64)
    rebuildable = np.isfinite(instance.c)
    fixed = int(s[~rebuildable].sum())
    cand = np.flatnonzero(rebuildable & (s > 0))
    items = cand[np.argsort(-s[cand], kind="stable")]
    span = max(int(instance.A) - fixed, 1)
    memory = [float(s[k]) / span for k in items]
    runtimes = [float(instance.c[k]) for k in items]
    return items, memory, runtimes, fixed


def memory_budget_ratio(instance: Instance, budget_bytes: int) -> float:
    """PyTorch's ``activation_memory_budget`` for slackopt's budget M (unclipped).

    b = (M - (P - A) - A_fixed) / (A - A_fixed); 1.0 when nothing can be rebuilt and M
    covers P. Dimensionless; < 0 means even recomputing every rebuildable tensor is
    predicted not to fit M.
    """
    _, _, _, fixed = knapsack_inputs(instance)
    span = int(instance.A) - fixed
    room = int(budget_bytes) - (int(instance.P) - int(instance.A)) - fixed
    if span <= 0:
        return 1.0 if room >= 0 else -1.0
    return room / span


def knapsack_plan(instance: Instance, budget_bytes: int, method: str = "dp"
                  ) -> tuple[Plan, dict[str, Any]]:
    """Keep what PyTorch's knapsack keeps under M; recompute the other rebuildable tensors.

    Args:
        instance: the problem (its saved tensors are the knapsack's candidates).
        budget_bytes: M (bytes), translated to PyTorch's ratio by
            :func:`memory_budget_ratio`.
        method: one of :data:`METHODS`.

    Returns:
        (plan, info): the plan (keep/recomp only) and ``info`` with ``memory_budget`` (b
        after clipping), ``memory_budget_raw``, ``model_fits`` (the planner's memory model:
        raw b >= 0), ``model_saved_bytes`` (kept saved bytes), ``model_peak_bytes`` (kept
        + P - A) and ``knapsack_runtime_saved_s`` (PyTorch's returned value).

    Raises:
        SolverError: see :func:`knapsack_function`; or PyTorch's solver failed.
    """
    fn = knapsack_function(method)
    raw = memory_budget_ratio(instance, budget_bytes)
    b = min(1.0, max(0.0, raw))
    items, memory, runtimes, fixed = knapsack_inputs(instance)
    dec = np.full(instance.n_saved, KEEP, dtype=np.int8)
    value = float(sum(runtimes))
    if b <= 0.0:        # PyTorch: memory_budget == 0 saves only what cannot be recomputed
        dec[items] = RECOMP
        value = 0.0
    elif b < 1.0 and len(items):
        try:
            value, _saved, recomputed = fn(memory, runtimes, b)
        except (RuntimeError, ValueError, ZeroDivisionError) as e:
            raise SolverError(f"torch-knapsack: PyTorch's {_FUNCTIONS[method]} failed: "
                              f"{e}") from None
        dec[items[np.asarray(sorted(int(i) for i in recomputed), dtype=np.int64)]] = RECOMP
    plan = Plan(dec, instance.saved_names)
    kept = int(np.asarray(instance.s)[dec == KEEP].sum())
    info = {"method": method, "memory_budget": b, "memory_budget_raw": raw,
            "model_fits": raw >= 0, "model_saved_bytes": kept,
            "model_peak_bytes": kept + int(instance.P) - int(instance.A),
            "knapsack_runtime_saved_s": float(value), "fixed_bytes": fixed}
    return plan, info


class TorchKnapsack(BaseSolver):
    """PyTorch's ``activation_memory_budget`` selection with PyTorch's knapsack solvers.

    Args:
        method: ``"dp"`` (PyTorch's default), ``"greedy"``,
            ``"dp_knapsack_sliding_hirschberg"`` or ``"ilp"`` (scipy).

    When the planner's model (saved bytes within b) says the plan fits M, the evaluator
    decides the status and ``objective_s`` is the model's step (T* plus the recompute time
    of the dropped tensors); when it says the plan does not fit (raw b < 0), the status is
    "infeasible" and ``objective_s`` None. So ``objective_s`` is set exactly when the
    model calls the plan fitting, and a "fits" with an infeasible status is a plan the
    model accepts and the evaluator finds over M. See the module docstring for the budget
    translation.

    Raises:
        SolverError: without torch (names the ``[torch]`` extra).
    """

    name = "torch-knapsack"
    param_specs = {"method": Param(str, choices=METHODS,
                                   doc="PyTorch's activation_memory_budget_solver")}

    def __init__(self, *, method: str = "dp") -> None:
        self.method = method

    def plan(self, instance: Instance, budget_bytes: int, run: Run) -> Outcome:
        plan, info = knapsack_plan(instance, int(budget_bytes), self.method)
        if not info["model_fits"]:
            return Outcome(plan, status="infeasible", info=info)
        recomputed = plan.decisions == RECOMP
        model_s = float(instance.ideal_time_s + np.asarray(instance.c)[recomputed].sum())
        return Outcome(plan, objective_s=model_s, info=info)


__all__ = ["TorchKnapsack", "knapsack_plan", "knapsack_inputs", "memory_budget_ratio",
           "knapsack_function", "METHODS"]
