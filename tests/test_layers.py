"""The arrows of the house (DESIGN.md): the library never imports what is built on it.

Read statically (every ``import`` and ``from ... import`` in a module, at any depth, since
a function-level import is still an arrow): the core (``slackopt`` outside ``experiments``
and ``cli``) imports neither ``slackopt.experiments`` nor ``slackopt.cli``, nor a solver
module by name; ``slackopt.experiments`` is imported only by the command line, its own
modules and tests/benchmarks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _core_modules() -> list[Path]:
    pkg = ROOT / "slackopt"
    return [p for p in pkg.rglob("*.py")
            if "experiments" not in p.relative_to(pkg).parts and p.name != "cli.py"]


def test_the_core_never_imports_the_experiments_or_the_cli() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p)
                                            if m.startswith(("slackopt.experiments",
                                                             "slackopt.cli")))
           for p in _core_modules()}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_solvers_never_import_the_experiments() -> None:
    bad = {str(p.relative_to(ROOT)): sorted(m for m in _imports(p)
                                            if m.startswith("slackopt.experiments"))
           for p in (ROOT / "solvers").rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_checker_sees_function_level_imports(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from slackopt.experiments.reproduce import reproduce\n")
    assert "slackopt.experiments.reproduce" in _imports(f)
