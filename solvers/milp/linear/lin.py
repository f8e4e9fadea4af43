"""The backend-neutral linear model: :class:`_Lin` (variables with bounds, integrality and
objective; named sparse rows), :class:`ModelTimeout` and :func:`check_deadline`. Every
backend (solvers/milp/linear/backends.py) loads a :class:`_Lin`;
:func:`~slackopt.solvers.milp.model.builder.build_model` and the timing and checkpoint bounds
build one."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

_INF = float("inf")


class ModelTimeout(Exception):
    """Building or loading a model passed its deadline (the solver then returns the best
    plan found so far)."""


ROWS_PER_LOOK = 64
"""Rows built or loaded between two looks at the clock (:func:`check_deadline`): a row
of a memory family can hold a term per saved tensor, so on a graph of a thousand saved
tensors 64 rows are some 10^5 terms, a few hundredths of a second of Python."""


def check_deadline(deadline: float | None, i: int, what: str) -> None:
    """Raise :class:`ModelTimeout` if `deadline` (perf_counter seconds) has passed; the
    clock is read only when `i` (a row count) is a multiple of :data:`ROWS_PER_LOOK`."""
    if deadline is not None and i % ROWS_PER_LOOK == 0 and time.perf_counter() > deadline:
        raise ModelTimeout(f"{what}: the time limit ended it after {i} rows")


class _Lin:
    """A backend-neutral MILP: variables with bounds, integrality, objective; sparse rows
    ``lo <= sum coef * var <= hi``. With a `deadline` (perf_counter seconds), adding a row
    after it raises :class:`ModelTimeout`."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.is_int: list[bool] = []
        self.obj: list[float] = []
        self.names: list[str] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []
        self.row_names: list[str] = []

    @property
    def n_vars(self) -> int:
        return len(self.lb)

    def var(self, lb: float = 0.0, ub: float = _INF, integer: bool = False,
            obj: float = 0.0, name: str = "") -> int:
        self.names.append(name)
        self.lb.append(float(lb))
        self.ub.append(float(ub))
        self.is_int.append(bool(integer))
        self.obj.append(float(obj))
        return len(self.lb) - 1

    def row(self, terms: Sequence[tuple[int, float]], lo: float = -_INF,
            hi: float = _INF, name: str = "") -> int:
        """Add ``lo <= sum coef * var <= hi`` and return its index; `name` says which
        family of the formulation the row belongs to (``"family[index]"``), so that a
        soundness check can name the row a plan violates (:meth:`violations`)."""
        check_deadline(self.deadline, len(self.rows), "building the model")
        acc: dict[int, float] = {}
        for j, c in terms:
            if j is None or c == 0.0:
                continue
            acc[j] = acc.get(j, 0.0) + float(c)
        idx = [j for j, c in acc.items() if c != 0.0]
        cf = [acc[j] for j in idx]
        if not idx:
            if lo > 1e-9 or hi < -1e-9:
                # An empty infeasible row: keep it (0 >= lo) so the backend reports it.
                self.rows.append(([], [], float(lo), float(hi)))
                self.row_names.append(name)
            return len(self.rows) - 1
        self.rows.append((idx, cf, float(lo), float(hi)))
        self.row_names.append(name)
        return len(self.rows) - 1

    def violations(self, x: Sequence[float], rel_tol: float = 1e-9,
                   limit: int = 10) -> list[dict[str, Any]]:
        """The rows and variable bounds that the point `x` (one value per variable, model
        units) violates, in row order, at most `limit`: dicts with ``row`` (index, or
        ``None`` for a variable bound), ``name`` (the row's family name, or the
        variable's), ``value`` (the row's activity) and ``lo``/``hi``. A row counts as
        violated when it misses a side by more than `rel_tol` times ``1 + sum |coef x|``
        (the rounding a point read from a simulated trace carries). Integrality is
        checked too (within `rel_tol`). Used by the plan-by-plan soundness tests: the point
        built from a plan's trace must satisfy every row."""
        out: list[dict[str, Any]] = []
        xs = [float(v) for v in x]
        if len(xs) != self.n_vars:
            raise ValueError(f"point has {len(xs)} values, the model {self.n_vars} variables")
        for j, v in enumerate(xs):
            tol = rel_tol * (1.0 + abs(v))
            bad = (v < self.lb[j] - tol or v > self.ub[j] + tol
                   or (self.is_int[j] and abs(v - round(v)) > tol))
            if bad:
                out.append({"row": None, "name": self.names[j] or f"x{j}", "value": v,
                            "lo": self.lb[j], "hi": self.ub[j]})
                if len(out) >= limit:
                    return out
        # screen every row at once (numpy), then confirm each candidate with exact sums
        rid, col, coef, lo_a, hi_a = self._arrays()
        xa = np.asarray(xs, dtype=np.float64)
        terms = coef * xa[col] if col.size else np.zeros(0)
        nr = len(self.rows)
        act = np.bincount(rid, weights=terms, minlength=nr)
        mag = np.bincount(rid, weights=np.abs(terms), minlength=nr)
        slack = 2.0 * rel_tol * (1.0 + mag)
        with np.errstate(invalid="ignore"):
            cand = np.flatnonzero((act < lo_a - slack) | (act > hi_a + slack)
                                  | ~np.isfinite(act))
        for i in cand.tolist():
            idx, cf, lo, hi = self.rows[i]
            tv = [c * xs[j] for j, c in zip(idx, cf, strict=True)]
            a = math.fsum(tv)
            tol = rel_tol * (1.0 + math.fsum(abs(t) for t in tv))
            if a < lo - tol or a > hi + tol or not math.isfinite(a):
                out.append({"row": i, "name": self.row_names[i] or f"row{i}", "value": a,
                            "lo": lo, "hi": hi})
                if len(out) >= limit:
                    break
        return out

    def _arrays(self) -> tuple[np.ndarray, ...]:
        """The rows as flat arrays (row id, column, coefficient per nonzero; lo, hi per
        row), cached until a row is added."""
        cache = getattr(self, "_arr", None)
        if cache is not None and cache[0] == len(self.rows):
            return cache[1]
        rid = np.fromiter((i for i, r in enumerate(self.rows) for _ in r[0]), dtype=np.int64)
        col = np.fromiter((j for r in self.rows for j in r[0]), dtype=np.int64)
        coef = np.fromiter((c for r in self.rows for c in r[1]), dtype=np.float64)
        lo = np.array([r[2] for r in self.rows], dtype=np.float64)
        hi = np.array([r[3] for r in self.rows], dtype=np.float64)
        arrs = (rid, col, coef, lo, hi)
        self._arr = (len(self.rows), arrs)
        return arrs

    def objective(self, x: Sequence[float]) -> float:
        """The objective at `x` (model units)."""
        return math.fsum(c * float(v) for c, v in zip(self.obj, x, strict=True) if c)

    def copy(self) -> _Lin:
        """An independent copy (rows may be added to either without touching the other)."""
        other = _Lin()
        other.lb, other.ub, other.is_int = list(self.lb), list(self.ub), list(self.is_int)
        other.obj, other.names, other.rows = list(self.obj), list(self.names), list(self.rows)
        other.row_names = list(self.row_names)
        return other

    def stats(self) -> dict[str, int]:
        return {"variables": self.n_vars, "binaries": int(sum(self.is_int)),
                "rows": len(self.rows), "nonzeros": int(sum(len(r[0]) for r in self.rows))}
