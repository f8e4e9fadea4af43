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
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from slackopt.errors import InstanceError
from slackopt.hardware import Link

PHASES = ("fwd", "bwd", "rebuild")
RNG_REGEN_KIND = "rng_regen"
"""Op kind of an op that regenerates random numbers from saved RNG state."""
RNG_STATE_CATEGORY = "rng_state"
"""Tensor category of saved RNG state (8 bytes per random op)."""
MAX_BYTES = 2**53
"""Largest size (bytes) of one tensor, workspace or transient: exact in float64 copies."""
MAX_DURATION_S = 1e9
"""Largest duration (s) of one op: keeps every sum of times finite."""
MIN_BANDWIDTH = 1e-3
"""Smallest link bandwidth (B/s): a copy of MAX_BYTES then lasts < 1e19 s, finite."""

# Fixes shared by several checks (InstanceError's ``fix``).
_FIX_LABEL = "use a non-empty name of printable characters"
_FIX_BYTES = "use a whole number of bytes >= 0"
_FIX_VALUE = "use a finite value >= 0"
_FIX_READERS = "list only scheduled ops that run after the producer, each once"
_FIX_RECIPE_OPS = ("list forward or rebuild-only ops that exist and run no later than the "
                   "producer")
_FIX_RECIPE_INPUTS = "read only saved tensors produced no later than this one"
_FIX_STORAGE = ("name the base tensor that owns the storage (produced no later than the "
                "view, in the same pass), or null")
_FIX_MUTATED = "list forward ops that read the tensor after its producer"


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
        storage: None if the tensor owns its storage; else the name of the *base* tensor
            whose storage it views (a transpose, a slice, a reshape). The base must own its
            storage (no chains), and the view must be produced in the same phase as its
            base, no earlier than it. The storage's bytes are the base's ``size_bytes``;
            the view's own ``size_bytes`` (its elements) is informational only. See
            "Storage aliasing" in the :class:`Instance` docstring.
        mutated_by: names of forward ops that overwrite this tensor in place after its
            producer (``relu_``, ``add_``, ``masked_fill_``). Each must be
            one of its readers. The value the backward pass reads is the one after the last
            mutation, so a recipe must re-run every mutating op; a recipe that does not
            is rejected (InstanceError "add the op to the recipe, or drop the recipe").
    """

    name: str
    size_bytes: int
    producer: str
    readers: tuple[str, ...] = ()
    recipe: Recipe | None = None
    category: str = "other"
    storage: str | None = None
    mutated_by: tuple[str, ...] = ()


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


def _printable_names(names: list[Any]) -> bool:
    """All plain non-empty printable strings (checked in bulk)."""
    return _all_of_types(names, str) and all(names) and "".join(names).isprintable()


def _all_of_types(xs: list[Any], *types_: type) -> bool:
    """Whether every element's type is exactly one of `types_` (subclasses such as bool
    for int do not count); one pass in C."""
    return set(map(type, xs)) <= set(types_)


def _unique_index(names: list[Any], labels: list[Any]) -> dict[str, int] | None:
    """name -> position if the names are unique and names and labels (kinds, categories)
    are all printable non-empty strings; else None."""
    if not _printable_names(names) or not _printable_names(labels):
        return None
    index = dict(zip(names, range(len(names)), strict=True))
    return index if len(index) == len(names) else None


def _positions(index: Mapping[str, int], names: list[str]) -> np.ndarray | None:
    """``index[n]`` for each of `names` (int64 array, one lookup pass in C); None if one
    is missing."""
    if not names:
        return np.zeros(0, dtype=np.int64)
    try:
        got = operator.itemgetter(*names)(index)
    except (KeyError, TypeError):
        return None
    return np.array(got if len(names) > 1 else (got,), dtype=np.int64)


def _has_repeats(keys: np.ndarray) -> bool:
    """Whether some value occurs twice in int array `keys`."""
    k = np.sort(keys)
    return bool((k[1:] == k[:-1]).any())


def _ops_pass_bulk_checks(ops: Sequence[Op]) -> tuple[dict[str, int], int] | None:
    """(name -> index, scheduled count) if every op passes the per-op checks of
    :meth:`Instance._validate_and_index`, tested in bulk on plain Python types; None if
    any may fail (then the per-op loop finds it and names it)."""
    index = _unique_index([op.name for op in ops], [op.kind for op in ops])
    if index is None:
        return None
    phases = [op.phase for op in ops]
    n_fwd, n_bwd = phases.count("fwd"), phases.count("bwd")
    n_sched = n_fwd + n_bwd
    if phases != ["fwd"] * n_fwd + ["bwd"] * n_bwd + ["rebuild"] * (len(ops) - n_sched):
        return None
    durs = [op.duration_s for op in ops]
    flops = [op.flops for op in ops]
    ws = [op.workspace_bytes for op in ops]
    if not (_all_of_types(durs, int, float) and _all_of_types(flops, int, float)
            and _all_of_types(ws, int)):
        return None
    # sums are finite only without NaN or infinities (min/max skip a NaN)
    if ops and not (math.isfinite(sum(durs)) and math.isfinite(sum(flops))
                    and 0 <= min(durs) and max(durs) <= MAX_DURATION_S and min(flops) >= 0
                    and 0 <= min(ws) and max(ws) <= MAX_BYTES):
        return None
    return index, n_sched


def _tensors_pass_bulk_checks(
        tensors: Sequence[Tensor], op_index: Mapping[str, int], n_sched: int,
) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray] | None:
    """(name -> index, producer index per tensor, reader indices of all tensors one
    after the other, reader count per tensor) if every tensor passes the per-tensor checks
    of :meth:`Instance._validate_and_index` (names, sizes, categories, list fields,
    producer and readers), tested in bulk; None if any may fail (the per-tensor loop
    names it)."""
    index = _unique_index([t.name for t in tensors], [t.category for t in tensors])
    if index is None:
        return None
    sizes = [t.size_bytes for t in tensors]
    if not _all_of_types(sizes, int) or (sizes and not (0 <= min(sizes)
                                                                 and max(sizes) <= MAX_BYTES)):
        return None
    if not _all_of_types([t.readers for t in tensors], tuple):
        return None
    readers = [r for t in tensors for r in t.readers]
    if not _all_of_types(readers, str):
        return None
    recipes = [t.recipe for t in tensors if t.recipe is not None]
    if not (_all_of_types([r.ops for r in recipes], tuple)
            and _all_of_types([r.inputs for r in recipes], tuple)
            and _all_of_types([x for r in recipes for x in r.ops], str)
            and _all_of_types([x for r in recipes for x in r.inputs], str)):
        return None
    # producer and readers: scheduled ops, readers after the producer, none twice (in bulk)
    prod = _positions(op_index, [t.producer for t in tensors])
    flat = _positions(op_index, readers)
    if prod is None or flat is None:
        return None
    counts = np.array([len(t.readers) for t in tensors], dtype=np.int64)
    if (prod >= n_sched).any() or (flat >= n_sched).any() \
            or (flat <= np.repeat(prod, counts)).any():
        return None
    key = np.repeat(np.arange(len(tensors), dtype=np.int64), counts) * (n_sched + 1) + flat
    if _has_repeats(key):
        return None
    return index, prod, flat, counts


def _recipes_pass_bulk_checks(
        tensors: Sequence[Tensor], saved: np.ndarray, prod: np.ndarray, saved_mask: np.ndarray,
        op_index: Mapping[str, int], t_index: Mapping[str, int], op_is_bwd: np.ndarray,
        op_dur: np.ndarray, op_ws: np.ndarray,
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], np.ndarray, np.ndarray,
           np.ndarray] | None:
    """(recipe ops, recipe inputs as saved positions, c, transient bytes, workspace bytes)
    per saved tensor, as the recipe loop of :meth:`Instance._validate_and_index` computes
    them, if every recipe of a saved tensor passes that loop's checks, tested in bulk
    (numpy over all recipe ops and inputs at once); None if any may fail, and then the
    loop names the problem. For instances without in-place mutation, never-recompute ops
    or ``rng_capture = False`` only (the loop handles those). c is each recipe's op
    durations added left to right, as the loop adds them."""
    ns = len(saved)
    recs = [tensors[j].recipe for j in saved.tolist()]
    has = [r is not None for r in recs]
    mine = [r for r in recs if r is not None]
    n_ops_of = np.array([len(r.ops) for r in mine], dtype=np.int64)
    n_in_of = np.array([len(r.inputs) for r in mine], dtype=np.int64)
    tb = [r.transient_bytes for r in mine]
    if (n_ops_of == 0).any() or not _all_of_types(tb, int) \
            or (tb and not (0 <= min(tb) and max(tb) <= MAX_BYTES)):
        return None
    k_of = np.flatnonzero(np.array(has, dtype=bool))  # saved position of each recipe
    pk = prod[saved[k_of]]                             # its producer
    q = _positions(op_index, [o for r in mine for o in r.ops])
    x = _positions(t_index, [v for r in mine for v in r.inputs])
    if q is None or x is None:
        return None  # a recipe op or input that does not exist
    owner = np.repeat(np.arange(len(mine), dtype=np.int64), n_ops_of)
    if op_is_bwd[q].any() or (q > np.repeat(pk, n_ops_of)).any():
        return None  # backward or (not mutating) after the producer
    if _has_repeats(owner * (len(op_is_bwd) + 1) + q):
        return None  # an op listed twice
    ntens = len(tensors)
    xo = np.repeat(np.arange(len(mine), dtype=np.int64), n_in_of)
    if (x == saved[k_of][xo]).any() or not saved_mask[x].all() \
            or (prod[x] > pk[xo]).any():
        return None
    pos = np.full(ntens, -1, dtype=np.int64)
    pos[saved] = np.arange(ns, dtype=np.int64)
    # per saved position: tuples of op indices and input positions, () without a recipe
    none_t: tuple[int, ...] = ()
    ops_l, ins_l = [none_t] * ns, [none_t] * ns
    ql, xl = q.tolist(), pos[x].tolist()
    a = b = 0
    for k, no, ni in zip(k_of.tolist(), n_ops_of.tolist(), n_in_of.tolist(), strict=True):
        ops_l[k] = tuple(ql[a:a + no])
        ins_l[k] = tuple(xl[b:b + ni])
        a += no
        b += ni
    # c: durations added left to right, one recipe-op column at a time (adding 0.0 to a
    # finished sum leaves it unchanged)
    width = int(n_ops_of.max()) if len(mine) else 0
    col = np.arange(len(q)) - np.repeat(np.cumsum(n_ops_of) - n_ops_of, n_ops_of)
    grid = np.zeros((width, len(mine)))
    grid[col, owner] = op_dur[q]
    c = np.full(ns, np.inf)
    csum = np.zeros(len(mine))
    for row in grid:
        csum += row
    c[k_of] = csum
    ws = np.zeros(ns, dtype=np.int64)
    if len(mine):
        starts = np.cumsum(n_ops_of) - n_ops_of
        ws[k_of] = np.maximum.reduceat(op_ws[q], starts)
    transient = np.zeros(ns, dtype=np.int64)
    transient[k_of] = tb
    return ops_l, ins_l, c, transient, ws


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
        if host_memory_bytes is not None and not (_is_int(host_memory_bytes)
                                                  and 0 <= host_memory_bytes <= 2**62):
            raise InstanceError(f"host_memory_bytes must be null (unlimited) or an integer "
                                f"number of bytes in [0, 2**62], got {host_memory_bytes!r}",
                                "host_memory_bytes",
                                "use null (unlimited) or a whole number of bytes >= 0")
        self.host_memory_bytes: int | None = (None if host_memory_bytes is None
                                              else int(host_memory_bytes))
        self._lowered: Instance | None = None
        self.saved_unit: np.ndarray | None = None
        self._validate_and_index()
        if self._any_view:
            self._lower()

    # ------------------------------------------------------------------ building
    def _validate_and_index(self) -> None:
        ops, tensors = self.ops, self.tensors
        link = self.link
        if not _is_name(link.name):
            raise InstanceError(f"link: name must be a non-empty printable string, got "
                                f"{link.name!r}", "link.name", _FIX_LABEL)
        for key in ("d2h_bytes_per_s", "h2d_bytes_per_s"):
            w = getattr(link, key)
            if not (_is_real(w) and math.isfinite(w) and w >= MIN_BANDWIDTH):
                raise InstanceError(f"link '{link.name}': bandwidth {key} must be a finite "
                                    f"number >= {MIN_BANDWIDTH:g} B/s, got {w!r}",
                                    f"link.{key}",
                                    f"use a finite bandwidth >= {MIN_BANDWIDTH:g} (bytes/s)")
        if not (_is_real(link.duplex_factor) and 0 < link.duplex_factor <= 1):
            raise InstanceError(f"link '{link.name}': duplex_factor must be in (0, 1], got "
                                f"{link.duplex_factor!r}", "link.duplex_factor",
                                "use a value in (0, 1]: 1 for full duplex")
        if not (_is_real(link.copy_latency_s) and math.isfinite(link.copy_latency_s)
                and 0 <= link.copy_latency_s <= MAX_DURATION_S):
            raise InstanceError(f"link '{link.name}': copy_latency_s must be finite, >= 0 and "
                                f"<= {MAX_DURATION_S:g} s, got {link.copy_latency_s!r}",
                                "link.copy_latency_s", "use a value in the allowed range")

        fast = _ops_pass_bulk_checks(ops)
        if fast is not None:  # every op is valid: skip the loop that names the bad one
            op_index, n_sched = fast
            self._op_index = op_index
            self.n_ops = n_sched
        op_index = {} if fast is None else op_index
        last_phase = 0
        n_sched = 0 if fast is None else n_sched
        for i, op in enumerate(ops if fast is None else ()):
            at = f"ops[{i}]"
            if not _is_name(op.name):
                raise InstanceError(f"op #{i}: name must be a non-empty printable string, "
                                    f"got {op.name!r}", f"{at}.name", _FIX_LABEL)
            if op.name in op_index:
                raise InstanceError(f"op '{op.name}': duplicate op name", f"{at}.name",
                                    "give every op a unique name")
            if op.phase not in PHASES:
                raise InstanceError(
                    f"op '{op.name}': phase '{op.phase}' is not one of {', '.join(PHASES)}",
                    f"{at}.phase", f"use one of {', '.join(PHASES)}")
            ph = PHASES.index(op.phase)
            if ph < last_phase:
                raise InstanceError(
                    f"op '{op.name}': phase '{op.phase}' after a '{PHASES[last_phase]}' op",
                    f"{at}.phase", "list all forward ops, then all backward ops, then "
                    "rebuild-only ops")
            last_phase = ph
            if not (_is_real(op.duration_s) and math.isfinite(op.duration_s)
                    and 0 <= op.duration_s <= MAX_DURATION_S):
                raise InstanceError(
                    f"op '{op.name}': duration_s must be finite, >= 0 and <= {MAX_DURATION_S:g}"
                    f" s, got {op.duration_s!r}", f"{at}.duration_s", _FIX_VALUE)
            if not _is_size(op.workspace_bytes):
                raise InstanceError(
                    f"op '{op.name}': workspace_bytes must be an integer in [0, 2**53], "
                    f"got {op.workspace_bytes!r}", f"{at}.workspace_bytes", _FIX_BYTES)
            if not _is_name(op.kind):
                raise InstanceError(f"op '{op.name}': kind must be a non-empty printable "
                                    f"string, got {op.kind!r}", f"{at}.kind", _FIX_LABEL)
            if not (_is_real(op.flops) and math.isfinite(op.flops) and op.flops >= 0):
                raise InstanceError(f"op '{op.name}': flops must be finite and >= 0, got "
                                    f"{op.flops!r}", f"{at}.flops", _FIX_VALUE)
            op_index[op.name] = i
            if op.phase != "rebuild":
                n_sched += 1
        self._op_index = op_index
        self.n_ops = n_sched

        t_fast = _tensors_pass_bulk_checks(tensors, op_index, n_sched)
        t_index: dict[str, int] = {} if t_fast is None else t_fast[0]
        for j, t in enumerate(tensors if t_fast is None else ()):
            at = f"tensors[{j}]"
            if not _is_name(t.name):
                raise InstanceError(f"tensor #{j}: name must be a non-empty printable string, "
                                    f"got {t.name!r}", f"{at}.name", _FIX_LABEL)
            if t.name in t_index:
                raise InstanceError(f"tensor '{t.name}': duplicate tensor name", f"{at}.name",
                                    "give every tensor a unique name")
            t_index[t.name] = j
            if not _is_size(t.size_bytes):
                raise InstanceError(
                    f"tensor '{t.name}': size_bytes must be an integer in [0, 2**53], "
                    f"got {t.size_bytes!r}", f"{at}.size_bytes", _FIX_BYTES)
            if not _is_name(t.category):
                raise InstanceError(f"tensor '{t.name}': category must be a non-empty "
                                    f"printable string, got {t.category!r}", f"{at}.category",
                                    _FIX_LABEL)
            if not _names(t.readers):
                raise InstanceError(
                    f"tensor '{t.name}': readers must be a list of op names, got {t.readers!r}",
                    f"{at}.readers", _FIX_READERS)
            if t.recipe is not None and not (_names(t.recipe.ops) and _names(t.recipe.inputs)):
                raise InstanceError(
                    f"tensor '{t.name}': recipe ops and inputs must be lists of names",
                    f"{at}.recipe", "list op names in 'ops' and tensor names in 'inputs'")
            p = op_index.get(t.producer)
            if p is None:
                raise InstanceError(f"tensor '{t.name}': producer op '{t.producer}' does not "
                                    "exist", f"{at}.producer",
                                    "name a forward or backward op listed in 'ops'")
            if p >= n_sched:
                raise InstanceError(
                    f"tensor '{t.name}': producer '{t.producer}' is a rebuild-only op",
                    f"{at}.producer", "a tensor must be produced by a scheduled op: name a "
                    "forward or backward op")
            seen = set()
            for k, rd in enumerate(t.readers):
                q = op_index.get(rd)
                where = f"{at}.readers[{k}]"
                if q is None:
                    raise InstanceError(f"tensor '{t.name}': reader op '{rd}' does not exist",
                                        where, _FIX_READERS)
                if q >= n_sched:
                    raise InstanceError(
                        f"tensor '{t.name}': reader '{rd}' is a rebuild-only op", where,
                        "list it in the recipe of the tensor it rebuilds instead")
                if q <= p:
                    raise InstanceError(
                        f"tensor '{t.name}': reader '{rd}' runs before or at its producer "
                        f"'{t.producer}'", where, "readers must come after the producer: "
                        + _FIX_READERS)
                if rd in seen:
                    raise InstanceError(f"tensor '{t.name}': reader '{rd}' listed twice", where,
                                        _FIX_READERS)
                seen.add(rd)
        self._t_index = t_index
        # views and in-place mutation (list.count finds whether any, in C)
        self._any_view = [t.storage for t in tensors].count(None) != len(tensors)
        self._any_mutated = [t.mutated_by for t in tensors].count(()) != len(tensors)
        for j, t in enumerate(tensors if self._any_view or self._any_mutated else ()):
            if t.storage is not None or t.mutated_by != ():
                self._check_storage_and_mutation(j, t)
        total = sum(map(int, [t.size_bytes for t in tensors])) + sum(
            map(int, [op.workspace_bytes for op in ops]))
        if total > 2**62:
            raise InstanceError(f"the tensors and workspaces add up to {total} B, more than "
                                "2**62 B", "tensors",
                                "give sizes in bytes, not bits or elements")

        # The op graph (producer -> reader) is acyclic by construction: every reader was
        # checked to run after its producer. It is built on first use (self.graph).
        self._graph: nx.DiGraph | None = None

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
        last = np.empty(nt, dtype=np.int64)
        last_fwd = np.empty(nt, dtype=np.int64)
        first_bwd = np.full(nt, -1, dtype=np.int64)
        last_bwd = np.full(nt, -1, dtype=np.int64)
        size = np.empty(nt, dtype=np.int64)
        size[:] = [t.size_bytes for t in tensors]
        if t_fast is not None:  # computed by the bulk checks
            prod, flat, counts = t_fast[1:]
        else:
            prod = np.array([op_index[t.producer] for t in tensors], dtype=np.int64)
            counts = np.fromiter((len(t.readers) for t in tensors), dtype=np.int64, count=nt)
            flat = np.fromiter((op_index[x] for t in tensors for x in t.readers),
                               dtype=np.int64, count=int(counts.sum()))
        owner = np.repeat(np.arange(nt, dtype=np.int64), counts)
        order = np.lexsort((flat, owner))  # by tensor, then schedule position
        flat, owner = flat[order], owner[order]
        ends = np.cumsum(counts).tolist()
        reader_idx: list[np.ndarray] = [flat[a:b] for a, b in zip([0, *ends], ends,
                                                                   strict=False)]
        last[:] = prod
        np.maximum.at(last, owner, flat)
        last_fwd[:] = prod
        fw = flat < n_fwd
        np.maximum.at(last_fwd, owner[fw], flat[fw])
        big = np.iinfo(np.int64).max
        fb = np.full(nt, big, dtype=np.int64)
        np.minimum.at(fb, owner[~fw], flat[~fw])
        first_bwd[:] = np.where(fb == big, -1, fb)
        np.maximum.at(last_bwd, owner[~fw], flat[~fw])
        self.tensor_producer_idx = prod
        self.tensor_last_reader_idx = last
        self.tensor_size = size

        saved_mask = (first_bwd >= 0) & (prod < n_fwd)
        saved = np.flatnonzero(saved_mask)
        saved = saved[np.argsort(prod[saved], kind="stable")]
        self.saved = saved
        self.saved_names: tuple[str, ...] = tuple(tensors[j].name for j in saved)
        self._saved_pos = {name: k for k, name in enumerate(self.saved_names)}
        self.is_saved = saved_mask

        # Recipes: in bulk when every one passes; else the loop names the first problem
        # (per-op fields and masks as plain lists there: indexing numpy scalars one at a
        # time in this loop would cost more than the checks).
        self._blockers: dict[int, str] = {}  # saved position -> why c = inf (recipe given)
        any_never = any(op.never_recompute for op in ops)
        bulk = None
        if not (any_never or self._any_mutated) and self.rng_capture:  # else: the loop
            bulk = _recipes_pass_bulk_checks(
                tensors, saved, prod, saved_mask, op_index, t_index,
                np.array([op.phase == "bwd" for op in ops], dtype=bool),
                np.array([op.duration_s for op in ops], dtype=np.float64),
                np.array([op.workspace_bytes for op in ops], dtype=np.int64))
        c_list = [math.inf] * len(saved)
        self.recipe_inputs: list[tuple[int, ...]] = []  # saved positions of recipe inputs
        self.recipe_ops: list[tuple[int, ...]] = []
        transient = [0] * len(saved)
        workspace = [0] * len(saved)
        op_phase = [op.phase for op in ops]
        op_dur = [op.duration_s for op in ops]
        op_ws = [op.workspace_bytes for op in ops]
        prod_list, saved_list = prod.tolist(), saved_mask.tolist()
        saved_pos = self._saved_pos
        no_inputs: tuple[int, ...] = ()
        for k, j in enumerate(saved.tolist() if bulk is None else ()):
            t = tensors[j]
            rec = t.recipe
            if rec is None:
                self.recipe_inputs.append(no_inputs)
                self.recipe_ops.append(no_inputs)
                continue
            at = f"tensors[{j}].recipe"
            if not rec.ops:
                raise InstanceError(f"tensor '{t.name}': recipe has no ops", at,
                                    "give the recipe at least one op, or null if the tensor "
                                    "cannot be rebuilt")
            dup = len(rec.ops) > 1 and len(set(rec.ops)) != len(rec.ops)
            pj = prod_list[j]
            idx = []
            for n, o in enumerate(rec.ops):
                if dup and rec.ops.count(o) > 1:
                    raise InstanceError(f"tensor '{t.name}': recipe lists op '{o}' more than "
                                        "once", f"{at}.ops[{rec.ops.index(o, n + 1)}]",
                                        "list each op the recipe re-runs once")
                q = op_index.get(o)
                if q is None:
                    raise InstanceError(f"tensor '{t.name}': recipe op '{o}' does not exist",
                                        f"{at}.ops[{n}]", _FIX_RECIPE_OPS)
                if op_phase[q] == "bwd":
                    raise InstanceError(
                        f"tensor '{t.name}': recipe op '{o}' is a backward op",
                        f"{at}.ops[{n}]", "recipes re-run forward or rebuild-only ops: "
                        + _FIX_RECIPE_OPS)
                if op_phase[q] == "fwd" and q > pj and o not in t.mutated_by:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe op '{o}' runs after the producer "
                        f"'{t.producer}' in the forward pass; it cannot help rebuild it",
                        f"{at}.ops[{n}]", _FIX_RECIPE_OPS)
                idx.append(q)
            for u in t.mutated_by:
                if u not in rec.ops:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe misses op '{u}', which mutates the tensor "
                        f"in place after its producer '{t.producer}', so the recipe would "
                        "rebuild the pre-mutation value", f"{at}.ops",
                        "add the op to the recipe, or drop the recipe")
            ins = []
            for n, x in enumerate(rec.inputs):
                where = f"{at}.inputs[{n}]"
                jj = t_index.get(x)
                if jj is None:
                    raise InstanceError(f"tensor '{t.name}': recipe input '{x}' does not exist",
                                        where, _FIX_RECIPE_INPUTS)
                if x == t.name:
                    raise InstanceError(f"tensor '{t.name}': recipe reads the tensor it "
                                        "rebuilds", where,
                                        "remove the tensor itself from its recipe inputs")
                if not saved_list[jj]:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe input '{x}' is not a saved tensor, so it "
                        "is gone by the backward pass", where,
                        "rebuild from saved tensors only: " + _FIX_RECIPE_INPUTS)
                if prod_list[jj] > pj:
                    raise InstanceError(
                        f"tensor '{t.name}': recipe input '{x}' is produced after it", where,
                        _FIX_RECIPE_INPUTS)
                ins.append(saved_pos[x])
            tb = rec.transient_bytes
            if not (type(tb) is int and 0 <= tb <= MAX_BYTES) and not _is_size(tb):
                raise InstanceError(
                    f"tensor '{t.name}': recipe transient_bytes must be an integer in "
                    f"[0, 2**53], got {tb!r}", f"{at}.transient_bytes", _FIX_BYTES)
            self.recipe_inputs.append(tuple(ins))
            self.recipe_ops.append(tuple(idx))
            transient[k] = tb
            workspace[k] = max([op_ws[q] for q in idx])
            blocker = None
            if any_never:
                blocker = next((f"its recipe runs never-recompute op '{ops[q].name}'"
                                for q in idx if ops[q].never_recompute), None)
            if blocker is None and not self.rng_capture:
                blocker = next((f"its recipe runs op '{ops[q].name}', which needs saved RNG "
                                "state, and the instance has rng_capture = false (RNG state "
                                "cannot be saved)"
                                for q in idx
                                if ops[q].random or ops[q].kind == RNG_REGEN_KIND), None)
                if blocker is None:
                    blocker = next((f"its recipe reads RNG state '{x}' and the instance has "
                                    "rng_capture = false (RNG state cannot be saved)"
                                    for x in rec.inputs
                                    if tensors[t_index[x]].category == RNG_STATE_CATEGORY),
                                   None)
            if blocker is None:
                ck = 0.0
                for q in idx:  # left to right, as the bulk checks add
                    ck += op_dur[q]
                c_list[k] = ck
            else:
                self._blockers[k] = blocker
        if bulk is None:
            c = np.array(c_list, dtype=np.float64)
            self.recipe_transient: np.ndarray = np.array(transient, dtype=np.int64)
            self.recipe_workspace: np.ndarray = np.array(workspace, dtype=np.int64)
        else:
            self.recipe_ops, self.recipe_inputs, c, self.recipe_transient, \
                self.recipe_workspace = bulk
        # A recipe whose inputs chain back to an unrebuildable-through-recipe cycle cannot
        # happen: inputs are produced no later than the tensor, and a tensor cannot read
        # itself; equal production (two outputs of one op) is acyclic unless mutual.
        self._check_recipe_cycles(prod[saved])

        sv = saved
        # Ready: the op after which a saved tensor holds its final forward value (its
        # producer, or its last in-place mutation): r and the D2H of a swap start there.
        ready = prod[sv].copy()
        for k, j in enumerate(sv.tolist() if self._any_mutated else ()):
            for u in tensors[j].mutated_by:
                ready[k] = max(ready[k], op_index[u])
        self.saved_ready_idx = ready
        self.s = size[sv].copy()
        self.r = end[ready] if sv.size else np.zeros(0)
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
                    self.recipe_workspace, self.saved_prod_idx, self.saved_ready_idx,
                    self.saved_last_fwd_idx,
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

    def _check_storage_and_mutation(self, j: int, t: Tensor) -> None:
        """Validate ``t.storage`` and ``t.mutated_by`` of tensor `t` = ``tensors[j]``
        (indices already built)."""
        ops, op_index = self.ops, self._op_index
        at = f"tensors[{j}]"
        if t.storage is not None:
            where = f"{at}.storage"
            if not isinstance(t.storage, str):
                raise InstanceError(f"tensor '{t.name}': storage must be a tensor name or "
                                    f"null, got {t.storage!r}", where, _FIX_STORAGE)
            b = self._t_index.get(t.storage)
            if b is None:
                raise InstanceError(f"tensor '{t.name}': storage '{t.storage}' does not "
                                    "exist", where, "name the base tensor whose storage it "
                                    "views, or null")
            if t.storage == t.name:
                raise InstanceError(f"tensor '{t.name}': storage names the tensor itself",
                                    where, "use null for a tensor that owns its storage")
            base = self.tensors[b]
            if base.storage is not None:
                raise InstanceError(
                    f"tensor '{t.name}': storage '{t.storage}' is itself a view of "
                    f"'{base.storage}'", where, f"name the base '{base.storage}' directly")
            pv, pb = op_index[t.producer], op_index[base.producer]
            if pv < pb:
                raise InstanceError(
                    f"tensor '{t.name}': storage '{t.storage}' is produced by "
                    f"'{base.producer}', after the view's producer '{t.producer}'; a view "
                    "is produced no earlier than its base", where, _FIX_STORAGE)
            if ops[pv].phase != ops[pb].phase:
                raise InstanceError(
                    f"tensor '{t.name}': storage '{t.storage}' is produced in the "
                    f"{ops[pb].phase} pass but the view in the {ops[pv].phase} pass", where,
                    "list the op that makes the view among the readers of the base instead")
        if not _names(t.mutated_by):
            raise InstanceError(f"tensor '{t.name}': mutated_by must be a list of op names, "
                                f"got {t.mutated_by!r}", f"{at}.mutated_by", _FIX_MUTATED)
        p = op_index[t.producer]
        for n, u in enumerate(t.mutated_by):
            where = f"{at}.mutated_by[{n}]"
            q = op_index.get(u)
            if q is None:
                raise InstanceError(f"tensor '{t.name}': mutated_by op '{u}' does not exist",
                                    where, _FIX_MUTATED)
            if ops[q].phase != "fwd" or q <= p:
                raise InstanceError(
                    f"tensor '{t.name}': mutated_by op '{u}' must be a forward op that runs "
                    f"after the producer '{t.producer}'", where, _FIX_MUTATED)
            if u not in t.readers:
                raise InstanceError(f"tensor '{t.name}': mutated_by op '{u}' is not one of its "
                                    "readers", where, "list it among the readers too")

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
                           host_memory_bytes=self.host_memory_bytes)
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
    if isinstance(budget, bool) or not _is_real(budget):
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


def budget_bytes(instance: Instance, budget: float | int | str) -> int:
    """Turn a budget into bytes.

    Args:
        instance: gives P for fractional budgets.
        budget: any form :func:`parse_budget` reads: 0.5, "0.5", "50%", "1.2P", "11.5GB",
            "800MB", "1.2e9B", "12GiB", or an int (bytes; one below 1 MB and below 0.1%
            of P is refused as a slip, :data:`TINY_INT_BUDGET_BYTES`: write "512B").

    Returns:
        The budget M in bytes (int, >= 0): floor(fraction x P) for fractions.

    Raises:
        BudgetError: as :func:`parse_budget`, more than 2**62 bytes, or an int budget that
            is a slip (above).
    """
    kind, value = parse_budget(budget)
    if kind == "fraction":
        return int(math.floor(value * instance.P))
    if isinstance(budget, str):
        return _checked(int(round(value)), budget)
    return _checked(_plausible_int(int(budget), instance), budget)


TINY_INT_BUDGET_BYTES = 1_000_000
"""An int budget (bytes, from Python) below this many bytes and below 0.1% of P is refused
as a slip: ``solve(inst, "slackswap", 1)`` meant all of P, not 1 byte (the command line
never reads a number without a unit as bytes). An explicit size string ("512B") is always
taken as given."""


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


__all__ = ["Op", "Recipe", "Tensor", "Instance", "budget_bytes", "parse_budget", "PHASES"]
