"""The time-indexed relaxation built in one call: :func:`build_model` runs the builder's
sections (:mod:`~slackopt.solvers.milp.model.builder`) and the runtime rules
(:mod:`~slackopt.solvers.milp.model.rules`) that its options switch on, in a fixed order.
The formulation and the argument why each relaxation is one are in
:mod:`slackopt.solvers.milp.model`'s docstring."""

from __future__ import annotations

from slackopt.instance import Instance
from slackopt.solvers.milp.model import memory, rules
from slackopt.solvers.milp.model.builder import ModelOptions, _Builder, _Model
from slackopt.solvers.milp.model.steps import _groups


def build_model(inst: Instance, M: int | None, *, tier: str = "full",
                steps: str | int | None = None, lagging: bool | None = None,
                binary_placement: bool | None = None,
                integral_copies: bool | None = None, fifo: bool | None = None,
                admission: bool | None = None,
                integer_evictions: bool | None = None,
                cumulative_placement: bool | None = None,
                deadline: float | None = None) -> _Model:
    """Build the time-indexed relaxation of ``inst`` at budget ``M`` (bytes).

    Step K covers ops ``a_K .. b_K`` and the interval ``[E(a_K - 1), E(b_K))`` of the
    evaluated run (E = end of an op; the gap before an op, with its stalls and the
    rebuilds inserted before it, belongs to the op's step). Memory is checked at the end
    of every op (all its allocations live, H2D buffers started during it counted) and, in
    the exact tier, at its start (D2H copies that ended while it waited already freed).

    The model is built by the sections of :class:`~.builder._Builder`, the memory rows of
    :mod:`~.memory` and, where their option is on, the runtime rules of :mod:`~.rules`,
    called in this order (which fixes
    the order of the variables and rows): ``rebuild_candidates``, ``decisions``,
    ``placements``, ``placement_prefix_sums``, ``placement_order``, ``copies``,
    ``copy_order``, ``fifo_r1`` and ``work_conserving_r2`` (`fifo`), ``lagging_r3``
    (`lagging`), ``step_durations``, ``gamma`` (`integral_copies`), ``memory_at_ops``,
    ``admission_r5`` (`admission` with `integral_copies`), ``rebuild_instants``; each
    section's docstring gives its rows and why they are valid.

    Args:
        inst: the instance.
        M: the budget (bytes); None builds the model without memory rows.
        tier: the options' defaults and the steps' (:meth:`ModelOptions.for_tier
            <slackopt.solvers.milp.model.builder.ModelOptions.for_tier>`): "full" (one
            step per op, every option below on but `cumulative_placement`), "exact" (one
            step per op, options off: binary decisions, fractional copies, continuous
            rebuild positions and evictions) or "aggregated" (as "exact", one step per
            (phase, layer) run, `cumulative_placement` on).
        steps: override the steps: "op", "layer" or a number of ops per step.
        lagging: lag binaries (a D2H still running at the first backward read).
        binary_placement: binary rebuild placements.
        integral_copies: copy *events* are integral: a tensor is freed when its D2H ends,
            an H2D buffer is allocated in full when the copy starts.
        fifo: D2H copies run one at a time in the runtime's queue order (ready op, then
            saved position), the engine is work-conserving, a D2H lags only behind
            copies queued no later (R1-R3); turns `lagging` on.
        admission: the H2D admission rule (used + size + next three tasks' allocations).
        integer_evictions: eviction counts are integers (a tensor is evicted whole).
        cumulative_placement: state "rebuilt before op k" through prefix-sum variables
            of the placements (same relaxation, far fewer nonzeros; default on in the
            aggregated tier only).
        deadline: perf_counter time after which building stops with
            :class:`~slackopt.solvers.milp.linear.lin.ModelTimeout` (the paper workloads' models
            take seconds to build).

    Returns:
        The model with its variable maps.

    Raises:
        ValueError: `tier` is not "full", "exact" or "aggregated", or `steps` is an int
            below 1.
    """
    opts = ModelOptions.for_tier(
        tier, lagging=lagging, binary_placement=binary_placement,
        integral_copies=integral_copies, fifo=fifo, admission=admission,
        integer_evictions=integer_evictions, cumulative_placement=cumulative_placement)
    steps = steps if steps is not None else ("layer" if tier == "aggregated" else "op")
    bd = _Builder(inst, M, _groups(inst, steps), opts, deadline)
    bd.rebuild_candidates()
    bd.decisions()
    bd.placements()
    bd.placement_prefix_sums()
    bd.placement_order()
    bd.copies()
    bd.copy_order()
    if opts.fifo:
        rules.fifo_r1(bd)
        rules.work_conserving_r2(bd)
    if opts.lagging:
        rules.lagging_r3(bd)
    bd.step_durations()
    if opts.integral_copies:
        rules.gamma(bd)
    memory.memory_at_ops(bd)
    if opts.admission and opts.integral_copies:
        rules.admission_r5(bd)
    memory.rebuild_instants(bd)
    return bd.result(tier)
