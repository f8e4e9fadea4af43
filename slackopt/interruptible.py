"""Ctrl-C during a native solver call (OR-Tools CP-SAT, SCIP, GLOP, HiGHS).

A native solve holds the main thread inside C++ code, where Python's SIGINT handler only
sets a flag: the KeyboardInterrupt would come when the solve returns, after its time
limit. Worse, OR-Tools' own Ctrl-C handling changes the process's SIGINT disposition:

- CP-SAT (``SatParameters.catch_sigint_signal``, true by default) installs a
  ``SigintHandler`` for the duration of ``Solve()`` whose destructor sets SIGINT back to
  ``SIG_DFL`` (ortools/util/sigint.cc, ``SigintHandler::~SigintHandler() { signal(SIGINT,
  SIG_DFL); }``), not to Python's handler: after the first CP-SAT solve a Ctrl-C killed
  the process silently (status 130 from the shell, nothing on stderr) while
  ``signal.getsignal`` still showed Python's handler.
- SCIP (parameter ``misc/catchctrlc``, true by default) catches SIGINT during its solve and
  ends that solve as if a limit had been reached: the Ctrl-C never reaches Python.

So every native solve here runs with its solver's own Ctrl-C handling off
(:func:`cpsat_sigint_off`, :data:`SCIP_SIGINT_OFF`) through :func:`interruptible`: the call
runs in a helper thread (these calls release the GIL), the main thread waits and keeps
Python's handler live; on Ctrl-C (or any exception raised in the main thread by a signal
handler, such as the sweep's SIGALRM hard timeout) it asks the solver to stop through its
interrupt API (CP-SAT ``StopSearch``, pywraplp ``InterruptSolve``, MathOpt
``SolveInterrupter``), waits for the native call to return and raises the exception
there. (A lock, not ``Thread.join``, is what it waits on: a ``join`` cut short by Ctrl-C
marked the thread as ended while it still ran, on Python 3.11.) Afterwards Python's SIGINT
handler is installed again, in case a native library changed it anyway.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SCIP_SIGINT_OFF = "misc/catchctrlc = FALSE\n"
"""SCIP parameter text (for pywraplp's ``SetSolverSpecificParametersAsString``): SCIP leaves
SIGINT to Python."""


def cpsat_sigint_off(solver: object) -> None:
    """Turn CP-SAT's own SIGINT handling off on a ``cp_model.CpSolver`` (its handler
    resets SIGINT to the default action when the solve ends; module docstring)."""
    solver.parameters.catch_sigint_signal = False  # type: ignore[attr-defined]


def interruptible(call: Callable[[], T], stop: Callable[[], object]) -> T:
    """Run the native solve `call` so that Ctrl-C stops it promptly.

    Args:
        call: the solve (no arguments); it must release the GIL while it works, as
            OR-Tools' solve calls do, and must not install a SIGINT handler of its own.
        stop: asks the running `call` to return soon (a solver's interrupt method); called
            from the main thread while `call` runs in another.

    Returns:
        What `call` returned.

    Raises:
        KeyboardInterrupt: Ctrl-C arrived while `call` ran (after `call` has returned);
            likewise any other exception a signal handler raised meanwhile.
        Exception: whatever `call` raised.

    Off the main thread (where Python delivers no signals) `call` runs directly.
    """
    if threading.current_thread() is not threading.main_thread():
        return call()
    box: dict[str, object] = {}
    running = threading.Lock()  # held while `call` runs; acquiring it waits for the end
    running.acquire()

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            box["error"] = e
        finally:
            running.release()

    handler = signal.getsignal(signal.SIGINT)
    try:
        threading.Thread(target=run, name="slackopt-native-solve", daemon=True).start()
        try:
            running.acquire()  # a signal handler's exception interrupts the wait
        except BaseException:
            _stop_and_wait(stop, running)
            raise
    finally:
        if handler is not None:  # None: installed outside Python; leave it
            signal.signal(signal.SIGINT, handler)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def _stop_and_wait(stop: Callable[[], object], running: threading.Lock) -> None:
    """Ask the native call to stop and wait until it has returned. A further Ctrl-C
    meanwhile asks again rather than leaving the call running: the interpreter would
    exit under a thread inside C++ (``terminate called without an active exception``)."""
    while True:
        stop()
        try:
            running.acquire()
            return
        except KeyboardInterrupt:
            continue
