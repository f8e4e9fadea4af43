"""The progress report of a sweep on stderr: a rich bar (runs done, left, ETA), a plain
text line where rich cannot draw live (Jupyter without ipywidgets), or nothing."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any


def progress_bar(total: int, done: int, enabled: bool) -> Any:
    """A rich progress bar on stderr (runs done / left), or a no-op."""
    if not enabled:
        return contextlib.nullcontext(lambda n=1: None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True)
    if console.is_jupyter:
        try:
            import ipywidgets  # noqa: F401  (rich draws live bars in Jupyter with it)
        except ImportError:
            return _text_progress(total, done)

    @contextlib.contextmanager
    def bar() -> Iterator[Callable[[int], None]]:
        prog = Progress(TextColumn("compare"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("runs, {task.fields[left]} left"), TimeElapsedColumn(),
                        TextColumn("eta"), TimeRemainingColumn(),
                        console=console, transient=False)
        with prog:
            tid = prog.add_task("compare", total=total, completed=done, left=total - done)
            state = {"done": done}

            def advance(n: int = 1) -> None:
                state["done"] += n
                prog.update(tid, advance=n, left=total - state["done"])

            yield advance

    return bar()


@contextlib.contextmanager
def _text_progress(total: int, done: int) -> Iterator[Callable[[int], None]]:
    """A one-line text progress report on stderr, rewritten in place (no live display)."""
    import sys

    state = {"done": done, "shown": 0.0}

    def show(final: bool = False) -> None:
        now = time.monotonic()
        if final or now - state["shown"] >= 0.5:
            state["shown"] = now
            sys.stderr.write(f"\rcompare: {state['done']}/{total} runs, "
                             f"{total - state['done']} left" + ("\n" if final else ""))
            sys.stderr.flush()

    def advance(n: int = 1) -> None:
        state["done"] += n
        show()

    show()
    try:
        yield advance
    finally:
        show(final=True)
