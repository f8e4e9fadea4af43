"""Exit statuses and the one-message rule of every command (DESIGN.md, "Command line").

:func:`guarded` wraps each command: a :class:`~slackopt.errors.SlackoptError` is bad input
(one message on stderr, exit 2), any other exception an internal error (exit 1, the
traceback only with ``SLACKOPT_DEBUG=1``), Ctrl-C exit :data:`INTERRUPTED_EXIT` with one
line saying how to go on; with ``--json`` whatever the command prints goes to stderr and
the document it returns is the one thing on stdout.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import typer

from slackopt.cli._output import emit_json, err
from slackopt.errors import SlackoptError, interrupt_cause

F = TypeVar("F", bound=Callable[..., Any])

INTERRUPTED_EXIT = 130
"""Exit status after Ctrl-C (128 + SIGINT, as shells report it)."""
RERUN = "nothing was kept; run the same command again to start over"
"""The interrupt line's advice when nothing of the run was kept."""
EXIT_STATUS_KEY = "_exit_status"
"""A --json command's document may carry this key: the exit status after the document is
printed (``slackopt bench`` exits 1 after reporting a bound violation)."""
REPORTED: list[str] = []
"""Interrupt lines already written (main() writes one if typer stopped the command first)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with the line that tells the user how to go on (``hint``)."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


def interrupted(e: BaseException) -> None:
    """Print the one-line interrupt message and exit with :data:`INTERRUPTED_EXIT`."""
    hint = e.hint if isinstance(e, Interrupted) else RERUN
    sys.stderr.write(f"slackopt: interrupted; {hint}\n")
    sys.stderr.flush()
    REPORTED.append(hint)
    raise typer.Exit(INTERRUPTED_EXIT) from None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout (Python or C level) to stderr meanwhile."""
    sys.stdout.flush()
    saved = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # pragma: no cover - no file descriptors (embedded use)
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).fflush(None)
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _run_json(fn: Callable[..., Any], args: Any, kwargs: Any) -> None:
    """Run a --json command: its prints to stderr, its document to stdout, then exit with
    the status the document carries (:data:`EXIT_STATUS_KEY`, default 0)."""
    with stdout_to_stderr():
        doc = fn(*args, **kwargs)
    status = doc.pop(EXIT_STATUS_KEY, 0) if isinstance(doc, dict) else 0
    if doc is not None:
        emit_json(doc)
    if status:
        raise typer.Exit(status)


def guarded(fn: F) -> F:
    """Turn user errors into exit 2 and internal ones into exit 1, message on stderr."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            if kwargs.get("json_output"):
                return _run_json(fn, args, kwargs)
            return fn(*args, **kwargs)
        except (typer.Exit, typer.TyperException, typer.Abort):
            raise
        except SlackoptError as e:
            err(str(e))
            raise typer.Exit(2) from None
        except KeyboardInterrupt as e:
            interrupted(e)
        except Exception as e:
            if isinstance(interrupt_cause(e), KeyboardInterrupt):
                interrupted(e)  # Ctrl-C inside compiled code arrives as a SystemError
            if os.environ.get("SLACKOPT_DEBUG", "") not in ("", "0"):
                traceback.print_exc(file=sys.stderr)
            msg = str(e) or "(no message)"
            err(f"internal error: {type(e).__name__}: {msg}\n(this is a bug in slackopt or "
                "a solver; rerun with SLACKOPT_DEBUG=1 to see the traceback)")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]
