"""The ``on_demand`` runtime: an eviction cache over swappable tensors.

docs/model.md ("Other runtimes"): "no pre-planned offload; when an
allocation does not fit, victims are evicted (LRU or furthest next use) and the compute
stream waits for their D2H copies; prefetch rules as each baseline describes". This is
the runtime of SuperNeurons (Wang et al., 2018: an LRU tensor cache, prefetching one
heavy operator ahead) and SwapAdvisor (Huang et al., 2020: Belady eviction on the planned
schedule, swaps as early as possible); sections 2.1 and 4.1 of the SlackSwap paper.

Plan decisions mean: keep = resident until its last reader; recomp = as in every runtime
(dropped after its last forward reader, rebuilt before its first backward need); swap =
*swappable*: resident like a kept tensor until the runtime evicts it. Runtime parameters
(:data:`slackopt.plan.RUNTIME_PARAMS`):

- ``eviction``: "lru" (least recently used first: the last task that started reading or
  producing it is the earliest; ties by production order) or "belady" (furthest next
  use first, Belady 1966; ties: the later-produced tensor first).
- ``offload``: "on_eviction" (a swappable tensor is copied out only once chosen as a
  victim) or "early" (its D2H is queued when its producer ends, FIFO, as in the
  barrier-free runtime, but its device copy stays until it is evicted; a victim whose
  host copy is complete is then freed at once).
- ``prefetch``: "next_heavy" (when the backward pass starts, and whenever a heavy task
  starts, the evicted tensors needed by the tasks up to and including the next heavy task
  are queued) or "asap" (an evicted tensor is queued as soon as its host copy is
  complete). ``heavy_kinds``: the op kinds that count as heavy (default GEMM, attention,
  convolution). A task that finds an input evicted queues it at once (a demand fetch).

Eviction: when the compute stream cannot start task k because its allocation (or the
H2D of an input it waits for) does not fit, the bytes short beyond those already being
evicted are covered by victims, taken in eviction order among the swappable tensors on
the device whose forward readers are done, that task k does not read and that are read
again later; if all candidates together cannot cover the shortfall, nothing is evicted
(the plan is infeasible unless something in flight changes that). A victim with a
complete host copy is freed at once; the others have their D2H queued (FIFO) and are
freed when it ends, the compute stream waiting. A task that reads a tensor still being
evicted keeps its device copy. H2D copies start after the forward pass, in need order,
under the barrier-free admission rule (the next three tasks' allocations must fit too,
unless the compute stream waits for the copy); each buffer is freed after the last
backward reader.
"""

from __future__ import annotations

from slackopt.instance import Instance
from slackopt.plan import SWAP, Plan
from slackopt.simulate._engine import _DEV, _EVICT, _FWD, _HOST, _PRESENT, Engine
from slackopt.simulate.rules import shortfall


class OnDemand(Engine):
    """The event loop with on-demand eviction (see the module docstring)."""

    def __init__(self, inst: Instance, plan: Plan, M: int, trace: bool) -> None:
        super().__init__(inst, plan, M, trace)
        p = self.params
        self.belady = p["eviction"] == "belady"
        self.early = p["offload"] == "early"
        self.asap = p["prefetch"] == "asap"
        self.swap_out_state = _FWD if self.early else _DEV
        heavy_kinds = set(p["heavy_kinds"])
        kinds = self.st.kinds
        n = self.n_tasks
        self.heavy = [op >= 0 and kinds[op] in heavy_kinds for op in self.task_op]
        # next_heavy[k]: first heavy task after k (n - 1 if none).
        nh = [n - 1] * n
        nxt = n - 1
        for k in range(n - 1, -1, -1):
            nh[k] = nxt
            if self.heavy[k]:
                nxt = k
        self.next_heavy = nh
        self.window_end = self.n_fwd - 1     # last task whose evicted inputs were queued
        self.last_use = [-1] * len(self.dec)
        self.pending = 0                     # bytes of victims whose D2H has not ended

    # ------------------------------------------------------------------ hooks
    def init_queues(self) -> None:
        """Nothing is fetched before it is evicted."""

    def on_missing_input(self, k: int, t: int) -> None:
        if self.state[t] == _HOST and self.qkey[t] < 0:
            self.push_h2d(t, self.next_need(t))

    def on_task_start(self, k: int) -> None:
        last_use = self.last_use
        for t in self.reads[k]:
            last_use[t] = k
        op = self.task_op[k]
        if 0 <= op < self.n_fwd:
            for t in self.st.outs[op]:
                last_use[t] = k
        if not self.asap and k >= self.n_fwd and self.heavy[k]:
            self._prefetch_until(self.next_heavy[k])

    def on_produced(self, t: int) -> None:
        if self.early:
            super().on_produced(t)

    def on_swap_fwd_released(self, t: int) -> None:
        self.fwd_done[t] = True

    def on_d2h_done(self, t: int) -> None:
        self.d2h_done[t] = True
        st = self.state[t]
        if st == _EVICT:
            self.state[t] = _HOST
            s = self.st.s[t]
            self.used -= s
            self.pending -= s
            self._queue_if_due(t)
            self.mem_sample()
        elif st == _FWD:
            self.state[t] = _DEV

    def cancel_eviction(self, t: int) -> None:
        self.state[t] = _DEV
        self.pending -= self.st.s[t]

    def relieve(self) -> bool:
        """Evict when the compute stream is blocked for memory (see the module docstring)."""
        k = self.k
        if self.comp_busy or k >= self.n_tasks:
            return False
        s, M = self.st.s, self.M
        if any(self.state[t] not in _PRESENT for t in self.reads[k]):
            if self.h2d is not None:
                return False                 # the engine is busy: wait for it
            head = self._head()
            if head < 0 or self.state[head] != _HOST:
                return False
            short = shortfall(self.used, s[head], M)
        else:
            short = shortfall(self.used, self.alloc[k], M)
        if short <= self.pending:
            return False                     # evictions in flight cover it
        return self._evict(k, short - self.pending)

    def evict_fallback(self, k: int, short: int) -> bool:
        return False                         # relieve() already evicted what it could

    # ------------------------------------------------------------------ helpers
    def _end_task(self) -> None:
        fwd_end = self.task_op[self.k] == self.n_fwd - 1
        super()._end_task()
        if fwd_end and not self.asap:
            self._prefetch_until(self.next_heavy[self.n_fwd - 1])

    def _prefetch_until(self, end: int) -> None:
        """Queue the evicted tensors needed by tasks window_end+1 .. end."""
        if end <= self.window_end:
            return
        state, qkey, dec = self.state, self.qkey, self.dec
        for j in range(self.window_end + 1, end + 1):
            for t in self.reads[j]:
                if dec[t] == SWAP and state[t] == _HOST and qkey[t] < 0 \
                        and self.next_need(t) == j:
                    self.push_h2d(t, j)
        self.window_end = end

    def _queue_if_due(self, t: int) -> None:
        nxt = self.next_need(t)
        if nxt < self.n_tasks and (self.asap or nxt <= self.window_end):
            self.push_h2d(t, nxt)

    def _evict(self, k: int, short: int) -> bool:
        dec, s, state, fwd_done = self.dec, self.st.s, self.state, self.fwd_done
        need, need_ptr = self.need, self.need_ptr
        reading = set(self.reads[k])
        cands = []
        for t, d in enumerate(dec):
            if d == SWAP and s[t] > 0 and state[t] in (_DEV, _FWD) and fwd_done[t] \
                    and t not in reading and need_ptr[t] < len(need[t]):
                if self.belady:   # furthest next use first; ties: later-produced first
                    cands.append((-need[t][need_ptr[t]], -t, t))
                else:             # least recently used first; ties: production order
                    cands.append((self.last_use[t], t, t))
        if sum(s[t] for _, _, t in cands) < short:
            return False
        cands.sort()
        covered = 0
        freed = False
        for _, _, t in cands:
            if covered >= short:
                break
            covered += s[t]
            self.evictions += 1
            self.trace_evict(t)
            if self.d2h_done[t]:
                state[t] = _HOST
                self.used -= s[t]
                self._queue_if_due(t)
                freed = True
            else:
                if state[t] == _DEV:         # not offloaded yet: copy it out now
                    self.queue_d2h(t)
                state[t] = _EVICT
                self.pending += s[t]
        if freed:
            self.mem_sample()
        return True


__all__ = ["OnDemand"]
