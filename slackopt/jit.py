"""slackopt's numba kernels: compiled from numba's on-disk cache, or run as Python.

numba compiles a kernel at its first call and keeps the machine code in an on-disk cache
beside the kernel's source (``cache=True``; ``NUMBA_CACHE_DIR`` moves it). Compiling all
of slackopt's kernels takes about a minute of CPU (docs/speed.md), longer than the time
limit of a first solve after installing. So each process decides once, at its first
kernel, how it runs them:

- **compiled**, when numba's cache holds every kernel (:func:`ready`): each kernel loads
  from it at its first call, inside the clock of the solve that calls it.
- **python**, when it does not: each kernel runs as the Python function it is written as
  (numba compiles them without fastmath: the same floating-point operations), the
  evaluator runs its reference engine (equal bit for bit), and :func:`start_compile`
  starts ``python -m slackopt.compile_kernels`` in the background, which fills the cache
  for the processes that come after.

The environment variable ``SLACKOPT_KERNELS`` sets the choice:

| value | kernels |
|-------|---------|
| ``auto`` (default) | compiled when :func:`ready`, else python and a background compile |
| ``compiled`` | numba's way: compile at the first call if the cache lacks it, and wait |
| ``python`` | never compiled |

How readiness is known: the compile writes a record (``slackopt-kernels-<key>.json``,
key: numba's version, Python's and the CPU) of every kernel source file, by sha256, and
of numba's index file of every kernel it compiled. :func:`ready` holds while every
source is unchanged and every index file exists. A compile first empties numba's index
of every kernel it compiles: numba checks only the file of the function it caches, so a
kernel that inlines a rule of another file (simulate/_kernel.py compiles
simulate/rules.py) would otherwise load stale code after that file changed.

This module imports the standard library and :mod:`slackopt.errors`; numba and llvmlite
only when needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from slackopt.errors import SlackoptError

MODE_ENV = "SLACKOPT_KERNELS"
"""The environment variable that chooses how kernels run (module docstring)."""
MODES = ("auto", "compiled", "python")
"""Its values."""
COMPILE_MODULE = "slackopt.compile_kernels"
"""The module ``python -m`` runs to compile every kernel (:func:`start_compile`)."""

_mode: str | None = None
_sources: set[str] = set()   # source files of every kernel decorated in this process
_dispatchers: list[Any] = []  # numba dispatchers made in this process (compiled mode)
_fresh = False                # a compile: empty each kernel's cache index when made


def mode() -> str:
    """``"compiled"`` or ``"python"``: how this process runs its kernels, decided at the
    first call (module docstring) and fixed for the life of the process. In ``auto`` with
    a cache that is not :func:`ready`, the first call also starts the background compile
    (:func:`start_compile`) and says so on stderr.

    Raises:
        SlackoptError: ``SLACKOPT_KERNELS`` is set to something other than :data:`MODES`.
    """
    global _mode
    if _mode is None:
        want = (os.environ.get(MODE_ENV) or "auto").strip().lower()
        if want not in MODES:
            raise SlackoptError(f"{MODE_ENV}={os.environ.get(MODE_ENV)!r}: expected one of "
                                f"{', '.join(MODES)} (unset means auto)")
        if want == "auto":
            try:
                want = "compiled" if ready() else "python"
            except Exception:  # noqa: BLE001 - cannot tell: numba's own way
                want = "compiled"
            if want == "python" and start_compile():
                sys.stderr.write(
                    "slackopt: compiling the numba kernels in the background (the first run "
                    "after installing or changing them, about a minute of CPU); this process "
                    "runs them as Python: same results, slower\n")
        _mode = want
    return _mode


def compiled() -> bool:
    """True when this process runs its kernels compiled (:func:`mode`)."""
    return mode() == "compiled"


def njit(*args: Any, **options: Any) -> Any:
    """``numba.njit`` for slackopt's kernels: ``@njit(cache=True)`` or
    ``njit(inline="always", cache=True)(f)``, the same options.

    Returns:
        In compiled mode, numba's dispatcher; in python mode, the function itself.
    """
    if args and callable(args[0]) and not options:
        return _decorate(args[0], {})
    if args:
        raise TypeError("slackopt.jit.njit takes keyword options only (no signature)")
    return lambda f: _decorate(f, options)


def _decorate(f: Callable, options: dict[str, Any]) -> Any:
    path = inspect.getsourcefile(f)
    if path:
        _sources.add(os.path.realpath(path))
    if not compiled():
        return f
    import numba

    disp = numba.njit(**options)(f)
    _dispatchers.append(disp)
    if _fresh:
        _flush(disp)
    return disp


def _flush(disp: Any) -> None:
    cache = getattr(disp, "_cache", None)
    if cache is not None and hasattr(cache, "flush"):
        with contextlib.suppress(OSError):
            cache.flush()


# ------------------------------------------------------------------ the record
def _key() -> str:
    """numba's version, Python's and the CPU numba compiles for: what a cached kernel is
    valid for besides its source."""
    from importlib.metadata import version

    import llvmlite.binding as ll

    parts = [version("numba"), sys.version, os.environ.get("NUMBA_CPU_NAME") or
             ll.get_host_cpu_name(), os.environ.get("NUMBA_CPU_FEATURES") or
             ll.get_host_cpu_features().flatten(), os.environ.get("NUMBA_OPT", "")]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def state_dir() -> Path:
    """Where the record and the compile's lock and log live: ``$NUMBA_CACHE_DIR/slackopt``
    when that is set, else this package's ``__pycache__`` when it can be written (where
    numba caches an installed package's kernels), else the user's cache folder
    (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``slackopt``)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env) / "slackopt"
    here = Path(__file__).resolve().parent
    pyc = here / "__pycache__"
    if os.access(pyc if pyc.is_dir() else here, os.W_OK):
        return pyc
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slackopt"


def record_path() -> Path:
    """The record file of this numba, Python and CPU (module docstring)."""
    return state_dir() / f"slackopt-kernels-{_key()}.json"


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ready() -> bool:
    """True when numba's cache holds every kernel for this install: the record exists, no
    kernel source changed since it was written, and each index file it lists exists."""
    try:
        rec = json.loads(record_path().read_text(encoding="utf-8"))
        return bool(rec["sources"]) and all(
            _sha256(p) == h for p, h in rec["sources"].items()) and all(
            os.path.exists(p) for p in rec["indexes"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def begin_compile() -> None:
    """Called by the compile before it imports the kernels: empty the cache index of
    every kernel made from now on (and of those made already), so that each one is
    compiled from the sources as they are (module docstring)."""
    global _fresh
    _fresh = True
    for disp in _dispatchers:
        _flush(disp)


def write_record() -> tuple[int, list[str]]:
    """Record the kernels this process compiled (module docstring): every kernel source
    decorated here, by sha256, and numba's index file of each dispatcher with a compiled
    signature. Written atomically.

    Returns:
        (kernels recorded, names of the dispatchers left without a compiled signature;
        those inlined into others need none).
    """
    indexes: list[str] = []
    idle: list[str] = []
    for disp in _dispatchers:
        if not disp.signatures:
            if disp.targetoptions.get("inline", "never") == "never":
                idle.append(disp.py_func.__qualname__)
            continue
        cache_file = getattr(disp._cache, "_cache_file", None)  # None: numba cannot cache
        if cache_file is not None:
            indexes.append(str(cache_file._index_path))
    rec = {"sources": {p: _sha256(p) for p in sorted(_sources)}, "indexes": sorted(indexes)}
    path = record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(rec, indent=1), encoding="utf-8")
    os.replace(tmp, path)
    return len(indexes), idle


# ------------------------------------------------------------------ the compile
@contextlib.contextmanager
def compile_lock(wait: bool) -> Iterator[bool]:
    """Hold the compile's lock file (one compile at a time per cache); yields False when
    another process holds it and `wait` is False. Without ``fcntl`` (Windows) no lock is
    taken (numba writes its cache files atomically)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield True
        return
    path = state_dir() / "slackopt-kernels.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _compile_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", COMPILE_MODULE, *extra]


def start_compile() -> bool:
    """Start ``python -m slackopt.compile_kernels`` in the background, in a session of its
    own (it outlives this process; Ctrl-C here does not stop it), its output appended to
    ``slackopt-kernels.log`` beside the record. Nothing happens when a compile is running
    already or the cache cannot be written.

    Returns:
        True when a compile was started.
    """
    try:
        with compile_lock(wait=False) as free:
            if not free:
                return False
        log = open(state_dir() / "slackopt-kernels.log", "ab")  # noqa: SIM115
    except OSError:
        return False
    with log:
        subprocess.Popen(_compile_command(), stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True,
                         env={**os.environ, MODE_ENV: "compiled"})
    return True


def ensure_compiled(timeout_s: float | None = None) -> None:
    """Compile every kernel now, in a child process, and wait for it (also for a compile
    already running), unless the cache is :func:`ready`. For test suites and benchmark
    scripts that want compiled kernels from their first solve.

    Raises:
        RuntimeError: the compile failed (its output is in the message).
        subprocess.TimeoutExpired: it took longer than `timeout_s`.
    """
    if ready():
        return
    res = subprocess.run(_compile_command("--wait"), capture_output=True, text=True,
                         timeout=timeout_s, env={**os.environ, MODE_ENV: "compiled"})
    if res.returncode != 0 or not ready():
        raise RuntimeError(f"compiling slackopt's kernels failed (exit {res.returncode}):\n"
                           f"{res.stdout[-2000:]}{res.stderr[-2000:]}")


__all__ = ["MODE_ENV", "MODES", "mode", "compiled", "njit", "ready", "state_dir",
           "record_path", "begin_compile", "write_record", "compile_lock", "start_compile",
           "ensure_compiled"]
