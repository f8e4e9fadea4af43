"""The exact tier's layout (solvers/milp/): the subpackages import only the ones below them,
and the docs page walks the phases in the order ``PHASES`` runs them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from slackopt.solvers.milp.search.phases import PHASES

ROOT = Path(__file__).resolve().parents[1]
MILP = ROOT / "solvers" / "milp"
LAYERS = ("linear", "certify", "model", "bounds", "search")
"""The subpackages, lowest first: each may import only those before it (and itself)."""


def _milp_imports(path: Path) -> set[str]:
    """The subpackages of slackopt.solvers.milp that `path` imports, at any level of the
    module (inside functions and ``if TYPE_CHECKING:`` blocks too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for nm in names:
            m = re.match(r"slackopt\.solvers\.milp\.(\w+)", nm)
            if m:
                out.add(m.group(1))
    return out


def test_subpackages_import_only_those_below() -> None:
    found = {p.name for p in MILP.iterdir() if (p / "__init__.py").exists()}
    assert found == set(LAYERS)
    wrong = []
    for i, layer in enumerate(LAYERS):
        allowed = set(LAYERS[:i + 1])
        for f in sorted((MILP / layer).glob("*.py")):
            bad = _milp_imports(f) - allowed
            if bad:
                wrong.append(f"{f.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, wrong
    # the checker sees imports: search/ imports from every layer
    assert _milp_imports(MILP / "search" / "phases.py") >= {"bounds", "search"}


def test_the_docs_page_lists_the_phases_in_the_order_they_run() -> None:
    names = [p.name for p in PHASES]
    assert len(set(names)) == len(names)
    page = (ROOT / "docs" / "exact-tier.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", page, flags=re.M)
    assert [int(n) for n, _ in rows] == list(range(1, len(names) + 1))
    assert [nm for _, nm in rows] == names
    # and each phase has its section, in the same order
    sections = re.findall(r"^### .*$", page, flags=re.M)
    at = [next(i for i, s in enumerate(sections) if f"`{nm}`" in s) for nm in names]
    assert at == sorted(at)
