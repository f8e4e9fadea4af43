"""The source text this process loaded, as a digest per module.

A leaf (standard library only). :class:`slackopt.solverbase.BaseSolver` records the digest
of a solver's module when the class is defined, so that the code identity that
:mod:`slackopt.compare.code_id` builds from these digests is that of the code the process
runs, even if the file is edited afterwards.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

_SOURCE_DIGESTS: dict[tuple[str, int], str] = {}


def module_digest(mod: Any) -> str:
    """sha256 (64 hex digits) of a module's source text, read once per module name and
    import (a reload makes a new ``__spec__``, hence a new entry); "" when it has no
    source file (a notebook cell, the REPL, a compiled module).

    Args:
        mod: a module object.
    """
    key = (mod.__name__, id(getattr(mod, "__spec__", None)))
    if key not in _SOURCE_DIGESTS:
        try:
            text = inspect.getsource(mod)
        except (OSError, TypeError):
            _SOURCE_DIGESTS[key] = ""
        else:
            _SOURCE_DIGESTS[key] = hashlib.sha256(text.encode()).hexdigest()
    return _SOURCE_DIGESTS[key]
