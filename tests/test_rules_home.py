"""Every runtime rule of the model has one home, slackopt/simulate/rules.py (issue 42).

The guard parses every module under slackopt/ and solvers/ (the AST, so formatting and
names do not hide a pattern) and fails when one of these is written outside rules.py:

- the copy's latency added to a time (``now + latency``, ``latency + s / W``: the copy
  time and the latency phase, :func:`~slackopt.simulate.rules.copy_start`,
  :func:`~slackopt.simulate.rules.copy_time`, :func:`~slackopt.simulate.rules.fifo_copy_end`);
- bytes at a copy rate (``now + remaining / rate``, ``remaining -= rate * dt``: the copy
  engine's progression, :func:`~slackopt.simulate.rules.copy_event`,
  :func:`~slackopt.simulate.rules.copy_advance`);
- the duplex factor in arithmetic or in min/max (:func:`~slackopt.simulate.rules.copy_rate`);
- the admission test (``used + size + reserved <= M``: three terms or more against the
  budget), the allocation test and the shortfall (``used + size <= M``,
  ``used + size - M``), the host pinned-memory test (``host_used + size`` against the
  limit);
- a literal look-ahead: a name like ``lookahead`` bound to an integer literal, or, in a
  function about admission, the integers ADMISSION_LOOKAHEAD - 1 .. + 1 as a call
  argument, a slice bound or a term of a sum (``np.zeros(4)``, ``_lb_tasks(k, 3, ...)``,
  ``k + 3``);
- the FIFO recurrence in closed form (``np.maximum.accumulate``,
  :func:`~slackopt.simulate.rules.fifo_ends`).

The detector is checked on the restatements this guard replaced (each must be found) and
on rules.py itself (where the rules are written, so they must be found there).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from slackopt.simulate.rules import ADMISSION_LOOKAHEAD

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "slackopt" / "simulate" / "rules.py"
SOURCES = sorted(p for d in ("slackopt", "solvers") for p in (ROOT / d).rglob("*.py")
                 if p != RULES)

LATENCY = re.compile(r"^(lat|latency|latency_s|copy_latency|copy_latency_s)$", re.I)
RATE = re.compile(r"rate", re.I)
DUPLEX = re.compile(r"duplex", re.I)
BUDGET = re.compile(r"^(M|budget|budget_bytes)$")
USED = re.compile(r"^used$")
HOST_USED = re.compile(r"^host_used$")
ADMISSION_TOPIC = re.compile(r"admi|look-?ahead|reserv|slots|next three", re.I)
WINDOW_CALLEE = re.compile(r"task|slot|window|look|reserv", re.I)
ARRAY_MAKERS = {"zeros", "empty", "ones", "full"}
LOOKAHEAD_NAME = re.compile(r"look_?ahead", re.I)
LOOKAHEAD_INTS = {ADMISSION_LOOKAHEAD - 1, ADMISSION_LOOKAHEAD, ADMISSION_LOOKAHEAD + 1}


def ident(node: ast.AST) -> str:
    """The last identifier of a name, attribute, subscript or ``float(x)``/``int(x)``
    wrapper ('' for anything else)."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("float", "int") and len(node.args) == 1):
            node = node.args[0]
        else:
            return ""


def operand_names(node: ast.AST) -> list[str]:
    """The identifiers `node` computes with: through arithmetic, conditional expressions
    and ``float(x)``/``int(x)``, not into other calls (what a call receives is its own)."""
    if isinstance(node, ast.BinOp):
        return operand_names(node.left) + operand_names(node.right)
    if isinstance(node, ast.UnaryOp):
        return operand_names(node.operand)
    if isinstance(node, ast.IfExp):
        return operand_names(node.body) + operand_names(node.orelse)
    return [ident(node)]


def terms(node: ast.AST) -> list[ast.AST]:
    """The operands of a chain of + and - (the node itself when it is not one)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return terms(node.left) + terms(node.right)
    return [node]


def is_sum(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)


def rate_div(node: ast.AST) -> bool:
    """``x / rate``."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
            and bool(RATE.search(ident(node.right))))


def rate_mult(node: ast.AST) -> bool:
    """``rate * x`` or ``x * rate``."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
            and any(RATE.search(ident(x)) for x in (node.left, node.right)))


def against(cmp: ast.Compare, side: re.Pattern, pred) -> bool:
    """A comparison of one operand matching `pred` with one whose identifier matches
    `side` (either order, any of <, <=, >, >=)."""
    ops = [cmp.left, *cmp.comparators]
    for i, op in enumerate(cmp.ops):
        if not isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            continue
        a, b = ops[i], ops[i + 1]
        if (pred(a) and side.search(ident(b))) or (pred(b) and side.search(ident(a))):
            return True
    return False


def sum_from(pattern: re.Pattern, n: int = 2):
    """A predicate: a sum of at least `n` terms whose first term matches `pattern`."""
    def pred(node: ast.AST) -> bool:
        ts = terms(node)
        return is_sum(node) and len(ts) >= n and bool(pattern.search(ident(ts[0])))
    return pred


def long_sum(node: ast.AST) -> bool:
    return is_sum(node) and len(terms(node)) >= 3


def _lookahead_literals(fn: ast.AST) -> list[tuple[int, str]]:
    """Integer literals ADMISSION_LOOKAHEAD - 1 .. + 1 in `fn` used as the size of a new
    array, an argument of a call about tasks, slots or windows, a slice bound or a term
    of a sum with a non-literal."""
    out = []

    def lit(x: ast.AST) -> bool:
        return (isinstance(x, ast.Constant) and type(x.value) is int
                and x.value in LOOKAHEAD_INTS)

    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            callee = ident(node.func)
            if callee in ARRAY_MAKERS and node.args and lit(node.args[0]):
                out.append((node.lineno, "an array sized by a literal look-ahead"))
            elif WINDOW_CALLEE.search(callee):
                args = [*node.args, *(k.value for k in node.keywords)]
                out += [(a.lineno, "a literal look-ahead as a call argument") for a in args
                        if lit(a)]
        elif isinstance(node, ast.Slice):
            out += [(b.lineno, "a literal look-ahead as a slice bound")
                    for b in (node.lower, node.upper) if b is not None and lit(b)]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if lit(a) and not isinstance(b, ast.Constant):
                    out.append((a.lineno, "a literal look-ahead in a sum"))
    return out


def findings(source: str) -> list[tuple[int, str]]:
    """(line, what) for every restated rule in `source` (a module's text)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign)):
            op = node.op
            left = node.target if isinstance(node, ast.AugAssign) else node.left
            right = node.value if isinstance(node, ast.AugAssign) else node.right
            if isinstance(op, ast.Add):
                ts = terms(left) + terms(right)
                if any(LATENCY.search(ident(t)) for t in ts):
                    out.append((node.lineno, "the copy latency added (copy time / latency "
                                             "phase: rules.copy_start, copy_time, "
                                             "fifo_copy_end)"))
                if any(rate_div(t) for t in ts):
                    out.append((node.lineno, "bytes over a copy rate added to a time "
                                             "(rules.copy_event)"))
            if isinstance(op, ast.Sub) and rate_mult(right):
                out.append((node.lineno, "bytes moved at a copy rate subtracted "
                                         "(rules.copy_advance)"))
            if isinstance(op, ast.Sub) and isinstance(node, ast.BinOp) \
                    and sum_from(USED)(left) and BUDGET.search(ident(right)):
                out.append((node.lineno, "the shortfall used + size - M (rules.shortfall)"))
            if any(DUPLEX.search(x) for side in (left, right) for x in operand_names(side)):
                out.append((node.lineno, "the duplex factor in arithmetic (rules.copy_rate, "
                                         "copy_time)"))
        elif isinstance(node, ast.Call) and ident(node.func) in ("min", "max") \
                and any(DUPLEX.search(ident(a)) for a in node.args):
            out.append((node.lineno, "the duplex factor in min/max (rules.copy_rate)"))
        elif isinstance(node, ast.Compare):
            if against(node, BUDGET, long_sum):
                out.append((node.lineno, "the admission test used + size + reserved vs M "
                                         "(rules.h2d_admits)"))
            elif against(node, BUDGET, sum_from(USED)):
                out.append((node.lineno, "the allocation test used + size vs M "
                                         "(rules.allocation_fits)"))
            if against(node, re.compile("^host_limit$"), sum_from(HOST_USED)):
                out.append((node.lineno, "the host pinned-memory test (rules.host_admits)"))
        elif isinstance(node, ast.Call) and ident(node.func) == "accumulate" \
                and isinstance(node.func, ast.Attribute) and ident(node.func.value) == "maximum" \
                and any(isinstance(a, ast.BinOp) and isinstance(a.op, ast.Sub)
                        for a in node.args):
            out.append((node.lineno, "the FIFO recurrence in closed form (rules.fifo_ends)"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(LOOKAHEAD_NAME.search(ident(t)) for t in targets) \
                    and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
                out.append((node.lineno, "a look-ahead bound to a literal "
                                         "(rules.ADMISSION_LOOKAHEAD)"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if ADMISSION_TOPIC.search("\n".join(lines[node.lineno - 1:node.end_lineno])):
                out += _lookahead_literals(node)
    return sorted(set(out))


def test_no_rule_restated_outside_rules_py():
    """No module of slackopt/ or solvers/ but rules.py writes a runtime rule itself."""
    assert len(SOURCES) > 50
    found = [f"{p.relative_to(ROOT)}:{line}: {what}"
             for p in SOURCES for line, what in findings(p.read_text())]
    assert not found, ("runtime rules restated outside slackopt/simulate/rules.py (call "
                       "the rule instead):\n" + "\n".join(found))


# The restatements the guard replaced, as main wrote them (issue 42's review), each as a
# module's text; a few more shapes of the same rules besides.
RESTATED = {
    "look-ahead: the slots of the admission bound": '''
@njit(cache=True)
def _lb_tasks(j, slots, n, A, R, m):
    """The least total allocation (bytes) of the next `slots` (at most 3) tasks from gap
    j on: in each gap g, at most R[g] rebuilds of at least m[g] bytes each, then op g
    (A[g] bytes)."""
    f = np.zeros(4, dtype=np.int64)      # f[q]: the gaps after the current one
    return f[slots] if j < n else 0
''',
    "look-ahead: a slot count": '''
def blocked_stall_lb(dec, fixed, prof, keep_x, M, slack_u, nf, firstb, s, c, cfin):
    """B (s): the summed H2D time of the fixed swaps whose prefetch no instant before
    their need admits (module docstring)."""
    lb = _lb_tasks(k, 3, n, A, R, m)
    return lb
''',
    "look-ahead: a window": '''
def window(k, n):
    """The tasks the admission look-ahead reserves room for."""
    return k, min(k + 3, n)
''',
    "look-ahead: a named literal": "LOOKAHEAD = 3\n",
    "admission test": "ok = k < K and base + _lb_tasks(k + 1, 3, n, A, R, m) + s[t] <= M\n",
    "admission test, negated": "bad = self.used + s[t] + reserved > self.M\n",
    "allocation test": "if self.used + s[t] > self.M:\n    pass\n",
    "allocation test (kernel)": "if used + a <= M:\n    pass\n",
    "shortfall": "short = self.used + s[head] - M\n",
    "host test": "if 0 <= host_limit and host_limit < host_used + s[t]:\n    pass\n",
    "host test (chained)": "if 0 <= self.host_limit < self.host_used + s:\n    pass\n",
    "copy time": "w = float(inst.link.copy_latency_s) + s / W\n",
    "copy time (FIFO)": "cur = st + lat + s[t] / wd2h\n",
    "copy time (augmented)": "tot += lat + s[t] / wh2d\n",
    "latency phase": ("self.d2h = [t, self.now + self.inst.link.copy_latency_s, float(s), "
                      "self.now]\n"),
    "latency phase (kernel)": "d_lat = now + lat\n",
    "next event": "d_ev = d_lat if now < d_lat else now + d_rem / d_rate\n",
    "next event (list)": "cand[e] = a[1] if now < a[1] else now + a[2] / rates[e]\n",
    "bytes moved": "d_rem -= d_rate * dt\n",
    "bytes moved (list)": "a[2] -= rates[e] * (t - now)\n",
    "duplex factor": "w = float(inp.w_d2h) * min(1.0, float(inp.duplex))\n",
    "duplex rate": "r = bandwidth * duplex_factor\n",
    "FIFO closed form": "e = cd + np.maximum.accumulate(release - (cd - dur))\n",
}


EXPECTED = {
    "look-ahead: the slots of the admission bound": "look-ahead",
    "look-ahead: a slot count": "look-ahead",
    "look-ahead: a window": "look-ahead",
    "look-ahead: a named literal": "ADMISSION_LOOKAHEAD",
    "admission test": "h2d_admits",
    "admission test, negated": "h2d_admits",
    "allocation test": "allocation_fits",
    "allocation test (kernel)": "allocation_fits",
    "shortfall": "rules.shortfall",
    "host test": "host_admits",
    "host test (chained)": "host_admits",
    "copy time": "copy_time",
    "copy time (FIFO)": "fifo_copy_end",
    "copy time (augmented)": "copy_time",
    "latency phase": "copy_start",
    "latency phase (kernel)": "copy_start",
    "next event": "copy_event",
    "next event (list)": "copy_event",
    "bytes moved": "copy_advance",
    "bytes moved (list)": "copy_advance",
    "duplex factor": "copy_rate",
    "duplex rate": "copy_rate",
    "FIFO closed form": "fifo_ends",
}
"""The rule the guard must name for each restatement."""


@pytest.mark.parametrize("label", sorted(RESTATED))
def test_the_guard_finds_each_restatement(label):
    found = findings(RESTATED[label])
    assert any(EXPECTED[label] in what for _, what in found), (label, found)


def test_the_guard_finds_the_rules_in_their_home():
    """rules.py writes every rule the guard looks for (so the guard can fail)."""
    found = " ".join(what for _, what in findings(RULES.read_text()))
    for rule in ("copy_start", "copy_event", "copy_advance", "h2d_admits",
                 "allocation_fits", "rules.shortfall", "host_admits", "copy_rate",
                 "fifo_ends", "ADMISSION_LOOKAHEAD"):
        assert rule in found, rule


def test_the_guard_leaves_plain_arithmetic_alone():
    """Sums, budgets and small integers that restate no rule pass."""
    src = '''
def heap_push(hk, i):
    p = (i - 1) // 2
    return hk[2 * i + 1] + hk[p]

def profile_fits(prof, keep, M):
    return prof + keep <= M and prof.max() <= M

def stall(deficit, W):
    return deficit / W + 3
'''
    assert findings(src) == []
