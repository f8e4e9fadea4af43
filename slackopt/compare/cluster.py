"""Runs on a Dask cluster (``compare(..., scheduler=...)``, the ``[dist]`` extra)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from slackopt.compare.grid import Task
from slackopt.compare.runner import execute, transport_error
from slackopt.errors import SlackoptError
from slackopt.instance import Instance

SCHEDULER_TIMEOUT_S = 5.0
"""Seconds to reach a Dask scheduler before the sweep is refused."""
_SCHEDULER_FIX = ("start one (dask scheduler; dask worker ADDRESS) and give its address as "
                  "tcp://HOST:PORT")


def check_scheduler_address(address: str) -> None:
    """Refuse, within :data:`SCHEDULER_TIMEOUT_S`, an address that is not HOST:PORT or
    where nothing listens (before Dask's client, whose failed connection waits longer and
    prints a traceback when it is collected).

    Raises:
        SlackoptError: naming the address and the fix.
    """
    import socket
    from urllib.parse import urlsplit

    text = address.strip()
    scheme, _, rest = text.rpartition("://")
    if scheme and scheme not in ("tcp", "tls"):
        return  # other Dask transports (inproc, ucx, ws): let Dask judge them
    try:
        parts = urlsplit(f"tcp://{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise SlackoptError(f"'{address}' is not a Dask scheduler address (tcp://HOST:PORT). "
                            f"Fix: {_SCHEDULER_FIX}")
    try:
        with socket.create_connection((host, port), timeout=SCHEDULER_TIMEOUT_S):
            pass
    except OSError as e:
        raise SlackoptError(f"cannot reach the Dask scheduler at '{address}': "
                            f"{e.strerror or e}. Fix: {_SCHEDULER_FIX}") from None


def run_dask(tasks: list[Task], instances: dict[str, Instance], scheduler: Any,
             on_result: Callable[[Task, dict], None]) -> None:
    """Run `tasks` on a Dask cluster (a scheduler address or a ``distributed.Client``),
    scattering each instance once; `on_result(task, run columns)` is called as each run
    returns, in completion order. A run that cannot reach a worker becomes a transient
    error row (not stored).

    Raises:
        SlackoptError: no [dist] extra, or the scheduler cannot be reached.
    """
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise SlackoptError("running on a Dask cluster needs the [dist] extra: "
                            "pip install 'slackopt[dist]'") from None
    own = isinstance(scheduler, str)
    if own:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            raise SlackoptError(f"cannot reach the Dask scheduler at '{scheduler}': {e}. "
                                f"Fix: {_SCHEDULER_FIX}") from None
    else:
        client = scheduler
    futs: list[Any] = []
    try:
        used = sorted({t.instance_hash for t in tasks})
        scattered = {h: client.scatter(instances[h], hash=False) for h in used}
        by_key = {}
        for t in tasks:
            f = client.submit(execute, scattered[t.instance_hash], t, pure=False,
                              key=f"slackopt-run-{t.key[:20]}-{os.getpid()}-{time.time_ns()}")
            by_key[f.key] = t
            futs.append(f)
        for f in as_completed(futs, loop=client.loop):
            try:
                row = f.result()
            except Exception as e:  # the task could not be sent or its result returned
                row = transport_error(e)
            on_result(by_key[f.key], row)
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futs)
        raise
    finally:
        if own:
            with contextlib.suppress(Exception):
                client.close()
