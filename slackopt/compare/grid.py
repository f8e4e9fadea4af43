"""The grid of a sweep: what the user gave (instances, solver specs, budgets) made into
runs, and what identifies each run in the store (:func:`run_key`)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from slackopt.compare.code_id import solver_code_id
from slackopt.errors import SlackoptError, SolverError, json_problem
from slackopt.instance import Bytes, Instance, parse_budget
from slackopt.plan import Plan
from slackopt.solver import canonical_name, get_solver, registered_solvers, solver_name
from slackopt.solverbase import BaseSolver

SUITES: dict[str, tuple[str | tuple[str, dict[str, Any]], ...]] = {
    "production": ("torch-knapsack", ("torch-knapsack", {"method": "greedy"}), "titan-auto",
                   "module-offload", "offload-all", "ckpt-offload", "slackswap"),
}
"""Named solver lists for ``--solvers NAME`` (names, or (name, params) pairs):
``production`` is the planners people train with (PyTorch's knapsack with its default DP
and its greedy solver, torchtitan, Megatron-Core, torchtune, DeepSpeed) beside SlackSwap."""
KEY_COLUMNS = ("instance", "instance_hash", "budget_bytes", "solver", "params", "seed",
               "time_limit_s")
"""What identifies a run in the store, with the solver's code identity (:func:`run_key`)."""

InstanceLike = Instance | str | os.PathLike
SolverSpec = str | tuple[str, Mapping[str, Any]] | Any


@dataclass(frozen=True)
class Task:
    """One run: everything a worker needs besides the instance itself."""

    index: int
    key: str
    instance_hash: str
    budget_bytes: Bytes  # read once by budget_bytes; solve takes it as given
    solver: str
    params: dict[str, Any]
    params_json: str
    solver_obj: Any
    seed: int | None
    time_limit_s: float | None
    start_plan: Any = None  # a Plan to start from (slackopt.solve's start_plan), or None


def canon_json(x: Any) -> str:
    """Canonical JSON text of solver parameters (sorted keys, no spaces; numpy numbers,
    tuples and sets as JSON numbers and lists): the ``params`` column and part of the key.

    Raises:
        SolverError: a value that cannot be written as JSON.
    """
    try:
        return json.dumps(x, sort_keys=True, separators=(",", ":"), allow_nan=False,
                          default=_json_default)
    except (TypeError, ValueError) as e:
        raise SolverError(f"solver parameters {x!r} cannot be written as JSON: {e}") from None


def _json_default(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, (tuple, set, frozenset)):
        return sorted(x) if isinstance(x, (set, frozenset)) else list(x)
    raise TypeError(f"{type(x).__name__} is not JSON")


def instance_hash(instance: Instance) -> str:
    """Content hash of an instance: sha256 of its canonical JSON, first 16 hex digits.

    Two instances with the same ops, tensors, link, name and meta hash alike, whether
    built in memory or loaded from a file (formatting of the file does not matter).
    """
    from slackopt.io import instance_to_dict

    doc = instance_to_dict(instance)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def key_text(name: str, ihash: str, m: int, solver: str, params_json: str,
             seed: int | None, time_limit_s: float | None, code: str,
             start: str | None = None) -> str:
    """The store key (64 hex digits) from its parts, as :func:`run_key` documents; a run
    started from a plan adds that plan's :func:`plan_digest` (`start`) as a last part."""
    parts: list[Any] = [name, ihash, int(m), solver, params_json, seed, time_limit_s, code]
    if start is not None:
        parts.append(start)
    text = json.dumps(parts, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plan_digest(plan: Plan) -> str:
    """sha256 (64 hex digits) of a plan's decisions, runtime policy and parameters: what
    a run started from it depends on."""
    text = json.dumps([plan.decisions.tolist(), plan.policy, plan.resolved_runtime_params()],
                      sort_keys=True, separators=(",", ":"), default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()


def run_key(instance: Instance, budget_bytes: int, solver: Any, *, seed: int | None,
            time_limit_s: float | None, code: str | None = None) -> str:
    """The store key of one run (64 hex digits): sha256 of the instance name and content
    hash, M (bytes), the solver's name, its params as canonical JSON, the seed, the time
    limit (s) and the solver's code identity (`code`, default
    :func:`slackopt.compare.code_id.solver_code_id` of its class).

    Raises:
        SolverError: params that cannot be written as JSON.
    """
    return key_text(instance.name, instance_hash(instance), int(budget_bytes),
                    solver_name(solver), canon_json(dict(getattr(solver, "params", {}) or {})),
                    seed, time_limit_s, solver_code_id(type(solver)) if code is None else code)


def load_instances(instances: Iterable[InstanceLike]) -> list[Instance]:
    """Instances from Instance objects and file paths (one or many), in order.

    Raises:
        FileFormatError: an unreadable instance file.
        SlackoptError: an item that is neither, or no instances.
    """
    from slackopt.io import load_instance

    if isinstance(instances, (Instance, str, os.PathLike)):
        instances = [instances]
    out = []
    for x in instances:
        if isinstance(x, Instance):
            out.append(x)
        elif isinstance(x, (str, os.PathLike)):
            out.append(load_instance(x))
        else:
            raise SlackoptError(f"instance {x!r} is neither an Instance nor a file path")
    if not out:
        raise SlackoptError("no instances given")
    return out


def parse_solvers(text: str) -> list[SolverSpec]:
    """The solvers of a ``--solvers`` option: comma-separated names, ``all`` (every
    registered solver), a suite name of :data:`SUITES`, or a JSON list of names and
    ``[name, {params}]`` pairs; a suite name in either list stands for its solvers.

    Returns:
        Names and (name, params) pairs, in order (names are not checked here:
        :func:`resolve_solvers` does that).

    Raises:
        SlackoptError: bad JSON, an empty list or item, an entry of another shape, a suite
            given parameters, or ``all`` with no solver registered (the message names
            the fix).
    """
    t = text.strip()
    if t in SUITES:
        return list(SUITES[t])
    if t == "all":
        names = list(registered_solvers())
        if not names:
            raise SlackoptError("no solvers are registered (is slackopt installed? "
                                "pip install -e .)")
        return names
    if t.startswith(("[", "{")):
        try:
            doc = json.loads(t)
        except json.JSONDecodeError as e:
            raise SlackoptError(f"{json_problem(e)}; give a JSON list such as "
                                '\'["slackswap", ["genetic", {"generations": null}]]\'') \
                from None
        if not isinstance(doc, list) or not doc:
            raise SlackoptError(
                f"{t}: the JSON form is a non-empty list of solver names and [name, "
                '{params}] pairs, e.g. \'["slackswap", ["genetic", {"generations": null}]]\'')
        out: list[SolverSpec] = []
        for x in doc:
            if isinstance(x, str):
                out.extend(SUITES.get(x, (x,)))
            elif isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) \
                    and isinstance(x[1], dict):
                if x[0] in SUITES:
                    raise SlackoptError(
                        f"{x!r}: {x[0]!r} is a suite, which takes no parameters; list it "
                        "by name and give parameters to its solvers one by one")
                out.append((x[0], x[1]))
            else:
                raise SlackoptError(f"{x!r}: each entry is a solver name or [name, {{params}}]")
        return out
    items = [x.strip() for x in t.split(",")]
    if not t or any(not x for x in items):
        raise SlackoptError(f"'{text}' is not a comma-separated list of solver names (or "
                            f"'all', or a suite: {', '.join(SUITES)})")
    out = []
    for x in items:
        out.extend(SUITES.get(x, (x,)))
    return out


def resolve_solvers(solvers: Iterable[SolverSpec] | str) -> list[tuple[str, dict, Any]]:
    """(name, params, solver object) per solver spec; checks names and parameters now."""
    if isinstance(solvers, str):
        solvers = [solvers]
    out = []
    for spec in solvers:
        if isinstance(spec, str):
            spec = (spec, {})
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) \
                and isinstance(spec[1], Mapping):
            # unknown names and bad parameters fail here, once; "file.py:Class" is
            # labelled by the class's name
            obj = get_solver(spec[0], **spec[1])
            name = solver_name(obj) if ":" in spec[0] else canonical_name(spec[0])
            params = dict(spec[1])
        elif callable(getattr(spec, "solve", None)):
            name, obj = solver_name(spec), spec
            params = dict(getattr(spec, "params", None) or {})
        else:
            raise SolverError(f"solver {spec!r} is not a name, a (name, params) pair or a "
                              "solver object")
        if isinstance(obj, BaseSolver):  # its params are complete and canonical
            params = obj.params
        out.append((name, params, obj))
    if not out:
        raise SolverError(f"no solvers given; registered: {', '.join(registered_solvers())}")
    return out


def requested_fraction(budget: Any, m: int, p: int) -> float:
    """The fraction of P the user asked for, if the budget was a fraction (0.5, "50%",
    "1.2P"); else M / P."""
    kind, value = parse_budget(budget)
    if kind == "fraction":
        return float(value)
    return m / p if p else math.nan
