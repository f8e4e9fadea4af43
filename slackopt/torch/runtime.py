"""Execute a plan on the real PyTorch module with the evaluator's runtime policy.

The plan that runs is the plan that was simulated.
:func:`~slackopt.torch.schedule.runtime_schedule` runs the evaluator's own barrier-free
event loop on the profiled instance at budget M
(:func:`slackopt.simulate.barrier_free_actions`; docs/model.md, "Plan semantics under
the barrier-free runtime") and logs, by position in the compute stream's task list,
every action it takes: D2H at production in FIFO order, dropped D2Hs of tensors with no
reader left, H2D by first need under the admission rule with no head-of-line blocking,
lagging device copies claimed together, evictions when an allocation does not fit,
releases; the host pinned-memory limit is the evaluator's too (a plan it refuses is
infeasible). :class:`PlanRuntime` replays those actions at the same places in the real
step and runs the task list's rebuild tasks in its order:

- **Matching.** A :class:`~slackopt.torch.trace.StepTracer` numbers the forward ATen
  calls and names their storages exactly as :func:`slackopt.torch.profile.profile_step`
  did (and checks them), so each storage autograd saves is matched to its instance
  tensor; a second dispatch mode numbers the backward calls, so the runtime knows which
  task runs next. Pack hooks (``torch.autograd.graph.saved_tensors_hooks``) hand autograd
  a geometry instead of the data for swapped and recomputed tensors; unpack hooks return
  the view of the storage the schedule brought back.
- **keep**: held from production to the end of its last backward reader.
- **swap**: the device storage is held from production until the schedule frees it (D2H
  ended and forward readers done); its bytes go to a slice of one host buffer
  (:class:`~slackopt.torch.copies.HostPool`, pinned on CUDA, allocated once and reusable
  across steps); the H2D allocates a device buffer when the schedule admits it; an
  eviction drops that buffer and the schedule fetches it again later.
- **recomp**: the runtime records the ATen calls of the tensor's recipe while the forward
  pass runs and keeps no data; the rebuild task re-runs them
  (:mod:`slackopt.torch.recipes`).

**Pipeline stages.** An instance that :func:`slackopt.stage.build_stage` built from a
profile runs its schedule of units on one device: each forward unit is the forward pass
of its microbatch under its own tracer (op and tensor ``x`` of the pass are the
instance's ``x@j``), its loss keeps the autograd graph until the microbatch's backward
unit runs ``loss.backward()``; one task list and one action log cover the whole
schedule. Idle time between units is not waited for (see :class:`PlanRuntime`); split
backward halves (W units) are refused
(:func:`~slackopt.torch.schedule.check_executable`).

After every task the runtime sums the bytes of the saved storages it holds; the
:class:`~slackopt.torch.report.RuntimeReport` puts that timeline beside the evaluator's,
and ``matches_plan`` requires them equal op by op, with the same D2H and H2D bytes,
evictions and rebuilds. On CPU the copies are synchronous, so the two timelines agree
exactly (tolerance 0 bytes). The runtime also keeps a
:class:`~slackopt.torch.blocks.BlockLedger`: every block from its allocation until it is
really free, whoever holds it, which gives the accounted peak beside the simulated one.

On CUDA the actions are issued at the same places, asynchronously: copies run on two side
streams after events of the compute stream (:mod:`slackopt.torch.copies`), buffers are
allocated on the compute stream, ``record_stream`` marks every stream that uses a block,
prefetch state is changed under a lock (autograd runs the backward pass in its own
thread). The schedule is positional, not timed: where the GPU's durations differ from the
profile's, the compute stream waits for a copy the evaluator expected done.
``benchmarks/gpu_check.py`` runs these paths on a CUDA machine; the CPU test suite cannot.

Limits: both passes run under a Python dispatch mode, which adds tens of microseconds per
ATen call (visible on small models, small next to large GPU kernels); a model that
installs its own saved-tensor hooks (``torch.utils.checkpoint``, ``save_on_cpu``)
overrides these for its region. Swapped and recomputed tensors come back bit for bit, so
on CPU a planned step gives the unplanned step's gradients exactly (the tests check it).

Sources: docs/model.md (the policy); PyTorch documentation of
``torch.autograd.graph.saved_tensors_hooks`` (and ``save_on_cpu``, which this
generalises), ``TorchDispatchMode``, "CUDA semantics" (streams, events,
``Tensor.record_stream``, pinned memory).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from slackopt.instance import Instance
from slackopt.pipeline import Unit
from slackopt.plan import KEEP, RECOMP, SWAP, Plan
from slackopt.simulate import Action
from slackopt.torch.blocks import BlockLedger
from slackopt.torch.copies import HostPool, bytes_of, copy_d2h, copy_h2d, host_pool_bytes
from slackopt.torch.errors import PlanRuntimeError
from slackopt.torch.recipes import (
    ActivationArg,
    ConstArg,
    Geometry,
    RecordedCall,
    ShapeArg,
    storage_view,
)
from slackopt.torch.report import RuntimeReport
from slackopt.torch.schedule import check_executable, runtime_schedule
from slackopt.torch.trace import (
    OpRec,
    StepTracer,
    is_view_op,
    op_label,
    storage_of,
    written_tensors,
)


class _Record:
    """The runtime state of one saved storage (shared by every saved view of it).

    ``orig`` is the storage produced in the forward pass (held from production until the
    schedule frees it), ``dev`` the storage readers use in the backward pass (a prefetch
    buffer, a rebuilt storage, or ``orig`` itself for a kept tensor or a claimed lagging
    copy), ``host`` the host slice of a swapped one."""

    __slots__ = ("rt", "pos", "name", "decision", "nbytes", "orig", "dev", "host", "host_off",
                 "d2h_done", "h2d_done", "alloc_stream", "streams", "recipe", "packed",
                 "last_read")

    def __init__(self, rt: PlanRuntime, pos: int, name: str, decision: int) -> None:
        self.rt = rt
        self.pos = pos
        self.name = name
        self.decision = decision
        self.nbytes = int(rt.sizes[name])
        self.orig: Any = None
        self.dev: Any = None
        self.host: Any = None
        self.host_off = -1
        self.d2h_done: Any = None     # CUDA events
        self.h2d_done: Any = None
        self.last_read: Any = None    # CUDA: event after the last H2D read of the host slice
        self.alloc_stream: Any = None
        self.streams: set[Any] = set()
        self.recipe: list[RecordedCall] | None = None
        self.packed = False

    def storage(self) -> Any:
        """The device storage a backward reader or a recipe uses now. On CUDA the current
        stream waits for the H2D copy, and ``record_stream`` tells the allocator every
        stream that uses the block."""
        if self.decision == KEEP:
            st = self.orig
        else:
            st = self.dev
            if st is None:
                st = self.rt.off_schedule(self)
        if st is None:
            raise PlanRuntimeError(f"internal: saved tensor '{self.name}' is not on the device")
        if st.device.type == "cuda":
            cur = torch.cuda.current_stream(st.device)
            if self.h2d_done is not None:
                cur.wait_event(self.h2d_done)
            if self.alloc_stream is not None and cur != self.alloc_stream \
                    and cur not in self.streams:
                bytes_of(st).record_stream(cur)
                self.streams.add(cur)
        return st


@dataclass(slots=True)
class _Handle:
    """What autograd stores for one saved view: the record and the view's geometry (or,
    for a kept tensor, the detached alias itself)."""

    record: _Record | None
    tensor: Any = None
    geom: Geometry | None = None


class _RuntimeTracer(StepTracer):
    """Forward-pass tracer of the runtime for one forward unit: checks the op sequence
    against the instance, names storages like the profile, records the calls that recipes
    re-run.

    The unit's ops are the instance's ops ``first .. first + n - 1``; the tracer numbers
    the pass's calls from 0 as the profile did, and op and storage ``x`` of the pass are
    the instance's ``x + sfx`` (a pipeline stage's ``@j`` suffix; "" for a single pass)."""

    def __init__(self, rt: PlanRuntime, first: int, n: int, sfx: str) -> None:
        super().__init__()
        self.rt = rt
        self.first, self.n, self.sfx = first, n, sfx

    def _before(self, index: int, name: str, func: Any, args: Any, kwargs: Any) -> Any:
        rt = self.rt
        g = self.first + index
        if index >= self.n or rt.op_names[g] != name + self.sfx:
            want = (rt.op_names[g].removesuffix(self.sfx) if index < self.n
                    else "the end of the forward")
            raise PlanRuntimeError(
                f"forward op #{index} is '{name}' but the profile has '{want}': the step "
                "differs from the profiled one (same model, input shapes, dtypes, device and "
                "train/eval mode needed)")
        rt.advance(rt.cursor)
        if g in rt.capture_ops and torch.Tag.nondeterministic_seeded in func.tags:
            cuda = {}
            for x in tree_flatten((args, kwargs))[0]:
                dev = (x.device if isinstance(x, torch.Tensor) else
                       x if isinstance(x, torch.device) else None)
                if dev is not None and dev.type == "cuda":
                    i = dev.index if dev.index is not None else torch.cuda.current_device()
                    if i not in cuda:
                        cuda[i] = torch.cuda.get_rng_state(i)
            return (torch.get_rng_state(), cuda)
        return None

    def _after(self, rec: OpRec, args: Any, kwargs: Any, out: Any, token: Any) -> None:
        rt = self.rt
        g = self.first + rec.index
        for k in rec.outputs:
            st = self.storages[k]
            name = str(st.name) + self.sfx
            want = rt.sizes.get(name)
            if want is not None and want != st.nbytes:
                raise PlanRuntimeError(
                    f"tensor '{name}' has {st.nbytes} bytes but {want} in the profile: the "
                    "step differs from the profiled one (other input shapes or dtypes?)")
            rt.names[k] = name
            rt.key_by_name[name] = k
        if g in rt.prod_at:
            live: dict[int, Any] = {}
            for x in tree_flatten((args, kwargs, out))[0]:
                s = storage_of(x) if isinstance(x, torch.Tensor) else None
                if s is not None:
                    live[s._cdata] = s
            rt.produced(g, live)
        rt._task_done()
        if g not in rt.capture_ops:
            return
        leaves, spec = tree_flatten((args, kwargs))
        meta_id = id(args[0]) if rec.meta_reads and args else None
        conv: list[Any] = []
        for x in leaves:
            if not isinstance(x, torch.Tensor) or storage_of(x) is None:
                conv.append(x)
                continue
            k = self.key_of(x)
            s = self.storages[k]
            if id(x) == meta_id:
                conv.append(ShapeArg(tuple(x.shape), tuple(x.stride()), x.dtype, x.device))
            elif s.persistent:
                conv.append(ConstArg(x))
            else:
                conv.append(ActivationArg(k, Geometry.of(x), rt.record_for(k)))
        out_keys: list[int | None] = []
        for t in tree_flatten(out)[0]:
            st = storage_of(t)
            out_keys.append(st._cdata if st is not None else None)
        call = RecordedCall(rec.func, spec, conv, out_keys)
        if token is not None:
            call.cpu_rng, call.cuda_rng = token
        rt.calls[g] = call


# ----------------------------------------------------------------------------- runtime
class _BackwardCursor(TorchDispatchMode):
    """Numbers the backward pass's non-view ATen calls as the profiler did, so the runtime
    knows which task is about to run."""

    def __init__(self, rt: PlanRuntime) -> None:
        super().__init__()
        self.rt = rt

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.rt.paused and not is_view_op(func):
            grads = self.rt.grad_storages
            if grads and any((st := storage_of(t)) is not None and st._cdata in grads
                             for t in written_tensors(func, args, kwargs)):
                self.rt.stats.extra_backward_ops += 1  # accumulation into an existing .grad
            else:
                self.rt.before_backward_op(op_label(func))
        return func(*args, **kwargs)


class PlanRuntime:
    """Runs one training step of a module under a plan, with the evaluator's policy.

    The evaluator's barrier-free loop is run first on the instance (durations, link, M:
    :func:`~slackopt.torch.schedule.runtime_schedule`); the step then replays its
    actions at the same places in the compute stream: before task j the runtime performs
    every action the evaluator took after task j-1 started and before task j started
    (offloads, frees of device copies, dropped offloads, admitted prefetches, claimed
    lagging copies, evictions, releases), and runs the rebuild tasks of the task list in
    order. Forward ops are numbered by the forward tracer, backward ops by a dispatch
    mode over ``loss.backward()``, exactly as
    :func:`slackopt.torch.profile.profile_step` numbered them.

    After each task it samples the bytes of the saved storages it holds (kept, swapped
    device copies, prefetch buffers, rebuilt storages), so ``report().memory_timeline``
    can be compared with the evaluator's ``saved_timeline`` op by op.

    Usage (what :func:`execute_plan` does)::

        rt = PlanRuntime(instance, plan, budget_bytes)
        with rt.forward(model):
            loss = loss_fn(model(*inputs), *inputs)
        with rt.backward():
            loss.backward()
        report = rt.report()

    **A pipeline stage** (an instance of :func:`slackopt.stage.build_stage` whose base is
    a profile) runs its units (``instance.units``) in order: one :meth:`forward` block per
    F unit, the forward pass of that unit's microbatch (the loss it returns keeps the
    autograd graph), one :meth:`backward` block per B unit, that microbatch's
    ``loss.backward()``. Each pass is numbered from 0 as the profile numbered it, and
    op and tensor ``x`` of microbatch j is the instance's ``x@j`` (``x@jcC`` for chunk
    C). Units run back to back: idle time (a unit's earliest start) is not waited for;
    the actions the evaluator took while its compute stream idled are performed before
    the unit's first task, so the timelines agree task by task. Split backward halves
    (W units of zb-h1 and interleaved-zb) are refused: ``loss.backward()`` runs each
    autograd node's formula whole (input and weight gradients together), and
    torch.distributed.pipelining's split (``stage_backward_input`` then
    ``stage_backward_weight``, over a retained graph) re-enters nodes, so neither runs
    the instance's B ops and then its W ops.

    One runtime serves one step (one pass through the schedule); the step must run the
    profiled ATen calls.

    Args:
        instance: the profiled instance (:func:`slackopt.torch.profile.profile_step`), or a
            pipeline stage built from one (:func:`slackopt.stage.build_stage`).
        plan: a barrier_free plan for it.
        budget_bytes: M (bytes) the plan is executed under.
        force: execute a plan the evaluator finds infeasible at M (its schedule is then
            taken at M = 2**62, without memory pressure); default refuse.
        host_pool: a :class:`~slackopt.torch.copies.HostPool` to reuse (one is made if
            None).

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the instance was not made by the profiler (nor built as a stage
            from a profile); a stage with a split backward (W units); the plan is
            infeasible at M (names the evaluator's failure) and not forced; another policy.
    """

    def __init__(self, instance: Instance, plan: Plan, budget_bytes: int, *,
                 force: bool = False, host_pool: HostPool | None = None) -> None:
        plan.check(instance)
        check_executable(instance)
        sched = runtime_schedule(instance, plan, budget_bytes)
        self.forced = False
        if not sched.evaluation.feasible:
            if not force:
                raise PlanRuntimeError(
                    f"the plan is infeasible at M = {budget_bytes} B: "
                    f"{sched.evaluation.failure}. Solve for this budget, or pass force=True "
                    "to run it without the memory limit")
            sched = runtime_schedule(instance, plan, 2**62)
            self.forced = True
        self.schedule = sched
        self.instance = instance
        self.plan = plan
        self.op_names = [op.name for op in instance.ops]
        self.n_fwd = instance.n_fwd
        # The units, each with its first op and the suffix of its names (stage.py: op and
        # tensor x of microbatch j is x@j, of chunk C > 0 x@jcC; a single pass has none).
        self.units = instance.units
        self.unit_first_op = [0]
        for u in self.units:
            self.unit_first_op.append(self.unit_first_op[-1] + u.n_ops)
        stage = instance.scheduled_units is not None
        self.unit_sfx = [self.op_names[i][self.op_names[i].rindex("@"):] if stage else ""
                         for i in self.unit_first_op[:-1]]
        self.op_task = {op: k for k, op in enumerate(sched.task_op) if op >= 0}
        self._unit = -1            # the unit running, or the last one run
        self._label = ""           # its name (F3, B3c1)
        self.in_backward = False   # inside a backward() block
        self.sizes = {t.name: int(t.size_bytes) for t in instance.tensors}
        self.pos_of = {n: i for i, n in enumerate(sched.saved_names)}
        self.decision = {n: int(d) for n, d in zip(plan.names, plan.decisions, strict=True)}
        self.recipe_ops: dict[str, list[int]] = {}
        for k, n in enumerate(instance.saved_names):
            if self.decision[n] == RECOMP:
                self.recipe_ops[n] = [int(i) for i in instance.recipe_ops[k]]
        self.capture_ops = {i for ops in self.recipe_ops.values() for i in ops}
        self.prod_at: dict[int, list[int]] = {}
        for k, n in enumerate(instance.saved_names):
            self.prod_at.setdefault(int(instance.saved_prod_idx[k]), []).append(
                self.pos_of[n])
        self.records = [_Record(self, i, n, self.decision[n])
                        for i, n in enumerate(sched.saved_names)]
        self.names: dict[int, str] = {}
        self.key_by_name: dict[str, int] = {}
        self.calls: dict[int, RecordedCall] = {}
        self.host_pool = host_pool
        self.cursor = 0            # next task of the task list
        self._ev = 0               # next schedule event
        self.paused = False
        self.grad_storages: set[int] = set()
        self._bwd_span = (0, 0, "")
        self.lock = threading.RLock()
        self._streams: dict[tuple[str, Any], Any] = {}
        self._tracer: _RuntimeTracer | None = None
        self.ledger = BlockLedger()
        self.stats = RuntimeReport(
            device="cpu", planned=plan.counts(), budget_bytes=sched.budget_bytes,
            forced=self.forced,
            simulated={"d2h_bytes": sched.evaluation.d2h_bytes,
                       "h2d_bytes": sched.evaluation.h2d_bytes,
                       "evictions": sched.evaluation.evictions,
                       "rebuilt": sum(1 for t in sched.task_t if t >= 0),
                       "peak_bytes": sched.evaluation.peak_bytes,
                       "step_time_s": sched.evaluation.step_time_s},
            simulated_timeline=list(sched.saved_timeline))

    # -- streams (CUDA only)
    def _stream(self, kind: str, device: Any) -> Any:
        key = (kind, device)
        if key not in self._streams:
            self._streams[key] = torch.cuda.Stream(device=device)
        return self._streams[key]

    def _pool(self, device: Any) -> HostPool:
        if self.host_pool is None:
            self.host_pool = HostPool(host_pool_bytes(self.instance, self.plan),
                                      pin=device.type == "cuda")
        return self.host_pool

    # -- the schedule
    def advance(self, tag: int) -> None:
        """Perform the schedule's actions tagged <= `tag`, in order."""
        acts = self.schedule.actions
        while self._ev < len(acts) and acts[self._ev].tag <= tag:
            act = acts[self._ev]
            self._ev += 1
            getattr(self, "_do_" + act.kind)(self.records[act.saved], act)

    def _drop(self, st: Any) -> None:
        """The runtime lets go of device storage `st` (None: nothing)."""
        if st is not None:
            self.ledger.drop(st)

    def _do_d2h(self, rec: _Record, act: Action | None = None) -> None:
        src = rec.orig if rec.orig is not None else rec.dev  # dev: claimed before its D2H
        if src is None:
            raise PlanRuntimeError(f"internal: the device copy of '{rec.name}' is gone before "
                                   "its D2H")
        pool = self._pool(src.device)
        rec.host, rec.host_off, wait = pool.take(rec.nbytes)
        stream = self._stream("d2h", src.device) if src.device.type == "cuda" else None
        rec.d2h_done = copy_d2h(src, rec.host, stream, wait)
        self.ledger.use(src, "d2h")
        self.stats.d2h_bytes += rec.nbytes
        self.stats.swapped += 1

    def _do_d2h_end(self, rec: _Record, act: Action | None = None) -> None:
        self.ledger.end_use(rec.name, "d2h")

    def _do_to_host(self, rec: _Record, act: Action | None = None) -> None:
        self._drop(rec.orig)
        rec.orig = None

    def _do_drop(self, rec: _Record, act: Action | None = None) -> None:
        self.stats.dropped_d2h += 1

    def _do_h2d(self, rec: _Record, act: Action | None = None) -> None:
        """Admit a prefetch (`act` None: off the schedule, fetched because a reader needs
        it now)."""
        if rec.host is None:
            raise PlanRuntimeError(f"internal: swapped tensor '{rec.name}' has no host copy")
        dev = self.stats_device
        stream = self._stream("h2d", dev) if dev.type == "cuda" else None
        rec.dev, rec.h2d_done, rec.alloc_stream = copy_h2d(rec.host, dev, stream,
                                                           rec.d2h_done)
        rec.streams = set()
        rec.last_read = rec.h2d_done
        self.ledger.allocate(rec.name, "prefetched", rec.dev)
        if act is not None:  # the copy's end is the schedule's h2d_end
            self.ledger.use(rec.dev, "h2d")
            self.ledger.sample(act.used_bytes)
        self.stats.h2d_bytes += rec.nbytes
        self.stats.fetched += 1

    def _do_h2d_end(self, rec: _Record, act: Action | None = None) -> None:
        self.ledger.end_use(rec.name, "h2d")

    def _do_claim(self, rec: _Record, act: Action | None = None) -> None:
        rec.dev, rec.orig = rec.orig, None  # the device copy is now the readers' (and may
        self.stats.claimed += 1             # be evicted like a prefetched one)

    def _do_evict(self, rec: _Record, act: Action | None = None) -> None:
        self._drop(rec.dev)
        rec.dev = None
        rec.h2d_done = None
        self.stats.evictions += 1

    def _do_fwd_free(self, rec: _Record, act: Action | None = None) -> None:
        self._drop(rec.orig)
        rec.orig = None

    def _do_release(self, rec: _Record, act: Action | None = None) -> None:
        self._drop(rec.orig)
        if rec.dev is not rec.orig:
            self._drop(rec.dev)
        rec.orig = rec.dev = None
        rec.h2d_done = None
        if rec.host is not None:
            assert self.host_pool is not None
            self.host_pool.give(rec.host_off, rec.nbytes, rec.last_read or rec.d2h_done)
            rec.host = None

    def held_bytes(self) -> int:
        """Bytes of the distinct saved storages the runtime holds on the device now."""
        seen: dict[int, int] = {}
        for rec in self.records:
            for st in (rec.orig, rec.dev):
                if st is not None:
                    seen[st._cdata] = int(st.nbytes())
        return sum(seen.values())

    def _task_done(self) -> None:
        """Task `cursor` has started (a forward op: has run): sample the runtime's bytes and
        the ledger, move to the next task."""
        k = self.cursor
        self.stats.memory_timeline.append(self.held_bytes())
        used = self.schedule.task_used_bytes
        if k < len(used):
            self.ledger.sample(used[k])
        self.cursor = self.ledger.task = k + 1

    def _run_rebuilds(self) -> None:
        """Run the rebuild tasks at the cursor (they precede the next backward op)."""
        sched = self.schedule
        while self.cursor < len(sched.task_t) and sched.task_t[self.cursor] >= 0:
            self.advance(self.cursor)
            self._rebuild(self.records[sched.task_t[self.cursor]])
            self._task_done()

    def _rebuild(self, rec: _Record) -> None:
        if rec.recipe is None:
            raise PlanRuntimeError(f"internal: recomputed tensor '{rec.name}' has no recorded "
                                   "recipe (autograd never saved it)")
        env: dict[int, Any] = {}
        with torch.no_grad():
            for call in rec.recipe:
                out = call.run(env)
                for k, t in zip(call.out_keys, tree_flatten(out)[0], strict=False):
                    if k is not None:
                        env[k] = t.untyped_storage()
                self.stats.rebuild_ops += 1
        key = self.key_by_name.get(rec.name)
        st = env.get(key) if key is not None else None
        if st is None:
            raise PlanRuntimeError(f"internal: the recipe of '{rec.name}' did not rebuild it")
        rec.dev = st
        rec.alloc_stream = None
        self.ledger.allocate(rec.name, "rebuilt", st)
        self.stats.rebuilt += 1
        self.stats.rebuilt_bytes += int(st.nbytes())

    def off_schedule(self, rec: _Record) -> Any:
        """A reader needs `rec` where the schedule has not brought it: fetch or rebuild it
        now (correct gradients), and note it (``matches_plan`` is then False)."""
        self.stats.off_schedule.append(f"{rec.name}@task{self.cursor}")
        if rec.decision == SWAP:
            if rec.dev is None and rec.orig is not None:
                rec.dev = rec.orig
            elif rec.dev is None:
                self._do_h2d(rec)
        else:
            self._rebuild(rec)
        return rec.dev

    # -- hooks
    def record_for(self, key: int) -> _Record | None:
        """The record of storage `key` if it is a saved tensor of the instance, else None."""
        name = self.names.get(key)
        pos = self.pos_of.get(name) if name is not None else None
        return None if pos is None else self.records[pos]

    def captured(self, index: int) -> RecordedCall:
        call = self.calls.get(index)
        if call is None:
            raise PlanRuntimeError(f"internal: recipe op #{index} was not recorded")
        return call

    def produced(self, index: int, storages: dict[int, Any]) -> None:
        """Forward op `index` has run: hold the saved storages it made final."""
        for t in self.prod_at.get(index, ()):
            rec = self.records[t]
            st = storages.get(self.key_by_name.get(rec.name, -1))
            if st is None:
                raise PlanRuntimeError(f"internal: saved tensor '{rec.name}' not found at its "
                                       "producer")
            rec.orig = st
            self.ledger.allocate(rec.name, "produced", st)
            if rec.decision == KEEP:
                rec.dev = None

    def _pack(self, t: Any) -> Any:
        tr = self._tracer
        assert tr is not None
        with tr.pause():
            st = storage_of(t)
            rec = self.record_for(st._cdata) if st is not None else None
            if rec is None:
                if st is not None and st._cdata in self.names:
                    self.stats.unplanned_saves += 1
                return _Handle(None, t.detach())
            if not rec.packed:
                rec.packed = True
                if rec.decision == KEEP:
                    self.stats.kept += 1
                elif rec.decision == RECOMP:
                    rec.recipe = [self.captured(i) for i in self.recipe_ops[rec.name]]
            if rec.decision == KEEP:
                return _Handle(rec, t.detach())
            return _Handle(rec, None, Geometry.of(t))

    def _unpack(self, h: _Handle) -> Any:
        rec = h.record
        if rec is None or rec.decision == KEEP:
            return h.tensor
        assert h.geom is not None
        with self.lock:
            old, self.paused = self.paused, True
            try:
                if self.in_backward:
                    self.advance(self.cursor)
                    self._run_rebuilds()
                    self.advance(self.cursor)
                return storage_view(rec.storage(), h.geom)
            finally:
                self.paused = old

    def before_backward_op(self, label: str) -> None:
        """The backward pass is about to run its next ATen call (`label`)."""
        with self.lock:
            self.paused = True
            try:
                self._run_rebuilds()
                sched = self.schedule
                k = self.cursor
                if k >= len(sched.task_op):
                    self.stats.off_schedule.append(f"backward op {label} after the last "
                                                   "task")
                    return
                first, n, sfx = self._bwd_span
                op = sched.task_op[k]
                name = self.op_names[op].removesuffix(sfx)
                if not first <= op < first + n or name.split(".", 1)[1] != label:
                    self.stats.off_schedule.append(f"backward op {label} where the profile "
                                                   f"has {name}")
                    return
                self.advance(k)
                self._task_done()
            finally:
                self.paused = False

    # -- the step
    def _enter_unit(self, kind: str) -> tuple[int, int, str]:
        """Move to the next unit of the schedule, which must be of `kind` ("F" or "B"),
        with the cursor at its first task; returns (its first op, its op count, the
        suffix of its names).

        Raises:
            PlanRuntimeError: no unit is left (one runtime serves one step), the next
                unit is of another kind, or the step left the schedule before it.
        """
        u = self._unit + 1
        if u >= len(self.units):
            raise PlanRuntimeError("a PlanRuntime runs one step; make a new one")
        unit = self.units[u]
        label = str(Unit(unit.microbatch, unit.kind, unit.chunk))
        if unit.kind != kind:
            asked = "a forward pass" if kind == "F" else "a backward pass"
            raise PlanRuntimeError(f"the schedule's next unit is {label}, and {asked} was "
                                   "run: run the units in the order of instance.units")
        first = self.unit_first_op[u]
        task = self.op_task[first]
        if kind == "B":  # the rebuilds inserted before its first op belong to it
            while task > 0 and self.schedule.task_op[task - 1] < 0:
                task -= 1
        if self.cursor != task:
            raise PlanRuntimeError(
                f"the step left the schedule before unit {label} (at task {self.cursor}, "
                f"the unit starts at task {task}): {'; '.join(self.stats.off_schedule)}")
        self._unit = u
        self._label = label
        return first, unit.n_ops, self.unit_sfx[u]

    @contextlib.contextmanager
    def forward(self, model: Any) -> Iterator[None]:
        """Context for the forward pass of `model` (model and loss): hooks, op matching,
        the schedule. The module paths of `model` name the storages, as in the profile.
        For a pipeline stage, the next unit of the schedule (an F unit)."""
        first, n, sfx = self._enter_unit("F")
        first_task = self.cursor
        self.names.clear()  # storage keys are named per pass (an address may be reused)
        tr = _RuntimeTracer(self, first, n, sfx)
        self._tracer = tr
        ok = False
        try:
            with tr.modules(model), tr, \
                    torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                yield
            ok = True
        finally:
            self.calls.clear()
        if ok and len(tr.ops) != n:
            raise PlanRuntimeError(
                f"the forward pass ran {len(tr.ops)} ops but the profile has "
                f"{n}: the step differs from the profiled one")
        devs = {s.device for s in tr.storages.values() if not s.persistent}
        if devs:
            self.stats.device = sorted(devs)[-1]
        self._tracer = None
        self.stats.still_resident += [b.tensor for b in self.ledger.held()
                                      if b.kind == "produced" and b.dropped_at is not None
                                      and first_task <= b.dropped_at <= self.cursor]

    @property
    def stats_device(self) -> Any:
        return torch.device(self.stats.device)

    @contextlib.contextmanager
    def backward(self, params: Any = ()) -> Iterator[None]:
        """Context for ``loss.backward()``: numbers the backward ops; after the last unit,
        replays the rest of the schedule when it returns. For a pipeline stage, the next
        unit of the schedule (a B unit: the backward of the loss of its microbatch's
        forward unit).

        Args:
            params: the model's parameters; ATen calls that write into a ``.grad`` they
                already hold (gradient accumulation, which the profile does not have) are
                not tasks (counted in ``extra_backward_ops``).
        """
        first, n, sfx = self._enter_unit("B")
        start = self.cursor
        last = self._unit == len(self.units) - 1
        self._bwd_span = (first, n, sfx)
        self.grad_storages = {p.grad.untyped_storage()._cdata for p in params
                              if p.grad is not None}
        self.in_backward = True
        try:
            with _BackwardCursor(self):
                yield
        finally:
            self.in_backward = False
        n_tasks = len(self.schedule.task_op)
        if last:
            with self.lock:
                self.paused = True
                self._run_rebuilds()
                self.advance(n_tasks + 1)
                self.paused = False
        end = n_tasks if last else self.op_task[first + n - 1] + 1
        if self.cursor != end:
            where = "" if self.instance.scheduled_units is None else f" of unit {self._label}"
            self.stats.off_schedule.append(
                f"the backward pass{where} ran {self.cursor - start} tasks, the task list "
                f"has {end - start}")

    def report(self) -> RuntimeReport:
        """The counts so far (complete after the backward block)."""
        self.stats.unmanaged = sorted(r.name for r in self.records
                                      if r.decision != KEEP and not r.packed)
        self.stats.accounted_peak_bytes = self.ledger.accounted_peak_bytes
        self.stats.held_past_drop = self.ledger.late_blocks()
        return self.stats


__all__ = ["PlanRuntime"]
