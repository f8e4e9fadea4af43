"""A certified branch and bound: a MILP lower bound that floating point cannot make too
large (no LP or MILP solver's objective is taken as a bound without a check that floating
point cannot fool).

A MILP solver's dual bound (SCIP's best bound) rests on LP solves whose tolerances are
not checked, so it is not a bound here. :func:`certified_milp_bound` runs its own
best-first branch and bound over the binaries of a
:class:`~slackopt.solvers.milp.linear.lin._Lin` whose every bound is a safe dual bound
(:func:`~slackopt.solvers.milp.certify.safe_lp.safe_lp_bound`, Neumaier and Shcherbina 2004) of
a node LP solved by GLOP.

Nodes. A node is the box of the model with some binaries fixed (``lb_j = ub_j`` = 0 or
1); its region is the set of points of the MILP (rows, box, integrality) inside that
box. The root is the model's box; branching on an unfixed binary j splits a node into
the two children with j fixed to 0 and to 1, whose regions partition the node's region
(j is 0 or 1 at every integer point). So at any moment the regions of the leaves and
the open (not yet branched) nodes together cover every integer point of the model.

Node bounds. Each node gets a number ``b`` with ``b <= c x`` for every x in its region
(in exact arithmetic):

- from the node LP (rows, the node's box, integrality dropped), solved by GLOP in one
  solver object kept across nodes (bounds changed, re-solved from the last basis, GLOP's
  preprocessing off: :class:`~slackopt.solvers.milp.certify.lp._GlopLP`), its row duals
  ``y`` give ``safe_lp_bound(lin, y, arrays=<the node's lb, ub>)``, which is at most
  ``min {c x : rows, node box}`` for *any* y (weak duality with the rounding of its own
  computation bounded a priori; certify.py) and so at most the minimum over the node's
  region; when the duals leave the sign of a reduced cost on an unbounded variable
  uncertain, the LP is re-solved with a shifted objective and the bound recomputed with
  the true one (backends._certify_loop, certify.objective_shift; the shift is kept for
  later nodes, which does not matter for validity: any y gives a valid bound);
- when GLOP proves no optimum for the node LP (infeasible, abnormal, time limit), its
  claim is not used. Instead an *elastic* LP is solved: every row gets nonnegative
  slacks, ``lo_i <= a_i x + p_i - q_i <= hi_i`` (p_i only where lo_i is finite, q_i only
  where hi_i is finite), each with cost ``penalty``. Its row duals y are then used in
  ``safe_lp_bound`` of the *original* node LP exactly as above: weak duality holds for
  every y, so the number is a valid lower bound on the node's region whatever GLOP's
  claim was (and whether the elastic LP was solved accurately); the elastic LP only
  serves to find a y that proves a large bound. (When the node LP is infeasible, the
  elastic LP's optimum is at least ``penalty`` times the smallest total row violation
  plus the least objective, so its duals certify a bound that reaches the cutoff once
  the penalty is large; its duals satisfy ``|y_i| <= penalty`` up to GLOP's tolerance,
  which the safe bound does not rely on.)
- a child's bound is the larger of its own and its parent's (the parent's bound holds
  on the parent's region, which contains the child's); with no certificate at all the
  child keeps its parent's bound (the root: -inf).

Leaves. A node whose LP solution has every binary within ``int_tol`` of 0 or 1 is a
leaf: its bound stays its value (it holds for every integer point of its region,
whatever the LP solution is, so ``int_tol`` only decides when to stop branching, not
validity); so is a node with every binary fixed. A node is branched on its most
fractional unfixed binary (``|x_j - 0.5|`` smallest; ties: the smallest index), or, with
no LP solution, the first unfixed binary; or, with ``strong=k``, by strong branching:
both children of each of the k most fractional binaries are solved and certified, and
the pair with the largest product of bound gains over the node is kept (the first pair
with a child at or above the cutoff or the best leaf at once); the other pairs are
dropped. Which variable is branched on never affects validity (any split of the region
into the two children is a partition); the most fractional rule stalls on the timing
model (see timing_bound.BB_STRONG).

Search and result. Open nodes are kept in a heap by (bound, creation number): best
first, deterministic. The search stops when the smallest open bound is at least the
smallest leaf value or the `cutoff` (nothing left can lower the result below either: a
node whose bound is at least the cutoff is pruned and keeps its bound as a leaf value),
when no node is open, or at the node or time limit. The returned number is the minimum
over the leaves and the open nodes of their bounds: every integer point lies in the
region of one of them and is at least that node's bound, so the number is at most the
MILP optimum (in exact arithmetic: every node bound is a safe bound, never a solver's
objective), whenever the search stops. With no cutoff and a search that closes, it is
the smallest leaf value, within the LP's tolerance of the optimum.

Determinism: GLOP is deterministic, and the node order depends only on the bounds and
the creation order, so for given limits the result is the same on every run, except
where the clock stops the search or a GLOP solve.
"""

from __future__ import annotations

import heapq
import math
import time
from typing import Any

from slackopt.solvers.milp.certify.lp import _certify_loop, _GlopLP
from slackopt.solvers.milp.certify.safe_lp import lin_arrays
from slackopt.solvers.milp.linear.lin import ModelTimeout, _Lin

NODE_LIMIT = 20_000
"""Default limit on the node LPs solved (the root included)."""
INT_TOL = 1e-9
"""A binary of a node LP's solution within this of 0 or 1 counts as integral."""
ELASTIC_PENALTY = 1e3
"""Slack cost of the elastic LP: this times ``1 + |cutoff|`` (``1 + |root bound|`` when
there is no cutoff), in model units per unit of row violation."""


class _Node:
    """A GLOP solver over a model (the model itself or its elastic version) with the
    node fixings applied incrementally; `n` variables and `m` rows are the original
    model's (the elastic one puts its slacks after them)."""

    def __init__(self, lin: _Lin, n: int, m: int, deadline: float | None) -> None:
        self.glop = _GlopLP(lin, deadline, presolve=False)
        self.lin, self.n, self.m = lin, n, m
        self.fixed: dict[int, float] = {}

    def apply(self, fix: dict[int, float]) -> None:
        """Fix the binaries of `fix` ({index: 0 or 1}) and free every other one fixed
        before (back to its model box)."""
        for j in [j for j in self.fixed if j not in fix]:
            self.glop.set_bounds(j, self.lin.lb[j], self.lin.ub[j])
            del self.fixed[j]
        for j, v in fix.items():
            if self.fixed.get(j) != v:
                self.glop.set_bounds(j, v, v)
                self.fixed[j] = v

    def solve(self, end: float, shift: dict[int, float]
              ) -> tuple[str, float | None, list | None, list | None]:
        """GLOP's solve before perf_counter time `end` with the objective shifted by
        `shift`: (status, objective, the duals of the original model's rows, the values
        of its variables), as :meth:`_GlopLP.solve`."""
        st, objv, y, x = self.glop.solve(end, shift)
        if st != "optimal":
            return st, objv, y, x
        return st, objv, y[:self.m], x[:self.n]


def _elastic(lin: _Lin, penalty: float) -> _Lin:
    """`lin` with slacks ``p_i >= 0`` (where lo_i is finite) and ``q_i >= 0`` (where hi_i
    is finite) in row i: ``lo_i <= a_i x + p_i - q_i <= hi_i``, cost `penalty` each; the
    first ``lin.n_vars`` variables and the first rows are those of `lin`."""
    el = lin.copy()
    el.is_int = [False] * lin.n_vars
    rows = []
    for idx, cf, lo, hi in lin.rows:
        idx, cf = list(idx), list(cf)
        if math.isfinite(lo):
            idx.append(el.var(0.0, math.inf, obj=penalty, name="p"))
            cf.append(1.0)
        if math.isfinite(hi):
            idx.append(el.var(0.0, math.inf, obj=penalty, name="q"))
            cf.append(-1.0)
        rows.append((idx, cf, lo, hi))
    el.rows = rows
    return el


def certified_milp_bound(lin: _Lin, time_limit_s: float, *, cutoff: float | None = None,
                         deadline: float | None = None, node_limit: int = NODE_LIMIT,
                         int_tol: float = INT_TOL, strong: int = 0
                         ) -> tuple[float | None, dict[str, Any]]:
    """A lower bound on ``min {obj x : rows, box, integrality}`` of `lin` that floating
    point cannot make too large: the best-first branch and bound of the module docstring
    (which argues why the number is at most the MILP optimum, also when stopped early).

    Args:
        lin: the model (minimise; model units); its integer variables must be binaries
            (box [0, 1], or fixed at 0 or 1).
        time_limit_s: wall-clock limit (s) for loading GLOP and the search.
        cutoff: a value at or above which nodes are not branched (e.g. the objective of a
            known solution): the result is then at least ``min(cutoff, MILP optimum)``
            when the search closes. Any value keeps the result valid.
        deadline: perf_counter time after which nothing new starts.
        node_limit: the most node LPs solved, the root's and strong branching's included
            (a branching solves two at a time: the count may end one above).
        int_tol: integrality tolerance of the LP solutions (decides leaves, not validity).
        strong: 0: branch on the most fractional binary; k > 0: strong branching over
            the k most fractional ones (both children of each solved and certified; the
            pair with the largest product of bound gains is kept, or at once a pair
            with a child at or above the cutoff or the best leaf). Any choice keeps the
            result valid.

    Returns:
        (bound in model units, or None when no node got a certificate (the root's LP
        proved nothing in time), info): ``nodes`` (node LPs solved), ``leaves``,
        ``open`` (nodes left unbranched), ``closed`` (the search ended because nothing
        open could lower the result, or nothing was open), ``stopped`` ("closed",
        "time limit", "node limit"), ``root_bound``, ``bound`` (the returned number),
        ``elastic`` (nodes whose LP GLOP did not solve, bounded from the elastic LP),
        ``uncertified`` (nodes that kept their parent's bound), ``seconds``.

    Raises:
        ValueError: an integer variable of `lin` is not a binary.
    """
    t0 = time.perf_counter()
    end = t0 + float(time_limit_s)
    if deadline is not None:
        end = min(end, deadline)
    ints = [j for j in range(lin.n_vars) if lin.is_int[j]]
    for j in ints:
        if lin.lb[j] not in (0.0, 1.0) or lin.ub[j] not in (0.0, 1.0) or lin.lb[j] > lin.ub[j]:
            raise ValueError(f"integer variable {j} has box [{lin.lb[j]}, {lin.ub[j]}], "
                             "not a binary's")
    info: dict[str, Any] = {"nodes": 0, "leaves": 0, "open": 0, "closed": False,
                            "stopped": None, "root_bound": None, "bound": None,
                            "elastic": 0, "uncertified": 0}
    try:
        main = _Node(lin, lin.n_vars, len(lin.rows), deadline)
    except ModelTimeout as e:
        info.update(stopped=str(e), seconds=time.perf_counter() - t0)
        return None, info
    bb = _BestFirst(lin, main, ints, info, end=end, deadline=deadline, cutoff=cutoff,
                 int_tol=int_tol, strong=strong)
    out = bb.run(node_limit)
    info.update(open=len(bb.heap), seconds=time.perf_counter() - t0,
                bound=out if math.isfinite(out) else None)
    # out is a leaf's or an open node's bound: a finite safe bound, or -inf where no
    # certificate was found on the way from the root
    return (out if math.isfinite(out) else None), info


class _BestFirst:
    """One run of :func:`certified_milp_bound`'s best-first search: the node solvers
    (the model's and, once a node LP fails, the elastic model's), the objective shifts
    that certified the last node, the open nodes (a heap by bound) and the smallest leaf
    bound; counts go to `info`."""

    def __init__(self, lin: _Lin, main: _Node, ints: list[int], info: dict[str, Any], *,
                 end: float, deadline: float | None, cutoff: float | None, int_tol: float,
                 strong: int) -> None:
        self.lin, self.main, self.ints, self.info = lin, main, ints, info
        self.end, self.deadline, self.cutoff = end, deadline, cutoff
        self.int_tol, self.strong = int_tol, strong
        self.base = lin_arrays(lin)
        self.state: dict[str, Any] = {"shift": {}, "elastic": None, "el_shift": {}}
        self.heap: list[tuple[float, int, dict[int, float], list[int]]] = []
        self.leaf_min = math.inf
        self.seq = 0

    def certify(self, node: _Node, arrays: dict, key: str
                ) -> tuple[float | None, list | None, str]:
        """The node's certified bound from `node`'s LP (None without one), its solution
        and status; the objective shift found is kept for the next node."""
        state = self.state
        last: dict[str, Any] = {"shift": state[key]}

        def solve(shift: dict[int, float]) -> tuple:
            merged = dict(state[key])
            for j, e in shift.items():
                merged[j] = merged.get(j, 0.0) + e
            last["shift"] = merged
            return node.solve(self.end, merged)

        ninfo: dict = {}
        b, x = _certify_loop(self.lin, arrays, solve, self.end, ninfo)
        state[key] = last["shift"]
        return b, x, str(ninfo.get("lp_status"))

    def evaluate(self, fix: dict[int, float], parent: float
                 ) -> tuple[float, list | None, bool]:
        """(bound, LP solution or None, leaf?) of the node with fixings `fix`."""
        lin, info, state = self.lin, self.info, self.state
        lb, ub = self.base["lb"].copy(), self.base["ub"].copy()
        for j, v in fix.items():
            lb[j] = ub[j] = v
        arrays = dict(self.base, lb=lb, ub=ub)
        self.main.apply(fix)
        b, x, st = self.certify(self.main, arrays, "shift")
        solved = st == "certified" or st == "no certificate from the duals"
        if not solved and self.end - time.perf_counter() > 0:
            # GLOP proved no optimum: bound the node from the elastic LP's duals
            info["elastic"] += 1
            if state["elastic"] is None:
                ref = self.cutoff if self.cutoff is not None else info["root_bound"]
                pen = ELASTIC_PENALTY * (1.0 + abs(ref if ref is not None else 0.0))
                try:
                    state["elastic"] = _Node(_elastic(lin, pen), lin.n_vars, len(lin.rows),
                                             self.deadline)
                except ModelTimeout:
                    state["elastic"] = False
            if state["elastic"]:
                state["elastic"].apply(fix)
                b, x, st = self.certify(state["elastic"], arrays, "el_shift")
        if b is None:
            info["uncertified"] += 1
        bound = parent if b is None else max(parent, b)
        free = [j for j in self.ints if j not in fix]
        leaf = not free or (x is not None and b is not None and all(
            min(x[j], 1.0 - x[j]) <= self.int_tol for j in free))
        return bound, x, leaf

    def candidates(self, fix: dict[int, float], x: list | None) -> list[int]:
        """Branching candidates, best first: the unfixed binaries fractional in `x`, most
        fractional first (ties: smallest index), at most ``max(1, strong)``; with none
        (no LP solution, or an integral one without a certificate) the first unfixed."""
        free = [j for j in self.ints if j not in fix]
        frac = [] if x is None else sorted(
            (abs(x[j] - 0.5), j) for j in free if min(x[j], 1.0 - x[j]) > self.int_tol)
        return [j for _, j in frac[:max(1, self.strong)]] or free[:1]

    def child(self, fix: dict[int, float], parent: float) -> tuple:
        """The node with fixings `fix` solved: (fix, bound, solution, leaf?)."""
        out = self.evaluate(fix, parent)
        self.info["nodes"] += 1
        return (fix, *out)

    def add(self, fix: dict[int, float], b: float, x: list | None, leaf: bool) -> None:
        """Record a solved node: a leaf's bound, or an open node on the heap."""
        if leaf:
            self.info["leaves"] += 1
            self.leaf_min = min(self.leaf_min, b)
        else:
            heapq.heappush(self.heap, (b, self.seq, fix, self.candidates(fix, x)))
            self.seq += 1

    def run(self, node_limit: int) -> float:
        """Branch best first until nothing open can lower the result, the time limit or
        `node_limit`; returns the smallest bound over the leaves and open nodes (model
        units; -inf when no certificate was found on the way from the root)."""
        info, heap = self.info, self.heap
        root = self.child({}, -math.inf)
        info["root_bound"] = root[1] if math.isfinite(root[1]) else None
        self.add(*root)
        stop = self.cutoff if self.cutoff is not None else math.inf
        while True:
            if not heap or heap[0][0] >= min(self.leaf_min, stop):
                info.update(closed=True, stopped="closed")
                break
            if time.perf_counter() >= self.end:
                info["stopped"] = "time limit"
                break
            if info["nodes"] >= node_limit:
                info["stopped"] = "node limit"
                break
            b, _, fix, cands = heapq.heappop(heap)
            best = None
            eps = 1e-9 * (1.0 + abs(b)) if math.isfinite(b) else 1e-9
            for j in cands:
                kids = [self.child({**fix, j: v}, b) for v in (0.0, 1.0)]
                if len(cands) == 1 or any(k[1] >= min(self.leaf_min, stop) for k in kids):
                    best = (math.inf, kids)
                    break
                # strong branching: the product of the two children's gains
                score = max(kids[0][1] - b, eps) * max(kids[1][1] - b, eps)
                if best is None or score > best[0]:
                    best = (score, kids)
                if time.perf_counter() >= self.end or info["nodes"] >= node_limit:
                    break
            for k in best[1]:
                self.add(*k)
        return min([self.leaf_min] + [h[0] for h in heap])
