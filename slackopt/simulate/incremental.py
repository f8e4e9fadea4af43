"""Incremental evaluation: plans that differ from a base plan in a few tensors, simulated
from the first task the difference can affect.

A local search scores many plans one or two decisions away from its incumbent. Until the
producer of the first changed tensor starts, such a plan's run is the incumbent's, event
for event (a run reads a tensor's decision first when its producer starts, and no H2D
starts before a forward unit ends). :class:`Incremental` runs the incumbent (the *base*
plan) once with snapshots of the compiled event loop at evenly spaced ops of the forward
prefix
(:func:`slackopt.simulate._kernel.simulate_from`) and resumes each candidate from the
last snapshot before its first changed producer. The result is equal bit for bit to a
run from t = 0 (tests/test_incremental.py checks it on random plans and changes). A
candidate that recomputes the same tensors as the base (keep and swap changes only) also
reuses the base's task list and per-task arrays (:func:`slackopt.simulate._kernel.prepare`,
about a third of a run). benchmarks/incremental_speed.py measures the evaluations per
second, full and incremental.

A cutoff (s) stops a run once its step can no longer end below it: when the next task
starts at ``now``, the step is at least ``now`` plus the durations of the tasks left
(tasks run one at a time on the compute stream), so a search that only accepts faster
plans loses nothing by stopping there (give the cutoff a relative 1e-9 above the step to
beat: that sum and a step equal to it can differ by rounding).

Barrier-free runtime only (docs/model.md, "Plan semantics under the barrier-free
runtime"); decisions are over the saved units of the lowered instance
(``instance.lowered`` when the instance has views).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from slackopt.errors import BudgetError
from slackopt.instance import Instance
from slackopt.plan import RECOMP
from slackopt.simulate import _kernel as kernel
from slackopt.simulate import kernel_inputs

OK, CUTOFF = kernel.OK, kernel.CUTOFF
SNAPSHOTS = 32
"""Snapshot rows per base run, at forward ops spaced evenly in op index."""


class Run(NamedTuple):
    """One run of the compiled evaluator (:func:`slackopt.simulate._kernel.simulate_from`).

    Attributes:
        code: :data:`OK` (feasible), :data:`CUTOFF` (stopped at the cutoff) or a failure
            code of the kernel (``FAIL_ALLOC``, ``FAIL_H2D``, ``FAIL_HOST``).
        step_s: the step time T (s) when ``code == OK``; else the time the run stopped.
        stall_fwd_s, stall_bwd_s, recompute_s: as in
            :class:`~slackopt.simulate.Evaluation` (s; partial unless OK).
        peak_bytes: the peak of device memory so far (bytes).
        fail_task: the task the run stopped at (an index of ``task_op``), -1 if OK.
        fail_head: the tensor whose H2D or D2H failed (saved position), else -1.
        short_bytes: bytes missing at a failed allocation (FAIL_ALLOC, FAIL_H2D).
        h2d_stall_s: float64 [n_saved], seconds the compute stream waited for each
            tensor's H2D copy.
        task_op, task_t: the plan's task list: the op of each task (-1 for a rebuild)
            and the rebuilt tensor (-1 for an op).
        tasks: tasks this run simulated (all of them, or those from its snapshot on, up
            to where it stopped).
    """

    code: int
    step_s: float
    stall_fwd_s: float
    stall_bwd_s: float
    recompute_s: float
    peak_bytes: int
    fail_task: int
    fail_head: int
    short_bytes: int
    h2d_stall_s: np.ndarray
    task_op: np.ndarray
    task_t: np.ndarray
    tasks: int

    @property
    def feasible(self) -> bool:
        """The plan runs under M."""
        return self.code == OK


def _snapshot_prefix(inst: Instance) -> int:
    """The last task index a snapshot may be taken at (:class:`~slackopt.simulate._kernel.
    Snapshots`): the smaller of the first backward op's index and the first op that ends
    a forward unit (``n_fwd - 1`` in a single pass); -1 when there is none."""
    bwd = np.flatnonzero(np.asarray(inst.is_bwd))
    first_bwd = int(bwd[0]) if bwd.size else int(inst.n_ops)
    ends = np.asarray(inst.saved_fwd_end_idx, dtype=np.int64)
    first_end = int(ends.min()) if ends.size else int(inst.n_ops) - 1
    return min(first_bwd, first_end, int(inst.n_ops) - 1)


class Incremental:
    """Evaluations of plans near a base plan, resumed from snapshots of the base's run.

    Args:
        instance: the instance (its lowered form is simulated: decisions are one per
            saved unit of ``instance.lowered``).
        budget_bytes: M (bytes, int >= 0).
        snapshots: snapshot rows per base run (:data:`SNAPSHOTS`).

    Attributes:
        base: the base plan's decisions (int8 [n_saved]), None before :meth:`rebase`.
        base_run: the base plan's :class:`Run`.
        runs: evaluator runs so far; ``tasks``: tasks they simulated in all.

    Raises:
        BudgetError: M outside [0, 2**62].
    """

    def __init__(self, instance: Instance, budget_bytes: int, *,
                 snapshots: int = SNAPSHOTS) -> None:
        if instance.saved_unit is not None:
            instance = instance.lowered
        M = int(budget_bytes)
        if M < 0 or M > 2**62:
            raise BudgetError(f"budget {M} B is outside [0, 2**62]")
        self.instance, self.M = instance, M
        self.inp = kernel_inputs(instance)
        self.prefix = prefix = _snapshot_prefix(instance)
        at = np.unique(np.linspace(0, prefix, max(1, int(snapshots))).astype(np.int64)) \
            if prefix >= 0 else np.zeros(0, np.int64)
        self._snaps = kernel.snapshots(at, instance.n_saved)
        self._prod = np.asarray(instance.saved_prod_idx, dtype=np.int64)
        self.base: np.ndarray | None = None
        self.base_run: Run | None = None
        self._pre = None  # the base plan's kernel.Prepared
        self.runs = 0
        self.tasks = 0
        self.listed = 0

    def _run(self, dec: np.ndarray, pre, resume: int, record: bool, cutoff: float) -> Run:
        if pre is None:  # one call: prepare and simulate
            out = kernel.simulate_from(self.inp, dec, self.M, self._snaps, resume, record,
                                       float(cutoff))
        else:
            out = kernel.simulate_prepared(self.inp, dec, self.M, pre, self._snaps, resume,
                                           record, float(cutoff))
        (code, now, sf, sb, rc, _d2h, _h2d, _ev, peak, _used, fail_task, fail_head, short,
         h2d_stall, task_op, task_t) = out
        start = int(self._snaps.at[resume]) if resume >= 0 else 0
        stop = int(task_op.shape[0]) if code == OK else int(fail_task)
        self.runs += 1
        self.tasks += max(0, stop - start)
        self.listed += int(task_op.shape[0])
        return Run(int(code), float(now), float(sf), float(sb), float(rc), int(peak),
                   int(fail_task) if code != OK else -1, int(fail_head), int(short),
                   h2d_stall, task_op, task_t, max(0, stop - start))

    def _check(self, dec: np.ndarray) -> np.ndarray:
        if not (isinstance(dec, np.ndarray) and dec.dtype == np.int8
                and dec.flags.c_contiguous):
            dec = np.ascontiguousarray(dec, dtype=np.int8)
        if dec.shape != self._prod.shape:
            raise ValueError(f"expected {self._prod.size} decisions, got shape {dec.shape}")
        return dec

    def _changed(self, dec: np.ndarray, changed: np.ndarray | None) -> np.ndarray | None:
        """The positions where `dec` differs from the base (`changed` when given), None
        without a base."""
        if self.base is None:
            return None
        if changed is None:
            return np.flatnonzero(dec != self.base)
        return np.asarray(changed, dtype=np.int64)

    def _same_rebuilds(self, dec: np.ndarray, changed: np.ndarray | None) -> bool:
        """Whether `dec` recomputes the same tensors as the base (its task arrays apply)."""
        if changed is None or self._pre is None:
            return False
        base = self.base
        return all((dec[t] == RECOMP) == (base[t] == RECOMP) for t in changed.tolist())

    def _resume_row(self, changed: np.ndarray | None) -> int:
        """The last snapshot row taken before the first changed tensor's producer, or -1."""
        if changed is None:
            return -1
        if len(changed) == 0:
            first = self.prefix + 1
        else:
            first = int(self._prod[changed].min())
        j = int(np.searchsorted(self._snaps.at, first, side="right")) - 1
        while j >= 0 and not self._snaps.taken[j]:
            j -= 1
        return j

    def rebase(self, decisions: np.ndarray, changed: np.ndarray | None = None) -> Run:
        """Make `decisions` the base plan: run it, recording its snapshots (resumed from
        the current base's when `changed`, the positions where they differ, or the
        difference itself allows). Returns its :class:`Run`."""
        dec = self._check(decisions).copy()
        ch = self._changed(dec, changed)
        pre = self._pre if self._same_rebuilds(dec, ch) else kernel.prepare(self.inp, dec)
        run = self._run(dec, pre, self._resume_row(ch), True, np.inf)
        self.base, self.base_run, self._pre = dec, run, pre
        return run

    def evaluate(self, decisions: np.ndarray, changed: np.ndarray | None = None,
                 cutoff: float = np.inf) -> Run:
        """Simulate `decisions` under M, from the base run's last snapshot before the
        first tensor where they differ from the base plan (from t = 0 without a base).

        Args:
            decisions: int8 [n_saved] (KEEP/SWAP/RECOMP).
            changed: the saved positions where `decisions` differs from the base plan
                (a superset is fine), or None to compare them here.
            cutoff: stop once the step cannot end at or below this time (s); the
                :class:`Run` then has code :data:`CUTOFF`.

        Returns:
            The :class:`Run`, equal bit for bit to a run from t = 0 when it is OK.
        """
        dec = self._check(decisions)
        ch = self._changed(dec, changed)
        pre = self._pre if self._same_rebuilds(dec, ch) else None
        return self._run(dec, pre, self._resume_row(ch), False, cutoff)


__all__ = ["Incremental", "Run", "OK", "CUTOFF", "SNAPSHOTS"]
