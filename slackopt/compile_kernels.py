"""``python -m slackopt.compile_kernels [--wait]``: compile every numba kernel of slackopt
into numba's on-disk cache and record it (:mod:`slackopt.jit`), so that the processes that
follow run them compiled from their first solve.

What it compiles: the evaluator's kernel (:func:`slackopt.simulate.warm_up`) and the
kernels of every registered solver of slackopt that has a ``warm_up`` of its own
(:meth:`slackopt.solverbase.BaseSolver.warm_up`: SlackSwap's, the MILP's), each through
the calls a solve makes, so that the signatures compiled are those solves use.

A process in ``auto`` mode starts it in the background when the cache is not ready
(:func:`slackopt.jit.start_compile`); run it yourself to compile ahead, e.g. after
installing, in an image build. It runs niced, one at a time per cache (a second one exits
at once, or with ``--wait`` waits for the first and then compiles only if still needed).
Exit status 0 when the record is written (or was already), 1 when a kernel failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def compile_all() -> tuple[int, list[str]]:
    """Compile every kernel (module docstring) in this process and write the record.

    Returns:
        :func:`slackopt.jit.write_record`'s (kernels recorded, dispatchers left
        uncompiled).
    """
    from slackopt import jit
    from slackopt.simulate import warm_up
    from slackopt.solver import registered_solvers
    from slackopt.solverbase import BaseSolver

    jit.begin_compile()
    warm_up()
    done: set = set()
    for name, entry in registered_solvers().items():
        if not entry.value.startswith("slackopt."):
            continue
        cls = entry.load()
        hook = getattr(cls, "warm_up", None)
        fn = getattr(hook, "__func__", None)
        if fn is None or fn is BaseSolver.warm_up.__func__ or fn in done:
            continue
        done.add(fn)
        t0 = time.perf_counter()
        hook()
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return jit.write_record()


def main(argv: list[str] | None = None) -> int:
    """The command (module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m slackopt.compile_kernels",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--wait", action="store_true",
                    help="wait for a compile that is running instead of exiting")
    args = ap.parse_args(argv)
    os.environ["SLACKOPT_KERNELS"] = "compiled"
    from slackopt import jit

    with jit.compile_lock(wait=args.wait) as held:
        if not held:
            print("another compile is running", flush=True)
            return 0
        if jit.ready():
            return 0
        with_nice = getattr(os, "nice", None)
        if with_nice is not None:
            with_nice(10)  # leave the CPU to the solve that started it
        t0 = time.perf_counter()
        print(f"compiling slackopt's kernels (pid {os.getpid()}, {time.ctime()})", flush=True)
        try:
            n, idle = compile_all()
        except Exception as e:  # noqa: BLE001 - reported, and the record stays unwritten
            print(f"failed: {type(e).__name__}: {e}", flush=True)
            return 1
        print(f"{n} kernels compiled in {time.perf_counter() - t0:.1f} s; record: "
              f"{jit.record_path()}" + (f"; not compiled: {', '.join(idle)}" if idle else ""),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
