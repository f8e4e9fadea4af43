"""The time-indexed relaxation of the evaluator: its formulation, its tiers, and why its
optimum is a lower bound on the simulated step time of every plan the barrier-free
runtime runs (:func:`~slackopt.solvers.milp.model.build.build_model`; the steps and the
floor in :mod:`~.steps`, the sections in :mod:`~.builder`, :mod:`~.memory` and
:mod:`~.rules`, a run's point in :mod:`~.point`).

Decisions and steps. Every saved tensor t gets binaries ``xs_t`` (swap) and ``xr_t``
(recomp), keep being ``1 - xs - xr`` (``xr = 0`` when c_t = inf), in the style of
Checkmate (Jain et al. 2020: binary keep/recompute decisions over operator stages) and
POET (Patil et al. 2022: paging, i.e. swap, with per-stage link capacity). The model is
indexed by *steps*: step K covers the scheduled ops ``a_K .. b_K`` and the wall-clock
interval ``[E(a_K - 1), E(b_K))`` of the evaluated iteration (E = end of an op in the
simulated run; the gap before an op, with its stalls and the rebuilds the runtime inserts
there, belongs to the op's step). ``tau_K`` is the step's duration; the objective is
``sum_K tau_K`` (microseconds inside the model, seconds outside; memory in P / 1e4 bytes).

Tiers (``tier``; "auto" picks by size):

- "full" (up to 10 saved tensors and 48 ops): one step per op and every runtime rule
  below that can be stated as a valid linear implication.
- "exact" (up to 128 saved tensors and 320 ops): one step per op; binaries only for the
  decisions (copy shares, rebuild positions and evictions continuous, runtime rules
  off). The LP relaxation is solved first (GLOP; up to 150k nonzeros), then
  the MILP.
- "aggregated" (the paper workloads): one step per (phase, layer) run of ops, as "exact"
  otherwise; "rebuilt before op k" is one prefix-sum variable per (tensor, gap)
  (``cumulative_placement``, a substitution: BERT-Large's model has 1.06M nonzeros instead
  of 10M). Its LP relaxation (BERT-Large at 0.3 P: 109k variables, 209k rows) is too large
  to solve in minutes (docs/bounds.md, "Settings and the measurements behind them"); the
  paper workloads' bound comes from the checkpoint LP (phase "checkpoint_bound") unless
  it finishes.

Model (the names are the variables):

- Copies: cumulative shares through the end of step K of the D2H copy of a swap that does
  not lag (``F``) or lags (``L``: still running at the tensor's first backward read, so
  the device copy is used and its H2D cancelled; ``lag_t`` binary), of H2D copies
  (``H``, re-fetches included) and evictions (``E``, counts). A share is the overlap of
  the copy's busy interval with the step divided by the copy's duration. Each engine is
  busy at most ``tau_K``: ``sum_t w_t * share <= tau_K`` with ``w_t = latency + s_t / W``,
  W the bandwidth of the engine's direction (W_d2h or W_h2d; a copy lasts at least that
  long; the 10 us latency is included). A D2H starts no
  earlier than the end of its tensor's *ready* op (``Instance.saved_ready_idx``: the
  producer, or the last op that mutates the tensor in place; the runtime queues the D2H
  then), so it overlaps only the rest of that step; an H2D starts after the
  forward pass and after the tensor's D2H ended or an eviction; a backward reader needs
  every earlier eviction re-fetched and the H2D ended before it starts; evictions need a
  finished D2H (``E <= (reads - 1) * (F + L)``).
- Rebuilds: ``y_ug`` places the rebuild of recomp tensor u in the gap before op g, exactly
  where the evaluator does: ``gap(u) = min(first backward reader of u, gap(v) for recomp v
  whose recipe reads u)``; ``tau_K >= op time + sum c_u y_ug``; a swapped recipe input
  is fetched before the rebuild starts.
- Memory, checked at the end of every op (all its allocations live) and, in the full tier,
  at its start: non-saved tensors and workspaces (``static_profile``), kept tensors until
  their last backward reader, recomp tensors until their last forward reader and from
  their rebuild on, swapped tensors from production until their D2H has ended and their
  forward readers are done, then from the start of an H2D until an eviction or release;
  and at every possible rebuild start: the bytes alive across the gap, the rebuilt tensor,
  its transient bytes and workspace, and its recipe inputs. All ``<= M``.
- Full tier only: integral copy events (``Dn``: the D2H has ended by the end of K;
  ``Sg``: H2D copies started; ``g``: the D2H ended in the gap before the op, the compute
  stream waiting for it, so its whole share of that step lies in the gap) so that a
  tensor is freed when its D2H *ends* and an H2D buffer is allocated in full when it
  *starts*; integer evictions; binary lag and rebuild positions; and the runtime rules
  R1 the D2H queue is FIFO in the runtime's queue order, by ready op and then saved
  position (chain ``P``; not production order: a tensor mutated in place is queued
  after tensors produced later); R2 the D2H engine is work-conserving (a queued D2H
  keeps it busy: ``B``); R3 a D2H lags only if the engine
  stays busy with copies queued no later until the tensor's first read; R5 the H2D
  admission rule (a copy the compute stream does not wait for starts only when used + its
  size + the next three tasks' allocations fit in M: ``R`` bounds used from below, and
  rebuilds placed in the window may displace an op's allocation by at most the largest op
  allocation minus their own; ``phi``: the first H2D has started); R6 the H2D reads for a
  rebuild end before it starts. No row orders the H2D copies: the runtime has no
  head-of-line blocking, so a copy needed later may start while an earlier-needed one
  waits for its D2H.

Why the optimum is a lower bound on the simulated step time of every plan: take any plan
the evaluator runs to the end and its trace. Set the decisions, rebuild positions and lag
indicators to what the trace shows (a swap lags if its first backward read finds the
device copy, i.e. no H2D of it started before that read: its D2H had not ended, or the
runtime dropped it), ``tau_K`` to the trace's step intervals (they sum to T), each share
to the overlap of the copy's busy interval with the step divided by the copy's whole
duration (shares sum to 1 over a copy that ran, to 0 over a dropped one; a D2H still in
flight when the last task ends, which the trace does not record, started when the
engine was free of the copies queued before it; its duration is taken as max(w, T -
start), within [w, dmax]; for an H2D only fetches that served a read count, so fetches
evicted before their next read are left out), ``E`` to the evictions of a copy that
served a read (at most one between two reads), and the event indicators to the trace's
events (an event at a step boundary belongs to the later step, except a copy that ends
there). Every row holds for that assignment, so the model's optimum is <= T; the same
holds with the decisions fixed, which the no-good loop
(:mod:`~slackopt.solvers.milp.search.nogood`) relies on. The mapping is
:func:`~slackopt.solvers.milp.model.point.point_from_trace`; every row has a family name
(``fifo_R1[t=..,K=..]``), and tests/test_milp_point.py checks every row for every plan of
small random instances and the recorded soundness cases (tests/data/milp_soundness/), in
every tier. Row by row:

- Capacity (``sum_t w_t share <= tau_K``, and the rows that place a copy after its
  ready op, before its reader or in a gap): a copy lasts at least ``w = latency + s / W``
  (W its direction's bandwidth at full rate; the duplex rate only makes it longer), so
  ``w x share <= overlap``, and the overlaps of one engine's copies with a step sum to at
  most the step.
- R1 (FIFO): a D2H runs only after every earlier-queued, non-dropped D2H ended; the queue
  order is the runtime's (``Engine._end_task`` queues the tensors ready at an op, in
  saved-position order, when the op ends). The row exempts every tensor that lags
  (whether its D2H is dropped or only late), so it states a weaker implication than the
  runtime's; it needs the lag indicators, so ``fifo`` turns ``lagging`` on.
- R2 (work-conserving) and R3 (lagging): these need busy time from *below*, so a share is
  costed at the longest a D2H can last, ``dmax = latency + s / (duplex W_d2h)``:
  ``overlap = share x duration <= share x dmax`` whatever part of the copy ran at the
  duplex rate. (Costing a forward step's share at ``w`` would cut off real traces: a D2H
  that straddles T_F runs at the duplex rate after it: the case milp-bound-above-optimum
  in tests/test_milp_bounds.py.) R2: a swapped tensor ready (queued) before step K
  whose D2H has neither ended by the end of K nor lags is queued (a D2H is dropped only
  once its tensor has no reader left, i.e. only a lagging one) through the whole step,
  and a queued D2H keeps the engine busy, so the engine is busy >= the step's op time.
  R3: a lagging tensor's D2H is queued from the end of its ready op to its first read
  (at least), and while it waits the engine runs a copy queued no later (FIFO; dropped
  copies do not run, but then another one at or ahead of it does). The busy time counts
  a lagging copy's share in every step it runs: one in flight when its tensor's last
  reader ends is not dropped and runs to its end, so with ``fifo`` the ``L`` shares span
  every later step.
- R5 (admission) and R6 (a rebuild's H2D inputs): implications of the spec's admission
  rule and of "a reader waits for the H2D to end" for the trace's events; R5 is stated
  only with a lower bound on used memory and only for copies the compute stream is not
  waiting for (waived in the gap before any task that reads the tensor).
- Memory: each counted tensor is resident at the checked instant in the trace (kept
  and rebuilt tensors until their last reader; a swap until its D2H ended or it was
  dropped, and from its H2D start; a lagging swap, read from its device copy, until its
  last reader); leaving bytes out only admits more.

The places where the model is *looser* than docs/model.md (each admits more
traces, never fewer, so the bound stays valid):

1. Copies are preemptive and fractional within and across steps; in the exact and
   aggregated tiers memory follows the shares (a tensor partly freed while its D2H runs,
   an H2D buffer partly allocated), and a swap may lag (or its D2H be dropped) without
   the engine being busy.
2. The duplex slowdown is dropped from the capacity rows (copies credited the full W);
   R2/R3 credit every copy the slowest rate (see above).
3. R1-R3, R5, R6 (full tier) are the only ordering and admission rules; the exact and
   aggregated tiers keep none of them. No H2D order is modelled (no first-need order, no
   head-of-line rule), no claim order of lagging copies, no drop of a D2H (a dropped D2H
   is a lagging one with no share). R5 is checked for first H2D copies against a lower
   bound on "used" (the bytes alive throughout the step).
4. Memory is checked at op ends and op starts and rebuild starts only, not at every
   instant; a swapped tensor alive across a rebuild gap, other rebuilds of the same gap,
   and a kept (or rebuilt) tensor whose life a later rebuild extends past its last
   backward op reader are not counted. In aggregated steps the counts use step
   boundaries (a D2H through the end of the step, an H2D through the end of the
   previous step), which only undercounts.
5. Evictions may happen at any step between the first and the last backward read of a
   tensor (the evaluator evicts only when the compute stream is blocked).
6. Exact and aggregated tiers: rebuild positions and evictions are continuous.
7. T* bounds every plan (every op runs once, in order, on one stream), so the bound is
   never below it.

The property test (tests/test_milp_bounds.py) checks ``lower_bound_s <=`` the enumerated
optimum on random small instances for every tier, both backends, with and without local
search; the model with the optimum's decisions fixed is checked the same way, and on the
recorded soundness cases with SCIP, HiGHS and CBC (tests/test_milp_model_cases.py). The
plan-by-plan check (tests/test_milp_point.py) is the stronger one: it checks the argument
above for every plan, row by row, not only the optimum's value.

The model's floor (the smallest M at which it is feasible) has a
closed form: every tensor swapped, each copy as slow as needed, so a swapped tensor is
resident from production to its last forward reader and at its backward readers only:
``floor = max_k (static_k + sum_{prod_t <= k <= lastfwd_t} s_t + sum_{t read by backward
op k} s_t)``. No plan runs in the evaluator below it (a host pinned-memory limit only
removes plans). The floor plans are simulated at the floor; if one runs, the floor is the
exact minimum budget (``min_budget_exact``); otherwise each is bisected down from the best
budget so far (keep-all runs at P), and on instances the enumeration covers, the
enumeration looks for any plan at the floor and bisects below the best witness
(:func:`~slackopt.solvers.milp.search.floor.min_budget`).
"""
