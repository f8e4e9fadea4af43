"""Plan files: the document of a plan and back, with the header ``slackopt solve -o``
writes (made-for instance, budget, provenance).

The file format: :mod:`slackopt.io`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from pydantic import ValidationError

from slackopt.errors import FileFormatError, PlanError
from slackopt.instance import Instance
from slackopt.io.schemas import (
    PLAN_FORMAT,
    PLAN_SCHEMA_VERSIONS,
    PlanFileModel,
    check_header,
    pydantic_error,
)
from slackopt.io.text import PathLike, dumps, normalize, read_json, write_text
from slackopt.plan import DECISION_NAMES, POLICIES, Plan, check_runtime_params

_QUOTED = re.compile(r"'([^']*)'")


def plan_to_dict(plan: Plan, instance: Instance | str | None = None,
                 meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready document of a plan file.

    Args:
        plan: the plan.
        instance: the instance it plans (checked against it, and its name recorded), or
            just the instance name, or None.
        meta: provenance to record (solver, budget, ...); stored, never interpreted.

    Returns:
        A dict in file order.

    Raises:
        PlanError: the plan does not fit `instance`.
        FileFormatError: `meta` holds values JSON cannot store.
    """
    if isinstance(instance, Instance):
        plan.check(instance)
        name: str | None = instance.name
    else:
        name = instance
    doc: dict[str, Any] = {"format": PLAN_FORMAT, "schema_version": PLAN_SCHEMA_VERSIONS[-1],
                           "instance": name, **plan.to_dict()}
    doc["meta"] = normalize(dict(meta or {}), "<plan meta>", ("meta",))
    return doc


def plan_from_dict(d: Mapping[str, Any], instance: Instance, source: str = "<dict>") -> Plan:
    """Validate a plan document against `instance` and build the Plan.

    Args:
        d: the parsed document.
        instance: the instance the plan is for; every saved tensor must get exactly one
            decision and no other name may appear.
        source: what to call the document in error messages.

    Returns:
        The Plan, aligned with ``instance.saved_names``.

    Raises:
        FileFormatError: wrong format/version/structure, decisions missing for some saved
            tensors or naming tensors that are not saved tensors of the instance, an unknown
            policy, or recomp of a tensor that cannot be rebuilt.
    """
    check_header(source, d, PLAN_FORMAT, PLAN_SCHEMA_VERSIONS)
    raw = normalize(d, source)
    try:
        m = PlanFileModel.model_validate(raw)
    except ValidationError as e:
        raise pydantic_error(source, e, raw, PlanFileModel) from None
    made_for = (f" (the plan was made for instance '{m.instance}')"
                if m.instance and m.instance != instance.name else "")
    if m.policy not in POLICIES:
        raise FileFormatError(source, "policy", f"runtime policy '{m.policy}' is unknown",
                              f"use one of {', '.join(POLICIES)}")
    try:
        runtime_params = check_runtime_params(m.policy, m.runtime_params)
    except PlanError as e:
        raise FileFormatError(source, "runtime_params", str(e),
                              "see slackopt.plan.RUNTIME_PARAMS") from None
    saved = set(instance.saved_names)
    unknown = [n for n in m.decisions if n not in saved]
    if unknown:
        kind = ("not a saved tensor" if unknown[0] in {t.name for t in instance.tensors}
                else "not a tensor")
        raise FileFormatError(
            source, f"decisions.{unknown[0]}",
            f"'{unknown[0]}' is {kind} of instance '{instance.name}'" + _more(unknown)
            + made_for, "decide only the saved tensors of this instance (`slackopt describe`)")
    missing = [n for n in instance.saved_names if n not in m.decisions]
    if missing:
        shown = ", ".join(f"'{n}'" for n in missing[:5])
        raise FileFormatError(
            source, "decisions", f"no decision for {len(missing)} saved tensor"
            f"{'s' if len(missing) > 1 else ''} of instance '{instance.name}': {shown}"
            f"{', ...' if len(missing) > 5 else ''}" + made_for,
            "give every saved tensor a decision: keep, swap or recomp")
    codes = np.array([DECISION_NAMES.index(m.decisions[n]) for n in instance.saved_names],
                     dtype=np.int8)
    try:
        plan = Plan(codes, instance.saved_names, m.policy, runtime_params)
        plan.check(instance)
    except PlanError as e:
        bad = _QUOTED.search(str(e))
        field = f"decisions.{bad.group(1)}" if bad else "decisions"
        fix = ("give all views of one storage the same decision" if "views of one storage"
               in str(e) else "plan keep or swap for tensors that cannot be rebuilt")
        raise FileFormatError(source, field, str(e), fix) from None
    return plan


def _more(names: list[str]) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""


def save_plan(plan: Plan, path: PathLike, instance: Instance | str | None = None,
              overwrite: bool = False, *, meta: Mapping[str, Any] | None = None) -> Path:
    """Write `plan` to a plan file.

    Args:
        plan: the plan.
        path: the file to write (parent directories are created).
        instance: the instance it plans (checked, name recorded), its name, or None.
        overwrite: replace an existing file; without it an existing file is an error.
        meta: provenance (solver, params, budget_bytes, ...); stored, never interpreted.

    Returns:
        The path written.

    Raises:
        OutputExistsError: the file exists and `overwrite` is False.
        PlanError: the plan does not fit `instance`.
        FileFormatError: the file cannot be written or `meta` is not JSON-storable.
    """
    return write_text(path, dumps(plan_to_dict(plan, instance, meta)), overwrite)


def load_plan(path: PathLike, instance: Instance) -> Plan:
    """Read a plan file for `instance`.

    Args:
        path: the file.
        instance: the instance the plan is for.

    Returns:
        The Plan, aligned with ``instance.saved_names``.

    Raises:
        FileFormatError: naming the file, the field and a fix, for any problem (see
            :func:`plan_from_dict`).
    """
    return plan_from_dict(read_json(path), instance, source=str(path))


class PlanFile(NamedTuple):
    """A plan file read with its header.

    Attributes:
        plan: the Plan, aligned with the instance's saved tensors.
        instance: the instance name the file says it was made for, or None.
        budget_bytes: the budget M (bytes) the plan was made for (``meta.budget_bytes``,
            which ``slackopt solve -o`` writes), or None if the file records none.
        meta: the file's ``meta`` object (provenance).
    """

    plan: Plan
    instance: str | None
    budget_bytes: int | None
    meta: dict[str, Any]


def read_plan_file(path: PathLike, instance: Instance) -> PlanFile:
    """Read a plan file for `instance` with its header (made-for instance, budget, meta).

    Args:
        path: the file.
        instance: the instance the plan is for.

    Returns:
        A :class:`PlanFile`.

    Raises:
        FileFormatError: as :func:`load_plan`, or ``meta.budget_bytes`` that is not an
            integer >= 0 (naming the field and the fix).
    """
    doc = read_json(path)
    plan = plan_from_dict(doc, instance, source=str(path))
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    m = meta.get("budget_bytes")
    if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 0):
        raise FileFormatError(str(path), "meta.budget_bytes", f"{m!r} is not an integer >= 0",
                              "remove it, or give --budget to choose the budget")
    made_for = doc.get("instance")
    return PlanFile(plan, made_for if isinstance(made_for, str) else None, m, dict(meta))
