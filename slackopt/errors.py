"""Errors that slackopt raises for bad input.

Every error a user can cause derives from :class:`SlackoptError`; the command line turns
them into a message on stderr and exit status 2, never a traceback. Internal errors
(bugs) are anything else and exit with status 1.
"""

from __future__ import annotations


class SlackoptError(Exception):
    """Base class of all user-facing errors (bad instance, plan, budget or file)."""


class InstanceError(SlackoptError, ValueError):
    """An instance is malformed.

    Args:
        problem: what is wrong, naming the op or tensor ("tensor 'x': size_bytes must be
            ...").
        field: where, as a path into the instance document (the argument lists of
            :class:`~slackopt.instance.Instance`, in the order given, which is a file's
            order): ``"tensors[12].size_bytes"``, ``"ops[3].phase"``,
            ``"tensors[2].recipe.inputs[0]"``, ``"link.bytes_per_s"``; ``""`` when no one
            field is to blame.
        fix: what to do about it ("" if nothing better than the problem can be said).

    The message (``str(e)``) is ``"{problem}. Fix: {fix}"`` (or just the problem); the
    file loader turns the three parts into a :class:`FileFormatError` naming the file.
    """

    def __init__(self, problem: str, field: str = "", fix: str = "") -> None:
        self.problem, self.field, self.fix = problem, field, fix
        super().__init__(f"{problem}. Fix: {fix}" if fix else problem)


class PlanError(SlackoptError, ValueError):
    """A plan does not fit its instance: wrong length, unknown decision, recomp of c = inf."""


class BudgetError(SlackoptError, ValueError):
    """A memory budget cannot be parsed or is negative."""


class AnalysisError(SlackoptError, ValueError):
    """Bad arguments to an analysis of a plan (slackopt.experiments.runtime_gap): a time limit that
    is not a finite number > 0, or a "lower bound" that is not one."""


class SolverError(SlackoptError, LookupError):
    """An unknown solver name or bad solver parameters."""


class FileFormatError(SlackoptError):
    """A file cannot be read as what it claims to be.

    Args:
        path: the file.
        field: the dotted path of the offending field ("" for the whole file).
        problem: what is wrong.
        fix: what the user should do about it.
    """

    def __init__(self, path: str, field: str, problem: str, fix: str) -> None:
        self.path, self.field, self.problem, self.fix = str(path), field, problem, fix
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {problem}. Fix: {fix}")


def json_problem(e: ValueError) -> str:
    """What is wrong with JSON text that ``json.loads`` refused, for an error message:
    ``"not valid JSON: Expecting ',' delimiter at line 1 column 12"``. The one place that
    words it: Python's own text for some errors ends in " at" ("Invalid control character
    at"), which a naive "{msg} at line" doubles.

    Args:
        e: the ``json.JSONDecodeError`` (a ValueError with ``msg``, ``lineno``, ``colno``).

    Returns:
        The problem, without a trailing period.
    """
    msg = getattr(e, "msg", None)
    if msg is None:
        return f"not valid JSON: {e}"
    return (f"not valid JSON: {msg.removesuffix(' at')} at line {getattr(e, 'lineno', '?')} "
            f"column {getattr(e, 'colno', '?')}")


def interrupt_cause(e: BaseException) -> BaseException | None:
    """The KeyboardInterrupt (or other BaseException that is not an Exception) behind `e`.

    Ctrl-C that arrives while compiled code (the numba evaluator) is on the stack can
    surface as ``SystemError: ... returned a result with an exception set`` whose
    ``__cause__`` / ``__context__`` is the KeyboardInterrupt. Code that turns failures into
    results (``except Exception``) asks this first and re-raises the interrupt.

    Args:
        e: a caught exception.

    Returns:
        The first KeyboardInterrupt / non-Exception BaseException in the chain of causes
        and contexts of `e` (at most 20 links), or None.
    """
    seen = 0
    x: BaseException | None = e
    while x is not None and seen < 20:
        if not isinstance(x, Exception):
            return x
        x = x.__cause__ or x.__context__
        seen += 1
    return None
