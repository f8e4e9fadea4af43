"""SlackSwap: the two-pass keep/swap/recompute planner with validation and repair.

Paper: the SlackSwap paper (2026), section 3 (Algorithm 1); the details the paper leaves
open are pinned in docs/model.md ("SlackSwap details the paper leaves open").

- :func:`pass1` (sec. 3.2, Alg. 1 lines 2-6) spends the link budget: it adds saved
  tensors to the swap set S in decreasing recompute cost per byte rho while both the
  offload schedule (D2H, production order, ends before (1 - g) T_F) and the prefetch
  schedule (H2D from T_F in deadline order, gated by the memory the backward pass
  releases) stay feasible, until S covers the deficit D = P - M. Each schedule runs at
  its direction's bandwidth: offloads (and the link budget) at W_d2h, prefetches at W_h2d.
- :func:`pass2` (sec. 3.3, Alg. 1 lines 7-12) recomputes the cheapest bytes: at the
  first operator whose planned memory m(i) exceeds M it marks recomp the resident,
  unused keep tensor with the lowest c_t / min(s_t, E), E the largest remaining excess;
  with no candidate it converts the earliest block to full recomputation.
- :func:`plan` runs both passes; :class:`SlackSwap` (sec. 3.4) replays each plan in the
  evaluator (:func:`slackopt.simulate.simulate`) and repairs it for at most six rounds.

Runtime rules (docs/model.md, "Plan semantics under the barrier-free runtime"): Pass 1
plans every D2H to end by (1 - g) T_F, before the first H2D may start, so its model needs
none of the three rules that keep the runtime from wasting the link: no H2D waits on an
unfinished D2H (no head-of-line blocking to model), no D2H can be dropped (every swapped
tensor still has its backward readers at T_F) and no device copy lags into the backward
pass (no lagging inputs to claim). Validation replays each plan in the evaluator, which
implements the rules, and the repair rounds act on what it observes.

Planning time (README, "n log n"): Pass 2 and the offload test of Pass 1 cost
O(log n) per step (segment trees, compiled kernels); Pass 1's prefetch test recomputes the
queue after the candidate's place, O(|S|) per candidate at worst (see :func:`pass1`).

All functions are deterministic. Saved tensors are addressed by their position in
``Instance.saved`` (production order).

The package, one job per module (each imports only those above it in this list):

- :mod:`~slackopt.solvers.slackswap.prep`: the per-instance arrays (cached);
- :mod:`~slackopt.solvers.slackswap.kernels`: the compiled segment trees and FIFO tests;
- :mod:`~slackopt.solvers.slackswap.swap_pass`: Pass 1 and its planned schedules;
- :mod:`~slackopt.solvers.slackswap.recomp_pass`: Pass 2 and its memory profile;
- :mod:`~slackopt.solvers.slackswap.solver`: :func:`plan` and :class:`SlackSwap`.

Besides the public names, the internals ``_prep``, ``_Prep``, ``_positions``,
``_OffloadTree``, ``_Profile``, ``_Candidates`` and the kernel ``_mx_add`` are importable
from here, for the planner's tests and for planners built on its passes.
"""

from slackopt.solvers.slackswap.kernels import _mx_add as _mx_add
from slackopt.solvers.slackswap.prep import _positions as _positions
from slackopt.solvers.slackswap.prep import _Prep as _Prep
from slackopt.solvers.slackswap.prep import _prep as _prep
from slackopt.solvers.slackswap.recomp_pass import Pass2Result, pass2, pass2_detailed
from slackopt.solvers.slackswap.recomp_pass import _Candidates as _Candidates
from slackopt.solvers.slackswap.recomp_pass import _Profile as _Profile
from slackopt.solvers.slackswap.solver import GUARD_STEP, PlannedRound, SlackSwap, plan
from slackopt.solvers.slackswap.swap_pass import (
    SWAP_ORDERS,
    SwapSet,
    offload_end_op,
    offload_schedule,
    pass1,
    prefetch_schedule,
)
from slackopt.solvers.slackswap.swap_pass import _OffloadTree as _OffloadTree

__all__ = ["GUARD_STEP", "SWAP_ORDERS", "SlackSwap", "SwapSet", "Pass2Result", "PlannedRound",
           "pass1", "pass2", "pass2_detailed", "plan", "offload_schedule", "prefetch_schedule",
           "offload_end_op"]
