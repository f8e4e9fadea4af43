"""A plan for a profiled instance turned into a policy for PyTorch's selective activation
checkpointing (``torch.utils.checkpoint.create_selective_checkpoint_contexts``).

:func:`sac_policy` maps each forward ATen call the profiler numbered (:func:`op_name`) to
the answer its saved outputs need: **keep** -> ``MUST_SAVE``, **swap** ->
``MUST_CPU_OFFLOAD``, **recomp** -> ``MUST_RECOMPUTE``. A call whose outputs are not saved
tensors gets ``MUST_RECOMPUTE`` (or ``MUST_SAVE`` with ``unplanned="save"``). The policy
is matched to op calls two ways, both written to the file: the profiler's numbering
(``f0046.mm``), and selective checkpointing's own numbering (the overload and its
``call``, the k-th call of that overload inside its checkpoint region), so a stock
``policy_fn`` can read the file without slackopt. :mod:`slackopt.torch.sac` runs it.

**Regions.** Selective checkpointing works inside ``torch.utils.checkpoint`` regions: in
the backward pass it replays a region's forward, returning the cached outputs of
``MUST_SAVE`` calls and re-running the rest. The regions are modules (``regions="layers"``:
every module path that ends at its first all-digit component, ``model.layers.3``; or the
module paths given); each covers the forward calls of the tensors its module made (the
tensor names are module paths, :func:`~slackopt.torch.trace.storage_name`). A call
outside every region runs under plain autograd: its saved tensors are kept, or offloaded.

**What a policy cannot express** (:class:`SACExportError` names each tensor and why;
nothing is changed silently):

- recomp of a tensor made outside every region (plain autograd saves it), of a region's
  input or of a tensor read in the forward pass after its region (a checkpoint region
  holds its inputs until its replay), of a tensor a custom ``autograd.Function`` keeps
  (``meta["unmanaged_saved"]``: swap of those too);
- a recipe that runs a call outside the tensor's region (the replay would read the
  region's input instead: another recipe than the plan's);
- one call whose saved outputs have different decisions but not keep and swap together
  (selective checkpointing saves or re-runs all outputs of a call together);
- a random call (dropout) re-run after a cached random call of the same region (the
  replay would draw its numbers from another position of the generator);
- a recipe that runs a call the policy caches (it also makes a kept or swapped tensor,
  or must never run twice: BatchNorm's running statistics, data-dependent shapes), or a
  call re-run that reads a cached storage before its last in-place write.

**Units.** A storage written in place after its allocation (``NAME.pre`` then ``NAME``:
dropout's ``empty_like``, ``bernoulli_``, ``div_``; BatchNorm then an in-place ReLU) is
cached or re-run whole, with the calls that write it: ATen keeps using the allocated
tensor, so a re-run allocation followed by a cached write, or the reverse, gives other
values.

Swap in PyTorch 2.13: ``CheckpointPolicy.MUST_CPU_OFFLOAD`` exists, but eager selective
checkpointing caches only ``MUST_SAVE``/``PREFER_SAVE`` outputs and re-runs every other
call, offload included (``_CachingTorchDispatchMode``), and ``torch.compile``'s offloading
pass reads another mark. The file says ``MUST_CPU_OFFLOAD``; :mod:`slackopt.torch.sac`
answers ``MUST_SAVE`` for those calls and offloads the cached storage itself.

Sources: PyTorch documentation of ``torch.utils.checkpoint`` (non-reentrant checkpoint,
``create_selective_checkpoint_contexts``, ``CheckpointPolicy``) and its source (2.13);
Checkmate (Jain et al., MLSys 2020) for rebuilding inside a replayed region.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slackopt.errors import FileFormatError, SlackoptError
from slackopt.instance import Instance
from slackopt.plan import DECISION_NAMES, KEEP, RECOMP, SWAP, Plan
from slackopt.torch.build import GENERATOR
from slackopt.torch.errors import PlanRuntimeError

FORMAT = "slackopt-sac-policy"
"""``format`` of a policy file."""
VERSION = 1
"""``version`` of the policy file format this module writes and reads."""

MUST_SAVE, MUST_CPU_OFFLOAD, MUST_RECOMPUTE = "MUST_SAVE", "MUST_CPU_OFFLOAD", "MUST_RECOMPUTE"
AUTOGRAD = "AUTOGRAD"
"""The answer of a call outside every checkpoint region: plain autograd saves what it
saves (offloaded if the plan swaps it)."""
POLICIES = (MUST_SAVE, MUST_CPU_OFFLOAD, MUST_RECOMPUTE, AUTOGRAD)
REWRITE = "write the policy again with slackopt export PLAN --instance INSTANCE --to torch-sac"

_OP_NAMED = re.compile(r"^[fb]\d{4,}\.")
_DIGITS = re.compile(r"^\d+$")


class SACExportError(SlackoptError, ValueError):
    """The plan has tensors a selective-checkpoint policy cannot express.

    Attributes:
        reasons: {tensor name: why} for every such tensor, in production order.
    """

    def __init__(self, reasons: Mapping[str, str], instance: str) -> None:
        self.reasons = dict(reasons)
        shown = "; ".join(f"'{n}': {why}" for n, why in list(self.reasons.items())[:12])
        more = len(self.reasons) - 12
        super().__init__(
            f"{len(self.reasons)} tensor(s) of the plan for '{instance}' cannot be expressed "
            f"as a selective-checkpoint policy: {shown}"
            + (f"; and {more} more" if more > 0 else "")
            + ". Fix: plan those tensors keep (or swap where the reason allows it), or "
            "choose other regions")


@dataclass(frozen=True)
class Region:
    """One checkpoint region: a module and the forward calls it covers.

    Attributes:
        module: the module path (as ``named_modules()`` spells it).
        first, last: the first and the last forward op index of the tensors it made.
    """

    module: str
    first: int
    last: int


@dataclass(frozen=True)
class CallPolicy:
    """The policy of one forward ATen call.

    Attributes:
        index: the forward op index (the profiler's numbering).
        op: the op name (``f0046.mm``).
        label: :func:`~slackopt.torch.trace.op_label` of the overload (checked at run).
        region: the index of its region in ``SACPolicy.regions``, None outside all.
        call: selective checkpointing's numbering: how many calls of the same overload
            came before it in its region (None outside all).
        policy: one of :data:`POLICIES`.
        tensors: the saved tensors it produces (their final version), with their
            decisions.
        planned: False when the call makes no saved tensor and no recipe runs it (its
            answer follows ``unplanned``).
    """

    index: int
    op: str
    label: str
    region: int | None
    call: int | None
    policy: str
    tensors: tuple[tuple[str, str], ...] = ()
    planned: bool = True


@dataclass(frozen=True)
class Offload:
    """A swapped tensor as the runtime finds and frees it.

    Attributes:
        tensor: the instance tensor name.
        op: the forward op index that gives it its final value.
        output: which storage of that call: the k-th new output storage, or -1 for the
            storage the call writes in place.
        nbytes: its storage's bytes (checked at run).
        last_forward: the last forward op index that reads or holds it (the device copy
            is freed after it, once the copy to the host is done).
    """

    tensor: str
    op: int
    output: int
    nbytes: int
    last_forward: int


@dataclass
class SACPolicy:
    """A plan as a selective-checkpoint policy (see the module docstring).

    Attributes:
        instance: the instance name; ``ops_digest``: SHA-256 of its forward op names
            (a policy runs only on the step it was made for).
        regions: the checkpoint regions.
        calls: one :class:`CallPolicy` per forward op, in order.
        offloads: the swapped tensors.
        decisions: {saved tensor name: "keep" | "swap" | "recomp"}.
        unplanned: "recompute" or "save": the answer of calls no decision covers.
        allow_cache_entry_mutation: passed to ``create_selective_checkpoint_contexts``:
            True when a cached call writes in place (its own write counts as a mutation
            there: the version is read before autograd counts the write) or its storage
            is written in place later (an in-place ReLU after BatchNorm); the export has
            checked that no re-run call reads such a storage before its last write.
        extra: what the policy does beyond the plan: ``replayed_ops`` and
            ``replayed_s`` (calls re-run though no recipe needs them, at most; seconds of
            the profile), ``cached_unplanned_bytes`` (outputs of unplanned calls held
            in the cache until their region's replay), ``region_input_bytes`` (tensors
            not saved in the plan that a region holds as its inputs).
        meta: provenance (the torch version of the profile, the regions asked for; the
            command line adds the plan file).
    """

    instance: str
    ops_digest: str
    regions: list[Region]
    calls: list[CallPolicy]
    offloads: list[Offload]
    decisions: dict[str, str]
    unplanned: str = "recompute"
    allow_cache_entry_mutation: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    # -- sets a test or a report compares with what ran
    def tensors_with(self, decision: str) -> set[str]:
        """The saved tensors planned `decision` ("keep", "swap" or "recomp")."""
        return {n for n, d in self.decisions.items() if d == decision}

    def to_json(self) -> dict[str, Any]:
        """The policy as a JSON document (what :func:`save_policy` writes)."""
        return {
            "format": FORMAT, "version": VERSION, "instance": self.instance,
            "ops_digest": self.ops_digest, "unplanned": self.unplanned,
            "allow_cache_entry_mutation": self.allow_cache_entry_mutation,
            "regions": [{"module": r.module, "first": r.first, "last": r.last}
                        for r in self.regions],
            "calls": [{"index": c.index, "op": c.op, "label": c.label, "region": c.region,
                       "call": c.call, "policy": c.policy,
                       "tensors": [list(t) for t in c.tensors], "planned": c.planned}
                      for c in self.calls],
            "offloads": [{"tensor": o.tensor, "op": o.op, "output": o.output,
                          "nbytes": o.nbytes, "last_forward": o.last_forward}
                         for o in self.offloads],
            "decisions": dict(self.decisions), "extra": dict(self.extra),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], source: str = "<policy>") -> SACPolicy:
        """Read a document written by :meth:`to_json`.

        Raises:
            FileFormatError: not a policy document, another version, or a field missing or
                of the wrong type (names `source` and the field).
        """
        def need(d: Mapping[str, Any], key: str, typ: Any, where: str) -> Any:
            if key not in d or not isinstance(d[key], typ) or isinstance(d[key], bool) \
                    and typ is int:
                raise FileFormatError(source, f"{where}{key}",
                                      f"missing or not a {getattr(typ, '__name__', typ)}",
                                      REWRITE)
            return d[key]

        if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
            raise FileFormatError(source, "format",
                                  f"not a selective-checkpoint policy (format {FORMAT!r})",
                                  REWRITE)
        if doc.get("version") != VERSION:
            raise FileFormatError(source, "version",
                                  f"version {doc.get('version')!r}; this slackopt reads "
                                  f"version {VERSION}", REWRITE)
        try:
            regions = [Region(need(r, "module", str, f"regions[{i}]."),
                              need(r, "first", int, f"regions[{i}]."),
                              need(r, "last", int, f"regions[{i}]."))
                       for i, r in enumerate(need(doc, "regions", list, ""))]
            calls = []
            for i, c in enumerate(need(doc, "calls", list, "")):
                pol = need(c, "policy", str, f"calls[{i}].")
                if pol not in POLICIES:
                    raise FileFormatError(source, f"calls[{i}].policy",
                                          f"{pol!r} is not one of {', '.join(POLICIES)}",
                                          REWRITE)
                calls.append(CallPolicy(
                    need(c, "index", int, f"calls[{i}]."), need(c, "op", str, f"calls[{i}]."),
                    need(c, "label", str, f"calls[{i}]."), c.get("region"), c.get("call"),
                    pol, tuple((str(a), str(b)) for a, b in c.get("tensors", ())),
                    bool(c.get("planned", True))))
            offloads = [Offload(need(o, "tensor", str, f"offloads[{i}]."),
                                need(o, "op", int, f"offloads[{i}]."),
                                need(o, "output", int, f"offloads[{i}]."),
                                need(o, "nbytes", int, f"offloads[{i}]."),
                                need(o, "last_forward", int, f"offloads[{i}]."))
                        for i, o in enumerate(need(doc, "offloads", list, ""))]
            return cls(need(doc, "instance", str, ""), need(doc, "ops_digest", str, ""),
                       regions, calls, offloads, dict(need(doc, "decisions", dict, "")),
                       str(doc.get("unplanned", "recompute")),
                       bool(doc.get("allow_cache_entry_mutation", False)),
                       dict(doc.get("extra") or {}), dict(doc.get("meta") or {}))
        except (TypeError, ValueError, AttributeError) as e:
            raise FileFormatError(source, "", f"malformed policy: {e}", REWRITE) from None


def save_policy(policy: SACPolicy, path: str | Path, *, overwrite: bool = False) -> Path:
    """Write `policy` as JSON to `path` (refuses an existing file unless `overwrite`).

    Raises:
        SlackoptError: the file exists and `overwrite` is False.
    """
    p = Path(path)
    if p.exists() and not overwrite:
        raise SlackoptError(f"'{p}' exists; pass --force (overwrite=True) to replace it")
    p.write_text(json.dumps(policy.to_json(), indent=1) + "\n")
    return p


def load_policy(path: str | Path) -> SACPolicy:
    """Read a policy file written by :func:`save_policy`.

    Raises:
        FileFormatError: unreadable, not JSON, or not a policy (names the file and field).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FileFormatError(str(p), "", f"cannot read a JSON policy: {e}", REWRITE) from None
    return SACPolicy.from_json(doc, str(p))


def ops_digest(instance: Instance) -> str:
    """SHA-256 (hex) of the instance's forward op names joined by newlines."""
    names = "\n".join(op.name for op in instance.ops[:instance.n_fwd])
    return hashlib.sha256(names.encode()).hexdigest()


# ----------------------------------------------------------------------------- modules
def module_of(tensor_name: str) -> str:
    """The module path a profiled tensor's name gives: the name without ``.pre`` and
    ``#n``; "" for a tensor named after its op (made outside any submodule)."""
    base = tensor_name[:-4] if tensor_name.endswith(".pre") else tensor_name
    base = re.sub(r"#\d+$", "", base)
    return "" if _OP_NAMED.match(base) else base


def layer_module(path: str) -> str | None:
    """The path up to and including its first all-digit component (``model.layers.3`` of
    ``model.layers.3.mlp.up_proj``), None without one."""
    parts = path.split(".") if path else []
    for i, p in enumerate(parts):
        if _DIGITS.match(p):
            return ".".join(parts[: i + 1])
    return None


def _op_modules(instance: Instance) -> list[str | None]:
    """The module of each forward op that allocates a storage (that of the storage's name);
    None for an op that allocates none (an in-place write, which may run in another
    module than the one that made the storage; an op whose outputs are persistent)."""
    mods: list[str | None] = [None] * instance.n_fwd
    names = {t.name for t in instance.tensors}
    for t in instance.tensors:
        i = instance.op_index(t.producer)
        if i < instance.n_fwd and (t.name.endswith(".pre") or t.name + ".pre" not in names):
            mods[i] = module_of(t.name)
    return mods


def find_regions(instance: Instance, regions: str | Sequence[str] = "layers") -> list[Region]:
    """The checkpoint regions of `instance`: "layers" (every layer module, see
    :func:`layer_module`) or the given module paths.

    A region covers the forward ops from the first to the last that allocate a tensor of
    its module or a submodule; ops allocating none between them belong to it. The
    module's call may run more such ops before the first or after the last (BatchNorm
    counts its batches in place first): :class:`~slackopt.torch.sac.SACRun` caches those.

    Raises:
        SlackoptError: a module path makes no tensor, "" (the whole model: its call does
            not hold the loss), or two regions' ops interleave (names both).
    """
    mods = _op_modules(instance)

    def under(m: str | None, path: str) -> bool:
        return m is not None and (path == "" or m == path or m.startswith(path + "."))

    if regions == "layers":
        paths: list[str] = []
        for m in mods:
            lm = layer_module(m) if m else None
            if lm is not None and lm not in paths:
                paths.append(lm)
    elif isinstance(regions, str):
        raise SlackoptError(f"regions {regions!r}: give 'layers' or a list of module paths")
    else:
        paths = [str(p) for p in regions]
        if "" in paths:
            raise SlackoptError("region '': give module paths below the model (its own call "
                                "does not run the loss)")
    out: list[Region] = []
    for path in paths:
        idx = [i for i, m in enumerate(mods) if under(m, path)]
        if not idx:
            raise SlackoptError(f"region '{path}': no forward tensor of instance "
                                f"'{instance.name}' comes from that module; give a module "
                                "path as named_modules() spells it")
        lo, hi = idx[0], idx[-1]
        alien = [i for i in range(lo, hi + 1) if mods[i] is not None and not under(mods[i], path)]
        if alien:
            raise SlackoptError(
                f"region '{path}' (ops {instance.ops[lo].name} .. {instance.ops[hi].name}) "
                f"interleaves with module '{mods[alien[0]]}' (op "
                f"{instance.ops[alien[0]].name}): a module called twice, or code between its "
                "calls; choose other regions")
        out.append(Region(path, lo, hi))
    out.sort(key=lambda r: r.first)
    for a, b in zip(out, out[1:], strict=False):
        if b.first <= a.last:
            raise SlackoptError(f"regions '{a.module}' and '{b.module}' overlap; give "
                                "modules that do not contain each other")
    return out


# ----------------------------------------------------------------------------- export
class _Draft:
    """The policy of `plan` on `instance` while :func:`sac_policy` works it out: the calls'
    answers, the units of in-place chains, and the reasons of the tensors it cannot
    express.

    Attributes:
        n, ops: the forward op count and ops.
        regs, region_of: the regions, and the region index of each forward call (None
            outside all).
        dec: {saved tensor: decision} of the plan.
        prod: {forward call: the tensors it makes}.
        pre_names: the tensors allocated before an in-place write (``NAME.pre``).
        recipe_users: {forward call: the recomp tensors whose recipe runs it}.
        why: {tensor: why the policy cannot express its decision}.
        pol: each forward call's answer (one of :data:`POLICIES`).
        planned: whether a decision or a recipe covers each forward call.
        unit, groups, readers_of: the units (union-find parents; {root: its calls};
            {root: the calls that read its ``NAME.pre`` storage and make their own
            tensors}).
    """

    def __init__(self, instance: Instance, plan: Plan, regs: list[Region],
                 unplanned: str) -> None:
        self.instance, self.regs, self.unplanned = instance, regs, unplanned
        self.n = n = instance.n_fwd
        self.ops = instance.ops[:n]
        self.region_of: list[int | None] = [None] * n
        for k, r in enumerate(regs):
            for i in range(r.first, r.last + 1):
                self.region_of[i] = k
        self.dec = {name: int(d) for name, d in zip(plan.names, plan.decisions, strict=True)}
        self.idx = idx = instance.op_index
        self.prod: dict[int, list[Any]] = {}
        for t in instance.tensors:
            if idx(t.producer) < n:
                self.prod.setdefault(idx(t.producer), []).append(t)
        self.pre_names = {t.name for t in instance.tensors if t.name.endswith(".pre")}
        self.recipe_users: dict[int, list[str]] = {}
        for name, d in self.dec.items():
            if d == RECOMP:
                for o in instance.tensor(name).recipe.ops:
                    self.recipe_users.setdefault(idx(o), []).append(name)
        self.why: dict[str, str] = {}
        self.pol: list[str] = [AUTOGRAD] * n
        self.planned = [False] * n
        self.cached_units: set[int] = set()
        self._units()

    def fwd_readers(self, t: Any) -> list[int]:
        """The forward calls reading tensor `t`, in order."""
        return sorted(j for j in (self.idx(r) for r in t.readers) if j < self.n)

    def blame(self, i: int, msg: str) -> None:
        """Every decided output of call i, and every recomp tensor whose recipe runs it."""
        for t in self.prod.get(i, []):
            if t.name in self.dec:
                self.why.setdefault(t.name, msg)
        for nm in self.recipe_users.get(i, []):
            self.why.setdefault(nm, msg)

    def find(self, i: int) -> int:
        """The unit (its root call) of call i."""
        unit = self.unit
        while unit[i] != i:
            unit[i] = unit[unit[i]]
            i = unit[i]
        return i

    def _units(self) -> None:
        """Units: a storage written in place after its allocation (NAME.pre, then NAME) is
        one unit with the calls that write it (those of NAME.pre's readers that allocate
        nothing) and the call of its final version. A unit is cached or re-run whole: the
        calling code keeps using the allocated tensor (ATen's dropout runs
        noise.bernoulli_(), noise.div_(), then input * noise), so a re-run allocation
        followed by a cached write, or the reverse, gives other values."""
        instance, n, idx, prod = self.instance, self.n, self.idx, self.prod
        self.unit = list(range(n))
        find = self.find
        self.readers_of: dict[int, list[int]] = {}
        chains: list[tuple[int, list[int]]] = []
        for p in sorted(self.pre_names):
            a = idx(instance.tensor(p).producer)
            f = idx(instance.tensor(p[:-4]).producer)
            if a >= n or f >= n:
                continue
            readers = self.fwd_readers(instance.tensor(p))
            members = [a, f] + [j for j in readers if not prod.get(j)]
            plain = [j for j in readers if prod.get(j) and j != f]
            for j in members[1:]:
                self.unit[find(j)] = find(a)
            chains.append((a, plain))
        self.groups: dict[int, list[int]] = {}
        for i in range(n):
            self.groups.setdefault(find(i), []).append(i)
        for a, plain in chains:
            self.readers_of.setdefault(find(a), []).extend(plain)

    def cache(self, u: int) -> None:
        """Cache unit u (its calls inside regions), then every unplanned call reading one
        of its storages between allocation and last write (the replay would read the
        final values there); a planned one cannot be expressed."""
        pol, groups = self.pol, self.groups
        work = [u]
        while work:
            u = work.pop()
            if u in self.cached_units:
                continue
            self.cached_units.add(u)
            for i in groups[u]:
                if self.region_of[i] is not None:
                    swaps = any(self.dec.get(t.name) == SWAP for t in self.prod.get(i, []))
                    pol[i] = MUST_CPU_OFFLOAD if swaps else MUST_SAVE
            for j in self.readers_of.get(u, []):
                if self.region_of[j] is None or pol[j] != MUST_RECOMPUTE:
                    continue
                if self.planned[j]:
                    self.blame(j, f"re-run by the replay although it reads "
                                  f"{self.ops[groups[u][0]].name}'s storage before its last "
                                  "in-place write, and that storage is cached with its final "
                                  "values")
                else:
                    work.append(self.find(j))

    def answer_units(self) -> None:
        """Step 1: each unit's answer from the decisions of the tensors its calls make;
        then cache every unit with a cached call."""
        ops, pol, dec = self.ops, self.pol, self.dec
        for members in self.groups.values():
            mine = [(t.name, dec[t.name]) for i in members for t in self.prod.get(i, [])
                    if t.name in dec]
            ds = {d for _, d in mine}
            users = [i for i in members if i in self.recipe_users]
            for i in members:
                self.planned[i] = bool(mine) or bool(users)
            if RECOMP in ds and ds != {RECOMP}:
                for nm, _ in mine:
                    self.why.setdefault(
                        nm, f"calls {', '.join(ops[i].name for i in members)} also make "
                        + ", ".join(f"'{m}' ({DECISION_NAMES[e]})" for m, e in mine
                                    if m != nm)
                        + ": selective checkpointing saves or re-runs a call, and an "
                        "in-place chain, with all its outputs")
                continue
            inside = [i for i in members if self.region_of[i] is not None]
            if not inside:
                continue
            if ds == {RECOMP} or (users and not ds):
                for i in inside:
                    pol[i] = MUST_RECOMPUTE
            elif ds or any(ops[i].never_recompute for i in members) \
                    or len(inside) < len(members) or self.unplanned == "save":
                pol[inside[0]] = MUST_SAVE  # marks it; cache() sets every call
            else:
                for i in inside:
                    pol[i] = MUST_RECOMPUTE
        for u, members in self.groups.items():
            if any(pol[i] == MUST_SAVE for i in members):
                self.cache(u)

    def check_decisions(self) -> None:
        """Step 2: the decisions a region cannot carry (a custom autograd.Function's
        tensor not kept; a recomp made outside every region, read after its region, or
        whose recipe runs a call outside its region or one the policy caches)."""
        instance, ops, why = self.instance, self.ops, self.why
        unmanaged = set(instance.meta.get("unmanaged_saved") or ())
        for name, d in self.dec.items():
            t = instance.tensor(name)
            i = self.idx(t.producer)
            if name in unmanaged and d != KEEP:
                why.setdefault(name, "a custom autograd.Function keeps it outside the "
                                     "saved-tensor hooks (meta unmanaged_saved): only keep is "
                                     "possible")
            if d != RECOMP:
                continue
            r = self.region_of[i]
            if r is None:
                why.setdefault(name, f"made by {ops[i].name} outside every checkpoint region: "
                                     "plain autograd saves it, nothing replays it")
                continue
            reg = self.regs[r]
            later = [j for j in self.fwd_readers(t) if j > reg.last]
            if later:
                why.setdefault(name, f"read in the forward pass after its region "
                                     f"'{reg.module}' (by {ops[later[0]].name}): the autograd "
                                     "nodes or the region reading it there hold it")
            outside = [o for o in t.recipe.ops if not reg.first <= self.idx(o) <= reg.last]
            if outside:
                why.setdefault(name, f"its recipe runs {outside[0]} outside its region "
                                     f"'{reg.module}': the replay reads the region's input "
                                     "instead")
            cached = [o for o in t.recipe.ops if self.pol[self.idx(o)] != MUST_RECOMPUTE]
            if cached and not outside:
                why.setdefault(name, f"its recipe runs {cached[0]}, whose call the policy "
                                     "caches (it makes a kept or swapped tensor too, or must "
                                     "not run twice)")

    def region_inputs(self) -> int:
        """Step 3: region inputs (made before a region, read inside it) stay with the
        checkpoint: a recomp one cannot be expressed; returns the bytes of the undecided
        ones (``extra["region_input_bytes"]``)."""
        dec = self.dec
        region_input_bytes = 0
        for t in self.instance.tensors:
            i = self.idx(t.producer)
            if i >= self.n:
                continue
            for r in self.regs:
                if i < r.first and any(r.first <= j <= r.last for j in self.fwd_readers(t)):
                    if t.name in dec and dec[t.name] == RECOMP:
                        self.why.setdefault(t.name, f"an input of region '{r.module}' (made "
                                                    "before it, read in it): the checkpoint "
                                                    "holds it until its replay")
                    elif t.name not in dec and t.name not in self.pre_names:
                        region_input_bytes += int(t.size_bytes)
                    break
        return region_input_bytes

    def random_calls(self) -> None:
        """Step 4: random calls: the replay re-runs them in order from the region's RNG
        state, so none may be re-run after a cached one (a planned one cannot be
        expressed, an unplanned one is cached)."""
        ops, pol = self.ops, self.pol
        for r in self.regs:
            first_cached: int | None = None
            for i in range(r.first, r.last + 1):
                if not ops[i].random:
                    continue
                if pol[i] != MUST_RECOMPUTE:
                    first_cached = i if first_cached is None else first_cached
                elif first_cached is not None:
                    if self.planned[i]:
                        self.blame(i, f"random call {ops[i].name} is re-run after the cached "
                                      f"random call {ops[first_cached].name} of region "
                                      f"'{r.module}': the replay would draw other numbers")
                    else:
                        self.cache(self.find(i))

    def mutation(self) -> bool:
        """Whether a cached call writes in place: selective checkpointing then counts it as
        mutated (it reads the cached tensor's version before autograd counts the call's
        own write)."""
        return any(self.region_of[i] is not None
                   and self.pol[i] in (MUST_SAVE, MUST_CPU_OFFLOAD)
                   and (len(self.groups[self.find(i)]) > 1
                        or self.ops[i].name.split(".")[1].endswith("_"))
                   for i in range(self.n))

    def call_policies(self) -> tuple[list[CallPolicy], dict[str, Any]]:
        """Every forward call's :class:`CallPolicy`, numbered as selective checkpointing
        numbers them (the k-th call of an overload in its region), and the extra the
        unplanned calls cost: {"replayed_ops", "replayed_s" (s),
        "cached_unplanned_bytes"}."""
        calls: list[CallPolicy] = []
        seen: dict[tuple[int, str], int] = {}
        replayed, replayed_s, cached_bytes = 0, 0.0, 0
        for i, op in enumerate(self.ops):
            r = self.region_of[i]
            label = op.name.split(".", 1)[1]
            k = None
            if r is not None:
                k = seen.get((r, label), 0)
                seen[(r, label)] = k + 1
                if not self.planned[i]:
                    if self.pol[i] == MUST_RECOMPUTE:
                        replayed += 1
                        replayed_s += float(op.duration_s)
                    else:
                        cached_bytes += sum(int(t.size_bytes) for t in self.prod.get(i, []))
            ts = tuple((t.name, DECISION_NAMES[self.dec[t.name]]) for t in self.prod.get(i, [])
                       if t.name in self.dec)
            calls.append(CallPolicy(i, op.name, label, r, k, self.pol[i], ts, self.planned[i]))
        return calls, {"replayed_ops": replayed, "replayed_s": replayed_s,
                       "cached_unplanned_bytes": cached_bytes}

    def offloads(self) -> list[Offload]:
        """The :class:`Offload` of every swapped tensor: its producer, which of the call's
        new outputs it is (-1: the call writes it in place), its size and its last
        forward reader."""
        pre_names = self.pre_names
        out_list = []
        for name, d in self.dec.items():
            if d != SWAP:
                continue
            t = self.instance.tensor(name)
            i = self.idx(t.producer)
            if name + ".pre" in pre_names:
                out = -1  # the call writes the storage in place
            else:
                new = [x.name for x in self.prod[i] if x.name in pre_names or x.name + ".pre"
                       not in pre_names]
                out = new.index(name)
            out_list.append(Offload(name, i, out, int(t.size_bytes),
                                    max([i, *self.fwd_readers(t)])))
        return out_list


def sac_policy(instance: Instance, plan: Plan, *, regions: str | Sequence[str] = "layers",
               unplanned: str = "recompute") -> SACPolicy:
    """The selective-checkpoint policy of `plan` on a profiled `instance`.

    Args:
        instance: an instance made by :func:`slackopt.torch.profile_step` (or
            ``slackopt profile``).
        plan: a plan for it (its runtime policy is not used: PyTorch runs the policy).
        regions: "layers" or module paths (:func:`find_regions`).
        unplanned: the answer of calls whose outputs no decision covers and no recipe
            runs: "recompute" (re-run in the replay: time beyond the plan,
            ``extra["replayed_s"]``) or "save" (cached until the replay: bytes beyond the
            plan, ``extra["cached_unplanned_bytes"]``).

    Returns:
        The :class:`SACPolicy`.

    Raises:
        PlanError: the plan does not fit the instance.
        PlanRuntimeError: the instance was not profiled from PyTorch.
        SACExportError: tensors the policy cannot express, each with its reason.
        SlackoptError: bad `regions` or `unplanned`.
    """
    plan.check(instance)
    if instance.meta.get("generator") != GENERATOR:
        raise PlanRuntimeError(
            f"instance '{instance.name}' was not profiled from PyTorch (meta generator is "
            f"{instance.meta.get('generator')!r}); a policy matches op calls the profiler "
            "numbered: make the instance with slackopt profile")
    if unplanned not in ("recompute", "save"):
        raise SlackoptError(f"unplanned={unplanned!r}: give 'recompute' or 'save'")
    regs = find_regions(instance, regions)
    draft = _Draft(instance, plan, regs, unplanned)
    draft.answer_units()
    draft.check_decisions()
    region_input_bytes = draft.region_inputs()
    draft.random_calls()
    mutation = draft.mutation()
    if draft.why:
        order = {nm: k for k, nm in enumerate(instance.saved_names)}
        raise SACExportError(dict(sorted(draft.why.items(),
                                         key=lambda kv: order.get(kv[0], 0))),
                             instance.name)
    calls, extra = draft.call_policies()
    return SACPolicy(
        instance.name, ops_digest(instance), regs, calls, draft.offloads(),
        {nm: DECISION_NAMES[d] for nm, d in draft.dec.items()}, unplanned, mutation,
        {**extra, "region_input_bytes": region_input_bytes},
        {"torch_version": instance.meta.get("torch_version"),
         "regions": regions if isinstance(regions, str) else list(regions)})


__all__ = ["AUTOGRAD", "FORMAT", "MUST_CPU_OFFLOAD", "MUST_RECOMPUTE", "MUST_SAVE",
           "POLICIES", "VERSION", "CallPolicy", "Offload", "Region", "SACExportError",
           "SACPolicy", "find_regions", "layer_module", "load_policy", "module_of",
           "ops_digest", "sac_policy", "save_policy"]
