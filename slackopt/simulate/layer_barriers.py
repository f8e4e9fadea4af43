"""The ``layer_barriers`` runtime: vDNN's per-layer synchronization (Rhu et al., 2016).

docs/model.md ("Other runtimes") and sections 2.1 and 4.1 of the SlackSwap
paper: "a layer's offloaded inputs are copied while the layer runs and the next layer
starts only when the copy has ended; in the backward pass the closest preceding offloaded
layer is prefetched one layer ahead and its layer waits for it". Pinned here:

- **Runtime layer**: a maximal run of consecutive scheduled ops with the same phase,
  ``Op.layer`` and ``Op.kind``: one framework layer (Caffe/cuDNN, vDNN's setting), whose
  forward is one kernel and whose backward may be several (a GEMM's or convolution's
  dgrad and wgrad). A rebuild task belongs to the layer of the op it is inserted before.
- **Offload**: a swapped tensor is an offloaded input of the layer of its first forward
  reader (of the layer after its producer if no forward op reads it). Its D2H is queued
  (FIFO, in production order) when that layer starts, or when its producer ends if that
  is later, and the next layer starts only after every D2H queued for this layer has
  ended. The device copy is freed once its D2H and its forward readers are done, as in
  the barrier-free runtime.
- **Offloads stay in the forward pass** (vDNN offloads during forward propagation and
  prefetches during backward propagation, never the other way round): a swapped tensor
  that no forward op reads and whose producer is in the last forward layer (the layer
  after it would be a backward one) is an offloaded input of that last forward layer.
  Its D2H is queued when its producer ends and the first backward layer starts only once
  it has ended, so every D2H has ended, and every swapped tensor is on the host, before
  the backward pass starts; a tensor is therefore never gated at one barrier both by its
  D2H and by its prefetch. (Offloading it with the first backward layer would put a D2H
  and an H2D of one tensor behind the same barrier, a gate counted twice.)
- **Prefetch**: a backward layer is *offloaded* if it holds the first need of some swapped
  tensor (its fetch set). When a backward layer starts, the runtime queues the H2D copies
  of its own fetch set if they were not queued yet and of the next offloaded layer in
  execution order (the closest preceding one in forward order: "one layer ahead"); the
  layer after the current one starts only once those prefetches have ended (vDNN
  synchronizes its memory stream at every layer boundary), and the layer that reads a
  tensor waits for it as usual. Runtime parameter ``lookahead="adjacent"`` narrows this
  to the layer right after the current one (a prefetch then overlaps exactly one layer).
- H2D copies are served in need order. Runtime parameter ``prefetch``: "when_fits"
  (default) admits each under the barrier-free rule (:func:`.rules.h2d_admits`: the
  allocations of the next tasks must also fit, unless the compute stream waits for the
  copy, here also at a barrier) and keeps the barrier-free eviction fallback; "at_issue"
  is vDNN's static schedule: a prefetch buffer is allocated when its layer issues it, and
  if it does not fit then the plan is infeasible (vDNN's dynamic policy rejects a
  configuration whose trial iteration fails an allocation), with no eviction fallback.

With the workloads of docs/workloads.md this reproduces the paper's check on
VGG-16 with vDNN's Titan X parameters (3.4% overhead for vDNNconv, 22% for vDNNall).
"""

from __future__ import annotations

from slackopt.instance import Instance
from slackopt.plan import SWAP, Plan
from slackopt.simulate._engine import _FWD, _HOST, Engine
from slackopt.simulate.rules import h2d_admits, shortfall


def runtime_layers(instance: Instance) -> list[int]:
    """Runtime-layer id of each scheduled op: runs of consecutive ops with the same phase,
    ``Op.layer`` and ``Op.kind`` share one id (ids increase along the schedule)."""
    ids: list[int] = []
    prev = None
    cur = -1
    for op in instance.scheduled_ops:
        key = (op.phase, op.layer, op.kind)
        if key != prev:
            cur += 1
            prev = key
        ids.append(cur)
    return ids


class LayerBarriers(Engine):
    """The event loop with vDNN's per-layer barriers (see the module docstring)."""

    def __init__(self, inst: Instance, plan: Plan, M: int, trace: bool) -> None:
        super().__init__(inst, plan, M, trace)
        st, dec = self.st, self.dec
        op_layer = runtime_layers(inst)
        task_op = self.task_op
        n_tasks = self.n_tasks
        # Runtime layer of every task (a rebuild: that of the op it precedes).
        run = [0] * n_tasks
        nxt = op_layer[-1] if op_layer else 0
        for k in range(n_tasks - 1, -1, -1):
            if task_op[k] >= 0:
                nxt = op_layer[task_op[k]]
            run[k] = nxt
        self.run_of = run
        self.starts_run = [k == 0 or run[k] != run[k - 1] for k in range(n_tasks)]
        # Forward: the layer whose start queues each swapped tensor's D2H.
        n_runs = (max(op_layer) + 1) if op_layer else 0
        self.offload_at: list[list[int]] = [[] for _ in range(n_runs)]
        self.offload_run = [-1] * len(dec)
        reader_idx = inst.saved_reader_idx
        for t, d in enumerate(dec):
            if d != SWAP or st.s[t] == 0:
                continue
            fwd_readers = [i for i in reader_idx[t].tolist() if i < st.n_fwd]
            # No forward reader: the layer after the producer, but never a backward one.
            i = fwd_readers[0] if fwd_readers else min(st.prod[t] + 1, st.n_fwd - 1)
            self.offload_run[t] = op_layer[i]
            self.offload_at[op_layer[i]].append(t)
        self.produced = [False] * len(dec)
        # Backward: fetch set of each offloaded layer, and the offloaded layers in order.
        fetch: dict[int, list[int]] = {}
        for t, d in enumerate(dec):
            if d == SWAP and self.need[t]:
                fetch.setdefault(run[self.need[t][0]], []).append(t)
        self.fetch = fetch
        self.fetch_runs = sorted(fetch)
        self.fetch_ptr = 0              # next offloaded backward layer not yet issued
        self.issued: set[int] = set()
        self.cur_run = -1
        self.gated = [False] * len(dec)
        self.gate_pending = 0
        self.gate_list: list[int] = []       # tensors gated since the gate last opened
        self.at_issue = self.params["prefetch"] == "at_issue"
        self.adjacent = self.params["lookahead"] == "adjacent"
        self.reserved = [False] * len(dec)   # prefetch buffer allocated at issue

    # ------------------------------------------------------------------ hooks
    def init_queues(self) -> None:
        """Prefetches are queued layer by layer (as layers are entered), not up front."""

    def gate_open(self, k: int) -> bool:
        """Task k may start once the copies gating its layer have ended; the first task of
        a layer enters it then (queues its copies), before its inputs are checked."""
        if not self.starts_run[k] or self.cur_run == self.run_of[k]:
            return True
        if self.gate_pending > 0:
            return False
        self._enter(k)
        return True

    def _at_barrier(self) -> bool:
        """Is the compute stream waiting at a layer boundary for gated copies?"""
        k = self.k
        return self.gate_pending > 0 and not self.comp_busy and k < self.n_tasks \
            and self.starts_run[k] and self.cur_run != self.run_of[k]

    def waits_for(self, t: int) -> bool:
        return (self.gated[t] and self._at_barrier()) or super().waits_for(t)

    def _gated_host(self) -> int:
        """The gated copy with the earliest need that can start now (on the host, queued),
        or -1."""
        best = -1
        for t in self.gate_list:
            if self.gated[t] and self.state[t] == _HOST and self.qkey[t] >= 0 \
                    and (best < 0 or (self.qkey[t], t) < (self.qkey[best], best)):
                best = t
        return best

    def blocking_copy(self) -> int:
        if self._at_barrier():
            g = self._gated_host()
            if g >= 0:
                return g
        return super().blocking_copy()

    def _gate(self, t: int) -> None:
        self.gated[t] = True
        self.gate_pending += 1
        self.gate_list.append(t)

    def _ungate(self, t: int) -> None:
        if self.gated[t]:
            self.gated[t] = False
            self.gate_pending -= 1
            if not self.gate_pending:
                self.gate_list.clear()

    def _queue_d2h(self, t: int) -> None:
        self.queue_d2h(t)
        self._gate(t)

    def on_d2h_dropped(self, t: int) -> None:
        self._ungate(t)

    def _issue(self, r: int, gate: bool) -> None:
        """Queue the H2D copies of offloaded backward layer r's fetch set (allocating
        their buffers now under ``prefetch="at_issue"``)."""
        self.issued.add(r)
        s = self.st.s
        for t in self.fetch[r]:
            if self.state[t] in (_HOST, _FWD) and self.qkey[t] < 0:
                if self.at_issue:
                    if not h2d_admits(self.used, s[t], 0, self.M):  # no look-ahead at issue
                        self.failure = (
                            f"layer of task '{self.task_name(self.k)}' cannot allocate the "
                            f"prefetch of '{self.st.saved_names[t]}' ({s[t]} B) at t = "
                            f"{self.now * 1e3:.6g} ms: {self.used} B of M = {self.M} B in use, "
                            f"{shortfall(self.used, s[t], self.M)} B short")
                        return
                    self.used += s[t]
                    self.peak = max(self.peak, self.used)
                    self.reserved[t] = True
                    self.mem_sample()
                self.push_h2d(t, self.next_need(t))
                if gate:
                    self._gate(t)

    def _try_start_h2d(self) -> bool:
        """Head of the need-ordered queue first, except that while the compute stream
        waits at a barrier the barrier's own copies go first (admitted on used + size).
        A buffer allocated at issue needs no admission."""
        head = t = self._head()
        if self._at_barrier():
            g = self._gated_host()
            if g >= 0:
                t = g
        if t < 0 or self.state[t] != _HOST:
            return False
        if t == head and not self.reserved[t]:
            return super()._try_start_h2d()
        if not self.reserved[t]:
            s = self.st.s[t]
            if not h2d_admits(self.used, s, 0, self.M):  # awaited at the barrier
                return False
            self.used += s
            self.peak = max(self.peak, self.used)
        self.reserved[t] = False
        self.qkey[t] = -1                    # its queue entry goes stale
        self._start_h2d(t)
        return True

    def evict_fallback(self, k: int, short: int) -> bool:
        return False if self.at_issue else super().evict_fallback(k, short)

    def _enter(self, k: int) -> None:
        """The layer of task k starts: queue its offloads, or its prefetches."""
        r = self.cur_run = self.run_of[k]
        for t in self.offload_at[r]:
            if self.produced[t]:
                self._queue_d2h(t)
        if k < self.n_fwd:
            return
        if r in self.fetch and r not in self.issued:
            self._issue(r, gate=False)       # its own tasks wait for these
            if self.failure is not None:
                return
        if self.adjacent:
            nxt = r + 1 if r + 1 in self.fetch else -1
        else:
            fr = self.fetch_runs
            while self.fetch_ptr < len(fr) and fr[self.fetch_ptr] <= r:
                self.fetch_ptr += 1
            nxt = fr[self.fetch_ptr] if self.fetch_ptr < len(fr) else -1
        if nxt >= 0 and nxt not in self.issued:
            self._issue(nxt, gate=True)     # one layer ahead; the next layer waits

    def on_produced(self, t: int) -> None:
        self.produced[t] = True
        if self.st.s[t] == 0:
            self.d2h_done[t] = True
        elif self.offload_run[t] <= self.cur_run:
            self._queue_d2h(t)

    def on_d2h_done(self, t: int) -> None:
        self._ungate(t)
        super().on_d2h_done(t)

    def on_arrived(self, t: int) -> None:
        self._ungate(t)
        if self.reserved[t]:         # a lagging D2H: the device copy is used instead
            self.reserved[t] = False
            self.used -= self.st.s[t]



__all__ = ["LayerBarriers", "runtime_layers"]
