"""The checks of meaning of an :class:`~slackopt.instance.Instance`, each made once.

Every check is a mask over all items of one kind (ops, tensors, readers, recipe ops,
recipe inputs), computed in bulk; when a mask has a False, :func:`_raise_first` raises the
InstanceError of the first failure in the order a reader of the file meets the items
(item by item, and within an item its fields in the order they are listed below), with
the item named, the field as a path (``tensors[12].readers[3]``) and the fix. The file
schema (:mod:`slackopt.io`) checks only structure; the values are checked here.

The derived arrays are computed by :class:`~slackopt.instance.Instance` from what these
functions return (indices, producer and reader positions, recipe arrays).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from slackopt.errors import InstanceError

if TYPE_CHECKING:
    from slackopt.hardware import Link
    from slackopt.records import Op, Tensor, UnitSpan

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
_PHASE_NO = {p: i for i, p in enumerate(PHASES)}
_QUOTED_PHASES = ", ".join(f"'{p}'" for p in PHASES)


# ----------------------------------------------------------------------------- predicates
def is_int(x: Any) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def is_real(x: Any) -> bool:
    """A real number (Python or numpy int or float), not a bool."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(x)
    except OverflowError:  # an int beyond float's range
        return False


def _is_size(x: Any) -> bool:
    return is_int(x) and 0 <= x <= MAX_BYTES


def is_name(x: Any) -> bool:
    """A non-empty string of printable characters."""
    return isinstance(x, str) and bool(x) and x.isprintable()


def _names(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and all(isinstance(v, str) for v in x)


def _all_of_types(xs: list[Any], *types_: type) -> bool:
    """Whether every element's type is exactly one of `types_` (subclasses such as bool
    for int do not count); one pass in C."""
    return set(map(type, xs)) <= set(types_)


# ----------------------------------------------------------------------------- masks
# Each mask function has one predicate; its first branch is a shortcut that proves the
# predicate for every element at once (plain types, min and max in C), the second
# applies it element by element (only when the shortcut cannot prove it).
def _mask(xs: Sequence[Any], pred: Callable[[Any], bool]) -> np.ndarray:
    return np.fromiter(map(pred, xs), dtype=bool, count=len(xs))


def _ones(n: int) -> np.ndarray:
    return np.ones(n, dtype=bool)


def _labels_ok(xs: list[Any]) -> np.ndarray:
    """:func:`is_name` of each element."""
    if _all_of_types(xs, str) and all(xs) and "".join(xs).isprintable():
        return _ones(len(xs))
    return _mask(xs, is_name)


def _sizes_ok(xs: list[Any]) -> np.ndarray:
    """Each element an integer in [0, MAX_BYTES]."""
    if _all_of_types(xs, int) and (not xs or (min(xs) >= 0 and max(xs) <= MAX_BYTES)):
        return _ones(len(xs))
    return _mask(xs, _is_size)


def _values_ok(xs: list[Any], hi: float) -> np.ndarray:
    """Each element a finite real number in [0, hi]."""
    if _all_of_types(xs, int, float) and (not xs or (_finite(sum(xs)) and min(xs) >= 0
                                                      and max(xs) <= hi)):
        return _ones(len(xs))  # (a finite sum holds no NaN, so min and max are exact)
    return _mask(xs, lambda x: is_real(x) and _finite(x) and 0 <= x <= hi)


def _name_lists_ok(xs: list[Any]) -> np.ndarray:
    """Each element a tuple or list of strings."""
    if _all_of_types(xs, tuple) and _all_of_types([v for x in xs for v in x], str):
        return _ones(len(xs))
    return _mask(xs, _names)


def _lookup(index: Mapping[str, int], names: list[Any]) -> np.ndarray:
    """``index[n]`` for each of `names` (int64), -1 where `n` is not in `index`."""
    if not names:
        return np.zeros(0, dtype=np.int64)
    try:
        got = operator.itemgetter(*names)(index)  # one pass in C when all are found
        return np.array(got if len(names) > 1 else (got,), dtype=np.int64)
    except (KeyError, TypeError):
        return np.array([index.get(n, -1) if isinstance(n, str) else -1 for n in names],
                        dtype=np.int64)


def _first_index(names: list[Any], ok: np.ndarray) -> tuple[dict[str, int], np.ndarray]:
    """(name -> position of its first occurrence, whether each position repeats an
    earlier name); positions where `ok` is False (not a valid name) match nothing."""
    n = len(names)
    keys = names if ok.all() else [x if good else object()
                                   for x, good in zip(names, ok.tolist(), strict=True)]
    first = dict(zip(reversed(keys), range(n - 1, -1, -1), strict=True))
    if len(first) == n:
        return first, np.zeros(n, dtype=bool)
    return first, _lookup(first, keys) != np.arange(n)


def _repeats(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(whether each key occurs again earlier, whether it occurs more than once)."""
    k = np.sort(keys)
    if not (k[1:] == k[:-1]).any():  # (a plain sort is quicker to rule repeats out)
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=bool)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    same = k[1:] == k[:-1]
    later = np.zeros(len(keys), dtype=bool)
    later[order[1:]] = same
    many = np.zeros(len(keys), dtype=bool)
    many[order[1:]] |= same
    many[order[:-1]] |= same
    return later, many


class _Check(NamedTuple):
    ok: np.ndarray
    """Per element: passes."""
    key: Callable[[int], tuple[int, ...]]
    """Element -> where a reader meets it (item, part of the item, position in it)."""
    error: Callable[[int], InstanceError]
    """Element -> the error naming it."""


def _raise_first(checks: Sequence[_Check]) -> None:
    """Raise the error of the first failing element: least key, then the earliest check
    (checks are listed in the order they apply to one element)."""
    best: tuple[tuple[int, ...], int, _Check, int] | None = None
    for c, check in enumerate(checks):
        bad = np.flatnonzero(~check.ok)
        if bad.size:
            i = int(bad[0])  # elements are in reading order: the first is the least key
            key = check.key(i)
            if best is None or (key, c) < best[:2]:
                best = (key, c, check, i)
    if best is not None:
        raise best[2].error(best[3])


def _at(i: int) -> tuple[int, ...]:
    return (i,)


# ----------------------------------------------------------------------------- link
def check_link(link: Link) -> None:
    """Check the link's name, bandwidths (>= MIN_BANDWIDTH B/s), duplex factor (0, 1]
    and copy latency (s, in [0, MAX_DURATION_S]); raises InstanceError naming the field."""
    if not is_name(link.name):
        raise InstanceError(f"link: name must be a non-empty printable string, got "
                            f"{link.name!r}", "link.name", _FIX_LABEL)
    for key in ("d2h_bytes_per_s", "h2d_bytes_per_s"):
        w = getattr(link, key)
        if not (is_real(w) and math.isfinite(w) and w >= MIN_BANDWIDTH):
            raise InstanceError(f"link '{link.name}': bandwidth {key} must be a finite "
                                f"number >= {MIN_BANDWIDTH:g} B/s, got {w!r}", f"link.{key}",
                                f"use a finite bandwidth >= {MIN_BANDWIDTH:g} (bytes/s)")
    if not (is_real(link.duplex_factor) and 0 < link.duplex_factor <= 1):
        raise InstanceError(f"link '{link.name}': duplex_factor must be in (0, 1], got "
                            f"{link.duplex_factor!r}", "link.duplex_factor",
                            "use a value in (0, 1]: 1 for full duplex")
    if not (is_real(link.copy_latency_s) and math.isfinite(link.copy_latency_s)
            and 0 <= link.copy_latency_s <= MAX_DURATION_S):
        raise InstanceError(f"link '{link.name}': copy_latency_s must be finite, >= 0 and "
                            f"<= {MAX_DURATION_S:g} s, got {link.copy_latency_s!r}",
                            "link.copy_latency_s", "use a value in the allowed range")


# ----------------------------------------------------------------------------- ops
def _phase_codes(phases: list[Any]) -> np.ndarray:
    """Index in PHASES of each phase, -1 for a value that is not one."""
    n_f, n_b = phases.count("fwd"), phases.count("bwd")
    if phases == ["fwd"] * n_f + ["bwd"] * n_b + ["rebuild"] * (len(phases) - n_f - n_b):
        return np.repeat(np.arange(3, dtype=np.int64), [n_f, n_b, len(phases) - n_f - n_b])
    return np.array([_PHASE_NO.get(p, -1) if isinstance(p, str) else -1 for p in phases],
                    dtype=np.int64)


def check_ops(ops: Sequence[Op], interleaved: bool = False) -> tuple[dict[str, int],
                                                                    np.ndarray]:
    """Check every op: name (printable, unique), phase (one of PHASES, forward ops then
    backward then rebuild-only; with `interleaved`, the units of a pipeline schedule,
    forward and backward ops in any order before the rebuild-only ones), duration_s (s,
    finite, in [0, MAX_DURATION_S]), workspace_bytes (integer in [0, MAX_BYTES]), kind
    (printable) and flops (finite, >= 0).

    Returns:
        (name -> index, index in PHASES of each op's phase).

    Raises:
        InstanceError: for the first op that fails, naming it and its field (``ops[i].x``).
    """
    names = [op.name for op in ops]
    name_ok = _labels_ok(names)
    index, dup = _first_index(names, name_ok)
    phases = [op.phase for op in ops]
    ph = _phase_codes(phases)
    prev = np.concatenate(([0], np.maximum.accumulate(np.maximum(ph, 0))[:-1]))[:len(ph)]
    durs = [op.duration_s for op in ops]
    ws = [op.workspace_bytes for op in ops]
    kinds = [op.kind for op in ops]
    flops = [op.flops for op in ops]

    def err(field: str, problem: str, fix: str) -> Callable[[int], InstanceError]:
        return lambda i: InstanceError(f"op '{ops[i].name}': " + problem.format(op=ops[i]),
                                       f"ops[{i}].{field}", fix)

    _raise_first([
        _Check(name_ok, _at, lambda i: InstanceError(
            f"op #{i}: name must be a non-empty printable string, got {ops[i].name!r}",
            f"ops[{i}].name", _FIX_LABEL)),
        _Check(~dup, _at, err("name", "duplicate op name", "give every op a unique name")),
        _Check(ph >= 0, _at, err("phase", "phase '{op.phase}' is not one of " + _QUOTED_PHASES,
                                 f"use one of {_QUOTED_PHASES}")),
        _Check((ph >= prev) | (interleaved & (prev < 2)), _at, lambda i: InstanceError(
            f"op '{ops[i].name}': phase '{ops[i].phase}' after a '{PHASES[prev[i]]}' op",
            f"ops[{i}].phase", "list the scheduled ops (all forward ops, then all "
            "backward ops, or the units of a pipeline schedule), then rebuild-only ops")),
        _Check(_values_ok(durs, MAX_DURATION_S), _at, err(
            "duration_s", f"duration_s must be finite, >= 0 and <= {MAX_DURATION_S:g} s, "
            "got {op.duration_s!r}", _FIX_VALUE)),
        _Check(_sizes_ok(ws), _at, err(
            "workspace_bytes", "workspace_bytes must be an integer in [0, 2**53], got "
            "{op.workspace_bytes!r}", _FIX_BYTES)),
        _Check(_labels_ok(kinds), _at, err(
            "kind", "kind must be a non-empty printable string, got {op.kind!r}",
            _FIX_LABEL)),
        _Check(_values_ok(flops, math.inf), _at, err(
            "flops", "flops must be finite and >= 0, got {op.flops!r}", _FIX_VALUE)),
    ])
    return index, ph


# ----------------------------------------------------------------------------- units
UNIT_KINDS = ("F", "B", "W")
"""Kinds of schedule units: forward, backward (input-gradient half where split),
weight-gradient half of a split backward (:class:`~slackopt.records.UnitSpan`)."""


def check_units(units: Sequence[UnitSpan], ph: np.ndarray) -> np.ndarray:
    """Check the units of a pipeline schedule: kind (one of UNIT_KINDS), n_ops (integer
    >= 1), microbatch and chunk (integers >= 0), earliest_start_s (s, finite, in
    [0, MAX_DURATION_S]); (microbatch, kind, chunk) once each; the spans cover the
    scheduled ops exactly; an F unit runs forward ops only, a B or W unit backward ops.

    Args:
        units: the units in schedule order.
        ph: index in PHASES of every op's phase (scheduled ops first).

    Returns:
        The unit of each scheduled op (int64, shape (n_sched,)).

    Raises:
        InstanceError: for the first unit that fails, naming it and its field
            (``units[i].n_ops``).
    """
    n_sched = int(np.count_nonzero(ph < 2))
    seen: set[tuple[Any, ...]] = set()
    at = 0
    for i, u in enumerate(units):
        where = f"units[{i}]"
        if u.kind not in UNIT_KINDS:
            raise InstanceError(f"unit #{i}: kind {u.kind!r} is not one of "
                                f"{', '.join(UNIT_KINDS)}", f"{where}.kind",
                                "use F (forward), B (backward) or W (weight gradient)")
        for field in ("n_ops", "microbatch", "chunk"):
            v = getattr(u, field)
            low = 1 if field == "n_ops" else 0
            if not (is_int(v) and v >= low):
                raise InstanceError(f"unit #{i}: {field} must be an integer >= {low}, got "
                                    f"{v!r}", f"{where}.{field}", f"use an integer >= {low}")
        e = u.earliest_start_s
        if not (is_real(e) and math.isfinite(e) and 0 <= e <= MAX_DURATION_S):
            raise InstanceError(f"unit #{i}: earliest_start_s must be finite, >= 0 and <= "
                                f"{MAX_DURATION_S:g} s, got {e!r}", f"{where}.earliest_start_s",
                                _FIX_VALUE)
        key = (u.microbatch, u.kind, u.chunk)
        if key in seen:
            raise InstanceError(f"unit #{i}: {u.kind} of microbatch {u.microbatch}, chunk "
                                f"{u.chunk} is listed twice", where,
                                "list each unit of the schedule once")
        seen.add(key)
        if at + u.n_ops > n_sched:
            raise InstanceError(f"unit #{i}: the units span more than the {n_sched} "
                                "scheduled ops", f"{where}.n_ops",
                                "make the units' n_ops add up to the number of forward "
                                "and backward ops")
        want = 0 if u.kind == "F" else 1
        bad = np.flatnonzero(ph[at:at + u.n_ops] != want)
        if bad.size:
            raise InstanceError(
                f"unit #{i} ({u.kind} of microbatch {u.microbatch}) spans op #{at + bad[0]} "
                f"of phase '{PHASES[ph[at + bad[0]]]}'", f"{where}.n_ops",
                "an F unit runs forward ops only, a B or W unit backward ops only")
        at += u.n_ops
    if at != n_sched:
        raise InstanceError(f"the units span {at} of the {n_sched} scheduled ops", "units",
                            "make the units' n_ops add up to the number of forward and "
                            "backward ops")
    return np.repeat(np.arange(len(units), dtype=np.int64), [u.n_ops for u in units])


# ----------------------------------------------------------------------------- tensors
class TensorIndex(NamedTuple):
    """What :func:`check_tensors` finds: positions as int64 arrays."""

    index: dict[str, int]
    """Tensor name -> index."""
    prod: np.ndarray
    """Producer (op index) of each tensor."""
    flat: np.ndarray
    """Reader op indices of all tensors, one tensor after the other, in file order."""
    counts: np.ndarray
    """Number of readers of each tensor."""


def check_tensors(tensors: Sequence[Tensor], op_index: Mapping[str, int],
                  n_sched: int) -> TensorIndex:
    """Check every tensor's own fields: name (printable, unique), size_bytes (integer in
    [0, MAX_BYTES]), category (printable), readers (scheduled ops after the producer,
    each once), recipe (lists of names: their meaning is :func:`check_recipes`'s) and
    producer (a scheduled op).

    Args:
        tensors: the tensors, in file order.
        op_index: op name -> index (:func:`check_ops`).
        n_sched: number of scheduled (forward and backward) ops, which come first.

    Raises:
        InstanceError: for the first tensor that fails (in file order; its fields in the
            order above, the readers last), naming it and its field.
    """
    nt = len(tensors)
    names = [t.name for t in tensors]
    name_ok = _labels_ok(names)
    index, dup = _first_index(names, name_ok)
    readers = [t.readers for t in tensors]
    readers_ok = _name_lists_ok(readers)
    recipes = [t.recipe for t in tensors]
    rec_ok = _recipe_lists_ok(recipes)
    prod = _lookup(op_index, [t.producer for t in tensors])
    if readers_ok.all():
        counts = np.fromiter(map(len, readers), dtype=np.int64, count=nt)
        flat_names = [r for rs in readers for r in rs]
    else:  # (a tensor whose readers are not a list has none to check)
        kept = [rs if good else () for rs, good in zip(readers, readers_ok.tolist(),
                                                       strict=True)]
        counts = np.fromiter(map(len, kept), dtype=np.int64, count=nt)
        flat_names = [r for rs in kept for r in rs]
    flat = _lookup(op_index, flat_names)
    owner = np.repeat(np.arange(nt, dtype=np.int64), counts)
    pos = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)
    twice, _ = _repeats(owner * (n_sched + 2) + np.minimum(flat, n_sched) + 1)

    def err(field: str, problem: str, fix: str) -> Callable[[int], InstanceError]:
        return lambda j: InstanceError(f"tensor '{tensors[j].name}': "
                                       + problem.format(t=tensors[j]), f"tensors[{j}].{field}",
                                       fix)

    def rd_err(problem: str, fix: str) -> Callable[[int], InstanceError]:
        def make(i: int) -> InstanceError:
            t = tensors[owner[i]]
            return InstanceError(f"tensor '{t.name}': " + problem.format(
                t=t, rd=flat_names[i]), f"tensors[{owner[i]}].readers[{pos[i]}]", fix)
        return make

    def rd_at(i: int) -> tuple[int, ...]:
        return (int(owner[i]), 1, int(pos[i]))

    _raise_first([
        _Check(name_ok, _at, lambda j: InstanceError(
            f"tensor #{j}: name must be a non-empty printable string, got "
            f"{tensors[j].name!r}", f"tensors[{j}].name", _FIX_LABEL)),
        _Check(~dup, _at, err("name", "duplicate tensor name",
                              "give every tensor a unique name")),
        _Check(_sizes_ok([t.size_bytes for t in tensors]), _at, err(
            "size_bytes", "size_bytes must be an integer in [0, 2**53], got "
            "{t.size_bytes!r}", _FIX_BYTES)),
        _Check(_labels_ok([t.category for t in tensors]), _at, err(
            "category", "category must be a non-empty printable string, got "
            "{t.category!r}", _FIX_LABEL)),
        _Check(readers_ok, _at, err("readers", "readers must be a list of op names, got "
                                    "{t.readers!r}", _FIX_READERS)),
        _Check(rec_ok, _at, err("recipe", "recipe ops and inputs must be lists of names",
                                "list op names in 'ops' and tensor names in 'inputs'")),
        _Check(prod >= 0, _at, err("producer", "producer op '{t.producer}' does not exist",
                                   "name a forward or backward op listed in 'ops'")),
        _Check(prod < n_sched, _at, err(
            "producer", "producer '{t.producer}' is a rebuild-only op", "a tensor must be "
            "produced by a scheduled op: name a forward or backward op")),
        _Check(flat >= 0, rd_at, rd_err("reader op '{rd}' does not exist", _FIX_READERS)),
        _Check(flat < n_sched, rd_at, rd_err(
            "reader '{rd}' is a rebuild-only op",
            "list it in the recipe of the tensor it rebuilds instead")),
        _Check(flat > prod[owner], rd_at, rd_err(
            "reader '{rd}' runs before or at its producer '{t.producer}'",
            "readers must come after the producer: " + _FIX_READERS)),
        _Check(~twice, rd_at, rd_err("reader '{rd}' listed twice", _FIX_READERS)),
    ])
    return TensorIndex(index, prod, flat, counts)


def _recipe_lists_ok(recipes: list[Any]) -> np.ndarray:
    """Each recipe None or with ``ops`` and ``inputs`` lists of names."""
    mine = [r for r in recipes if r is not None]
    if (_all_of_types([r.ops for r in mine], tuple)
            and _all_of_types([r.inputs for r in mine], tuple)
            and _all_of_types([x for r in mine for x in r.ops], str)
            and _all_of_types([x for r in mine for x in r.inputs], str)):
        return _ones(len(recipes))
    return _mask(recipes, lambda r: r is None or (_names(r.ops) and _names(r.inputs)))


def check_total(tensors: Sequence[Tensor], ops: Sequence[Op]) -> None:
    """Refuse tensors and workspaces that add up to more than 2**62 bytes."""
    total = sum(map(int, [t.size_bytes for t in tensors])) + sum(
        map(int, [op.workspace_bytes for op in ops]))
    if total > 2**62:
        raise InstanceError(f"the tensors and workspaces add up to {total} B, more than "
                            "2**62 B", "tensors", "give sizes in bytes, not bits or elements")


# ----------------------------------------------------------------------------- views
def check_storage_and_mutation(tensors: Sequence[Tensor], ops: Sequence[Op],
                               op_index: Mapping[str, int], t_index: Mapping[str, int]
                               ) -> None:
    """Check ``storage`` and ``mutated_by`` of the tensors that set them (few, so one at
    a time): a storage names another tensor that owns its storage, produced no later
    than the view in the same pass; mutating ops are forward readers after the producer.

    Raises:
        InstanceError: for the first tensor that fails, naming it and its field.
    """
    for j, t in enumerate(tensors):
        if t.storage is not None or t.mutated_by != ():
            _check_view(j, t, tensors, ops, op_index, t_index)


def _check_view(j: int, t: Tensor, tensors: Sequence[Tensor], ops: Sequence[Op],
                op_index: Mapping[str, int], t_index: Mapping[str, int]) -> None:
    at = f"tensors[{j}]"
    if t.storage is not None:
        where = f"{at}.storage"
        if not isinstance(t.storage, str):
            raise InstanceError(f"tensor '{t.name}': storage must be a tensor name or "
                                f"null, got {t.storage!r}", where, _FIX_STORAGE)
        b = t_index.get(t.storage)
        if b is None:
            raise InstanceError(f"tensor '{t.name}': storage '{t.storage}' does not "
                                "exist", where, "name the base tensor whose storage it "
                                "views, or null")
        if t.storage == t.name:
            raise InstanceError(f"tensor '{t.name}': storage names the tensor itself",
                                where, "use null for a tensor that owns its storage")
        base = tensors[b]
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


# ----------------------------------------------------------------------------- recipes
class RecipeArrays(NamedTuple):
    """The recipes of the saved tensors, per saved position (production order)."""

    ops: list[tuple[int, ...]]
    """Op indices each recipe re-runs, in order; () without a recipe."""
    inputs: list[tuple[int, ...]]
    """Saved positions of each recipe's inputs; () without a recipe."""
    c: np.ndarray
    """Rebuild time (s): the recipe's op durations added left to right; inf without a
    recipe or with a blocker."""
    transient: np.ndarray
    """transient_bytes (int64), 0 without a recipe."""
    workspace: np.ndarray
    """Largest workspace of the recipe's ops (bytes, int64), 0 without a recipe."""
    blockers: dict[int, str]
    """Saved position -> why its recipe cannot run (c = inf although a recipe is given)."""


class _Flat(NamedTuple):
    """Items of the recipes' lists one after the other: the recipe (owner) and the
    position in its list of each."""

    owner: np.ndarray
    pos: np.ndarray


def _flat(counts: np.ndarray) -> _Flat:
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return _Flat(np.repeat(np.arange(len(counts), dtype=np.int64), counts),
                 np.arange(int(counts.sum()), dtype=np.int64) - starts)


def _first_per_owner(flag: np.ndarray, owner: np.ndarray) -> dict[int, int]:
    """owner -> first flagged element of it, for the owners with one (owners ascend)."""
    idx = np.flatnonzero(flag)
    own, first = np.unique(owner[idx], return_index=True)
    return dict(zip(own.tolist(), idx[first].tolist(), strict=True))


def check_recipes(tensors: Sequence[Tensor], ops: Sequence[Op], saved: np.ndarray,
                  prod: np.ndarray, saved_mask: np.ndarray, op_index: Mapping[str, int],
                  t_index: Mapping[str, int], ph: np.ndarray,
                  rng_capture: bool) -> RecipeArrays:
    """Check the recipes of the saved tensors and compute their arrays.

    A recipe lists at least one op; its ops exist, each once, are forward or rebuild-only
    ops and run no later than the producer, except the ops that mutate the tensor in
    place, which it must all list; its inputs exist, are saved, are not the tensor itself
    and are produced no later than it; transient_bytes is an integer in [0, MAX_BYTES].
    A valid recipe is blocked (c = inf) by a never-recompute op, and without RNG capture
    by a random or RNG-regeneration op or an RNG-state input.

    Args:
        tensors, ops: the instance's lists.
        saved: tensor indices of the saved tensors, in production order.
        prod: producer op index of every tensor.
        saved_mask: whether each tensor is saved.
        op_index, t_index: name -> index of ops and tensors.
        ph: index in PHASES of every op's phase.
        rng_capture: whether RNG state can be saved.

    Raises:
        InstanceError: for the first saved tensor (in production order) whose recipe
            fails, naming it and the field (``tensors[j].recipe.ops[n]``).
    """
    recs = [tensors[j].recipe for j in saved.tolist()]
    k_of = np.array([k for k, r in enumerate(recs) if r is not None], dtype=np.int64)
    mine = [recs[k] for k in k_of.tolist()]
    jm = saved[k_of]  # tensor index of each recipe's tensor
    pk = prod[jm]     # its producer
    n_op = np.fromiter(map(len, [r.ops for r in mine]), dtype=np.int64, count=len(mine))
    n_in = np.fromiter(map(len, [r.inputs for r in mine]), dtype=np.int64, count=len(mine))
    op_names = [o for r in mine for o in r.ops]
    in_names = [x for r in mine for x in r.inputs]
    q, x = _lookup(op_index, op_names), _lookup(t_index, in_names)
    fo, fx = _flat(n_op), _flat(n_in)
    mut = [(r, op_index[u], n) for r, j in enumerate(jm.tolist())
           for n, u in enumerate(tensors[j].mutated_by)]  # (mutated_by: checked before)
    m_own = np.array([r for r, _, _ in mut], dtype=np.int64)
    width = len(ops) + len(op_names) + 1
    op_key = fo.owner * width + q
    mut_key = m_own * width + np.array([u for _, u, _ in mut], dtype=np.int64)
    _check_recipe_fields(tensors, mine, k_of, jm, pk, q, x, fo, fx, op_names, in_names,
                         width, np.isin(op_key, mut_key), mut, np.isin(mut_key, op_key), ph,
                         prod, saved_mask)
    return _recipe_arrays(tensors, ops, len(saved), saved, mine, k_of, q, x, fo, fx, n_op,
                          rng_capture)


def _check_recipe_fields(tensors: Sequence[Tensor], mine: list[Any], k_of: np.ndarray,
                         jm: np.ndarray, pk: np.ndarray, q: np.ndarray, x: np.ndarray,
                         fo: _Flat, fx: _Flat, op_names: list[str], in_names: list[str],
                         width: int, mutating: np.ndarray, mut: list[tuple[int, int, int]],
                         mut_listed: np.ndarray, ph: np.ndarray, prod: np.ndarray,
                         saved_mask: np.ndarray) -> None:
    """The checks of :func:`check_recipes` (arguments: its flattened lists)."""
    qid = q.copy()  # an id per op name within a recipe, found or not, for repeats
    missing: dict[str, int] = {}
    for i in np.flatnonzero(q < 0).tolist():
        qid[i] = width + missing.setdefault(op_names[i], len(missing))
    _, many = _repeats(fo.owner * (2 * width) + qid)
    qc, xc = np.maximum(q, 0), np.maximum(x, 0)

    def name(r: int) -> str:
        return tensors[int(jm[r])].name

    def at(r: int) -> str:
        return f"tensors[{int(jm[r])}].recipe"

    def rec_key(r: int) -> tuple[int, ...]:
        return (int(k_of[r]), 0, 0)

    def op_err(problem: str, fix: str) -> Callable[[int], InstanceError]:
        def make(i: int) -> InstanceError:
            r = int(fo.owner[i])
            t = tensors[int(jm[r])]
            return InstanceError(f"tensor '{t.name}': " + problem.format(
                o=op_names[i], t=t), f"{at(r)}.ops[{fo.pos[i]}]", fix)
        return make

    def in_err(problem: str, fix: str) -> Callable[[int], InstanceError]:
        def make(i: int) -> InstanceError:
            r = int(fx.owner[i])
            return InstanceError(f"tensor '{name(r)}': " + problem.format(x=in_names[i]),
                                 f"{at(r)}.inputs[{fx.pos[i]}]", fix)
        return make

    def dup_err(i: int) -> InstanceError:
        r, o = int(fo.owner[i]), op_names[i]
        again = mine[r].ops.index(o, int(fo.pos[i]) + 1)
        return InstanceError(f"tensor '{name(r)}': recipe lists op '{o}' more than once",
                             f"{at(r)}.ops[{again}]", "list each op the recipe re-runs once")

    def mut_err(i: int) -> InstanceError:
        r, _, n = mut[i]
        t = tensors[int(jm[r])]
        return InstanceError(
            f"tensor '{t.name}': recipe misses op '{t.mutated_by[n]}', which mutates the "
            f"tensor in place after its producer '{t.producer}', so the recipe would rebuild "
            "the pre-mutation value", f"{at(r)}.ops", "add the op to the recipe, or drop the "
            "recipe")

    def op_at(i: int) -> tuple[int, ...]:
        return (int(k_of[fo.owner[i]]), 1, int(fo.pos[i]))

    def mut_at(i: int) -> tuple[int, ...]:
        return (int(k_of[mut[i][0]]), 2, mut[i][2])

    def in_at(i: int) -> tuple[int, ...]:
        return (int(k_of[fx.owner[i]]), 3, int(fx.pos[i]))

    _raise_first([
        _Check(np.array([len(r.ops) > 0 for r in mine], dtype=bool), rec_key,
               lambda r: InstanceError(f"tensor '{name(r)}': recipe has no ops", at(r),
                                       "give the recipe at least one op, or null if the "
                                       "tensor cannot be rebuilt")),
        _Check(~many, op_at, dup_err),
        _Check(q >= 0, op_at, op_err("recipe op '{o}' does not exist", _FIX_RECIPE_OPS)),
        _Check(ph[qc] != 1, op_at, op_err("recipe op '{o}' is a backward op",
                                          "recipes re-run forward or rebuild-only ops: "
                                          + _FIX_RECIPE_OPS)),
        _Check(~((ph[qc] == 0) & (qc > pk[fo.owner]) & ~mutating), op_at, op_err(
            "recipe op '{o}' runs after the producer '{t.producer}' in the forward pass; "
            "it cannot help rebuild it", _FIX_RECIPE_OPS)),
        _Check(mut_listed, mut_at, mut_err),
        _Check(x >= 0, in_at, in_err("recipe input '{x}' does not exist",
                                     _FIX_RECIPE_INPUTS)),
        _Check(x != jm[fx.owner], in_at, in_err(
            "recipe reads the tensor it rebuilds",
            "remove the tensor itself from its recipe inputs")),
        _Check(saved_mask[xc], in_at, in_err(
            "recipe input '{x}' is not a saved tensor, so it is gone by the backward pass",
            "rebuild from saved tensors only: " + _FIX_RECIPE_INPUTS)),
        _Check(prod[xc] <= pk[fx.owner], in_at, in_err(
            "recipe input '{x}' is produced after it", _FIX_RECIPE_INPUTS)),
        _Check(_sizes_ok([r.transient_bytes for r in mine]),
               lambda r: (int(k_of[r]), 4, 0), lambda r: InstanceError(
                   f"tensor '{name(r)}': recipe transient_bytes must be an integer in "
                   f"[0, 2**53], got {mine[r].transient_bytes!r}",
                   f"{at(r)}.transient_bytes", _FIX_BYTES)),
    ])


def _recipe_arrays(tensors: Sequence[Tensor], ops: Sequence[Op], ns: int, saved: np.ndarray,
                   mine: list[Any], k_of: np.ndarray, q: np.ndarray, x: np.ndarray,
                   fo: _Flat, fx: _Flat, n_op: np.ndarray, rng_capture: bool) -> RecipeArrays:
    """The :class:`RecipeArrays` of checked recipes (arguments: those of
    :func:`check_recipes`, flattened)."""
    pos = np.full(len(tensors), -1, dtype=np.int64)
    pos[saved] = np.arange(ns, dtype=np.int64)
    none_t: tuple[int, ...] = ()
    ops_l, ins_l = [none_t] * ns, [none_t] * ns
    ql, xl = q.tolist(), pos[x].tolist()
    a = b = 0
    for k, no, ni in zip(k_of.tolist(), n_op.tolist(), [len(r.inputs) for r in mine],
                         strict=True):
        ops_l[k] = tuple(ql[a:a + no])
        ins_l[k] = tuple(xl[b:b + ni])
        a += no
        b += ni
    blockers = _blockers(tensors, ops, mine, k_of, q, x, fo, fx, rng_capture)
    # c: durations added left to right, one recipe-op column at a time (adding 0.0 to a
    # finished sum leaves it unchanged)
    op_dur = np.array([op.duration_s for op in ops], dtype=np.float64)
    grid = np.zeros((int(n_op.max()) if len(mine) else 0, len(mine)))
    grid[fo.pos, fo.owner] = op_dur[q]
    csum = np.zeros(len(mine))
    for row in grid:
        csum += row
    c = np.full(ns, np.inf)
    c[k_of] = csum
    c[list(blockers)] = np.inf
    ws = np.zeros(ns, dtype=np.int64)
    if len(mine):
        op_ws = np.array([op.workspace_bytes for op in ops], dtype=np.int64)
        ws[k_of] = np.maximum.reduceat(op_ws[q], np.cumsum(n_op) - n_op)
    transient = np.zeros(ns, dtype=np.int64)
    transient[k_of] = [r.transient_bytes for r in mine]
    return RecipeArrays(ops_l, ins_l, c, transient, ws, blockers)


def _blockers(tensors: Sequence[Tensor], ops: Sequence[Op], mine: list[Any],
              k_of: np.ndarray, q: np.ndarray, x: np.ndarray, fo: _Flat, fx: _Flat,
              rng_capture: bool) -> dict[int, str]:
    """Saved position -> why its (valid) recipe cannot run: its first never-recompute op;
    else, without RNG capture, its first op that needs RNG state, else its first input
    that is RNG state."""
    out: dict[int, str] = {}
    if any(op.never_recompute for op in ops):
        never = np.array([op.never_recompute for op in ops], dtype=bool)
        for r, i in _first_per_owner(never[q], fo.owner).items():
            out[int(k_of[r])] = f"its recipe runs never-recompute op '{ops[q[i]].name}'"
    if rng_capture:
        return out
    rng = np.array([op.random or op.kind == RNG_REGEN_KIND for op in ops], dtype=bool)
    for r, i in _first_per_owner(rng[q], fo.owner).items():
        out.setdefault(int(k_of[r]), f"its recipe runs op '{ops[q[i]].name}', which needs "
                       "saved RNG state, and the instance has rng_capture = false (RNG state "
                       "cannot be saved)")
    state = np.array([t.category == RNG_STATE_CATEGORY for t in tensors], dtype=bool)
    for r, i in _first_per_owner(state[x], fx.owner).items():
        out.setdefault(int(k_of[r]), f"its recipe reads RNG state '{tensors[x[i]].name}' "
                       "and the instance has rng_capture = false (RNG state cannot be saved)")
    return out
