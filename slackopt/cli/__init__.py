"""The ``slackopt`` command: :data:`app` (typer) and :func:`main`.

One module per command group, each command a function registered here from
:data:`COMMANDS`:

- :mod:`~slackopt.cli.instance`: ``make``, ``stage``, ``describe``;
- :mod:`~slackopt.cli.solve`: ``solve``, ``simulate``, ``solvers``;
- :mod:`~slackopt.cli.compare`: ``compare``, ``bench``;
- :mod:`~slackopt.cli.plot`: ``plot KIND``, from its table of kinds;
- :mod:`~slackopt.cli.profile`: ``profile``; :mod:`~slackopt.cli.reproduce`: ``reproduce``;
- :mod:`~slackopt.cli.explore`: ``explore`` (an HTML page with a budget slider);
- :mod:`~slackopt.cli.exchange`: ``export`` (a plan as PyTorch's policy), ``import
  checkmate`` (a Checkmate graph as an instance);

and what they share: :mod:`~slackopt.cli._options` (options and their rules),
:mod:`~slackopt.cli._output` (JSON, tables, messages), :mod:`~slackopt.cli._errors` (exit
statuses), :mod:`~slackopt.cli._schedule` (the pipeline-stage options of make, profile
and stage). Every command takes ``--json``: stdout then holds exactly one JSON document and
nothing else (anything a solver prints goes to stderr). Exit status: 0 on success (an
infeasible budget is an answer, not an error), 2 for bad input (a
:class:`~slackopt.errors.SlackoptError`, an unknown name, a usage error), 1 for an
internal error (and for ``bench`` after it reported a bound violation, a bug), 130 after
Ctrl-C (with one line saying how to go on; a sweep with a ``--store`` resumes). Errors are
one message on stderr, never a traceback; set ``SLACKOPT_DEBUG=1`` to see the traceback of
an internal error. No command writes over a file it reads (:mod:`slackopt.io.outputs`).
"""

from __future__ import annotations

import atexit
import gc
import sys
from typing import Annotated

import typer

from slackopt.cli import compare, exchange, explore, instance, plot, profile, reproduce, solve
from slackopt.cli._errors import INTERRUPTED_EXIT, REPORTED, RERUN
from slackopt.cli._output import err

app = typer.Typer(
    name="slackopt",
    help="Activation-memory planning for DNN training: keep, swap or recompute each saved "
    "tensor under a GPU memory budget.",
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    no_args_is_help=True,
)

COMMANDS = (
    ("make", instance.make, None),
    ("stage", instance.stage_cmd, None),
    ("describe", instance.describe, None),
    ("solve", solve.solve, None),
    ("simulate", solve.simulate, None),
    ("solvers", solve.list_solvers, None),
    ("compare", compare.compare_cmd, None),
    ("bench", compare.bench_cmd, None),
    ("profile", profile.profile_cmd, None),
    ("export", exchange.export_cmd, None),
    ("reproduce", reproduce.reproduce_cmd, reproduce.SHORT_HELP),
    ("explore", explore.explore_cmd, explore.SHORT_HELP),
)
"""(name, function, short help or None) of every command but ``plot``, in help order."""

for _name, _fn, _short in COMMANDS:
    app.command(_name, short_help=_short)(_fn)
app.add_typer(plot.plot_app, name="plot")
app.add_typer(exchange.import_app, name="import")


def _version(value: bool) -> None:
    if value:
        from slackopt import __version__

        sys.stdout.write(f"slackopt {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Activation-memory planning for DNN training."""


def _usage_line(e: Exception) -> str:
    """A usage error (bad option value, unknown option, missing argument) as the one line
    every other bad input gets: click's message (typer's copy of click), then where the help
    is."""
    fmt = getattr(e, "format_message", None)
    msg = " ".join((fmt() if callable(fmt) else str(e)).split())
    ctx = getattr(e, "ctx", None)
    where = ctx.command_path if ctx is not None and ctx.command_path else "slackopt"
    return f"{msg.rstrip('.')}; see '{where} --help'"


def main(argv: list[str] | None = None) -> int:
    """Run the ``slackopt`` command.

    Args:
        argv: the arguments (without the program name); None reads ``sys.argv``.

    Returns:
        The exit status: 0 success, 2 bad input, 1 internal error, 130 interrupted
        (Ctrl-C; one line on stderr says how to go on).

    Called as the command (`argv` None), the process's objects are frozen at exit
    (:func:`gc.freeze`), so that the interpreter does not collect them one by one
    before it ends: after a solve that loaded the compiled kernels that took about a
    second of the wall time a time limit promises.
    """
    if argv is None:
        atexit.register(gc.freeze)
    try:
        rv = app(args=argv, prog_name="slackopt", standalone_mode=False)
    except typer.TyperException as e:  # usage errors (bad option, missing argument, ...)
        if type(e).__name__ == "NoArgsIsHelpError":  # `slackopt` or `slackopt plot` alone:
            e.show(file=sys.stderr)                  # the help is the answer
        else:
            err(_usage_line(e))
        return 2
    except typer.Abort:
        sys.stderr.write("slackopt: aborted\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"slackopt: interrupted; {RERUN}\n")
        return INTERRUPTED_EXIT
    if rv == INTERRUPTED_EXIT and not REPORTED:  # Ctrl-C before a command began
        sys.stderr.write(f"slackopt: interrupted; {RERUN}\n")
    REPORTED.clear()
    return rv if isinstance(rv, int) else 0


__all__ = ["COMMANDS", "app", "main"]
