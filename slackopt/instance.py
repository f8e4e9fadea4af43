"""The problem representation: one profiled training iteration.

An :class:`Instance` holds the operators of one iteration in execution order (the forward
pass, then the backward pass, then any rebuild-only operators), every tensor with its
producer and readers, recompute recipes, and the host link. From these it derives, in the
notation of the SlackSwap paper (section 3.1), numpy arrays over the *saved* tensors (read
by at least one backward op), in production order:

- ``s``   size (bytes, int64)
- ``r``   production time: end of the producer in the ideal schedule (s); for a tensor
          mutated in place later in the forward pass, end of its last mutating op
- ``d``   first backward use: start of the first backward reader (s)
- ``c``   rebuild time: sum of the recipe's op durations (s), ``inf`` if not rebuildable
- ``rho`` ``c / s`` (s/B), ``inf`` for zero-byte or unrebuildable tensors

and the keep-all peak ``P`` (bytes) and the ideal step time ``ideal_time_s`` (T*).
Semantics: docs/model.md ("Instance"). Lifetimes used for the memory profile:
a tensor is allocated when its producer starts and, unless a plan frees it earlier, freed
when its last reader ends; an op's workspace is held while it runs.

Ops with phase ``"rebuild"`` are not part of the schedule: they exist only to be re-run by
recipes (for example regenerating a dropout mask from its RNG state, which is cheaper
than re-running the dropout).

Extensions of docs/model.md ("Instance") that real training steps need:

- **Storage aliasing** (``Tensor.storage``). Several tensors may be views of one storage
  (a tensor and its transpose, a slice of a buffer). Memory is counted once per storage,
  one D2H and one H2D move the storage's bytes once, and freeing or offloading a view
  frees or moves the whole storage (the base's ``size_bytes``, not the view's elements),
  also when the base itself is not saved. Each view keeps its own name, readers and
  decision slot in plans, but all saved views of one storage must get the same decision
  (:meth:`slackopt.plan.Plan.check` rejects a plan that splits them, naming both views
  and both decisions). Implemented by *lowering*: :attr:`Instance.lowered` merges every
  storage group into its base tensor (size = storage bytes, producer = the base's,
  readers = the union of the group's readers, ``mutated_by`` = the union, recipe = the
  one recipe the group's members declare, or none if they declare different ones); the
  evaluator and :func:`slackopt.solve` work on the lowered instance and map plans between
  the two (:meth:`~slackopt.plan.Plan.lowered`, :meth:`~slackopt.plan.Plan.from_lowered`).
  A recipe in a storage group rebuilds the storage, so its ops run no later than the
  base's producer. An instance without views is its own lowered instance.
- **RNG capture** (``rng_capture``, default True). Random ops (``Op.random``, dropout) are
  rebuilt only by regenerating from saved RNG state (an 8-byte ``rng_state`` tensor that
  is counted like any tensor). When the instance says RNG capture is unsupported
  (``rng_capture=False``), every recipe that runs a random op, an RNG-regeneration op
  (kind ``"rng_regen"``) or reads an ``rng_state`` tensor is invalid: c = inf, no solver
  can recompute the tensor and the evaluator rejects a plan that does.
- **In-place mutation** (``Tensor.mutated_by``). Chosen behaviour: the validator *rejects*
  a recipe that would rebuild the pre-mutation value (it lacks a mutating op) with an
  InstanceError naming the tensor, the op and the fix; a recipe that lists the mutating
  ops (which run after the producer, an exception to the recipe-order rule) is valid.
  A swap copies the final value: the tensor is *ready* (``saved_ready_idx``, and r) at
  the end of its last mutating op, and its D2H is queued then, not when its producer
  ends (the device copy is allocated at the producer's start as usual).
- **Host pinned-memory limit** (``host_memory_bytes``, None = unlimited). A swapped
  storage occupies host memory from the start of its D2H until its last backward reader
  ends (or its D2H ends, if later). A D2H that would raise host occupancy above the limit
  makes the evaluation infeasible, with a failure naming the tensor, the host bytes in
  use and the limit (both evaluation engines, bit for bit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from slackopt._instance_checks import (
    MAX_BYTES,
    MAX_DURATION_S,
    MIN_BANDWIDTH,
    PHASES,
    RNG_REGEN_KIND,
    RNG_STATE_CATEGORY,
    TensorIndex,
    check_link,
    check_ops,
    check_recipes,
    check_storage_and_mutation,
    check_tensors,
    check_total,
    check_units,
    is_int,
    is_real,
)
from slackopt.errors import InstanceError
from slackopt.hardware import Link
from slackopt.records import Op, Recipe, Tensor, UnitSpan


class Instance:
    """One profiled training iteration under one host link. Immutable once built.

    Args:
        name: a label.
        ops: operators; scheduled ones ("fwd" then "bwd") in execution order, then any
            "rebuild" ops.
        tensors: every tensor (saved, temporaries, gradients).
        link: the host link (bandwidth per direction, duplex factor, copy latency).
        meta: provenance (generator name and parameters); stored, never interpreted.
        rng_capture: False if RNG state cannot be saved and replayed: every recipe
            through a random op is invalid (c = inf). See the module docstring.
        host_memory_bytes: host pinned-memory limit for swapped storages (bytes, int in
            [0, 2**62]), or None for unlimited.
        units: the units of a pipeline stage's schedule (:class:`UnitSpan`, in order),
            which span the scheduled ops one after the other; forward and backward ops
            may then interleave (docs/model.md, "A pipeline stage"). None: one forward
            unit and one backward unit without idle time, the one-microbatch step.

    Raises:
        InstanceError: naming the op or tensor, and carrying the field (a path into these
            arguments, ``tensors[12].size_bytes``) and the fix, if the instance is
            malformed: duplicate names, a phase out of order, a negative or non-finite size
            or duration, a reference that does not resolve, a reader not after its
            producer, a cycle, a recipe that reads an unsaved tensor or runs a backward op,
            a recipe that misses an op that mutates its tensor in place, a view of a view or
            of a missing tensor, storage groups whose merged recipe is invalid, a bad
            ``host_memory_bytes``.

    Attributes (derived; arrays are read-only):
        n_ops: number of scheduled ops. ``start_s``, ``end_s``: ideal start and end of
        each scheduled op (s). ``forward_time_s`` (T_F), ``ideal_time_s`` (T*).
        ``saved``: tensor indices of the saved tensors in production order; ``s, r, d, c,
        rho``: arrays over them; ``P``: keep-all peak (bytes); ``A``: saved bytes.
        With views (``aliased`` True) the per-saved-tensor arrays describe each view by
        its own fields, while ``P``, ``A`` and ``keep_all_profile`` count each storage
        once (they are those of :attr:`lowered`); ``saved_unit`` maps each saved
        position to its storage's saved position in :attr:`lowered`.
    """

    def __init__(
        self,
        name: str,
        ops: Sequence[Op],
        tensors: Sequence[Tensor],
        link: Link,
        meta: Mapping[str, Any] | None = None,
        *,
        rng_capture: bool = True,
        host_memory_bytes: int | None = None,
        units: Sequence[UnitSpan] | None = None,
    ) -> None:
        self.name = str(name)
        self.ops: tuple[Op, ...] = tuple(ops)
        self.tensors: tuple[Tensor, ...] = tuple(tensors)
        self.link = link
        self.meta: dict[str, Any] = dict(meta or {})
        if not isinstance(rng_capture, (bool, np.bool_)):
            raise InstanceError(f"rng_capture must be true or false, got {rng_capture!r}",
                                "rng_capture", "write true or false")
        self.rng_capture = bool(rng_capture)
        if host_memory_bytes is not None and not (is_int(host_memory_bytes)
                                                  and 0 <= host_memory_bytes <= 2**62):
            raise InstanceError(f"host_memory_bytes must be null (unlimited) or an integer "
                                f"number of bytes in [0, 2**62], got {host_memory_bytes!r}",
                                "host_memory_bytes",
                                "use null (unlimited) or a whole number of bytes >= 0")
        self.host_memory_bytes: int | None = (None if host_memory_bytes is None
                                              else int(host_memory_bytes))
        self._lowered: Instance | None = None
        self.saved_unit: np.ndarray | None = None
        self._units_given = None if units is None else tuple(units)
        self._validate_and_index()
        if self._any_view:
            self._lower()

    # ------------------------------------------------------------------ building
    def _validate_and_index(self) -> None:
        """Check the instance, each rule once (:mod:`slackopt._instance_checks`), in the
        order a reader meets the fields (link, ops, tensors, views and in-place
        mutation, recipes), and derive its arrays; raises InstanceError."""
        ops, tensors = self.ops, self.tensors
        check_link(self.link)
        self._op_index, ph = check_ops(ops, interleaved=self._units_given is not None)
        self.n_ops = n_sched = int(np.count_nonzero(ph < 2))
        if self._units_given is not None:
            op_unit = check_units(self._units_given, ph)
            self.units = self._units_given
        else:
            n_f = int(np.count_nonzero(ph == 0))
            self.units = tuple(UnitSpan(k, n) for k, n in (("F", n_f), ("B", n_sched - n_f))
                               if n)
            op_unit = np.repeat(np.arange(len(self.units), dtype=np.int64),
                                [u.n_ops for u in self.units])
        ti = check_tensors(tensors, self._op_index, n_sched)
        self._t_index = ti.index
        # views and in-place mutation (list.count finds whether any, in C)
        self._any_view = [t.storage for t in tensors].count(None) != len(tensors)
        self._any_mutated = [t.mutated_by for t in tensors].count(()) != len(tensors)
        if self._any_view or self._any_mutated:
            check_storage_and_mutation(tensors, ops, self._op_index, ti.index)
        check_total(tensors, ops)
        # The op graph (producer -> reader) is acyclic by construction: every reader was
        # checked to run after its producer. It is built on first use (self.graph).
        self._graph: nx.DiGraph | None = None
        self._index_schedule(ph[:n_sched] == 1, op_unit)
        per_tensor = self._index_tensors(ti)
        rec = check_recipes(tensors, ops, self.saved, ti.prod, self.is_saved, self._op_index,
                            ti.index, ph, self.rng_capture)
        self.recipe_ops, self.recipe_inputs = rec.ops, rec.inputs
        self.recipe_transient, self.recipe_workspace = rec.transient, rec.workspace
        self._blockers = rec.blockers
        # Inputs are produced no later than the tensor they rebuild, and a tensor cannot
        # read itself; recipes of tensors of one producer may still read each other.
        self._check_recipe_cycles(ti.prod[self.saved])
        self._derive_saved(rec.c, *per_tensor)
        self._derive_profiles()

    def _index_schedule(self, is_bwd: np.ndarray, op_unit: np.ndarray) -> None:
        """The ideal schedule of the scheduled ops (`is_bwd`: which are backward ops;
        `op_unit`: the unit of each): ops back to back, each unit from the later of the
        previous unit's end and its earliest start."""
        n_sched = len(is_bwd)
        dur = np.array([op.duration_s for op in self.ops[:n_sched]], dtype=np.float64)
        units = self.units
        earliest = np.array([u.earliest_start_s for u in units], dtype=np.float64)
        if self._units_given is None:
            end = np.cumsum(dur)
        else:  # each unit continues the running sum from its start (no idle: bit for bit)
            end = np.empty(n_sched)
            prev, at = 0.0, 0
            for u, e in zip(units, earliest.tolist(), strict=True):
                seg = np.concatenate(([max(prev, e)], dur[at:at + u.n_ops]))
                end[at:at + u.n_ops] = np.cumsum(seg)[1:]
                at += u.n_ops
                prev = float(end[at - 1])
        self.durations_s = dur
        self.start_s, self.end_s = end - dur, end
        self.is_bwd = is_bwd
        self.n_fwd = int(np.count_nonzero(~is_bwd))
        fwd = np.flatnonzero(~is_bwd)
        self.forward_time_s = float(end[fwd[-1]]) if fwd.size else 0.0
        self.ideal_time_s = float(end[-1]) if n_sched else 0.0
        self.op_unit = op_unit
        self.op_earliest_s = earliest[op_unit]
        sizes = np.array([u.n_ops for u in units], dtype=np.int64)
        self.unit_last_op = np.cumsum(sizes) - 1
        # One forward pass, then one backward pass, without idle time: the step every
        # single-microbatch rule (and bound) of the model is stated for.
        self.single_pass = bool(
            not np.any(is_bwd[:-1] & ~is_bwd[1:])
            and np.all(earliest <= np.concatenate(([0.0], end[self.unit_last_op[:-1]]))))
        for arr in (op_unit, self.op_earliest_s, self.unit_last_op):
            arr.flags.writeable = False

    def _index_tensors(self, ti: TensorIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        list[np.ndarray]]:
        """Per-tensor schedule positions and the saved tensors (production order).

        Returns:
            (last forward use, first and last backward use (-1: none), reader indices in
            schedule order) per tensor.
        """
        tensors, is_bwd = self.tensors, self.is_bwd
        nt = len(tensors)
        prod, flat, counts = ti.prod, ti.flat, ti.counts
        size = np.empty(nt, dtype=np.int64)
        size[:] = [t.size_bytes for t in tensors]
        owner = np.repeat(np.arange(nt, dtype=np.int64), counts)
        order = np.lexsort((flat, owner))  # by tensor, then schedule position
        flat, owner = flat[order], owner[order]
        ends = np.cumsum(counts).tolist()
        reader_idx = [flat[a:b] for a, b in zip([0, *ends], ends, strict=False)]
        last = prod.copy()
        np.maximum.at(last, owner, flat)
        last_fwd = prod.copy()
        fw = ~is_bwd[flat]
        np.maximum.at(last_fwd, owner[fw], flat[fw])
        big = np.iinfo(np.int64).max
        fb = np.full(nt, big, dtype=np.int64)
        np.minimum.at(fb, owner[~fw], flat[~fw])
        first_bwd = np.where(fb == big, -1, fb)
        last_bwd = np.full(nt, -1, dtype=np.int64)
        np.maximum.at(last_bwd, owner[~fw], flat[~fw])
        self.tensor_producer_idx = prod
        self.tensor_last_reader_idx = last
        self.tensor_size = size
        saved_mask = (first_bwd >= 0) & ~is_bwd[prod]
        saved = np.flatnonzero(saved_mask)
        self.saved = saved[np.argsort(prod[saved], kind="stable")]
        self.saved_names: tuple[str, ...] = tuple(tensors[j].name for j in self.saved)
        self._saved_pos = {name: k for k, name in enumerate(self.saved_names)}
        self.is_saved = saved_mask
        return last_fwd, first_bwd, last_bwd, reader_idx

    def _derive_saved(self, c: np.ndarray, last_fwd: np.ndarray, first_bwd: np.ndarray,
                      last_bwd: np.ndarray, reader_idx: list[np.ndarray]) -> None:
        """s, r, d, c, rho and the schedule positions of the saved tensors (arguments: per
        tensor, from :meth:`_index_tensors`; c per saved position)."""
        sv, prod = self.saved, self.tensor_producer_idx
        # Ready: the op after which a saved tensor holds its final forward value (its
        # producer, or its last in-place mutation): r and the D2H of a swap start there.
        ready = prod[sv].copy()
        for k, j in enumerate(sv.tolist() if self._any_mutated else ()):
            for u in self.tensors[j].mutated_by:
                ready[k] = max(ready[k], self._op_index[u])
        self.saved_ready_idx = ready
        # The end of the forward unit of its microbatch (its producer's unit): no H2D of
        # the tensor starts before it (the end of the forward pass in a single pass).
        self.saved_fwd_end_idx = self.unit_last_op[self.op_unit[prod[sv]]]
        self.s = self.tensor_size[sv].copy()
        self.r = self.end_s[ready] if sv.size else np.zeros(0)
        self.d = self.start_s[first_bwd[sv]] if sv.size else np.zeros(0)
        self.c = c
        with np.errstate(divide="ignore", invalid="ignore"):
            self.rho = np.where(self.s > 0, c / np.maximum(self.s, 1), np.inf)
        self.saved_prod_idx = prod[sv]
        self.saved_last_fwd_idx = last_fwd[sv]
        self.saved_first_bwd_idx = first_bwd[sv]
        self.saved_last_bwd_idx = last_bwd[sv]
        self.saved_reader_idx = [reader_idx[j] for j in sv]
        for arr in (self.s, self.r, self.d, self.c, self.rho, self.durations_s, self.start_s,
                    self.end_s, self.saved, self.tensor_size, self.tensor_producer_idx,
                    self.tensor_last_reader_idx, self.is_bwd, self.is_saved,
                    self.recipe_transient, self.recipe_workspace, self.saved_prod_idx,
                    self.saved_ready_idx, self.saved_last_fwd_idx, self.saved_first_bwd_idx,
                    self.saved_last_bwd_idx, self.saved_fwd_end_idx):
            arr.flags.writeable = False

    def _derive_profiles(self) -> None:
        """The memory profile of everything that is not a saved tensor (plan-independent:
        non-saved tensors from producer start to last reader end, plus workspaces), the
        keep-all profile, P and A."""
        n_sched, sv = self.n_ops, self.saved
        prod, last, size = (self.tensor_producer_idx, self.tensor_last_reader_idx,
                            self.tensor_size)
        delta = np.zeros(n_sched + 1, dtype=np.int64)
        ns = np.flatnonzero(~self.is_saved)
        np.add.at(delta, prod[ns], size[ns])
        np.add.at(delta, last[ns] + 1, -size[ns])
        static = np.cumsum(delta[:-1])
        self.static_alloc = np.zeros(n_sched, dtype=np.int64)
        np.add.at(self.static_alloc, prod[ns], size[ns])
        self.static_free = np.zeros(n_sched, dtype=np.int64)
        np.add.at(self.static_free, last[ns], size[ns])
        self.workspace = np.array([op.workspace_bytes for op in self.ops[:n_sched]],
                                  dtype=np.int64)
        self.static_profile = static + self.workspace
        for arr in (self.static_alloc, self.static_free, self.workspace, self.static_profile):
            arr.flags.writeable = False
        kd = np.zeros(n_sched + 1, dtype=np.int64)
        np.add.at(kd, prod[sv], size[sv])
        np.add.at(kd, last[sv] + 1, -size[sv])
        keep_prof = self.static_profile + np.cumsum(kd[:-1])
        keep_prof.flags.writeable = False
        self.keep_all_profile = keep_prof
        self.P = int(keep_prof.max()) if n_sched else 0
        self.A = int(self.s.sum())

    def _lower(self) -> None:
        """Build :attr:`lowered` (storage groups merged into their base) and the maps."""
        groups: dict[str, list[Tensor]] = {}
        for t in self.tensors:
            if t.storage is not None:
                groups.setdefault(t.storage, []).append(t)
        merged: list[Tensor] = []
        conflicts: set[str] = set()  # storages whose views declare different recipes
        for t in self.tensors:
            if t.storage is not None:
                continue
            views = groups.get(t.name)
            if not views:
                merged.append(t)
                continue
            members = [t, *views]
            readers = sorted({r for m in members for r in m.readers}, key=self._op_index.get)
            mutated = tuple(dict.fromkeys(u for m in members for u in m.mutated_by))
            recipes = {m.recipe for m in members if m.recipe is not None}
            recipe = recipes.pop() if len(recipes) == 1 else None
            if len(recipes) > 1:
                conflicts.add(t.name)
            merged.append(Tensor(t.name, t.size_bytes, t.producer, tuple(readers), recipe,
                                 t.category, None, mutated))
        # Recipe inputs that name a view read its storage.
        base_of = {t.name: t.storage for t in self.tensors if t.storage is not None}
        merged = [m if m.recipe is None or not any(x in base_of for x in m.recipe.inputs)
                  else Tensor(m.name, m.size_bytes, m.producer, m.readers,
                              Recipe(m.recipe.ops, tuple(dict.fromkeys(
                                  base_of.get(x, x) for x in m.recipe.inputs)),
                                  m.recipe.transient_bytes),
                              m.category, None, m.mutated_by) for m in merged]
        try:
            low = Instance(self.name, self.ops, merged, self.link, self.meta,
                           rng_capture=self.rng_capture,
                           host_memory_bytes=self.host_memory_bytes,
                           units=self._units_given)
        except InstanceError as e:
            raise self._lowered_error(e, merged, groups) from None
        self._lowered = low
        self._recipe_conflicts = conflicts
        unit = np.array([low.saved_position(base_of.get(nm, nm)) for nm in self.saved_names],
                        dtype=np.int64)
        unit.flags.writeable = False
        self.saved_unit = unit
        self.P, self.A = low.P, low.A
        self.keep_all_profile = low.keep_all_profile

    def _lowered_error(self, e: InstanceError, merged: list[Tensor],
                       groups: Mapping[str, list[Tensor]]) -> InstanceError:
        """`e`, raised by the lowered instance (tensor list `merged`), with its field moved
        to this instance's tensor list, and the views named when a merged storage group
        is to blame."""
        at, _, rest = e.field.partition("]")
        if not at.startswith("tensors["):
            return e
        name = merged[int(at[len("tensors["):])].name
        field = f"tensors[{self._t_index[name]}]"
        if name in groups:  # fields of the merged tensor are not those of the file's
            views = ", ".join(f"'{v.name}'" for v in groups[name])
            problem = e.problem.removeprefix(f"tensor '{name}': ")
            return InstanceError(f"tensor '{name}': as the storage of views {views}: "
                                 f"{problem}", field,
                                 f"{e.fix}; a view's recipe rebuilds the whole storage, so "
                                 "its ops run no later than the base's producer")
        if rest.startswith(".recipe.inputs["):  # inputs naming views were merged
            rest = ".recipe.inputs"
        return InstanceError(e.problem, field + rest, e.fix)

    @property
    def scheduled_units(self) -> tuple[UnitSpan, ...] | None:
        """The units the instance was built with (a pipeline stage's schedule), or None
        for the one-microbatch step (then :attr:`units` is its F and B unit)."""
        return self._units_given

    @property
    def aliased(self) -> bool:
        """True if some tensors are views of another tensor's storage."""
        return self._lowered is not None

    @property
    def lowered(self) -> Instance:
        """The storage-level instance: every storage group merged into its base tensor
        (see the module docstring); ``self`` when no tensor is a view."""
        return self if self._lowered is None else self._lowered

    def storage_of(self, name: str) -> str:
        """Name of the storage (base tensor) tensor `name` lives in (itself if it owns
        it); raises KeyError."""
        t = self.tensor(name)
        return t.name if t.storage is None else t.storage

    def rebuild_blocker(self, name: str) -> str | None:
        """Why saved tensor `name` cannot be rebuilt (c = inf), or None if it can.

        For a view, the storage's rebuildability decides (see :attr:`lowered`).
        Raises KeyError if `name` is not a saved tensor."""
        k = self.saved_position(name)
        if self._lowered is not None:
            base = self.storage_of(name)
            why = self._lowered.rebuild_blocker(base)
            if why is not None and base in self._recipe_conflicts:
                why = f"the views of storage '{base}' declare different recipes"
            if why is not None and base != name:
                return f"its storage '{base}' cannot be rebuilt: {why}"
            return why
        if np.isfinite(self.c[k]):
            return None
        return self._blockers.get(k, "it has no recipe")

    def _check_recipe_cycles(self, prod: np.ndarray) -> None:
        # A recipe input is produced no later than the tensor it rebuilds (`prod`: producer
        # index per saved position), so a cycle can only join tensors of one producer:
        # only those edges are looked at.
        prod = prod.tolist()
        g = nx.DiGraph()
        for k, ins in enumerate(self.recipe_inputs):
            for i in ins:
                if prod[i] == prod[k]:
                    g.add_edge(k, i)
        if not nx.is_directed_acyclic_graph(g):
            cyc = nx.find_cycle(g)
            names = " -> ".join(self.saved_names[a] for a, _ in cyc)
            first = int(self.saved[cyc[0][0]])
            raise InstanceError(f"recipes rebuild each other in a cycle: {names}",
                                f"tensors[{first}].recipe.inputs",
                                "break the cycle: one of these recipes must not read the "
                                "other tensor")

    # ------------------------------------------------------------------ access
    @property
    def graph(self) -> nx.DiGraph:
        """The operator graph over scheduled ops (edge attribute ``tensors``). Do not mutate.

        Built on first use (a networkx graph of a 150k-layer file costs seconds that
        loading does not need); acyclic because every reader runs after its producer.
        """
        if self._graph is None:
            g = nx.DiGraph()
            for op in self.ops[: self.n_ops]:
                g.add_node(op.name, phase=op.phase, layer=op.layer, kind=op.kind,
                           duration_s=op.duration_s)
            for t in self.tensors:
                for rd in t.readers:
                    if g.has_edge(t.producer, rd):
                        g.edges[t.producer, rd]["tensors"].append(t.name)
                    else:
                        g.add_edge(t.producer, rd, tensors=[t.name])
            self._graph = g
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
    def blocks(self) -> tuple[int, ...]:
        """The blocks: distinct layers >= 0 of the saved tensors' producers, ascending
        (forward order in a chain of blocks); what block checkpointing recomputes."""
        return tuple(sorted({int(b) for b in self.saved_layers.tolist() if b >= 0}))

    @cached_property
    def forward_flops(self) -> float:
        """Sum of forward-op FLOPs."""
        return float(sum(op.flops for op in self.ops[: self.n_fwd]))

    def summary(self) -> dict[str, Any]:
        """Plain-number summary: counts, A, P (bytes), T_F and T* (s), the link's name and
        bandwidth per direction (B/s); plus, only when
        they depart from the defaults, ``saved_storages`` (saved storages, when views
        share them), ``rng_capture`` (False) and ``host_memory_bytes`` (the limit)."""
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
            "link_d2h_bytes_per_s": self.link.d2h_bytes_per_s,
            "link_h2d_bytes_per_s": self.link.h2d_bytes_per_s,
            **({"saved_storages": self.lowered.n_saved} if self.aliased else {}),
            **({} if self.rng_capture else {"rng_capture": False}),
            **({} if self.host_memory_bytes is None
               else {"host_memory_bytes": self.host_memory_bytes}),
        }

    def __repr__(self) -> str:
        return (f"Instance({self.name!r}, ops={self.n_ops}, saved={self.n_saved}, "
                f"A={self.A / 1e9:.3g} GB, P={self.P / 1e9:.3g} GB, "
                f"T*={self.ideal_time_s * 1e3:.4g} ms)")


_SIZE_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
BUDGET_FORMS = ("a fraction of P <= 1 (0.5), a percentage of P (50%), a multiple of P "
                "with a P suffix (1.2P) or a size with a unit (11.5GB, 12GiB, 800MB)")
"""The budget forms :func:`budget_bytes` accepts, for error messages."""


def parse_budget(budget: float | int | str) -> tuple[str, float]:
    """Read a budget without an instance: ``("fraction", f)`` (of P) or ``("bytes", b)``.

    Forms: a float or bare number string is a fraction of P and must be <= 1 (a bare
    "8" would be 8 x P, 185 GB on GPT-2 XL, which a user thinking in GB does not mean);
    "50%" is a percentage of P; "1.2P" an explicit multiple of P (up to
    :data:`MAX_FRACTION`); a string with a unit is a size (decimal KB/MB/GB/TB, binary
    KiB/MiB/GiB/TiB, "B"); an int is bytes.

    Args:
        budget: the budget as given.

    Returns:
        (kind, value): kind "fraction" with value >= 0 (of P), or "bytes" with a value
        >= 0 (not yet rounded).

    Raises:
        BudgetError: unparsable, negative, not finite, a bare number > 1, or more than
            MAX_FRACTION x P; the message names the form to use instead.
    """
    from slackopt.errors import BudgetError

    if isinstance(budget, str):
        txt = budget.strip().lower().replace(" ", "")
        num, unit = txt, ""
        for u in ("%", "p", *sorted(_SIZE_UNITS, key=len, reverse=True)):
            if txt.endswith(u) and txt[: -len(u)]:
                num, unit = txt[: -len(u)], u
                break
        try:
            value = float(num)
        except ValueError:
            raise BudgetError(f"budget '{budget}' is not {BUDGET_FORMS}") from None
        if not math.isfinite(value) or value < 0:
            raise BudgetError(f"budget '{budget}' must be finite and >= 0")
        if unit in _SIZE_UNITS:
            return "bytes", value * _SIZE_UNITS[unit]
        frac = value / 100 if unit == "%" else value
        if unit == "" and frac > 1:
            raise BudgetError(
                f"budget '{budget}' has no unit: a bare number is a fraction of P and must "
                f"be <= 1. Fix: write '{budget}GB' (or another unit) for a size, or "
                f"'{budget}P' for {budget} x P")
        if frac > MAX_FRACTION:
            raise BudgetError(f"budget '{budget}' is more than {MAX_FRACTION:g} x P; give a "
                              "size with a unit (11.5GB) if you mean bytes")
        return "fraction", frac
    if isinstance(budget, bool) or not is_real(budget):
        raise BudgetError(f"budget {budget!r} must be a number or a string: {BUDGET_FORMS}")
    if not math.isfinite(budget) or budget < 0:
        raise BudgetError(f"budget {budget!r} must be finite and >= 0")
    if isinstance(budget, (float, np.floating)):
        if budget > 1:
            raise BudgetError(f"budget {budget!r}: a float is a fraction of P and must be "
                              f"<= 1. Fix: give '{budget}P' for {budget} x P, or bytes as an "
                              "int or a size string ('11.5GB')")
        return "fraction", float(budget)
    return "bytes", float(int(budget))


class Bytes(int):
    """A budget already read into bytes (what :func:`budget_bytes` returns): an int that
    :func:`budget_bytes` takes as given, never as a slip (:data:`TINY_INT_BUDGET_BYTES`).
    So a budget read once (by the command line, :func:`slackopt.compare.compare`,
    :func:`slackopt.solver.solve_budgets`) passes on to :func:`slackopt.solve` unchanged:
    ``--budget 1kB`` or ``1e-7`` (2314 B of GPT-2 XL) stay the budget the user wrote."""

    __slots__ = ()


def budget_bytes(instance: Instance, budget: float | int | str) -> Bytes:
    """Turn a budget into bytes.

    Args:
        instance: gives P for fractional budgets.
        budget: any form :func:`parse_budget` reads: 0.5, "0.5", "50%", "1.2P", "11.5GB",
            "800MB", "1.2e9B", "12GiB", or an int (bytes; one below 1 MB and below 0.1%
            of P is refused as a slip, :data:`TINY_INT_BUDGET_BYTES`: write "512B";
            a :class:`Bytes`, what this function returns, is taken as given).

    Returns:
        The budget M in bytes (a :class:`Bytes`, an int >= 0): floor(fraction x P) for
        fractions.

    Raises:
        BudgetError: as :func:`parse_budget`, more than 2**62 bytes, or an int budget that
            is a slip (above).
    """
    kind, value = parse_budget(budget)
    if kind == "fraction":
        return Bytes(math.floor(value * instance.P))
    if isinstance(budget, str):
        return Bytes(_checked(int(round(value)), budget))
    if isinstance(budget, Bytes):
        return Bytes(_checked(int(budget), budget))
    return Bytes(_checked(_plausible_int(int(budget), instance), budget))


TINY_INT_BUDGET_BYTES = 1_000_000
"""An int budget (bytes, from Python) below this many bytes and below 0.1% of P is refused
as a slip: ``solve(inst, "slackswap", 1)`` meant all of P, not 1 byte (the command line
never reads a number without a unit as bytes). An explicit size string ("512B") is always
taken as given, and so is a :class:`Bytes` (a budget already read)."""


def _plausible_int(m: int, instance: Instance) -> int:
    """`m` (an int budget, bytes) unless it is a slip (:data:`TINY_INT_BUDGET_BYTES`)."""
    from slackopt.errors import BudgetError

    P = int(instance.P)
    if 0 < m < min(TINY_INT_BUDGET_BYTES, P / 1000):
        raise BudgetError(
            f"budget {m} is an int, which reads as bytes: {m} B is {m / P:.2g} of P ({P} B). "
            "Fix: a float for a fraction of P (1.0 for all of it, 0.5 for half) or a size "
            f"with a unit ('11.5GB'); for exactly {m} B write '{m}B'")
    return m


def _checked(m: int, budget: Any) -> int:
    from slackopt.errors import BudgetError

    if m > 2**62:
        raise BudgetError(f"budget {budget!r} is more than 2**62 B; no device has that much")
    return m


MAX_FRACTION = 10.0
"""Largest budget accepted as a fraction of P."""


__all__ = ["Op", "Recipe", "Tensor", "Instance", "Bytes", "budget_bytes", "parse_budget",
           "PHASES",
           "MAX_BYTES", "MAX_DURATION_S", "MIN_BANDWIDTH", "RNG_REGEN_KIND", "RNG_STATE_CATEGORY"]
