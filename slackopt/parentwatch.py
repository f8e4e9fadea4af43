"""Worker processes that end with their parent and leave Ctrl-C to it.

A process pool's workers block on their task queue; when the parent is killed
(SIGKILL, out-of-memory killer) nothing tells them, and they idle on for minutes holding
the instance in memory. :func:`exit_with_parent`, called in a worker's initializer,
starts a daemon thread that ends the worker within about :data:`POLL_S` seconds of its
parent's death (the worker is re-parented, so ``os.getppid()`` changes). On Linux it
also asks the kernel to send SIGKILL at once (``prctl(PR_SET_PDEATHSIG)``), which also
covers a worker busy in C code that holds the GIL.

Ctrl-C in a terminal signals the whole process group, workers included. Workers ignore
SIGINT (their initializer says so), but a worker still starting up has no initializer
yet: :func:`sigint_blocked` keeps SIGINT blocked in the parent while it starts workers,
so they inherit the block, and the parent receives a Ctrl-C that came meanwhile as soon
as the block ends. :func:`worker_ignores_sigint` then ignores SIGINT in the worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

POLL_S = 0.5
"""Seconds between two checks of the parent process."""


def exit_with_parent(parent_pid: int | None = None) -> None:
    """End this process soon after `parent_pid` (default: the current parent) exits.

    Args:
        parent_pid: the process to outlive by at most about :data:`POLL_S` s; None for
            ``os.getppid()`` now.

    Returns:
        None. The watcher is a daemon thread; it calls ``os._exit(1)`` (no cleanup: the
        parent that would collect results is gone).
    """
    ppid = os.getppid() if parent_pid is None else int(parent_pid)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != ppid:  # the parent died before the watch began
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(POLL_S)
            if os.getppid() != ppid:
                os._exit(1)

    threading.Thread(target=watch, name="slackopt-exit-with-parent", daemon=True).start()


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Hold Ctrl-C back while worker processes start, then deliver it.

    Meanwhile SIGINT is blocked in this thread (processes started inherit the block, so
    a starting worker is not interrupted before its initializer ignores SIGINT) and a
    SIGINT that reaches the process anyway (through another thread) is recorded instead
    of interrupting the start half-way (a half-fed worker fails on the pool's freed
    semaphores and prints a traceback). When the block ends, a recorded SIGINT is raised
    as KeyboardInterrupt. Off the main thread, or where SIGINT is ignored, a no-op.
    """
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, None):
        yield
        return
    seen: list[int] = []
    old_handler = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    old_mask = (signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
                if hasattr(signal, "pthread_sigmask") else None)
    try:
        yield
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # a pending SIGINT lands
        signal.signal(signal.SIGINT, old_handler)
    if seen:
        raise KeyboardInterrupt


def worker_ignores_sigint() -> None:
    """In a worker: ignore SIGINT (the parent handles Ctrl-C) and lift an inherited block."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
