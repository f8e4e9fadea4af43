"""The import structure of slackopt/ (DESIGN.md, "Keep the direction of the arrows").

A static check with ast over every module of the package (solvers/ excluded: it sits above
slackopt): imports at top level and inside functions count alike, since a lazy import is
still a dependency. The one exception is a module-level ``__getattr__`` (PEP 562): the
hook behind a deprecated alias that resolves an old name from its new home.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]

CORE = ("slackopt", "slackopt._source", "slackopt.bisection", "slackopt.errors",
        "slackopt.hardware", "slackopt.instance", "slackopt.io", "slackopt.plan",
        "slackopt.result", "slackopt.solver", "slackopt.solverbase", "slackopt.testing")
"""Modules below compare/ (with simulate/ and workloads/, matched by prefix)."""
CORE_PACKAGES = ("slackopt.simulate", "slackopt.workloads")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(tree: ast.Module, name: str, is_package: bool) -> list[list[str]]:
    """Per import statement of `tree`, the modules it may name (absolute names): ``import
    a, b`` gives [a, b]; ``from a.b import c`` gives [a.b.c, a.b] (a.b.c when c is a
    module, else a.b); PEP 562 ``__getattr__`` hooks and ``if TYPE_CHECKING:`` blocks left
    out (annotations only: with ``from __future__ import annotations`` they never run)."""
    skip = {id(n) for f in tree.body if isinstance(f, ast.FunctionDef)
            and f.name == "__getattr__" for n in ast.walk(f)}
    skip |= {id(n) for f in ast.walk(tree) if isinstance(f, ast.If)
             and isinstance(f.test, ast.Name) and f.test.id == "TYPE_CHECKING"
             for b in f.body for n in ast.walk(b)}
    pkg = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [[a.name] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            out.append([f"{base}.{a.name}" for a in node.names] + [base])
    return out


def _imports(tree: ast.Module, name: str, is_package: bool) -> list[str]:
    """The modules `tree` imports (absolute names), PEP 562 ``__getattr__`` hooks left
    out; ``from package import submodule`` names the submodule."""
    return [m for st in _statements(tree, name, is_package) for m in st]


def import_graph() -> nx.DiGraph:
    """Module -> the slackopt modules it imports, over slackopt/ (solvers/ left out)."""
    files = {_module_name(f): f for f in (ROOT / "slackopt").rglob("*.py")
             if "solvers" not in f.relative_to(ROOT).parts}
    g = nx.DiGraph()
    for name, f in files.items():
        g.add_node(name)
        for seen in _statements(ast.parse(f.read_text()), name, f.name == "__init__.py"):
            for dep in seen:
                # `from a.b import c`: c when it is a module, else a.b itself (judged per
                # statement: another statement's `from a.b import module` hides no edge)
                if dep in files and dep != name and not any(
                        d.startswith(dep + ".") and d in files for d in seen):
                    g.add_edge(name, dep)
    return g


@pytest.mark.slow
def test_graph_sees_the_edges_it_must() -> None:
    """The checker itself: known imports are edges (a parser that saw none would pass the
    checks below vacuously)."""
    g = import_graph()
    assert g.has_edge("slackopt.solver", "slackopt.solverbase")
    assert g.has_edge("slackopt.solverbase", "slackopt.result")
    assert g.has_edge("slackopt.compare.grid", "slackopt.compare.code_id")
    assert g.has_edge("slackopt.cli", "slackopt.compare")  # a lazy import counts
    assert not g.has_edge("slackopt.solverbase", "slackopt.compare.code_id")  # PEP 562 hook
    assert g.has_edge("slackopt.instance", "slackopt._instance_checks")
    assert not g.has_edge("slackopt._instance_checks", "slackopt.instance")  # TYPE_CHECKING


@pytest.mark.slow
def test_no_import_circle() -> None:
    """No module of slackopt/ imports one that imports it back, directly or not (issue 24:
    solver.py and solverbase.py imported each other)."""
    cycles = sorted(nx.simple_cycles(import_graph()), key=len)
    assert cycles == [], f"import circles: {cycles[:5]}"


@pytest.mark.slow
def test_core_never_reaches_compare_or_the_solvers() -> None:
    """The core (instance, plan, simulate, the solver contract, testing) depends on no
    sweep module, not even through another module; nothing in slackopt/ imports a
    solver (the arrow is solvers -> slackopt)."""
    g = import_graph()
    core = [m for m in g if m in CORE or m.startswith(tuple(p + "." for p in CORE_PACKAGES))
            or m in CORE_PACKAGES]
    assert "slackopt.simulate" in core and "slackopt.result" in core
    bad = {m: sorted(d for d in nx.descendants(g, m) if d.startswith("slackopt.compare"))
           for m in core}
    assert {m: d for m, d in bad.items() if d} == {}
    solver_imports = []
    for f in (ROOT / "slackopt").rglob("*.py"):
        if "solvers" in f.relative_to(ROOT).parts:
            continue
        name = _module_name(f)
        solver_imports += [f"{name}: {d}" for d in
                           _imports(ast.parse(f.read_text()), name, f.name == "__init__.py")
                           if d.startswith("slackopt.solvers") or d.split(".")[0] == "solvers"]
    assert solver_imports == []


def test_importing_the_core_loads_no_sweep_or_solver_module() -> None:
    """At run time too (a fresh interpreter): ``import slackopt`` and the conformance
    checks load neither compare/ nor a solver module, and the old home of the code
    identity still resolves (with its DeprecationWarning) from compare/code_id.py."""
    import subprocess
    import sys

    code = ("import sys, warnings, slackopt, slackopt.testing\n"
            "print(sorted(m for m in sys.modules if m.startswith(('slackopt.compare', "
            "'slackopt.solvers'))))\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    from slackopt.solverbase import solver_code_id\n"
            "from slackopt.compare.code_id import solver_code_id as new\n"
            "print(solver_code_id is new, [str(x.category.__name__) for x in w])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.splitlines()
    assert out == ["[]", "True ['DeprecationWarning']"]


@pytest.mark.slow
def test_only_the_command_line_reaches_the_experiments() -> None:
    """The paper and the analyses (slackopt.experiments) are built on the library and never
    imported by it: no module outside experiments/ imports them but the command line
    (``slackopt reproduce``, ``simulate --best-schedule``), and no solver does."""
    g = import_graph()
    exp = [m for m in g if m.startswith("slackopt.experiments")]
    assert "slackopt.experiments.reproduce" in exp
    users = sorted(m for e in exp for m in g.predecessors(e)
                   if not m.startswith("slackopt.experiments"))
    assert set(users) == {"slackopt.cli"}, users
    solver_imports = [f"{f.relative_to(ROOT)}: {d}" for f in (ROOT / "solvers").rglob("*.py")
                      for d in _imports(ast.parse(f.read_text()), "slackopt.solvers.x", False)
                      if d.startswith("slackopt.experiments")]
    assert solver_imports == []
