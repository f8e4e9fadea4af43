"""Plans: one keep/swap/recomp decision per saved tensor, plus the runtime policy.

A :class:`Plan` is aligned with ``Instance.saved`` (saved tensors in production order).
Decision codes: ``KEEP = 0``, ``SWAP = 1`` (offload D2H after production, prefetch H2D
before the first backward need), ``RECOMP = 2`` (drop after the last forward reader,
rebuild before the first backward need). Semantics: ../shared/spec/semantics.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from slackopt.errors import PlanError
from slackopt.instance import Instance

KEEP, SWAP, RECOMP = 0, 1, 2
DECISION_NAMES = ("keep", "swap", "recomp")
POLICIES = ("barrier_free",)
"""Runtime policies the evaluator implements (section 3.4 of the SlackSwap paper)."""


@dataclass(frozen=True, eq=False)
class Plan:
    """Decisions for the saved tensors of one instance.

    Attributes:
        decisions: int8 array of shape (n_saved,), codes KEEP/SWAP/RECOMP, aligned with
            ``Instance.saved_names``. Read-only.
        names: the saved tensor names the decisions refer to (for files and messages).
        policy: runtime that executes the plan ("barrier_free").
    """

    decisions: np.ndarray
    names: tuple[str, ...]
    policy: str = "barrier_free"

    def __post_init__(self) -> None:
        dec = np.array(self.decisions, dtype=np.int8, copy=True)
        if dec.ndim != 1 or dec.size != len(self.names):
            raise PlanError(
                f"plan has {dec.size} decisions for {len(self.names)} saved tensors")
        bad = np.flatnonzero((dec < KEEP) | (dec > RECOMP))
        if bad.size:
            raise PlanError(f"tensor '{self.names[bad[0]]}': decision code {dec[bad[0]]} is "
                            "not 0 (keep), 1 (swap) or 2 (recomp)")
        if self.policy not in POLICIES:
            raise PlanError(f"runtime policy '{self.policy}' is not one of {', '.join(POLICIES)}")
        dec.flags.writeable = False
        object.__setattr__(self, "decisions", dec)

    # ------------------------------------------------------------- constructors
    @classmethod
    def uniform(cls, instance: Instance, decision: int, policy: str = "barrier_free") -> Plan:
        """Every saved tensor gets `decision`; for RECOMP, tensors with c = inf are kept."""
        dec = np.full(instance.n_saved, decision, dtype=np.int8)
        if decision == RECOMP:
            dec[~np.isfinite(instance.c)] = KEEP
        return cls(dec, instance.saved_names, policy)

    @classmethod
    def keep_all(cls, instance: Instance) -> Plan:
        """The plan that keeps every saved tensor."""
        return cls.uniform(instance, KEEP)

    @classmethod
    def from_mapping(
        cls, instance: Instance, decisions: Mapping[str, str | int], default: str = "keep",
        policy: str = "barrier_free",
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
        return cls(dec, instance.saved_names, policy)

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
        bad = np.flatnonzero((self.decisions == RECOMP) & ~np.isfinite(instance.c))
        if bad.size:
            raise PlanError(f"tensor '{self.names[bad[0]]}' is planned recomp but cannot be "
                            "rebuilt (no recipe, or its recipe runs a never-recompute op)")

    def counts(self) -> dict[str, int]:
        """Number of tensors per decision: {"keep": n, "swap": n, "recomp": n}."""
        cnt = Counter(self.decisions.tolist())
        return {DECISION_NAMES[k]: int(cnt.get(k, 0)) for k in range(3)}

    def bytes_by_decision(self, instance: Instance) -> dict[str, int]:
        """Saved bytes per decision (bytes)."""
        return {DECISION_NAMES[k]: int(instance.s[self.decisions == k].sum()) for k in range(3)}

    def with_policy(self, policy: str) -> Plan:
        """The same decisions under another runtime policy."""
        return Plan(self.decisions, self.names, policy)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: {"policy": ..., "decisions": {name: "keep"|"swap"|"recomp"}}."""
        return {"policy": self.policy,
                "decisions": {n: DECISION_NAMES[int(c)]
                              for n, c in zip(self.names, self.decisions, strict=True)}}

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Plan) and self.names == other.names
                and self.policy == other.policy
                and bool(np.array_equal(self.decisions, other.decisions)))

    def __hash__(self) -> int:
        return hash((self.names, self.policy, self.decisions.tobytes()))


def _code(v: str | int, name: str) -> int:
    if isinstance(v, str) and v.lower() in DECISION_NAMES:
        return DECISION_NAMES.index(v.lower())
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v <= 2:
        return int(v)
    raise PlanError(f"tensor '{name}': decision {v!r} is not keep, swap or recomp")
