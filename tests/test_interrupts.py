"""Runs that people interrupt and kill: Ctrl-C ends with exit 130 and one line saying how
to go on, nothing interrupted is stored, error rows are retried, a store left empty by a
kill is recovered, workers end with a killed sweep, a bad scheduler fails at once
(slackopt.cli, slackopt.compare, slackopt.parentwatch, slackopt.solvers.genetic).

These tests drive real processes: they wait for a sign on stderr (a progress line) or in
/proc, with bounded polling, and assert exit codes, stored rows and processes, never
durations.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slackopt.compare import ResultStore, compare
from slackopt.errors import FileFormatError, interrupt_cause
from slackopt.solver import SolveResult, get_solver

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "teaching" / "tiny-gpt_a100-pcie4.json"
CHAIN = ROOT / "instances" / "teaching" / "chain8_a100-pcie4.json"
WAIT_S = 120.0
"""Upper bound of every wait for a process (a loaded CI machine is slow; never asserted)."""
LONG_GA = json.dumps([["genetic", {"generations": None, "progress_s": 0}]])
"""A genetic search that only its time limit stops, reporting after every generation."""

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="process checks read /proc")


def start(*args: str, **kw: Any) -> subprocess.Popen:
    """Start `slackopt ARGS` as a process with pipes for stdout and stderr."""
    return subprocess.Popen([sys.executable, "-m", "slackopt.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_for_line(proc: subprocess.Popen, word: str) -> list[str]:
    """Read stderr lines until one contains `word` (bounded by WAIT_S); returns them."""
    import selectors

    lines: list[str] = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        if not sel.select(timeout=1.0):
            continue
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if word in line:
            return lines
    proc.kill()
    raise AssertionError(f"no line with {word!r} on stderr: {''.join(lines)[-2000:]}")


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=WAIT_S)
    return proc.returncode, out, err


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by init, is not alive)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(pid: int) -> set[int]:
    """Processes whose parent chain leads to `pid`, read from /proc."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {c for c, p in parent.items() if p in frontier} - out
        out |= frontier
    return out


def wait_until(cond: Any, what: str) -> None:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"still waiting for: {what}")


def store_rows(path: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT solver, status FROM runs").fetchall()
    finally:
        con.close()


# ----------------------------------------------------------------------------- Ctrl-C
def test_interrupt_cause_finds_ctrl_c_behind_a_system_error() -> None:
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as k:
            raise SystemError("returned a result with an exception set") from k
    except SystemError as e:
        assert isinstance(interrupt_cause(e), KeyboardInterrupt)
    assert interrupt_cause(ValueError("plain")) is None


def ctrl_c(proc: subprocess.Popen, word: str) -> tuple[str, str]:
    """Send SIGINT once a stderr line holds `word`; assert exit 130 without a traceback.
    Returns (stdout, stderr)."""
    wait_for_line(proc, word)
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc)
    assert rc == 130, err[-2000:]
    assert "Traceback" not in err and "SystemError" not in err and "internal error" not in err
    return out, err


CHAIN31 = ROOT / "instances" / "small" / "chain31-seed0_a100-pcie4.json"
MILP_LONG = '["milp", {"progress": true}]'
"""A milp solve of chain31 at 0.4 P runs to its time limit (no certified bound meets its
plan), printing progress lines on stderr from 3 s on."""


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_inside_a_genetic_solve_exits_130_with_one_line(attempt: int) -> None:
    # Most of a generation is spent inside the compiled evaluator, where Ctrl-C used to
    # come out as "SystemError ... returned a result with an exception set".
    proc = start("solve", TINY, "--solver", "genetic", "--budget", "0.4", "--time-limit",
                 "600", "--param", "generations=null", "--param", "progress_s=0",
                 "--param", "population=64")
    out, err = ctrl_c(proc, f"generation {attempt + 1},")
    last = err.strip().splitlines()[-1]
    assert last.startswith("slackopt: interrupted; ") and "run the same command again" in last
    assert out == ""


@pytest.mark.slow
def test_ctrl_c_inside_a_milp_solve_exits_130_with_one_line() -> None:
    # OR-Tools CP-SAT (the milp's recompute-only seed and warm-up) reset SIGINT to the
    # default action after each solve: Ctrl-C then killed the process silently (-2 here,
    # nothing on stderr); and SCIP swallowed a Ctrl-C during its solve. With a 600 s
    # limit a Ctrl-C held back until a native solve returned would outlast WAIT_S.
    proc = start("solve", CHAIN31, "--solver", "milp", "--budget", "0.4", "--time-limit",
                 "600", "--param", "progress=true")
    out, err = ctrl_c(proc, "milp ")
    assert [ln for ln in err.splitlines() if not ln.startswith("milp ")] == [
        "slackopt: interrupted; nothing was kept; run the same command again to start over"]
    assert out == ""


@pytest.mark.slow
@pytest.mark.parametrize(("instance", "spec", "word"), [
    (TINY, LONG_GA[1:-1], "genetic: generation 2,"), (CHAIN31, MILP_LONG, "milp ")],
    ids=["genetic", "milp"])
def test_ctrl_c_in_a_sweep_stores_no_row_for_the_interrupted_run(
        tmp_path: Path, instance: Path, spec: str, word: str) -> None:
    store = tmp_path / "runs.sqlite"
    proc = start("compare", instance, "--solvers", f'["keep-all", {spec}]',
                 "--budgets", "0.4", "--time-limit", "600", "--store", store)
    _, err = ctrl_c(proc, word)
    last = err.strip().splitlines()[-1]
    assert last == (f"slackopt: interrupted; {store} holds 1 finished run: run the same "
                    "command again to do only the missing ones")
    with ResultStore(store) as st:  # the store opens and holds the finished run only
        assert len(st.keys()) == 1
    assert store_rows(store) == [("keep-all", "infeasible")]  # not the interrupted run


def _hard_cpsat_model() -> Any:
    """A CP-SAT model that its search does not close within seconds (random knapsack
    rows over 60 integers)."""
    import random

    from ortools.sat.python import cp_model

    rnd = random.Random(0)
    m = cp_model.CpModel()
    xs = [m.NewIntVar(0, 1000, f"x{i}") for i in range(60)]
    for _ in range(200):
        m.Add(sum(rnd.randint(1, 9) * xs[j] for j in rnd.sample(range(60), 5))
              <= rnd.randint(500, 3000))
    m.Maximize(sum(rnd.randint(1, 9) * x for x in xs))
    return m


def test_interruptible_stops_a_native_solve_and_keeps_python_handling_ctrl_c() -> None:
    import threading

    from ortools.sat.python import cp_model

    from slackopt.interruptible import cpsat_sigint_off, interruptible

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 60.0
    solver.parameters.num_workers = 1
    cpsat_sigint_off(solver)
    model = _hard_cpsat_model()
    started, stops = threading.Event(), []

    def call() -> int:
        started.set()
        return solver.Solve(model)

    def stop() -> None:
        stops.append(1)
        solver.StopSearch()

    def ctrl_c() -> None:
        started.wait(WAIT_S)
        time.sleep(0.5)  # inside Solve by now
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        interruptible(call, stop)
    assert stops == [1]
    assert solver.WallTime() < 30.0  # stopped, not run to its 60 s limit


@linux_only
def test_interruptible_reinstalls_python_sigint_handler_after_a_native_call() -> None:
    # A native call that sets SIGINT to SIG_DFL behind Python's back (as CP-SAT's
    # SigintHandler does): afterwards Ctrl-C must still raise KeyboardInterrupt.
    code = ("import ctypes, os, signal, time\n"
            "from slackopt.interruptible import interruptible\n"
            "libc = ctypes.CDLL(None)\n"
            "libc.signal.restype = ctypes.c_void_p\n"
            "interruptible(lambda: libc.signal(2, None), lambda: None)\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGINT); time.sleep(30)\n"
            "except KeyboardInterrupt:\n"
            "    print('caught')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=WAIT_S)
    assert (res.returncode, res.stdout) == (0, "caught\n"), res.stderr[-2000:]


# ----------------------------------------------------------------------------- error rows
FLAKY_CALLS: list[int] = []


class Flaky:
    """Fails on its first call, then plans like keep_all."""

    name = "flaky"
    params: dict[str, Any] = {}

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None) -> SolveResult:
        FLAKY_CALLS.append(budget_bytes)
        if len(FLAKY_CALLS) == 1:
            raise OSError("disk full")
        return get_solver("keep-all").solve(instance, budget_bytes)


def test_error_rows_are_run_again_on_resume(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    FLAKY_CALLS.clear()
    df = compare([TINY], [Flaky(), "keep-all"], [1.0], store=store, progress=False)
    # keep_all at M = P runs at T*, its lower bound: "optimal"
    assert list(df["status"]) == ["error", "optimal"]
    assert sorted(store_rows(store)) == [("flaky", "error"), ("keep-all", "optimal")]
    df = compare([TINY], [Flaky(), "keep-all"], [1.0], store=store, progress=False)
    assert list(df["status"]) == ["optimal", "optimal"]  # flaky plans like keep_all
    assert df.attrs == {"runs_from_store": 1, "runs_now": 1}
    assert len(FLAKY_CALLS) == 2  # keep_all was not run again; flaky was
    assert sorted(store_rows(store)) == [("flaky", "optimal"), ("keep-all", "optimal")]
    df = compare([TINY], [Flaky(), "keep-all"], [1.0], store=store, progress=False)
    assert df.attrs == {"runs_from_store": 2, "runs_now": 0} and len(FLAKY_CALLS) == 2


# ----------------------------------------------------------------------------- the store
def _sqlite_with(path: Path, *sql: str) -> None:
    con = sqlite3.connect(path)
    with con:
        for q in sql:
            con.execute(q)
    con.close()


@pytest.mark.parametrize("leftover", ["zero_bytes", "no_tables", "meta_only"])
def test_a_store_left_empty_by_a_kill_is_completed(tmp_path: Path, leftover: str) -> None:
    store = tmp_path / "runs.sqlite"
    if leftover == "zero_bytes":
        store.write_bytes(b"")
    elif leftover == "no_tables":
        _sqlite_with(store, "PRAGMA user_version = 0")
        assert store.stat().st_size == 0 or store.read_bytes()[:6] == b"SQLite"
    else:
        _sqlite_with(store, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
                     "INSERT INTO meta VALUES ('format', 'slackopt-compare-store')")
    df = compare([TINY], ["keep-all"], [1.0], store=store, progress=False)
    assert df.attrs["runs_now"] == 1
    assert store_rows(store) == [("keep-all", "optimal")]


@pytest.mark.parametrize("content", ["user_table", "meta_of_someone_else", "text"])
def test_a_file_that_holds_data_is_never_taken_over(tmp_path: Path, content: str) -> None:
    store = tmp_path / "runs.sqlite"
    if content == "user_table":
        _sqlite_with(store, "CREATE TABLE notes (x TEXT)")
    elif content == "meta_of_someone_else":
        _sqlite_with(store, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
                     "INSERT INTO meta VALUES ('owner', 'alice')")
    else:
        store.write_text("a,b\n1,2\n")
    before = store.read_bytes()
    with pytest.raises(FileFormatError, match="refusing to write to it"):
        compare([TINY], ["keep-all"], [1.0], store=store, progress=False)
    assert store.read_bytes() == before


def test_a_store_is_never_seen_half_created(tmp_path: Path) -> None:
    # Creation writes the schema to a temporary file and links it into place: the store
    # path holds either nothing or a complete store, and the temporary file is removed.
    store = tmp_path / "runs.sqlite"
    with ResultStore(store) as st:
        assert st.keys() == set()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.sqlite"]


@pytest.mark.slow
@linux_only
def test_sigkill_while_the_store_is_created_leaves_a_store_a_rerun_uses(tmp_path: Path
                                                                       ) -> None:
    store = tmp_path / "runs.sqlite"
    args = ("compare", TINY, "--solvers", "keep-all,checkpoint", "--budgets", "1.0,0.5",
            "--store", store)
    proc = start(*args)
    # Kill as soon as anything of the store appears (the file or its temporary twin).
    wait_until(lambda: proc.poll() is not None or any(
        p.name.startswith((".runs.sqlite", "runs.sqlite")) for p in tmp_path.iterdir()),
        "the store to appear")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)
    rerun = subprocess.run([sys.executable, "-m", "slackopt.cli", *map(str, args), "--json"],
                           capture_output=True, text=True, timeout=WAIT_S)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    doc = json.loads(rerun.stdout)
    assert doc["runs"] == 4 and doc["runs_now"] + doc["runs_from_store"] == 4
    assert len(store_rows(store)) == 4


# ----------------------------------------------------------------------------- workers
@pytest.mark.slow
@linux_only
def test_no_worker_outlives_a_killed_parallel_sweep(tmp_path: Path) -> None:
    proc = start("compare", TINY, "--solvers", LONG_GA, "--budgets", "0.4,0.35",
                 "--time-limit", "600", "--workers", "2", "--store", tmp_path / "s.sqlite")
    wait_for_line(proc, "genetic: generation 1,")
    kids = descendants(proc.pid)
    assert len(kids) >= 2  # two pool workers (and the resource tracker)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)
    wait_until(lambda: not any(alive(p) for p in kids),
               f"workers {sorted(p for p in kids if alive(p))} to end")
    assert store_rows(tmp_path / "s.sqlite") == []


# ----------------------------------------------------------------------------- Dask
@pytest.mark.slow
@pytest.mark.parametrize("address", ["notanaddress", "tcp://127.0.0.1:1"])
def test_a_bad_scheduler_address_is_one_line(address: str) -> None:
    pytest.importorskip("distributed")
    res = subprocess.run([sys.executable, "-m", "slackopt.cli", "compare", str(TINY),
                          "--solvers", "keep-all", "--budgets", "1.0", "--scheduler", address],
                         capture_output=True, text=True, timeout=WAIT_S)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("slackopt: error: ") and address in lines[0]
    assert "tcp://HOST:PORT" in lines[0]


def test_worker_processes_watch_their_parent() -> None:
    # A process whose parent is killed ends by itself (exit_with_parent), here a plain
    # child of a shell that exits at once: the child must not stay behind.
    code = ("import os, time; from slackopt.parentwatch import exit_with_parent; "
            "exit_with_parent(); print(os.getpid(), flush=True); time.sleep(600)")
    shell = subprocess.Popen(["/bin/sh", "-c", f'{sys.executable} -c "{code}" & wait'],
                             stdout=subprocess.PIPE, text=True)
    child = int(shell.stdout.readline())
    assert alive(child)
    os.kill(shell.pid, signal.SIGKILL)
    shell.wait(timeout=WAIT_S)
    wait_until(lambda: not alive(child), "the orphaned child to end")


@pytest.mark.slow
@linux_only
def test_ctrl_c_during_reproduce_exits_130_and_leaves_no_worker(tmp_path: Path) -> None:
    proc = start("reproduce", "--tiny", "--out", tmp_path / "r")
    # Interrupt once the sweep's worker processes run (a Python child, not the tracker).
    wait_until(lambda: proc.poll() is not None or len(descendants(proc.pid)) >= 2,
               "reproduce's workers to start")
    kids = descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    rc, out, err = finish(proc)
    assert rc == 130, err[-2000:]
    assert "Traceback" not in err
    kept = sorted(p.name for p in (tmp_path / "r").glob("*"))
    assert err.strip().splitlines()[-1] == (
        f"slackopt: interrupted; kept {', '.join(kept)} in {tmp_path / 'r'}, written before "
        "Ctrl-C (this run wrote no report.md); run the same command again to make them all"
        if kept else "slackopt: interrupted; nothing was kept; run the same command again to "
        "start over")
    assert not (tmp_path / "r" / "report.md").exists()
    wait_until(lambda: not any(alive(p) for p in kids), "reproduce's workers to end")
