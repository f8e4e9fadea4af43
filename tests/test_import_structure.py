"""The import structure of slackopt/ and solvers/ (DESIGN.md, "Keep the direction of the
arrows"; issue 41 item 10, issue 42: "no circle and no import back up in the whole tree,
type-checking imports included").

A static check with :mod:`ast` over every module of slackopt/ and of solvers/ (installed
as the package ``slackopt.solvers``). Every import statement is an edge, wherever it
stands: at top level, inside a function (a lazy import is still a dependency), under
``if TYPE_CHECKING:`` (an annotation names the module it comes from) and in a module
``__getattr__``. ``import a.b`` is an edge to ``a.b``; ``from a import b`` is an edge to
``a.b`` when that is a module, else to ``a``; relative imports are resolved against the
importing package. Imports of other top-level packages (numpy, the standard library) are
not edges of the graph; the evaluator's are checked apart.

The rules (:func:`circles`, :func:`violations`), from DESIGN.md's arrows:

- no circle, however long;
- the front ends (:data:`FRONT_ENDS`: the command line, the sweeps of compare/, the
  paper's experiments) sit on top: no module below them imports one; the command line
  is imported by nothing but itself (and ``python -m slackopt``), the experiments by
  nothing but themselves and the command line;
- plotting and file I/O (:data:`LEAVES`) are leaves: only the front ends (and other
  leaves) import them;
- ``solvers -> slackopt``: no module outside slackopt.solvers imports a solver;
- the evaluator (slackopt.simulate) imports only itself, :data:`EVALUATOR_MAY_IMPORT`
  (slackopt.jit: numba's compiler, or the plain functions while the cache fills),
  numpy, numba and the standard library.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (("slackopt", "slackopt"), ("solvers", "slackopt.solvers"))
"""(folder under the repository root, the package it installs as)."""

SOLVERS = "slackopt.solvers"
CLI = "slackopt.cli"
EXPERIMENTS = "slackopt.experiments"
FRONT_ENDS = (CLI, "slackopt.compare", EXPERIMENTS)
"""Packages or modules (matched with their submodules) at the top of the house."""
LEAVES = ("slackopt.plot", "slackopt.explore", "slackopt.io", "slackopt.importers")
"""Plotting (figures, the explorer's HTML page) and file I/O (reading and writing files,
importing other tools' files, and the checks before a command writes one): DESIGN.md's
leaves, imported by the front ends and by each other only."""
EVALUATOR = "slackopt.simulate"
EVALUATOR_MAY_IMPORT = ("slackopt.instance", "slackopt.plan", "slackopt.hardware",
                        "slackopt.errors", "slackopt.jit")
"""The slackopt modules outside slackopt.simulate that the evaluator may import."""
EVALUATOR_THIRD_PARTY = ("numpy", "numba")
"""The packages besides the standard library and slackopt that the evaluator may import."""


def within(module: str, prefixes: Iterable[str]) -> bool:
    """Whether `module` is one of `prefixes` or a submodule of one."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def find_modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Every module of :data:`PACKAGES` under `root`: {absolute name: (file, is package)}."""
    out: dict[str, tuple[Path, bool]] = {}
    for folder, package in PACKAGES:
        for f in sorted((root / folder).rglob("*.py")):
            parts = list(f.relative_to(root / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join([package, *(parts[:-1] if is_package else parts)])] = (f, is_package)
    return out


def imported_names(tree: ast.Module, name: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute name) for every name the imports of `tree` bring in: ``import a.b``
    gives a.b, ``from a import b`` gives a.b (the caller decides whether that is a module);
    every import statement of the file, whatever encloses it."""
    package = name if is_package else name.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _resolve(target: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module an imported name lands on: itself if it is a module, else the nearest
    enclosing module (``slackopt.solver.solve`` -> ``slackopt.solver``); None outside."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """Module -> the modules of slackopt/ and solvers/ it imports, each edge with the
    ``lines`` of its import statements; external imports in the node's ``external``
    attribute (top-level package names)."""
    modules = find_modules(root)
    g = nx.DiGraph()
    for name, (f, is_package) in modules.items():
        g.add_node(name, external=set())
        for line, target in imported_names(ast.parse(f.read_text()), name, is_package):
            dep = _resolve(target, modules)
            if dep is None:
                g.nodes[name]["external"].add(target.split(".")[0])
            elif dep != name:
                if not g.has_edge(name, dep):
                    g.add_edge(name, dep, lines=[])
                g.edges[name, dep]["lines"].append(line)
    return g


def circles(g: nx.DiGraph) -> list[list[str]]:
    """The import circles: each strongly connected set of more than one module, sorted."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1)


def _edges(g: nx.DiGraph, pred: object) -> list[str]:
    """'module:line -> target' for every edge (m, t) with pred(m, t)."""
    return [f"{m}:{min(a['lines'])} -> {t}" for m, t, a in sorted(g.edges(data=True))
            if pred(m, t)]  # type: ignore[operator]


def violations(g: nx.DiGraph) -> dict[str, list[str]]:
    """Every import against DESIGN.md's arrows, by rule (empty lists when none)."""

    def front(m: str) -> bool:
        return within(m, FRONT_ENDS)

    def solver(m: str) -> bool:
        return within(m, (SOLVERS,))

    evaluator_ok = (EVALUATOR, *EVALUATOR_MAY_IMPORT)
    stdlib = set(sys.stdlib_module_names)
    return {
        "slackopt imports a solver": _edges(g, lambda m, t: solver(t) and not solver(m)),
        "the evaluator imports outside its list": _edges(
            g, lambda m, t: within(m, (EVALUATOR,)) and not within(t, evaluator_ok))
        + [f"{m} -> {x}" for m in sorted(g) if within(m, (EVALUATOR,))
           for x in sorted(g.nodes[m]["external"])
           if x not in stdlib and x not in EVALUATOR_THIRD_PARTY],
        "the library imports the experiments": _edges(
            g, lambda m, t: within(t, (EXPERIMENTS,)) and not within(m, (EXPERIMENTS, CLI))),
        "a leaf imported below the front ends": _edges(
            g, lambda m, t: within(t, LEAVES) and not front(m) and not within(m, LEAVES)),
        "a module below the front ends imports one": _edges(
            g, lambda m, t: front(t) and not front(m)),
        "the command line imported": _edges(
            g, lambda m, t: within(t, (CLI,)) and not within(m, (CLI, "slackopt.__main__"))),
    }


# --------------------------------------------------------------------------- the tree
def test_no_import_circle() -> None:
    """No module of slackopt/ or solvers/ imports one that imports it back, directly or
    not, type-checking and function-level imports included."""
    g = import_graph()
    found = circles(g)
    detail = [_edges(g, lambda m, t, c=set(c): m in c and t in c) for c in found]
    assert found == [], f"import circles: {detail}"


@pytest.mark.parametrize("rule", list(violations(nx.DiGraph())))
def test_arrows(rule: str) -> None:
    """No import against DESIGN.md's arrows (module docstring: the layers)."""
    assert violations(import_graph())[rule] == []


def test_graph_sees_the_edges_it_must() -> None:
    """The checker itself on the tree: known imports of each kind are edges (a parser that
    saw none would pass the checks above vacuously)."""
    g = import_graph()
    assert g.has_edge("slackopt.solver", "slackopt.solverbase")           # top level
    assert g.has_edge("slackopt.compare.grid", "slackopt.compare.code_id")
    assert g.has_edge("slackopt.solverbase", "slackopt.workloads.synthetic")  # in a function
    assert g.has_edge("slackopt._instance_checks", "slackopt.records")    # TYPE_CHECKING
    assert g.has_edge("slackopt.instance", "slackopt.records")
    assert g.has_edge("slackopt.solvers.genetic", "slackopt.solvers.seeds")
    assert g.has_edge("slackopt.simulate._engine", "slackopt.simulate.rules")
    assert "numpy" in g.nodes["slackopt.simulate._tasks"]["external"]
    assert g.has_edge("slackopt.simulate._kernel", "slackopt.jit")  # numba, through the jit
    assert len(g) > 80 and g.number_of_edges() > 300


def test_the_io_leaf_is_one_package_without_a_circle() -> None:
    """File I/O is the package slackopt.io, one module per job (issue 42): its
    ``__init__`` re-exports the modules that read and write files, none of which imports
    the package back (importing one of them first would close a circle); the checks
    before a command writes (slackopt.io.outputs) are part of it, imported by front ends
    only."""
    g = import_graph()
    io = sorted(m for m in g if within(m, ("slackopt.io",)))
    assert io == ["slackopt.io", "slackopt.io.instances", "slackopt.io.outputs",
                  "slackopt.io.plans", "slackopt.io.schemas", "slackopt.io.text"]
    assert sorted(t for _, t in g.out_edges("slackopt.io")) == [
        "slackopt.io.instances", "slackopt.io.plans", "slackopt.io.schemas",
        "slackopt.io.text"]
    assert [m for m in io if g.has_edge(m, "slackopt.io")] == []
    users = sorted(m for m, _ in g.in_edges("slackopt.io.outputs"))
    assert users and all(within(m, FRONT_ENDS) for m in users), users


# --------------------------------------------------------------------------- the checker
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A fake repository under `tmp_path`: `files` maps paths (``slackopt/a.py``) to source;
    every folder of slackopt/ and solvers/ gets an ``__init__.py``."""
    for rel, src in {"slackopt/__init__.py": "", "solvers/__init__.py": "", **files}.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src)
    return tmp_path


def test_checker_finds_a_planted_circle(tmp_path: Path) -> None:
    """A circle closed by a type-checking import and a function-level one (the two kinds
    issue 41 found) is found, with the lines of both imports."""
    root = _tree(tmp_path, {
        "slackopt/a.py": "from typing import TYPE_CHECKING\n"
                         "if TYPE_CHECKING:\n    from slackopt.b import B\n",
        "slackopt/b.py": "def f():\n    from slackopt import a\n    return a\n",
        "slackopt/c.py": "import slackopt.a\n",
    })
    g = import_graph(root)
    assert circles(g) == [["slackopt.a", "slackopt.b"]]
    assert g.edges["slackopt.a", "slackopt.b"]["lines"] == [3]
    assert g.edges["slackopt.b", "slackopt.a"]["lines"] == [2]


def test_checker_resolves_names_and_relative_imports(tmp_path: Path) -> None:
    """``from pkg import name``: an edge to pkg.name when it is a module, else to pkg;
    relative imports resolve against the package; solvers/ is slackopt.solvers."""
    root = _tree(tmp_path, {
        "slackopt/sim/__init__.py": "from .core import run\n",
        "slackopt/sim/core.py": "from . import rules\nfrom ..plan import Plan\n",
        "slackopt/sim/rules.py": "",
        "slackopt/plan.py": "from slackopt.sim import run, rules\n",
        "solvers/x.py": "from slackopt.solvers.y import f\nfrom .y import g\n",
        "solvers/y.py": "",
    })
    g = import_graph(root)
    assert sorted(g.edges) == [
        ("slackopt.plan", "slackopt.sim"), ("slackopt.plan", "slackopt.sim.rules"),
        ("slackopt.sim", "slackopt.sim.core"), ("slackopt.sim.core", "slackopt.plan"),
        ("slackopt.sim.core", "slackopt.sim.rules"),
        ("slackopt.solvers.x", "slackopt.solvers.y")]
    assert g.edges["slackopt.solvers.x", "slackopt.solvers.y"]["lines"] == [1, 2]
    assert circles(g) == [["slackopt.plan", "slackopt.sim", "slackopt.sim.core"]]


def test_checker_names_each_broken_arrow(tmp_path: Path) -> None:
    """One planted import per rule of :func:`violations`, each reported under its rule
    and nowhere it does not belong."""
    root = _tree(tmp_path, {
        "slackopt/instance.py": "", "slackopt/plan.py": "", "slackopt/errors.py": "",
        "slackopt/solver.py": "import slackopt.plot\n",          # a leaf, from the core
        "slackopt/plot.py": "import slackopt.solvers.s\n",       # a solver, from slackopt
        "slackopt/io.py": "",
        "slackopt/simulate/__init__.py": "import pandas\nimport numpy, math\n"
                                         "from slackopt.solver import x\n",
        "slackopt/compare/__init__.py": "from slackopt.experiments import paper\n"
                                        "from slackopt.cli import main\n",
        "slackopt/experiments/__init__.py": "", "slackopt/experiments/paper.py": "",
        "slackopt/cli.py": "from slackopt.experiments import paper\nimport slackopt.io\n",
        "solvers/s.py": "from slackopt.compare import compare\n",
    })
    assert violations(import_graph(root)) == {
        "slackopt imports a solver": ["slackopt.plot:1 -> slackopt.solvers.s"],
        "the evaluator imports outside its list": ["slackopt.simulate:3 -> slackopt.solver",
                                                   "slackopt.simulate -> pandas"],
        "the library imports the experiments": [
            "slackopt.compare:1 -> slackopt.experiments.paper"],
        "a leaf imported below the front ends": ["slackopt.solver:1 -> slackopt.plot"],
        "a module below the front ends imports one": [
            "slackopt.solvers.s:1 -> slackopt.compare"],
        "the command line imported": ["slackopt.compare:2 -> slackopt.cli"],
    }


# --------------------------------------------------------------------------- at run time
def test_importing_the_core_loads_no_sweep_or_solver_module() -> None:
    """At run time too (a fresh interpreter): ``import slackopt`` and the conformance
    checks load neither compare/ nor a solver module, and the code identity has one home,
    slackopt.compare.code_id (slackopt.solverbase has no alias of it)."""
    import subprocess

    code = ("import sys, slackopt, slackopt.testing, slackopt.solverbase\n"
            "print(sorted(m for m in sys.modules if m.startswith(('slackopt.compare', "
            "'slackopt.solvers'))))\n"
            "print(hasattr(slackopt.solverbase, 'solver_code_id'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.splitlines()
    assert out == ["[]", "False"]
