"""The problem representation: one profiled training iteration.

An :class:`Instance` holds the operators of one iteration in execution order (the forward
pass, then the backward pass, then any rebuild-only operators), every tensor with its
producer and readers, recompute recipes, and the host link. From these it derives, in the
notation of the SlackSwap paper (section 3.1), numpy arrays over the *saved* tensors (read
by at least one backward op), in production order:

- ``s``   size (bytes, int64)
- ``r``   production time: end of the producer in the ideal schedule (s)
- ``d``   first backward use: start of the first backward reader (s)
- ``c``   rebuild time: sum of the recipe's op durations (s), ``inf`` if not rebuildable
- ``rho`` ``c / s`` (s/B), ``inf`` for zero-byte or unrebuildable tensors

and the keep-all peak ``P`` (bytes) and the ideal step time ``ideal_time_s`` (T*).
Semantics: ../shared/spec/semantics.md ("Instance"). Lifetimes used for the memory profile:
a tensor is allocated when its producer starts and, unless a plan frees it earlier, freed
when its last reader ends; an op's workspace is held while it runs.

Ops with phase ``"rebuild"`` are not part of the schedule: they exist only to be re-run by
recipes (for example regenerating a dropout mask from its RNG state, which is cheaper
than re-running the dropout).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from slackopt.errors import InstanceError
from slackopt.hardware import Link

PHASES = ("fwd", "bwd", "rebuild")
MAX_BYTES = 2**53
"""Largest size (bytes) of one tensor, workspace or transient: exact in float64 copies."""
MAX_DURATION_S = 1e9
"""Largest duration (s) of one op: keeps every sum of times finite."""


@dataclass(frozen=True, slots=True)
class Op:
    """One operator (kernel) of the iteration.

    Attributes:
        name: unique name.
        phase: "fwd", "bwd", or "rebuild" (only re-run by recipes, never scheduled).
        duration_s: run time on the compute stream (s), finite and >= 0.
        layer: block index (0-based) or -1 outside the repeated blocks.
        kind: operator class ("gemm", "attention", "layernorm", "dropout", ...).
        workspace_bytes: scratch memory held while the op runs (bytes).
        flops: floating-point operations (for intensity I; 0 if unknown).
        never_recompute: collectives, data-dependent shapes: any recipe through it is invalid.
        random: draws random numbers (dropout): rebuilt only from saved RNG state.
    """

    name: str
    phase: str
    duration_s: float
    layer: int = -1
    kind: str = "other"
    workspace_bytes: int = 0
    flops: float = 0.0
    never_recompute: bool = False
    random: bool = False


@dataclass(frozen=True, slots=True)
class Recipe:
    """How to rebuild a dropped tensor.

    Attributes:
        ops: names of the ops re-run, in order (phase "fwd" or "rebuild").
        inputs: saved tensors the re-run reads; they must be resident (a recomp input is
            rebuilt first, a swapped input is fetched first).
        transient_bytes: intermediates held while the rebuild runs (bytes).
    """

    ops: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    transient_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor of the iteration.

    Attributes:
        name: unique name.
        size_bytes: bytes, >= 0.
        producer: name of the scheduled op that produces it.
        readers: names of the scheduled ops that read it (forward and backward).
        recipe: how to rebuild it, or None if it cannot be rebuilt (c = inf).
        category: tensor class ("block_input", "qkv", "mask", "grad", ...).
    """

    name: str
    size_bytes: int
    producer: str
    readers: tuple[str, ...] = ()
    recipe: Recipe | None = None
    category: str = "other"


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _is_size(x: Any) -> bool:
    return _is_int(x) and 0 <= x <= MAX_BYTES


def _is_name(x: Any) -> bool:
    return isinstance(x, str) and bool(x) and x.isprintable()


def _names(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and all(isinstance(v, str) for v in x)


class Instance:
    """One profiled training iteration under one host link. Immutable once built.

    Args:
        name: a label.
        ops: operators; scheduled ones ("fwd" then "bwd") in execution order, then any
            "rebuild" ops.
        tensors: every tensor (saved, temporaries, gradients).
        link: the host link (bandwidth per direction, duplex factor, copy latency).
        meta: provenance (generator name and parameters); stored, never interpreted.

    Raises:
        InstanceError: naming the op or tensor, if the instance is malformed: duplicate
            names, a phase out of order, a negative or non-finite size or duration, a
            reference that does not resolve, a reader not after its producer, a cycle,
            a recipe that reads an unsaved tensor or runs a backward op.

    Attributes (derived; arrays are read-only):
        n_ops: number of scheduled ops. ``start_s``, ``end_s``: ideal start and end of
        each scheduled op (s). ``forward_time_s`` (T_F), ``ideal_time_s`` (T*).
        ``saved``: tensor indices of the saved tensors in production order; ``s, r, d, c,
        rho``: arrays over them; ``P``: keep-all peak (bytes); ``A``: saved bytes.
    """

    def __init__(
        self,
        name: str,
        ops: Sequence[Op],
        tensors: Sequence[Tensor],
        link: Link,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = str(name)
        self.ops: tuple[Op, ...] = tuple(ops)
        self.tensors: tuple[Tensor, ...] = tuple(tensors)
        self.link = link
        self.meta: dict[str, Any] = dict(meta or {})
        self._validate_and_index()

    # ------------------------------------------------------------------ building
    def _validate_and_index(self) -> None:
        ops, tensors = self.ops, self.tensors
        link = self.link
        if not (_is_real(link.bytes_per_s) and math.isfinite(link.bytes_per_s)
                and link.bytes_per_s > 0):
            raise InstanceError(f"link '{link.name}': bandwidth must be a finite number > 0 B/s")
        if not (_is_real(link.duplex_factor) and 0 < link.duplex_factor <= 1):
            raise InstanceError(f"link '{link.name}': duplex_factor must be in (0, 1]")
        if not (_is_real(link.copy_latency_s) and math.isfinite(link.copy_latency_s)
                and link.copy_latency_s >= 0):
            raise InstanceError(f"link '{link.name}': copy_latency_s must be finite and >= 0")

        op_index: dict[str, int] = {}
        last_phase = 0
        n_sched = 0
        for i, op in enumerate(ops):
            if not _is_name(op.name):
                raise InstanceError(f"op #{i}: name must be a non-empty printable string, "
                                    f"got {op.name!r}")
            if op.name in op_index:
                raise InstanceError(f"op '{op.name}': duplicate op name")
            if op.phase not in PHASES:
                raise InstanceError(
                    f"op '{op.name}': phase '{op.phase}' is not one of {', '.join(PHASES)}")
            ph = PHASES.index(op.phase)
            if ph < last_phase:
                raise InstanceError(
                    f"op '{op.name}': phase '{op.phase}' after a '{PHASES[last_phase]}' op; "
                    "ops must be all forward, then all backward, then rebuild-only ops")
            last_phase = ph
            if not (_is_real(op.duration_s) and math.isfinite(op.duration_s)
                    and 0 <= op.duration_s <= MAX_DURATION_S):
                raise InstanceError(
                    f"op '{op.name}': duration_s must be finite, >= 0 and <= {MAX_DURATION_S:g}"
                    f" s, got {op.duration_s!r}")
            if not _is_size(op.workspace_bytes):
                raise InstanceError(
                    f"op '{op.name}': workspace_bytes must be an integer in [0, 2**53], "
                    f"got {op.workspace_bytes!r}")
            if not (_is_real(op.flops) and math.isfinite(op.flops) and op.flops >= 0):
                raise InstanceError(f"op '{op.name}': flops must be finite and >= 0")
            op_index[op.name] = i
            if op.phase != "rebuild":
                n_sched += 1
        self._op_index = op_index
        self.n_ops = n_sched

        t_index: dict[str, int] = {}
        for j, t in enumerate(tensors):
            if not _is_name(t.name):
                raise InstanceError(f"tensor #{j}: name must be a non-empty printable string, "
                                    f"got {t.name!r}")
            if t.name in t_index:
                raise InstanceError(f"tensor '{t.name}': duplicate tensor name")
            t_index[t.name] = j
            if not _is_size(t.size_bytes):
                raise InstanceError(
                    f"tensor '{t.name}': size_bytes must be an integer in [0, 2**53], "
                    f"got {t.size_bytes!r}")
            if not _names(t.readers):
                raise InstanceError(
                    f"tensor '{t.name}': readers must be a list of op names, got {t.readers!r}")
            if t.recipe is not None and not (_names(t.recipe.ops) and _names(t.recipe.inputs)):
                raise InstanceError(
                    f"tensor '{t.name}': recipe ops and inputs must be lists of names")
            p = op_index.get(t.producer)
            if p is None:
                raise InstanceError(f"tensor '{t.name}': producer op '{t.producer}' does not exist")
            if p >= n_sched:
                raise InstanceError(
                    f"tensor '{t.name}': producer '{t.producer}' is a rebuild-only op; "
                    "a tensor must be produced by a scheduled op")
            seen = set()
            for rd in t.readers:
                q = op_index.get(rd)
                if q is None:
                    raise InstanceError(f"tensor '{t.name}': reader op '{rd}' does not exist")
                if q >= n_sched:
                    raise InstanceError(
                        f"tensor '{t.name}': reader '{rd}' is a rebuild-only op; list it in "
                        "the recipe of the tensor it rebuilds instead")
                if q <= p:
                    raise InstanceError(
                        f"tensor '{t.name}': reader '{rd}' runs before or at its producer "
                        f"'{t.producer}'; readers must come after the producer")
                if rd in seen:
                    raise InstanceError(f"tensor '{t.name}': reader '{rd}' listed twice")
                seen.add(rd)
        self._t_index = t_index
        total = sum(int(t.size_bytes) for t in tensors) + sum(int(op.workspace_bytes)
                                                               for op in ops)
        if total > 2**62:
            raise InstanceError(f"the tensors and workspaces add up to {total} B, more than "
                                "2**62 B; sizes are bytes, not bits or elements")

        # Directed acyclic graph over scheduled ops (edges producer -> reader).
        g = nx.DiGraph()
        for op in ops[:n_sched]:
            g.add_node(op.name, phase=op.phase, layer=op.layer, kind=op.kind,
                       duration_s=op.duration_s)
        for t in tensors:
            for rd in t.readers:
                if g.has_edge(t.producer, rd):
                    g.edges[t.producer, rd]["tensors"].append(t.name)
                else:
                    g.add_edge(t.producer, rd, tensors=[t.name])
        # Readers come after producers in the schedule, so the graph is acyclic by
        # construction; the check guards that invariant against future edits.
        if not nx.is_directed_acyclic_graph(g):  # pragma: no cover - implied above
            cyc = nx.find_cycle(g)
            raise InstanceError(f"op graph has a cycle through {cyc}")
        self._graph = g

        # Ideal schedule.
        dur = np.array([op.duration_s for op in ops[:n_sched]], dtype=np.float64)
        end = np.cumsum(dur)
        start = end - dur
        self.durations_s = dur
        self.start_s, self.end_s = start, end
        phases = np.array([op.phase == "bwd" for op in ops[:n_sched]], dtype=bool)
        self.is_bwd = phases
        n_fwd = int(np.count_nonzero(~phases))
        self.n_fwd = n_fwd
        self.forward_time_s = float(end[n_fwd - 1]) if n_fwd else 0.0
        self.ideal_time_s = float(end[-1]) if n_sched else 0.0

        # Per-tensor schedule indices.
        nt = len(tensors)
        prod = np.empty(nt, dtype=np.int64)
        last = np.empty(nt, dtype=np.int64)
        last_fwd = np.empty(nt, dtype=np.int64)
        first_bwd = np.full(nt, -1, dtype=np.int64)
        last_bwd = np.full(nt, -1, dtype=np.int64)
        size = np.empty(nt, dtype=np.int64)
        reader_idx: list[np.ndarray] = []
        for j, t in enumerate(tensors):
            p = op_index[t.producer]
            rs = np.array(sorted(op_index[x] for x in t.readers), dtype=np.int64)
            reader_idx.append(rs)
            prod[j] = p
            size[j] = t.size_bytes
            last[j] = rs[-1] if rs.size else p
            fw = rs[rs < n_fwd]
            bw = rs[rs >= n_fwd]
            last_fwd[j] = fw[-1] if fw.size else p
            if bw.size:
                first_bwd[j], last_bwd[j] = bw[0], bw[-1]
        self.tensor_producer_idx = prod
        self.tensor_last_reader_idx = last
        self.tensor_size = size
        self._reader_idx = reader_idx

        saved_mask = (first_bwd >= 0) & (prod < n_fwd)
        saved = np.flatnonzero(saved_mask)
        saved = saved[np.argsort(prod[saved], kind="stable")]
        self.saved = saved
        self.saved_names: tuple[str, ...] = tuple(tensors[j].name for j in saved)
        self._saved_pos = {name: k for k, name in enumerate(self.saved_names)}
        self.is_saved = saved_mask

        # Recipes.
        c = np.full(len(saved), np.inf)
        self.recipe_inputs: list[tuple[int, ...]] = []  # saved positions of recipe inputs
        self.recipe_ops: list[tuple[int, ...]] = []
        self.recipe_transient: np.ndarray = np.zeros(len(saved), dtype=np.int64)
        self.recipe_workspace: np.ndarray = np.zeros(len(saved), dtype=np.int64)
        for k, j in enumerate(saved):
            t = tensors[j]
            rec = t.recipe
            if rec is None:
                self.recipe_inputs.append(())
                self.recipe_ops.append(())
                continue
            if not rec.ops:
                raise InstanceError(f"tensor '{t.name}': recipe has no ops")
            idx = []
            for o in rec.ops:
                q = op_index.get(o)
                if q is None:
                    raise InstanceError(f"tensor '{t.name}': recipe op '{o}' does not exist")
                if ops[q].phase == "bwd":
                    raise InstanceError(
                        f"tensor '{t.name}': recipe op '{o}' is a backward op; recipes re-run "
                        "forward or rebuild-only ops")
                if ops[q].phase == "fwd" and q > prod[j]:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe op '{o}' runs after the producer "
                        f"'{t.producer}' in the forward pass; it cannot help rebuild it")
                idx.append(q)
            ins = []
            for x in rec.inputs:
                jj = t_index.get(x)
                if jj is None:
                    raise InstanceError(f"tensor '{t.name}': recipe input '{x}' does not exist")
                if x == t.name:
                    raise InstanceError(f"tensor '{t.name}': recipe reads the tensor it rebuilds")
                if not saved_mask[jj]:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe input '{x}' is not a saved tensor, so it "
                        "is gone by the backward pass; rebuild from saved tensors only")
                if prod[jj] > prod[j]:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe input '{x}' is produced after it")
                ins.append(self._saved_pos[x])
            if not _is_size(rec.transient_bytes):
                raise InstanceError(
                    f"tensor '{t.name}': recipe transient_bytes must be an integer in [0, 2**53]")
            self.recipe_inputs.append(tuple(ins))
            self.recipe_ops.append(tuple(idx))
            self.recipe_transient[k] = rec.transient_bytes
            self.recipe_workspace[k] = max(ops[q].workspace_bytes for q in idx)
            if not any(ops[q].never_recompute for q in idx):
                c[k] = float(sum(ops[q].duration_s for q in idx))
        # A recipe whose inputs chain back to an unrebuildable-through-recipe cycle cannot
        # happen: inputs are produced no later than the tensor, and a tensor cannot read
        # itself; equal production (two outputs of one op) is acyclic unless mutual.
        self._check_recipe_cycles()

        sv = saved
        self.s = size[sv].copy()
        self.r = end[prod[sv]] if sv.size else np.zeros(0)
        self.d = start[first_bwd[sv]] if sv.size else np.zeros(0)
        self.c = c
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(self.s > 0, c / np.maximum(self.s, 1), np.inf)
        self.rho = rho
        self.saved_prod_idx = prod[sv]
        self.saved_last_fwd_idx = last_fwd[sv]
        self.saved_first_bwd_idx = first_bwd[sv]
        self.saved_last_bwd_idx = last_bwd[sv]
        self.saved_reader_idx = [reader_idx[j] for j in sv]
        for arr in (self.s, self.r, self.d, self.c, self.rho, self.durations_s, self.start_s,
                    self.end_s, self.saved, self.tensor_size, self.tensor_producer_idx,
                    self.tensor_last_reader_idx, self.is_bwd, self.is_saved, self.recipe_transient,
                    self.recipe_workspace, self.saved_prod_idx, self.saved_last_fwd_idx,
                    self.saved_first_bwd_idx, self.saved_last_bwd_idx):
            arr.flags.writeable = False

        # Memory profile of everything that is not a saved tensor (plan-independent):
        # non-saved tensors from producer start to last reader end, plus workspaces.
        delta = np.zeros(n_sched + 1, dtype=np.int64)
        ns = np.flatnonzero(~saved_mask)
        np.add.at(delta, prod[ns], size[ns])
        np.add.at(delta, last[ns] + 1, -size[ns])
        static = np.cumsum(delta[:-1])
        self.static_alloc = np.zeros(n_sched, dtype=np.int64)
        np.add.at(self.static_alloc, prod[ns], size[ns])
        self.static_free = np.zeros(n_sched, dtype=np.int64)
        np.add.at(self.static_free, last[ns], size[ns])
        ws = np.array([op.workspace_bytes for op in ops[:n_sched]], dtype=np.int64)
        self.workspace = ws
        self.static_profile = static + ws
        for arr in (self.static_alloc, self.static_free, self.workspace, self.static_profile):
            arr.flags.writeable = False

        # Keep-all profile and peak.
        kd = np.zeros(n_sched + 1, dtype=np.int64)
        np.add.at(kd, prod[sv], size[sv])
        np.add.at(kd, last[sv] + 1, -size[sv])
        keep_prof = self.static_profile + np.cumsum(kd[:-1])
        keep_prof.flags.writeable = False
        self.keep_all_profile = keep_prof
        self.P = int(keep_prof.max()) if n_sched else 0
        self.A = int(self.s.sum())

    def _check_recipe_cycles(self) -> None:
        g = nx.DiGraph()
        for k, ins in enumerate(self.recipe_inputs):
            for i in ins:
                g.add_edge(k, i)
        if not nx.is_directed_acyclic_graph(g):
            cyc = nx.find_cycle(g)
            names = " -> ".join(self.saved_names[a] for a, _ in cyc)
            raise InstanceError(f"recipes rebuild each other in a cycle: {names}")

    # ------------------------------------------------------------------ access
    @property
    def graph(self) -> nx.DiGraph:
        """The operator graph over scheduled ops (edge attribute ``tensors``). Do not mutate."""
        return self._graph

    @property
    def scheduled_ops(self) -> tuple[Op, ...]:
        """Scheduled ops (forward then backward) in execution order."""
        return self.ops[: self.n_ops]

    def op_index(self, name: str) -> int:
        """Index of op `name` in ``ops``; raises KeyError."""
        return self._op_index[name]

    def tensor(self, name: str) -> Tensor:
        """The tensor called `name`; raises KeyError."""
        return self.tensors[self._t_index[name]]

    def saved_position(self, name: str) -> int:
        """Position of saved tensor `name` in the saved arrays; raises KeyError."""
        return self._saved_pos[name]

    @property
    def n_saved(self) -> int:
        return len(self.saved)

    @cached_property
    def saved_categories(self) -> tuple[str, ...]:
        """Category of each saved tensor."""
        return tuple(self.tensors[j].category for j in self.saved)

    @cached_property
    def saved_layers(self) -> np.ndarray:
        """Layer (block) of each saved tensor's producer, -1 outside blocks."""
        a = np.array([self.ops[p].layer for p in self.saved_prod_idx], dtype=np.int64)
        a.flags.writeable = False
        return a

    @cached_property
    def forward_flops(self) -> float:
        """Sum of forward-op FLOPs."""
        return float(sum(op.flops for op in self.ops[: self.n_fwd]))

    def summary(self) -> dict[str, Any]:
        """Plain-number summary: counts, A, P (bytes), T_F and T* (s)."""
        return {
            "name": self.name,
            "ops": self.n_ops,
            "tensors": len(self.tensors),
            "saved_tensors": self.n_saved,
            "saved_bytes": self.A,
            "peak_bytes": self.P,
            "forward_time_s": self.forward_time_s,
            "ideal_time_s": self.ideal_time_s,
            "link": self.link.name,
            "link_bytes_per_s": self.link.bytes_per_s,
        }

    def __repr__(self) -> str:
        return (f"Instance({self.name!r}, ops={self.n_ops}, saved={self.n_saved}, "
                f"A={self.A / 1e9:.3g} GB, P={self.P / 1e9:.3g} GB, "
                f"T*={self.ideal_time_s * 1e3:.4g} ms)")


def budget_bytes(instance: Instance, budget: float | int | str) -> int:
    """Turn a budget into bytes.

    Args:
        instance: gives P for fractional budgets.
        budget: a float in [0, 10] is a fraction of P; an int is bytes; a string is a
            fraction ("0.5") or a size with a unit: "11.5GB", "800MB", "1.2e9B", "12GiB"
            (decimal units KB/MB/GB/TB, binary KiB/MiB/GiB/TiB, "B" for bytes).

    Returns:
        The budget M in bytes (int, >= 0).

    Raises:
        BudgetError: if the budget is negative, not finite or cannot be parsed.
    """
    from slackopt.errors import BudgetError

    units = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
             "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
    if isinstance(budget, str):
        txt = budget.strip().lower().replace(" ", "")
        num, unit = txt, ""
        for u in sorted(units, key=len, reverse=True):
            if txt.endswith(u) and txt[: -len(u)]:
                num, unit = txt[: -len(u)], u
                break
        try:
            value = float(num)
        except ValueError:
            raise BudgetError(
                f"budget '{budget}' is neither a fraction of P (0.5) nor a size (11.5GB)"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise BudgetError(f"budget '{budget}' must be finite and >= 0")
        if unit:
            return _checked(int(round(value * units[unit])), budget)
        if value > MAX_FRACTION:
            raise BudgetError(
                f"budget '{budget}' has no unit: as a fraction of P it must be <= "
                f"{MAX_FRACTION:g}; for bytes write a unit ('{budget}B', '{budget}GB')")
        return int(math.floor(value * instance.P))
    if isinstance(budget, bool) or not _is_real(budget):
        raise BudgetError(f"budget {budget!r} must be a number or a size string like '11.5GB'")
    if not math.isfinite(budget) or budget < 0:
        raise BudgetError(f"budget {budget!r} must be finite and >= 0")
    if isinstance(budget, (float, np.floating)):
        if budget > MAX_FRACTION:
            raise BudgetError(f"budget {budget!r} as a fraction of P must be <= "
                              f"{MAX_FRACTION:g}; give bytes as an int or a size string")
        return int(math.floor(budget * instance.P))
    return _checked(int(budget), budget)


def _checked(m: int, budget: Any) -> int:
    from slackopt.errors import BudgetError

    if m > 2**62:
        raise BudgetError(f"budget {budget!r} is more than 2**62 B; no device has that much")
    return m


MAX_FRACTION = 10.0
"""Largest budget accepted as a fraction of P."""


__all__ = ["Op", "Recipe", "Tensor", "Instance", "budget_bytes", "PHASES"]
