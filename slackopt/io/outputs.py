"""The checks before a command writes a file (DESIGN.md, "Command line").

Two rules, checked before any work is done, so a refused command changes nothing:

- **never over a file it reads**, with or without ``--force`` (``overwrite``): the
  output is compared with every input by :func:`same_file`, which sees through
  symbolic links, ``..`` and hard links (``os.path.samefile`` where both exist);
- **never over an existing file without asking**: an existing output is replaced only
  with ``--force`` (``overwrite=True``).

:func:`check_output` applies both; every command that writes calls it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from slackopt.errors import FileFormatError
from slackopt.io.text import OutputExistsError

PathLike = str | os.PathLike[str]


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether writing `a` would write `b`: the same file when both exist (one inode,
    through symbolic and hard links: ``os.path.samefile``), else the same resolved path
    (symbolic links and ``..`` followed)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet), or cannot be examined
        return Path(a).resolve() == Path(b).resolve()


def read_by(output: PathLike, reads: Iterable[tuple[str, PathLike | None]]
            ) -> tuple[str, Path] | None:
    """The first input of `reads` that `output` is (:func:`same_file`), as (role, path),
    or None. `reads` holds (role, path) pairs; a None path is skipped."""
    for role, src in reads:
        if src is not None and same_file(output, src):
            return role, Path(src)
    return None


def check_not_read(output: PathLike, reads: Iterable[tuple[str, PathLike | None]], *,
                   reader: str = "command", fix: str = "write the output to another path"
                   ) -> None:
    """Refuse an output that is one of the files the command reads.

    Args:
        output: the file the command would write.
        reads: (role, path) of every file it reads, e.g. ``("the instance file",
            "inst.json")``; None paths are skipped.
        reader: who reads, for the message ("command", "bench").
        fix: what the user should do instead.

    Raises:
        FileFormatError: `output` is one of them (naming both files and the role).
    """
    hit = read_by(output, reads)
    if hit is not None:
        role, src = hit
        raise FileFormatError(output, "", f"is {role} {src}, a file this {reader} reads; "
                              "writing would destroy it (--force does not change that)", fix)


def check_new(output: PathLike, overwrite: bool, *, what: str = "another path") -> None:
    """Refuse an existing `output` unless `overwrite` (``--force``).

    Raises:
        OutputExistsError: the file exists and `overwrite` is False.
    """
    if not overwrite and Path(output).exists():
        raise OutputExistsError(f"{output}: file exists; pass --force to replace it, or "
                                f"choose {what}")


def check_output(output: PathLike, *, reads: Iterable[tuple[str, PathLike | None]] = (),
                 overwrite: bool = False, reader: str = "command",
                 fix: str = "write the output to another path", what: str = "another path"
                 ) -> None:
    """Both rules for one output file: never one the command reads (:func:`check_not_read`),
    never an existing one without `overwrite` (:func:`check_new`), in that order.
    `reader` and `fix` go to :func:`check_not_read`, `what` to :func:`check_new`.

    Raises:
        FileFormatError: `output` is a file the command reads.
        OutputExistsError: `output` exists and `overwrite` is False.
    """
    check_not_read(output, reads, reader=reader, fix=fix)
    check_new(output, overwrite, what=what)


__all__ = ["check_new", "check_not_read", "check_output", "read_by", "same_file"]
