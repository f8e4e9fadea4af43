"""The code identity of a solver class, part of every store key (:func:`.grid.run_key`).

A row computed by other code is never returned from a store: the key includes
:func:`solver_code_id`, a digest of the source of the modules that make up the solver
(the source digests of :func:`slackopt._source.module_digest`).
"""

from __future__ import annotations

import inspect
from typing import Any

from slackopt._source import module_digest
from slackopt.solverbase import BaseSolver


def _code_modules(cls: type) -> dict[str, Any]:
    """The modules whose source makes up `cls`'s code: the modules of its classes (MRO,
    BaseSolver excluded), then, transitively, the modules they reference at top level
    (imported modules, functions, classes) and the loaded submodules of their package,
    restricted to the user's code: the same top-level package (``slackopt.solvers`` or a
    user file's module) and, for a solver outside slackopt, what it imports from its own
    folder (:func:`_folder_of` / :func:`_from_folder`: sibling modules and packages next
    to its file). slackopt itself (the evaluator), the standard library and installed
    packages are not part of it. Keys are the module names relative to that package
    (``".vdnn"``; ``"."`` for the package or file itself) or ``"folder:NAME"`` for a
    module from the solver's folder, so moving the package, the file or the folder keeps
    the identity."""
    import sys

    roots = [sys.modules.get(c.__module__) for c in cls.__mro__
             if c not in (BaseSolver, object) and c.__module__ in sys.modules]
    if not roots:
        return {}
    first = cls.__module__
    top = "slackopt.solvers" if first.startswith("slackopt.solvers") else first.split(".")[0]
    shipped = top == "slackopt" or top.startswith("slackopt.")
    home = None if shipped else _folder_of(sys.modules.get(first))

    def key(mod: Any) -> str | None:
        """The module's key if it is the user's code, else None."""
        name = getattr(mod, "__name__", None)
        if not isinstance(name, str):
            return None
        if name == top or name.startswith(top + "."):
            return name[len(top):] or "."
        if home is not None and _from_folder(name, home):
            return f"folder:{name}"
        return None

    found: dict[str, Any] = {}
    todo = [m for m in roots if m is not None and key(m) is not None]
    while todo:
        mod = todo.pop()
        if mod.__name__ in found:
            continue
        found[mod.__name__] = mod
        pkg = mod.__name__ if hasattr(mod, "__path__") else mod.__name__.rpartition(".")[0]
        if pkg and pkg != top:
            todo += [m for n, m in list(sys.modules.items()) if n.startswith(pkg + ".")
                     and m is not None and key(m) is not None]
        for v in list(vars(mod).values()):
            name = v.__name__ if inspect.ismodule(v) else getattr(v, "__module__", None)
            dep = sys.modules.get(name) if isinstance(name, str) else None
            if dep is not None and key(dep) is not None and dep.__name__ not in found:
                todo.append(dep)
    return {key(mod): mod for mod in found.values()}  # type: ignore[misc]


def _installed_dirs() -> list[Any]:
    """The standard library's and installed packages' folders (resolved Paths)."""
    import site
    import sysconfig
    from pathlib import Path

    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs |= set(getattr(site, "getsitepackages", list)())
    return [Path(d).resolve() for d in dirs if d]


def _folder_of(mod: Any) -> Any:
    """The folder of a user's solver module file (resolved Path), or None: no file, or a
    file among the standard library or installed packages (whose folder holds more than
    the user's code)."""
    from pathlib import Path

    f = getattr(mod, "__file__", None)
    if not f:
        return None
    folder = Path(f).resolve().parent
    if any(p in ("site-packages", "dist-packages") for p in folder.parts):
        return None
    if any(folder == d or d in folder.parents for d in _installed_dirs()):
        return None
    return folder


def _from_folder(name: str, home: Any) -> bool:
    """Whether module `name` was imported from folder `home`: its top-level module is a
    file or a package directly in `home` (home on ``sys.path``), and it is not slackopt."""
    import sys
    from pathlib import Path

    root = name.split(".")[0]
    if root == "slackopt":
        return False
    f = getattr(sys.modules.get(root), "__file__", None)
    if not f:
        return False
    p = Path(f).resolve()
    where = p.parent.parent if p.name == "__init__.py" else p.parent
    return where == home


def solver_code_id(cls: type) -> str:
    """What identifies the code of solver class `cls`: 16 hex digits of a sha256 over the
    source text of :func:`_code_modules`, or, for a class without a source file (defined
    in a notebook cell or the REPL), over its methods' bytecode and constants.

    Each module's source is read once per import (a reload reads it again); a
    BaseSolver subclass's own module is read when the class is defined, so the digest is
    that of the code this process runs even if the file is edited afterwards (the modules
    it depends on are read when the identity is first asked for).

    The store keys of :func:`slackopt.compare.compare` include it: a row computed by other
    code is never returned. An edit to any of those modules (a comment included) changes
    it, a helper module next to a user's solver file included (when the file imports it);
    an edit to slackopt's evaluator or to an installed package does not. Code reached only
    at call time (a module imported inside a function, a data file read) is not covered.
    """
    import hashlib

    h = hashlib.sha256()
    mods = _code_modules(cls)
    digests = {name: module_digest(mods[name]) for name in sorted(mods)}
    for name, d in digests.items():
        h.update(f"{name}:{d};".encode())
    if not any(digests.values()):  # no source file: the loaded bytecode
        for c in cls.__mro__:
            if c in (BaseSolver, object):
                continue
            for k, v in sorted(vars(c).items()):
                code = getattr(getattr(v, "__func__", v), "__code__", None)
                if code is not None:
                    h.update(f"{c.__qualname__}.{k}".encode() + _code_bytes(code))
    return h.hexdigest()[:16]


def _code_bytes(code: Any) -> bytes:
    """Bytecode and constants of a code object, nested code objects included (no memory
    addresses, so the same source gives the same bytes in every process)."""
    out = [code.co_code, repr(code.co_names).encode()]
    for c in code.co_consts:
        out.append(_code_bytes(c) if hasattr(c, "co_code") else repr(c).encode())
    return b"|".join(out)



__all__ = ["solver_code_id"]
