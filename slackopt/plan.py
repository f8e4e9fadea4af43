"""Plans: one keep/swap/recomp decision per saved tensor, plus the runtime policy.

A :class:`Plan` is aligned with ``Instance.saved`` (saved tensors in production order).
Decision codes: ``KEEP = 0``, ``SWAP = 1`` (offload D2H after production, prefetch H2D
before the first backward need), ``RECOMP = 2`` (drop after the last forward reader,
rebuild before the first backward need). Semantics: docs/model.md.

Views (``Tensor.storage``, see :mod:`slackopt.instance`): each saved view has its own
decision slot, but the views of one storage share one device copy, so they must share one
decision; :meth:`Plan.check` rejects a plan that splits a storage (a PlanError naming both
views and both decisions). :meth:`Plan.lowered` maps a plan to the storage-level instance
(``Instance.lowered``) that the evaluator and the solvers work on, and
:meth:`Plan.from_lowered` maps a storage-level plan back to every view.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slackopt.errors import PlanError
from slackopt.instance import Instance

KEEP, SWAP, RECOMP = 0, 1, 2
DECISION_NAMES = ("keep", "swap", "recomp")
POLICIES = ("barrier_free", "layer_barriers", "on_demand")
"""Runtime policies the evaluator implements: ``barrier_free`` (SlackSwap's runtime,
section 3.4 of the paper), ``layer_barriers`` (vDNN's per-layer synchronization, Rhu et al.
2016) and ``on_demand`` (an eviction cache, as in SuperNeurons, Wang et al. 2018, and
SwapAdvisor, Huang et al. 2020); sections 2.1 and 4.1 of the paper and
docs/model.md ("Other runtimes")."""

HEAVY_KINDS = ("gemm", "attention", "conv")
"""Op kinds that count as compute-heavy operators (GEMMs, attention, convolutions)."""

RUNTIME_PARAMS: dict[str, dict[str, Any]] = {
    "barrier_free": {},
    "layer_barriers": {"prefetch": ("when_fits", "at_issue"),
                       "lookahead": ("next_offloaded", "adjacent")},
    "on_demand": {
        "eviction": ("lru", "belady"),
        "offload": ("on_eviction", "early"),
        "prefetch": ("next_heavy", "asap"),
        "heavy_kinds": tuple,
    },
}
"""Runtime parameters each policy accepts: a tuple of allowed values, or ``tuple`` for a
list of op kinds.

- ``layer_barriers``: ``prefetch`` says when a prefetch buffer is allocated: when the copy
  starts and memory allows ("when_fits", the barrier-free admission rule), or when the
  layer issues it ("at_issue", vDNN's static schedule: an allocation that does not fit
  then fails the plan, and there is no eviction fallback); ``lookahead`` says which
  prefetch a starting backward layer issues: that of the next offloaded layer, however far
  ("next_offloaded", vDNN's rule), or only that of the layer right after it ("adjacent").
- ``on_demand``: ``eviction`` orders the victims (least recently used first, or furthest
  next use first: Belady 1966); ``offload`` says when a swappable tensor is copied out
  (only once evicted, or as soon as it is produced, its device copy then staying until
  it is evicted); ``prefetch`` says when an evicted tensor is copied back (for the tasks up
  to the next heavy operator, or as early as memory allows); ``heavy_kinds`` lists the op
  kinds that count as heavy operators.
"""

RUNTIME_DEFAULTS: dict[str, dict[str, Any]] = {
    "barrier_free": {},
    "layer_barriers": {"prefetch": "when_fits", "lookahead": "next_offloaded"},
    "on_demand": {"eviction": "lru", "offload": "on_eviction", "prefetch": "next_heavy",
                  "heavy_kinds": HEAVY_KINDS},
}
"""Values the evaluator uses for runtime parameters a plan leaves out."""


def check_runtime_params(policy: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate the runtime parameters of `policy`; return them normalized (lists of op
    kinds as tuples). Raises PlanError naming the parameter."""
    if policy not in POLICIES:
        raise PlanError(f"runtime policy '{policy}' is not one of {', '.join(POLICIES)}")
    allowed = RUNTIME_PARAMS[policy]
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key not in allowed:
            known = ", ".join(allowed) or "none"
            raise PlanError(f"runtime parameter '{key}' is unknown for policy '{policy}' "
                            f"(parameters: {known})")
        spec = allowed[key]
        if spec is tuple:
            if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
                    isinstance(v, str) and v for v in value):
                raise PlanError(f"runtime parameter '{key}' must be a list of op kinds, "
                                f"got {value!r}")
            out[key] = tuple(value)
        elif value not in spec:
            raise PlanError(f"runtime parameter '{key}' = {value!r} is not one of "
                            f"{', '.join(spec)}")
        else:
            out[key] = value
    return out


@dataclass(frozen=True, eq=False)
class Plan:
    """Decisions for the saved tensors of one instance.

    Attributes:
        decisions: int8 array of shape (n_saved,), codes KEEP/SWAP/RECOMP, aligned with
            ``Instance.saved_names``. Read-only.
        names: the saved tensor names the decisions refer to (for files and messages).
        policy: runtime that executes the plan (one of :data:`POLICIES`).
        runtime_params: parameters of the runtime (:data:`RUNTIME_PARAMS`), e.g.
            ``{"eviction": "belady"}`` for ``on_demand``; left-out ones take
            :data:`RUNTIME_DEFAULTS`. A validated copy; do not mutate it.
    """

    decisions: np.ndarray
    names: tuple[str, ...]
    policy: str = "barrier_free"
    runtime_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        dec = np.array(self.decisions, dtype=np.int8, copy=True)
        if dec.ndim != 1 or dec.size != len(self.names):
            raise PlanError(
                f"plan has {dec.size} decisions for {len(self.names)} saved tensors")
        bad = np.flatnonzero((dec < KEEP) | (dec > RECOMP))
        if bad.size:
            raise PlanError(f"tensor '{self.names[bad[0]]}': decision code {dec[bad[0]]} is "
                            "not 0 (keep), 1 (swap) or 2 (recomp)")
        params = check_runtime_params(self.policy, self.runtime_params)
        dec.flags.writeable = False
        object.__setattr__(self, "decisions", dec)
        object.__setattr__(self, "runtime_params", params)

    # ------------------------------------------------------------- constructors
    @classmethod
    def uniform(cls, instance: Instance, decision: int, policy: str = "barrier_free",
                runtime_params: Mapping[str, Any] | None = None) -> Plan:
        """Every saved tensor gets `decision`; for RECOMP, tensors with c = inf are kept
        (for views: those whose storage cannot be rebuilt)."""
        dec = np.full(instance.n_saved, decision, dtype=np.int8)
        if decision == RECOMP:
            if instance.saved_unit is not None:
                dec[~np.isfinite(instance.lowered.c)[instance.saved_unit]] = KEEP
            else:
                dec[~np.isfinite(instance.c)] = KEEP
        return cls(dec, instance.saved_names, policy, dict(runtime_params or {}))

    @classmethod
    def keep_all(cls, instance: Instance) -> Plan:
        """The plan that keeps every saved tensor."""
        return cls.uniform(instance, KEEP)

    @classmethod
    def from_mapping(
        cls, instance: Instance, decisions: Mapping[str, str | int], default: str = "keep",
        policy: str = "barrier_free", runtime_params: Mapping[str, Any] | None = None,
    ) -> Plan:
        """Build a plan from {tensor name: "keep" | "swap" | "recomp" (or code)}.

        Tensors not named get `default`. Raises PlanError for unknown names or decisions.
        """
        dec = np.full(instance.n_saved, _code(default, "<default>"), dtype=np.int8)
        for name, v in decisions.items():
            try:
                k = instance.saved_position(name)
            except KeyError:
                raise PlanError(f"tensor '{name}' is not a saved tensor of instance "
                                f"'{instance.name}'") from None
            dec[k] = _code(v, name)
        return cls(dec, instance.saved_names, policy, dict(runtime_params or {}))

    # ------------------------------------------------------------- queries
    def check(self, instance: Instance) -> None:
        """Raise PlanError unless this plan fits `instance` (same tensors, rebuildable recomps)."""
        if self.names != instance.saved_names:
            if len(self.names) != instance.n_saved:
                raise PlanError(f"plan has {len(self.names)} decisions but instance "
                                f"'{instance.name}' has {instance.n_saved} saved tensors")
            k = next(i for i, (a, b) in enumerate(zip(self.names, instance.saved_names,
                                                      strict=True)) if a != b)
            raise PlanError(f"plan decision #{k} is for tensor '{self.names[k]}' but "
                            f"instance '{instance.name}' has '{instance.saved_names[k]}' there")
        unit = instance.saved_unit
        if unit is not None:
            self._check_storages(instance, unit)
            rebuildable = np.isfinite(instance.lowered.c)[unit]
        else:
            rebuildable = np.isfinite(instance.c)
        bad = np.flatnonzero((self.decisions == RECOMP) & ~rebuildable)
        if bad.size:
            nm = self.names[bad[0]]
            raise PlanError(f"tensor '{nm}' is planned recomp but cannot be rebuilt: "
                            f"{instance.rebuild_blocker(nm)}")

    def _check_storages(self, instance: Instance, unit: np.ndarray) -> None:
        """PlanError if two saved views of one storage get different decisions."""
        first: dict[int, int] = {}
        dec = self.decisions
        for k, u in enumerate(unit.tolist()):
            j = first.setdefault(u, k)
            if dec[j] != dec[k]:
                a, b = self.names[j], self.names[k]
                raise PlanError(
                    f"tensors '{a}' ({DECISION_NAMES[dec[j]]}) and '{b}' "
                    f"({DECISION_NAMES[dec[k]]}) are views of one storage "
                    f"'{instance.storage_of(a)}' and must get the same decision; give "
                    "both keep, both swap or both recomp")

    def lowered(self, instance: Instance) -> Plan:
        """This plan on ``instance.lowered`` (one decision per storage); ``self`` when the
        instance has no views. Raises PlanError as :meth:`check` does."""
        self.check(instance)
        unit = instance.saved_unit
        if unit is None:
            return self
        low = instance.lowered
        dec = np.zeros(low.n_saved, dtype=np.int8)
        dec[unit] = self.decisions
        return Plan(dec, low.saved_names, self.policy, dict(self.runtime_params))

    @classmethod
    def from_lowered(cls, instance: Instance, plan: Plan) -> Plan:
        """Expand a plan for ``instance.lowered`` to every saved view of `instance` (each
        view gets its storage's decision); `plan` itself when the instance has no views.
        Raises PlanError if `plan` does not fit ``instance.lowered``."""
        unit = instance.saved_unit
        if unit is None:
            return plan
        plan.check(instance.lowered)
        return cls(plan.decisions[unit], instance.saved_names, plan.policy,
                   dict(plan.runtime_params))

    def counts(self) -> dict[str, int]:
        """Number of tensors per decision: {"keep": n, "swap": n, "recomp": n}."""
        cnt = Counter(self.decisions.tolist())
        return {DECISION_NAMES[k]: int(cnt.get(k, 0)) for k in range(3)}

    def bytes_by_decision(self, instance: Instance) -> dict[str, int]:
        """Saved bytes per decision (bytes); with views, each storage's bytes once."""
        if instance.saved_unit is not None:
            low = self.lowered(instance)
            return low.bytes_by_decision(instance.lowered)
        return {DECISION_NAMES[k]: int(instance.s[self.decisions == k].sum()) for k in range(3)}

    def with_policy(self, policy: str, runtime_params: Mapping[str, Any] | None = None) -> Plan:
        """The same decisions under another runtime policy (and its parameters)."""
        return Plan(self.decisions, self.names, policy, dict(runtime_params or {}))

    def resolved_runtime_params(self) -> dict[str, Any]:
        """The runtime parameters the evaluator uses: the plan's over the defaults."""
        return {**RUNTIME_DEFAULTS[self.policy], **self.runtime_params}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: {"policy": ..., "decisions": {name: "keep"|"swap"|"recomp"}},
        plus "runtime_params" when the plan sets any (op-kind lists as lists)."""
        d: dict[str, Any] = {"policy": self.policy}
        if self.runtime_params:
            d["runtime_params"] = {k: list(v) if isinstance(v, tuple) else v
                                   for k, v in self.runtime_params.items()}
        d["decisions"] = {n: DECISION_NAMES[int(c)]
                          for n, c in zip(self.names, self.decisions, strict=True)}
        return d

    def _params_key(self) -> str:
        return json.dumps({k: list(v) if isinstance(v, tuple) else v
                           for k, v in self.runtime_params.items()}, sort_keys=True)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Plan) and self.names == other.names
                and self.policy == other.policy
                and self._params_key() == other._params_key()
                and bool(np.array_equal(self.decisions, other.decisions)))

    def __hash__(self) -> int:
        return hash((self.names, self.policy, self._params_key(), self.decisions.tobytes()))


def _code(v: str | int, name: str) -> int:
    if isinstance(v, str) and v.lower() in DECISION_NAMES:
        return DECISION_NAMES.index(v.lower())
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v <= 2:
        return int(v)
    raise PlanError(f"tensor '{name}': decision {v!r} is not keep, swap or recomp")
