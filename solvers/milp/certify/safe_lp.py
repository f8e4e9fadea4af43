"""Safe lower bounds from LP duals: a bound that floating point cannot make too large.

An LP or MILP solver's objective value is not a bound: simplex codes work with tolerances
(feasibility and optimality around 1e-7 to 1e-9, scaled), and on badly scaled models they
can return an objective far above the true optimum (on a recorded case of
tests/data/milp_soundness/, SCIP's LP gave 12,909.68 us where the optimum is 3,288.997
us). Following Neumaier and Shcherbina, "Safe bounds in linear and mixed-integer linear
programming", Math. Programming 99 (2004) 283-296, a bound is instead computed from *any*
row multipliers ``y`` (the solver's duals) by weak duality, with the rounding errors of
that computation bounded a priori, so that the number returned is at most the exact
minimum.

The model is a :class:`~slackopt.solvers.milp.linear.lin._Lin`: minimise ``c x`` subject to
``lo <= A x <= hi`` (rows) and ``lb <= x <= ub`` (box; infinite bounds allowed).

Weak duality (Neumaier-Shcherbina, section 2): for any y with ``y_i > 0`` only where
``lo_i`` is finite and ``y_i < 0`` only where ``hi_i`` is finite, let ``r = c - A^T y``.
For every x satisfying the rows and the box,
``c x = y^T (A x) + r x >= sum_i (y_i > 0 ? y_i lo_i : y_i hi_i) + sum_j min_{lb_j <=
x_j <= ub_j} r_j x_j``, since ``y_i (A x)_i >= y_i lo_i`` when ``y_i > 0`` and
``>= y_i hi_i`` when ``y_i < 0``. The last minimum is ``min(r_j lb_j, r_j ub_j)``, and
``-inf`` when ``r_j != 0`` points towards an infinite bound. Integrality is not used, so
the bound holds for the MILP too. Any y gives a valid bound; the solver's optimal duals
give one close to the LP optimum.

Rigour: every quantity is computed in IEEE double precision (round to nearest) with an
a-priori error bound (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
section 3.1, eq. 3.5): a dot product of n terms computed in any order satisfies
``|fl(x . y) - x . y| <= gamma_n |x| . |y|`` with ``gamma_n = n u / (1 - n u)``,
``u = 2^-53``, barring underflow; gradual underflow adds at most ``eta = 2^-1074`` per
product, covered by an absolute term of ``(n + 2) 2^-1022``.

1. ``r_j = c_j - sum_i a_ij y_i`` is a dot product of ``n_j + 1`` terms (``n_j`` the
   nonzeros of column j). With ``E_j = fl(|c_j| + sum_i |a_ij| |y_i|)`` (itself within
   ``(1 + gamma_{n_j+1})`` of its exact value) the enclosure ``[r^_j - d_j, r^_j + d_j]``
   with ``d_j = 2 gamma_{n_j+2} E_j + (p_j + 1) 2^-1022`` contains the exact r_j, p_j the
   number of nonzero products ``a_ij y_i`` and ``c_j`` (the factor 2 covers the rounding
   of ``E_j`` and of the products ``gamma E``; the end points are moved outward by one
   ulp). When ``p_j = 0`` every term is an exact zero, and so is r_j (``d_j = 0``).
2. ``m_j = min`` of the four products ``{r_lo, r_hi} x {lb_j, ub_j}`` is at most
   ``min_x r_j x_j`` (bilinear: the minimum over the box of (r, x) is at a corner);
   the rounded products are ``fl`` of the exact ones and ``fl`` is monotone, so the
   computed minimum is ``fl(m_j)``. With an infinite bound the term is finite only when
   the enclosure has the right sign (``r_lo >= 0`` for ``ub = inf``, ``r_hi <= 0`` for
   ``lb = -inf``); otherwise no bound (None).
3. The total ``sum_i y_i rhs_i + sum_j m_j`` is a sum of K rounded products: it is
   computed, and the result lowered by ``2 gamma_{K+1} S + (K + 2) 2^-1022`` with S the
   computed sum of absolute values, then by one more ulp.

So the returned number is at most ``min {c x : lo <= A x <= hi, lb <= x <= ub}`` (also
when the LP is infeasible: then any number is). Cost: a few sparse matrix-vector
products (docs/bounds.md, "Settings and the measurements behind them").

Infinite bounds. The reduced cost of a basic variable is 0 up to rounding, so its
enclosure straddles 0, and against an infinite bound that gives -inf. Two remedies,
both rigorous: (a) :func:`implied_box` replaces infinite bounds by finite ones that the
rows imply (every feasible point lies in that box, so it serves in step 2 as the
declared box does; the time-indexed model's free prefix sums get bounds this way), and
(b) for a variable that stays unbounded (a stall, say), :func:`objective_shift` says by
how much to shift its objective coefficient before re-solving, so that the solver's new
duals leave a margin beyond the enclosure; the bound is still computed with the true
objective (Neumaier and Shcherbina 2004, section 3). The shift costs about
``sum_j e_j x_j``: 1e-12 to 1e-11 relative on the models here.

An exact cross-check (``exact=True``) does the same computation in rational arithmetic
(``fractions.Fraction`` of the floats, exact): slow, for tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from itertools import chain
from typing import Any

import numpy as np
import scipy.sparse as sp

from slackopt.solvers.milp.linear.lin import _Lin

_U = 2.0 ** -53
"""Unit roundoff of IEEE double precision, round to nearest."""
_TINY = 2.0 ** -1022
"""Smallest normal double: an absolute term per product covers gradual underflow."""


def _gamma(n: np.ndarray | int) -> np.ndarray | float:
    """Higham's ``gamma_n = n u / (1 - n u)`` (requires ``n u < 1``)."""
    nu = np.asarray(n, dtype=np.float64) * _U
    if np.any(nu >= 0.5):
        raise ValueError("too many terms for the a-priori error bound")
    return nu / (1.0 - nu)


def lin_arrays(lin: _Lin) -> dict[str, Any]:
    """The arrays of `lin`: ``A`` (scipy.sparse CSR, rows x variables), ``lo``, ``hi``,
    ``lb``, ``ub``, ``c`` (float64 numpy arrays, infinite sides as +-inf)."""
    lens = np.fromiter((len(r[0]) for r in lin.rows), dtype=np.int64, count=len(lin.rows))
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    indices = np.fromiter(chain.from_iterable(r[0] for r in lin.rows), dtype=np.int64,
                          count=int(indptr[-1]))
    data = np.fromiter(chain.from_iterable(r[1] for r in lin.rows), dtype=np.float64,
                       count=int(indptr[-1]))
    A = sp.csr_matrix((data, indices, indptr), shape=(len(lin.rows), lin.n_vars))
    A.sum_duplicates()
    return {"A": A,
            "lo": np.array([r[2] for r in lin.rows], dtype=np.float64),
            "hi": np.array([r[3] for r in lin.rows], dtype=np.float64),
            "lb": np.asarray(lin.lb, dtype=np.float64),
            "ub": np.asarray(lin.ub, dtype=np.float64),
            "c": np.asarray(lin.obj, dtype=np.float64)}


def usable_duals(lo: np.ndarray, hi: np.ndarray, y: Sequence[float] | np.ndarray
                 ) -> np.ndarray:
    """`y` with the sign convention of the module docstring enforced: ``y_i > 0`` kept
    only where ``lo_i`` is finite, ``y_i < 0`` only where ``hi_i`` is finite, else 0;
    NaN becomes 0. (Any such y gives a valid bound.)"""
    y = np.array(y, dtype=np.float64, copy=True)
    y[~np.isfinite(y)] = 0.0
    y[(y > 0) & ~np.isfinite(lo)] = 0.0
    y[(y < 0) & ~np.isfinite(hi)] = 0.0
    return y


def _reduced_costs(a: dict[str, Any], y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The computed reduced costs ``r^ = fl(c - A^T y)`` and the radius d of an enclosure
    ``|r - r^| <= d`` of the exact ones (step 1 of the module docstring; ``d_j = 0`` when
    every product of column j and ``c_j`` is an exact zero); `a`: :func:`lin_arrays`."""
    c = a["c"]
    if "AT" not in a:
        AT = a["A"].T.tocsr()
        a["AT"] = AT
        a["absAT"] = abs(AT)
        a["patAT"] = sp.csr_matrix(((AT.data != 0).astype(np.float64), AT.indices,
                                    AT.indptr), shape=AT.shape)
        a["nj"] = np.diff(AT.indptr)
    rhat = c - a["AT"] @ y
    E = np.abs(c) + a["absAT"] @ np.abs(y)
    # products that are not exactly zero (an exact zero needs no underflow term)
    pj = a["patAT"] @ (y != 0).astype(np.float64) + (c != 0)
    d = np.where(pj > 0, 2.0 * _gamma(a["nj"] + 2) * E + (pj + 1) * _TINY, 0.0)
    return rhat, d


def safe_lp_bound(lin: _Lin, row_duals: Sequence[float] | np.ndarray, *,
                  arrays: dict[str, Any] | None = None, exact: bool = False,
                  implied: bool = True) -> float | None:
    """A lower bound on ``min {obj x : rows, box}`` of `lin` (and so on its MILP
    optimum), from the row multipliers `row_duals`, that rounding cannot make too large.

    Args:
        lin: the model (minimise; rows ``lo <= sum coef x <= hi``; box ``lb <= x <= ub``).
        row_duals: one multiplier per row, in the sign convention ``y_i > 0`` for a row
            held at its lower side, ``y_i < 0`` at its upper side (OR-Tools' pywraplp
            ``dual_value()`` for a minimisation); the wrong sign for an infinite side is
            set to 0 (:func:`usable_duals`).
        arrays: :func:`lin_arrays` of `lin`, if already built.
        exact: compute in rational arithmetic (slow; for tests).
        implied: when the declared box gives no bound (a reduced cost of uncertain sign
            against an infinite bound), retry with the finite bounds the rows imply
            (:func:`implied_box`: a box that contains every feasible point serves as
            well as the declared one).

    Returns:
        The bound in model units (a float at most the exact minimum), or None when the
        bound is ``-inf`` (a reduced cost not certified to have the sign that an infinite
        variable bound needs) or not finite.

    Raises:
        ValueError: `row_duals` does not have one entry per row.

    Method: Neumaier and Shcherbina (2004), with Higham's a-priori error bounds; the
    argument is in the module docstring.
    """
    a = lin_arrays(lin) if arrays is None else arrays
    A, lo, hi, lb, ub, c = a["A"], a["lo"], a["hi"], a["lb"], a["ub"], a["c"]
    if len(row_duals) != A.shape[0]:
        raise ValueError(f"{len(row_duals)} duals for {A.shape[0]} rows")
    y = usable_duals(lo, hi, row_duals)
    if exact:
        out = _exact_bound(A, lo, hi, lb, ub, c, y)
        if out is None and implied:
            ilb, iub = implied_box(a)
            out = _exact_bound(A, lo, hi, ilb, iub, c, y)
        return out
    out = _fp_bound(a, y, lb, ub)
    if out is None and implied:
        # a reduced cost of uncertain sign against an infinite bound: finite bounds that
        # every point satisfying the rows and the box satisfies (implied_box) serve too
        ilb, iub = implied_box(a)
        if not (np.array_equal(ilb, lb) and np.array_equal(iub, ub)):
            out = _fp_bound(a, y, ilb, iub)
    return out


def _fp_bound(a: dict[str, Any], y: np.ndarray, lb: np.ndarray, ub: np.ndarray
              ) -> float | None:
    """Steps 1-3 of the module docstring in floating point with the box [lb, ub]."""
    lo, hi = a["lo"], a["hi"]
    with np.errstate(all="ignore"):
        rhs = np.where(y > 0, lo, np.where(y < 0, hi, 0.0))
        ty = y * rhs                                     # rounded products
        rhat, d = _reduced_costs(a, y)
        exact0 = d == 0.0               # r^_j is exact (every term an exact zero)
        r_lo = np.where(exact0, rhat, np.nextafter(rhat - d, -np.inf))
        r_hi = np.where(exact0, rhat, np.nextafter(rhat + d, np.inf))
        if not (np.all(np.isfinite(r_lo)) and np.all(np.isfinite(r_hi))
                and np.all(np.isfinite(ty))):
            return None
        zero = (r_lo == 0.0) & (r_hi == 0.0)
        fin_lb, fin_ub = np.isfinite(lb), np.isfinite(ub)
        # an infinite bound needs a certified sign of r (else the bound is -inf)
        if np.any(~fin_ub & ~zero & (r_lo < 0.0)) or np.any(~fin_lb & ~zero & (r_hi > 0.0)):
            return None
        lbf = np.where(fin_lb, lb, 0.0)
        ubf = np.where(fin_ub, ub, 0.0)
        cand = np.stack([np.where(fin_lb, r_lo * lbf, np.inf),
                         np.where(fin_lb, r_hi * lbf, np.inf),
                         np.where(fin_ub, r_lo * ubf, np.inf),
                         np.where(fin_ub, r_hi * ubf, np.inf)])
        m = cand.min(axis=0)
        m[zero] = 0.0
        if not np.all(np.isfinite(m)):
            return None
        terms = np.concatenate([ty, m])
        K = terms.size
        total = float(np.sum(terms))
        S = float(np.sum(np.abs(terms)))
        err = 2.0 * float(_gamma(K + 1)) * S + (K + 2) * _TINY
        out = float(np.nextafter(total - err, -np.inf))
    return out if math.isfinite(out) else None


def _outward(x: np.ndarray, up: bool) -> np.ndarray:
    """`x` moved outward by 1e-14 relative plus 4 * 2^-1022 and one ulp: covers two
    roundings (a subtraction, a division: at most ``(2u + u^2) |x|``) and underflow."""
    if up:
        return np.nextafter(x + np.abs(x) * 1e-14 + 4.0 * _TINY, np.inf)
    return np.nextafter(x - np.abs(x) * 1e-14 - 4.0 * _TINY, -np.inf)


def implied_box(a: dict[str, Any], max_rounds: int = 100_000
                ) -> tuple[np.ndarray, np.ndarray]:
    """Finite bounds, where the rows imply them, for the variables whose declared bound is
    infinite: every x that satisfies the rows and the declared box lies in the returned
    box (the declared finite bounds are kept as they are). Cached in `a`.

    Rigorous bound propagation (activity-based bound tightening, e.g. Achterberg's thesis,
    TU Berlin 2007, section 7.2): for row i and a variable j with ``a_ij > 0``,
    ``x_j <= (hi_i - min_{x_k in box} sum_{k != j} a_ik x_k) / a_ij`` and
    ``x_j >= (lo_i - max ...) / a_ij`` (sides swapped for ``a_ij < 0``), when that
    minimum (maximum) is finite. The row's finite activity is a sum of rounded products,
    enlarged by ``2 gamma_{n_i+2}`` times the sum of their magnitudes plus
    ``(n_i + 2) 2^-1022`` (as in the module docstring), and the quotient is moved outward
    by :func:`_outward`; so the computed bound is on the safe side of the exact one. Each
    round revisits the rows of the variables that got a bound in the previous one
    (prefix-sum chains need one round per link; each infinite bound is filled at most
    once, so there are at most ``2 n`` rounds, and at most `max_rounds`).

    Returns:
        (lb, ub) float64 arrays.
    """
    if "implied" in a:
        return a["implied"]
    A = a["A"]
    if "AT" not in a:
        _reduced_costs(a, np.zeros(A.shape[0]))         # builds the cached transposes
    AT = a["AT"]
    lb, ub = a["lb"].copy(), a["ub"].copy()
    lo, hi = a["lo"], a["hi"]
    m, n = A.shape
    active = np.arange(m)
    with np.errstate(all="ignore"):
        for _ in range(max_rounds):
            if active.size == 0:
                break
            sub = A[active]
            nrow = np.diff(sub.indptr)
            k = active.size
            rows = np.repeat(np.arange(k), nrow)
            cols, v = sub.indices, sub.data
            pos = v > 0
            g = 2.0 * _gamma(nrow + 2)
            tiny = (nrow + 2) * _TINY
            lbj, ubj = lb[cols], ub[cols]
            cmin = v * np.where(pos, lbj, ubj)
            cmax = v * np.where(pos, ubj, lbj)
            imin, imax = ~np.isfinite(cmin), ~np.isfinite(cmax)
            cmin = np.where(imin, 0.0, cmin)
            cmax = np.where(imax, 0.0, cmax)
            act_min = np.bincount(rows, weights=cmin, minlength=k)
            act_max = np.bincount(rows, weights=cmax, minlength=k)
            n_min = np.bincount(rows, weights=imin, minlength=k)[rows]
            n_max = np.bincount(rows, weights=imax, minlength=k)[rows]
            e_min = g * np.bincount(rows, weights=np.abs(cmin), minlength=k) + tiny
            e_max = g * np.bincount(rows, weights=np.abs(cmax), minlength=k) + tiny
            # the other terms' smallest (largest) activity, on the safe side
            rest_min = np.where(imin, np.where(n_min == 1, act_min[rows], -np.inf),
                                np.where(n_min == 0, act_min[rows] - cmin, -np.inf))
            rest_max = np.where(imax, np.where(n_max == 1, act_max[rows], np.inf),
                                np.where(n_max == 0, act_max[rows] - cmax, np.inf))
            rest_min = np.nextafter(rest_min - e_min[rows], -np.inf)
            rest_max = np.nextafter(rest_max + e_max[rows], np.inf)
            q_hi = (hi[active][rows] - rest_min) / v    # from a x_j <= hi - rest_min
            q_lo = (lo[active][rows] - rest_max) / v    # from a x_j >= lo - rest_max
            cand_ub = np.where(pos, _outward(q_hi, True), _outward(q_lo, True))
            cand_lb = np.where(pos, _outward(q_lo, False), _outward(q_hi, False))
            cand_ub[~np.isfinite(cand_ub)] = np.inf
            cand_lb[~np.isfinite(cand_lb)] = -np.inf
            new_ub = np.full(n, np.inf)
            new_lb = np.full(n, -np.inf)
            np.minimum.at(new_ub, cols, cand_ub)
            np.maximum.at(new_lb, cols, cand_lb)
            fill_ub = ~np.isfinite(ub) & np.isfinite(new_ub)
            fill_lb = ~np.isfinite(lb) & np.isfinite(new_lb)
            ub[fill_ub] = new_ub[fill_ub]
            lb[fill_lb] = new_lb[fill_lb]
            changed = np.flatnonzero(fill_ub | fill_lb)
            active = np.unique(AT[changed].indices) if changed.size else changed
    a["implied"] = (lb, ub)
    return lb, ub


def _exact_bound(A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray, lb: np.ndarray,
                 ub: np.ndarray, c: np.ndarray, y: np.ndarray) -> float | None:
    """The bound of :func:`safe_lp_bound` in exact rational arithmetic, rounded down to a
    float (None for -inf)."""
    F = Fraction
    r = [F(float(v)) for v in c]
    coo = A.tocoo()
    yf = [F(float(v)) for v in y]
    for i, j, v in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
        if yf[i]:
            r[j] -= F(v) * yf[i]
    total = F(0)
    for i, yi in enumerate(yf):
        if yi > 0:
            total += yi * F(float(lo[i]))
        elif yi < 0:
            total += yi * F(float(hi[i]))
    for j, rj in enumerate(r):
        if rj > 0:
            if not math.isfinite(lb[j]):
                return None
            total += rj * F(float(lb[j]))
        elif rj < 0:
            if not math.isfinite(ub[j]):
                return None
            total += rj * F(float(ub[j]))
    out = float(total)          # round to nearest, then down if above
    if F(out) > total:
        out = float(np.nextafter(out, -np.inf))
    return out


def objective_shift(lin: _Lin, row_duals: Sequence[float] | np.ndarray, *,
                    arrays: dict[str, Any] | None = None, margin: float = 1024.0
                    ) -> dict[int, float] | None:
    """Objective changes that let an LP solve's duals certify: for each variable with an
    infinite bound (declared, and not made finite by :func:`implied_box`) whose reduced
    cost is not certified to have the sign that bound needs (:func:`safe_lp_bound` returns
    None for them), the amount ``e_j > 0`` to subtract from (upper bound infinite) or add
    to (lower bound infinite) its objective coefficient.

    Re-solving with ``c_j -+ e_j`` makes the new duals satisfy the shifted dual
    constraint ``r'_j >= 0`` (``<= 0``) up to the solver's tolerance, so the reduced cost
    under the *true* objective is about ``e_j``, beyond the rounding enclosure; the
    bound is still computed with the true objective (valid for any multipliers) and loses
    about ``sum_j e_j x_j`` (Neumaier and Shcherbina 2004, section 3: perturbing the
    objective towards a strictly feasible dual). ``e_j = margin * (d_j + |r^_j|)``,
    with d_j the enclosure radius of the module docstring, at least ``1e-12 (1 + |c_j|)``.

    Args:
        lin: the model; row_duals: the multipliers of the solve (as for safe_lp_bound);
        arrays: :func:`lin_arrays` of `lin`, if built; margin: the factor above.

    Returns:
        {variable index: signed change to add to its objective coefficient} (empty when
        the duals certify already), or None when a free variable (both bounds infinite,
        declared and implied) has an uncertified reduced cost (no shift helps: it would
        need r_j = 0 exactly).
    """
    a = lin_arrays(lin) if arrays is None else arrays
    lo, hi, c = a["lo"], a["hi"], a["c"]
    lb, ub = implied_box(a)
    y = usable_duals(lo, hi, row_duals)
    with np.errstate(all="ignore"):
        rhat, d = _reduced_costs(a, y)
    fin_lb, fin_ub = np.isfinite(lb), np.isfinite(ub)
    exact0 = d == 0.0
    up = ~fin_ub & ~exact0 & (np.nextafter(rhat - d, -np.inf) < 0.0)
    dn = ~fin_lb & ~exact0 & (np.nextafter(rhat + d, np.inf) > 0.0)
    if np.any(up & dn):
        return None
    e = np.maximum(margin * (d + np.abs(rhat)), 1e-12 * (1.0 + np.abs(c)))
    if not np.all(np.isfinite(e[up | dn])):
        return None
    out = {int(j): -float(e[j]) for j in np.flatnonzero(up)}
    out.update({int(j): float(e[j]) for j in np.flatnonzero(dn)})
    return out


def certifies_infeasible(lin: _Lin, ray: Sequence[float] | np.ndarray, *,
                         arrays: dict[str, Any] | None = None) -> bool:
    """Whether the row multipliers `ray` prove that `lin` has no point satisfying its rows
    and box (integrality ignored, so neither has its MILP): a Farkas certificate, checked
    with the same rigour as :func:`safe_lp_bound`.

    Weak duality for the zero objective: every feasible x has ``0 = 0 x >=
    sum_i (y_i > 0 ? y_i lo_i : y_i hi_i) + sum_j min(r_j lb_j, r_j ub_j)``, ``r = -A^T
    y``; when the certified right side is positive there is no feasible x (Neumaier and
    Shcherbina 2004, section 4: rigorous infeasibility certificates).

    Args:
        lin: the model; ray: one multiplier per row (same sign convention as the duals);
        arrays: :func:`lin_arrays` of `lin`, if built.

    Returns:
        True when the certificate holds; False when it does not (which proves nothing).
    """
    a = lin_arrays(lin) if arrays is None else arrays
    a0 = dict(a, c=np.zeros_like(a["c"]))
    b = safe_lp_bound(lin, ray, arrays=a0)
    return b is not None and b > 0.0


DATA_SHAVE = 1e-9
"""Relative margin taken off a certified model value before it is reported in seconds.
The safe dual bound is exact for the model as stored in floating point; the model's data
(durations and bytes divided by the time and memory units) carry one rounding each,
relative 2^-53, so the stored model may be tighter than the exact one by that much per
coefficient. 1e-9 covers it with a wide margin (it is not an a-priori bound)."""


def seconds_below(offset_s: float, units: float, unit_s: float) -> float:
    """A float at most ``offset_s + units * (1 - DATA_SHAVE) * unit_s`` in exact
    arithmetic, never below ``offset_s - |units| * unit_s``: the certified model value
    `units` (model time units of `unit_s` seconds each) plus a constant `offset_s` (s),
    as a bound in seconds. Each rounded operation is followed by a step of one ulp toward
    -inf, so round-to-nearest cannot lift the result above the exact value.

    Raises:
        ValueError: a non-finite argument.
    """
    if not (math.isfinite(offset_s) and math.isfinite(units) and math.isfinite(unit_s)):
        raise ValueError("seconds_below needs finite arguments")
    down = -math.inf
    v = math.nextafter(units * (1.0 - DATA_SHAVE) if units > 0 else units * (1.0 + DATA_SHAVE),
                       down)
    v = math.nextafter(v * unit_s, down)
    return math.nextafter(offset_s + v, down)
