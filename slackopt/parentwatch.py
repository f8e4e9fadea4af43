"""Worker processes that end with their parent.

A process pool's workers block on their task queue; when the parent is killed
(SIGKILL, out-of-memory killer) nothing tells them, and they idle on for minutes holding
the instance in memory. :func:`exit_with_parent`, called in a worker's initializer,
starts a daemon thread that ends the worker within about :data:`POLL_S` seconds of its
parent's death (the worker is re-parented, so ``os.getppid()`` changes). On Linux it
also asks the kernel to send SIGKILL at once (``prctl(PR_SET_PDEATHSIG)``), which also
covers a worker busy in C code that holds the GIL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

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
