"""Sweeps: tidy table, failures as rows, resumable store, process and Dask parallelism
(slackopt.compare, `slackopt compare`)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from slackopt.compare import (
    COLUMNS,
    STORE_SCHEMA_VERSION,
    ResultStore,
    add_gaps,
    compare,
    load_references,
    read_results,
    write_results,
)
from slackopt.errors import FileFormatError, SlackoptError, SolverError
from slackopt.io import load_instance
from slackopt.solver import SolveResult, get_solver

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "teaching" / "tiny-gpt_a100-pcie4.json"
CHAIN = ROOT / "instances" / "teaching" / "chain8_a100-pcie4.json"
PAPER = sorted((ROOT / "instances" / "paper").glob("*.json"))
TEN_BUDGETS = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
FAST = ["keep-all", "checkpoint", "slackswap"]
"""Solvers that plan a paper instance in milliseconds (search-based solvers are not
swept in the tests: CI has two cores)."""
NONDETERMINISTIC = ["planning_time_s"]


# ----------------------------------------------------------------------------- fake solvers
class Boom:
    """Raises on every call."""

    name = "boom"
    params: dict[str, Any] = {}

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        raise RuntimeError("kaboom")


class Sleepy:
    """Ignores its time limit."""

    name = "sleepy"
    params: dict[str, Any] = {}

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        time.sleep(60)
        raise AssertionError("not interrupted")


class SaysTimeout:
    """Stops at its limit and reports it, with its best plan so far."""

    name = "says_timeout"
    params: dict[str, Any] = {}

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        res = get_solver("slackswap").solve(instance, budget_bytes)
        return SolveResult(plan=res.plan, solver=self.name, status="timeout",
                           lower_bound_s=instance.ideal_time_s)


CALLS: list[tuple[str, int]] = []
INTERRUPT_AT: set[int] = set()


class Counting:
    """SlackSwap that records each call and raises KeyboardInterrupt (a user's Ctrl-C)
    when asked to plan a budget in INTERRUPT_AT."""

    name = "counting"
    params: dict[str, Any] = {}

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        if budget_bytes in INTERRUPT_AT:
            raise KeyboardInterrupt
        CALLS.append((instance.name, int(budget_bytes)))
        return get_solver("slackswap").solve(instance, budget_bytes, seed=seed)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a.drop(columns=NONDETERMINISTIC).reset_index(drop=True),
                                  b.drop(columns=NONDETERMINISTIC).reset_index(drop=True))


# ----------------------------------------------------------------------------- the table
def test_tidy_table_one_row_per_run() -> None:
    df = compare([TINY, CHAIN], ["keep-all", ("slackswap", {"g": 0.02})], [1.0, 0.7],
                 seeds=[0, 1], progress=False)
    assert list(df.columns) == list(COLUMNS)
    assert len(df) == 2 * 2 * 2 * 2
    # Grid order: instance, budget, solver, seed.
    assert list(df["instance"].iloc[[0, 8]]) == ["tiny_a100-pcie4", "chain8-seed0_a100-pcie4"]
    assert list(df["budget_fraction"].iloc[:8]) == [1.0] * 4 + [0.7] * 4
    assert list(df["solver"].iloc[:4]) == ["keep-all", "keep-all", "slackswap", "slackswap"]
    assert list(df["seed"].iloc[:2]) == [0, 1]
    # every hyperparameter, canonical JSON: ("slackswap", {"g": 0.02}) and "slackswap"
    # are the same experiment (BaseSolver.params)
    assert set(df["params"]) == {"{}", '{"g":0.02,"max_rounds":6,"min_budget_search":true,'
                                       '"swap_order":"rho","use_link":true}'}
    inst = load_instance(TINY)
    t = df[df["instance"] == inst.name]
    assert (t["P_bytes"] == inst.P).all() and (t["A_bytes"] == inst.A).all()
    assert np.allclose(t["ideal_time_s"], inst.ideal_time_s)
    assert (t["budget_bytes"] == [int(np.floor(f * inst.P)) for f in t["budget_fraction"]]).all()
    feas = df[df["feasible"]]
    assert (feas["step_time_s"] >= feas["ideal_time_s"] - 1e-12).all()
    assert (feas["gap_to_bound"] >= -1e-12).all() and (feas["gap_to_best"] >= -1e-12).all()
    assert (df["best_lower_bound_s"] >= df["ideal_time_s"] - 1e-15).all()
    # keep_all does not fit 0.7 P: a row with no step and the evaluator's reason.
    ka = df[(df["solver"] == "keep-all") & (df["budget_fraction"] == 0.7)]
    assert (ka["status"] == "infeasible").all() and ka["step_time_s"].isna().all()
    assert ka["message"].str.contains("cannot allocate").all()
    assert (ka["min_budget_bytes"] == ka["P_bytes"]).all()
    # best_step_s is the best feasible step of its instance and budget.
    for _, g in df.groupby(["instance", "budget_bytes"]):
        best = g.loc[g["feasible"], "step_time_s"].min()
        assert np.allclose(g["best_step_s"], best, equal_nan=True)
    counts = df[["n_keep", "n_swap", "n_recomp"]].sum(axis=1)
    assert (counts == df["instance"].map({"tiny_a100-pcie4": inst.n_saved,
                                          "chain8-seed0_a100-pcie4": 9})).all()


def test_a_failing_solver_is_a_row_not_a_crash() -> None:
    df = compare([TINY], [Boom(), "keep-all", SaysTimeout()], [1.0], progress=False)
    boom = df[df["solver"] == "boom"].iloc[0]
    assert boom["status"] == "error" and "RuntimeError: kaboom" in boom["message"]
    assert not boom["feasible"] and np.isnan(boom["step_time_s"])
    assert df[df["solver"] == "keep-all"].iloc[0]["status"] == "optimal"  # M = P: T = T*
    said = df[df["solver"] == "says_timeout"].iloc[0]
    assert said["status"] == "timeout" and said["feasible"]  # its plan is still scored


def test_a_solver_past_its_deadline_becomes_a_timeout_row() -> None:
    # Sleepy sleeps 60 s and then fails the test: only the deadline ends it sooner.
    df = compare([TINY], [Sleepy(), "keep-all"], [1.0], time_limit_s=0.01, progress=False)
    row = df[df["solver"] == "sleepy"].iloc[0]
    assert row["status"] == "timeout" and "interrupted" in row["message"]
    assert df[df["solver"] == "keep-all"].iloc[0]["status"] == "optimal"  # M = P: T = T*
    assert (df["time_limit_s"] == 0.01).all()


def test_a_solver_gets_its_own_time_limit(tmp_path: Path) -> None:
    """time_limits replaces time_limit_s for the solvers it names: their rows, their calls
    and their store keys; the other solvers' runs keep theirs and come from the store."""
    store = tmp_path / "runs.sqlite"
    CALLS.clear()
    INTERRUPT_AT.clear()
    df = compare([TINY], [Sleepy(), "keep-all"], [1.0], time_limit_s=5.0,
                 time_limits={"sleepy": 0.01}, store=store, progress=False)
    by = df.set_index("solver")
    assert by.loc["sleepy", "status"] == "timeout" and by.loc["sleepy", "time_limit_s"] == 0.01
    assert "limit 0.01 s" in by.loc["sleepy", "message"]
    assert by.loc["keep-all", "time_limit_s"] == 5.0
    again = compare([TINY], [Counting(), "keep-all"], [1.0], time_limit_s=5.0,
                    time_limits={"counting": None}, store=store, progress=False)
    assert again.attrs == {"runs_from_store": 1, "runs_now": 1} and len(CALLS) == 1
    assert np.isnan(again.set_index("solver").loc["counting", "time_limit_s"])
    with pytest.raises(SlackoptError, match=r"time limit for 'milp' \(--time-limit-for, "
                                            r"time_limits\): this sweep does not run that "
                                            "solver; its solvers are keep-all"):
        compare([TINY], ["keep-all"], [1.0], time_limits={"milp": 300}, progress=False)
    with pytest.raises(SlackoptError, match="must map solver names to seconds"):
        compare([TINY], ["keep-all"], [1.0], time_limits=300, progress=False)
    with pytest.raises(SolverError, match="finite number >= 0"):
        compare([TINY], ["keep-all"], [1.0], time_limits={"keep-all": -1}, progress=False)


def test_bad_input_is_refused_before_running() -> None:
    with pytest.raises(SolverError, match="unknown solver 'nope'"):
        compare([TINY], ["nope"], [0.5], progress=False)
    with pytest.raises(SolverError, match=r"solver 'slackswap' has no parameter "
                                          r"'no_such_knob'; valid keys: g \(float >= 0 and "
                                          r"< 1, default 0.02\), max_rounds"):
        compare([TINY], [("slackswap", {"no_such_knob": 1})], [0.5], progress=False)
    with pytest.raises(SlackoptError, match="budget"):
        compare([TINY], ["keep-all"], ["half"], progress=False)
    with pytest.raises(FileFormatError, match="file not found"):
        compare([TINY.with_name("missing.json")], ["keep-all"], [0.5], progress=False)


# ----------------------------------------------------------------------------- the store
def test_interrupted_sweep_resumes_without_redoing_or_duplicating(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    inst = load_instance(TINY)
    budgets = [1.0, 0.9, 0.8, 0.7, 0.6]
    CALLS.clear()
    INTERRUPT_AT.clear()
    INTERRUPT_AT.add(int(np.floor(0.7 * inst.P)))  # Ctrl-C during the fourth run
    with pytest.raises(KeyboardInterrupt):
        compare([inst], [Counting()], budgets, store=store, progress=False)
    assert len(CALLS) == 3
    with ResultStore(store) as st:
        assert len(st.keys()) == 3
    INTERRUPT_AT.clear()
    df = compare([inst], [Counting()], budgets, store=store, progress=False)
    assert len(CALLS) == 5  # only the two missing runs were done
    assert df.attrs == {"runs_from_store": 3, "runs_now": 2}
    assert list(df["budget_fraction"]) == budgets
    con = sqlite3.connect(store)
    n, distinct = con.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM runs").fetchone()
    con.close()
    assert n == distinct == 5
    # Once more: nothing runs, the same table comes back.
    again = compare([inst], [Counting()], budgets, store=store, progress=False)
    assert len(CALLS) == 5
    pd.testing.assert_frame_equal(again, df)
    # The uninterrupted sweep gives the same rows.
    _same(df, compare([inst], [Counting()], budgets, progress=False))


def test_subset_then_full_set_adds_only_the_missing_rows(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    first = compare([TINY], FAST, [1.0, 0.5], store=store, progress=False)
    full = compare([TINY, CHAIN], FAST, [1.0, 0.5, 0.3], store=store, progress=False)
    assert full.attrs == {"runs_from_store": 6, "runs_now": 12}
    assert len(full) == 18 and not full.duplicated(["instance", "budget_bytes", "solver"]).any()
    stored = full[(full["instance"] == "tiny_a100-pcie4")
                  & full["budget_fraction"].isin([1.0, 0.5])]
    # Stored rows come back as they were (planning times included); gaps are recomputed.
    keep = [c for c in COLUMNS if c not in ("best_lower_bound_s", "gap_to_bound", "best_step_s",
                                            "gap_to_best")]
    pd.testing.assert_frame_equal(stored[keep].reset_index(drop=True), first[keep])
    # A different time limit is a different experiment: new runs, none replaced.
    limited = compare([TINY], ["keep-all"], [1.0], store=store, time_limit_s=5, progress=False)
    assert limited.attrs["runs_now"] == 1
    with ResultStore(store) as st:
        assert len(st.keys()) == 19


def test_store_refuses_files_it_did_not_write(tmp_path: Path) -> None:
    csv = tmp_path / "mine.csv"
    csv.write_text("a,b\n1,2\n")
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = other.read_bytes()
    for path in (csv, other):
        with pytest.raises(FileFormatError, match="not a slackopt compare store"):
            compare([TINY], ["keep-all"], [1.0], store=path, progress=False)
    assert csv.read_text() == "a,b\n1,2\n" and other.read_bytes() == before


# ----------------------------------------------------------------------------- parallel
@pytest.mark.slow
def test_processes_give_the_serial_table(tmp_path: Path) -> None:
    args = ([TINY, CHAIN], FAST, [1.0, 0.6])
    serial = compare(*args, progress=False)
    # A solver class the workers cannot import (as if defined in a notebook) gives error
    # rows that are not stored, so that a rerun retries them.
    local = type("NotebookSolver", (Boom,), {"__module__": "not_importable", "name": "local"})
    store = tmp_path / "s.sqlite"
    par = compare(args[0], [*FAST, local()], args[2], workers=2, store=store, progress=False)
    _same(serial, par[par["solver"] != "local"])
    bad = par[par["solver"] == "local"]
    assert (bad["status"] == "error").all()
    assert bad["message"].str.contains("could not run in a worker").all()
    with ResultStore(store) as st:
        assert len(st.keys()) == len(serial)


@pytest.mark.slow
def test_paper_sweep_on_a_dask_local_cluster(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    store = tmp_path / "dask.sqlite"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        df = compare(PAPER, FAST, TEN_BUDGETS, scheduler=client, store=store, progress=False)
    assert len(df) == len(PAPER) * len(TEN_BUDGETS) * len(FAST) == 120
    assert not df.duplicated(["instance", "budget_bytes", "solver"]).any()
    assert set(df["status"]) <= {"optimal", "bounded", "feasible", "infeasible"}
    with ResultStore(store) as st:
        assert len(st.keys()) == 120
    # Same rows as a serial run (checked on a sample of the grid to keep CI fast).
    sample = df[df["budget_fraction"].isin([0.9, 0.5, 0.1])
                & df["instance"].isin(["gpt2-xl_a100-pcie4", "vgg16_a100-pcie4"])]
    serial = compare([p for p in PAPER if p.stem in ("gpt2-xl_a100-pcie4", "vgg16_a100-pcie4")],
                     FAST, [0.9, 0.5, 0.1], progress=False)
    cols = [c for c in COLUMNS if c not in NONDETERMINISTIC and c not in
            ("best_lower_bound_s", "gap_to_bound", "best_step_s", "gap_to_best")]
    pd.testing.assert_frame_equal(sample[cols].reset_index(drop=True), serial[cols])


# ----------------------------------------------------------------------------- references
def test_references_join_the_gaps(tmp_path: Path) -> None:
    inst = load_instance(TINY)
    m = int(np.floor(0.7 * inst.P))
    ref = {"format": "slackopt-references", "schema_version": 1, "entries": [
        {"instance": inst.name, "budget_bytes": m, "budget_fraction": 0.7,
         "lower_bound_s": inst.ideal_time_s * 1.01, "best_step_s": inst.ideal_time_s * 1.02,
         "status": "feasible", "solver": "milp", "settings": {}, "date": "2026-01-01"},
        {"instance": "someone-else", "budget_bytes": m, "lower_bound_s": 99.0,
         "best_step_s": 99.0}]}
    path = tmp_path / "references.json"
    path.write_text(json.dumps(ref))
    df = compare([inst], ["slackswap"], [1.0, 0.7], references=path, progress=False)
    at = df.set_index("budget_fraction")
    assert at.loc[0.7, "best_lower_bound_s"] == pytest.approx(inst.ideal_time_s * 1.01)
    assert at.loc[0.7, "best_step_s"] == pytest.approx(inst.ideal_time_s * 1.02)
    step = at.loc[0.7, "step_time_s"]
    assert at.loc[0.7, "gap_to_bound"] == pytest.approx(step / (inst.ideal_time_s * 1.01) - 1)
    assert at.loc[1.0, "best_lower_bound_s"] == pytest.approx(inst.ideal_time_s)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**ref, "entries": [{"instance": "x", "budget_bytes": -1}]}))
    with pytest.raises(FileFormatError, match=r"entries\[0\]\.budget_bytes"):
        load_references(bad)


def test_gap_to_bound_only_for_barrier_free_plans() -> None:
    """The bounds are proven for the barrier-free runtime's plans: an on_demand row
    (SuperNeurons) gets no gap to bound, even when it beats the best bound; every row gets
    its gap to best."""
    inst = load_instance(TINY)
    df = compare([inst], ["slackswap", "superneurons"], [0.5], progress=False)
    bf, od = (df[df["solver"] == s].iloc[0] for s in ("slackswap", "superneurons"))
    assert (bf["policy"], od["policy"]) == ("barrier_free", "on_demand")
    assert bf["feasible"] and od["feasible"]
    # hand formula: best bound = max(T*, the rows' lower bounds)
    best_lb = max([inst.ideal_time_s] + [x for x in df["lower_bound_s"] if x == x])
    assert bf["best_lower_bound_s"] == pytest.approx(best_lb, rel=1e-12)
    assert bf["gap_to_bound"] == pytest.approx((bf["step_time_s"] - best_lb) / best_lb,
                                               rel=1e-12)
    assert np.isnan(od["gap_to_bound"]) and np.isnan(od["best_lower_bound_s"])
    best = min(bf["step_time_s"], od["step_time_s"])
    for r in (bf, od):
        assert r["gap_to_best"] == pytest.approx((r["step_time_s"] - best) / best, rel=1e-12)
    # A reference bound the on_demand plan beats (it is no bound for that runtime):
    # still NaN there, and the barrier-free row is measured against it.
    lb = od["step_time_s"] * 1.5
    refs = [{"instance": inst.name, "budget_bytes": int(bf["budget_bytes"]),
             "lower_bound_s": lb, "best_step_s": None}]
    g = add_gaps(df, refs)
    assert np.isnan(g.loc[g["solver"] == "superneurons", "gap_to_bound"]).all()
    assert g.loc[g["solver"] == "slackswap", "gap_to_bound"].iloc[0] == pytest.approx(
        (bf["step_time_s"] - lb) / lb, rel=1e-12)


def test_a_store_of_schema_1_opens_resumes_and_migrates(tmp_path: Path) -> None:
    """A store written before the ``policy`` column (schema version 1: the same runs table
    without it) is migrated on open: its rows come back with an unknown policy (and so no
    gap to bound), new runs record theirs."""
    store = tmp_path / "old.sqlite"
    first = compare([TINY], ["slackswap"], [0.5], store=store, progress=False)
    con = sqlite3.connect(store)
    con.execute('ALTER TABLE runs DROP COLUMN "policy"')
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    assert STORE_SCHEMA_VERSION == 3
    df = compare([TINY], ["slackswap", "checkpoint"], [0.5], store=store, progress=False)
    assert df.attrs == {"runs_from_store": 1, "runs_now": 1}
    old, new = df.iloc[0], df.iloc[1]
    assert old["policy"] is None and np.isnan(old["gap_to_bound"])
    assert old["step_time_s"] == first["step_time_s"].iloc[0]
    assert np.isfinite(old["gap_to_best"])
    assert new["policy"] == "barrier_free" and np.isfinite(new["gap_to_bound"])
    con = sqlite3.connect(store)
    ver = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    pols = con.execute("SELECT solver, policy FROM runs ORDER BY solver").fetchall()
    con.close()
    assert ver == ("3",) and pols == [("checkpoint", "barrier_free"), ("slackswap", None)]
    # and it resumes again without running anything
    again = compare([TINY], ["slackswap", "checkpoint"], [0.5], store=store, progress=False)
    assert again.attrs == {"runs_from_store": 2, "runs_now": 0}
    _same(again, df)


# ----------------------------------------------------------------------------- files
@pytest.mark.parametrize("suffix", [".csv", ".json", ".sqlite", ".parquet"])
def test_results_files_round_trip(tmp_path: Path, suffix: str) -> None:
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    df = compare([TINY], [Boom(), "keep-all", "slackswap"], [1.0, 0.5], seeds=[None, 3],
                 progress=False)
    path = write_results(df, tmp_path / f"r{suffix}")
    back = read_results(path)
    pd.testing.assert_frame_equal(back, df, check_exact=False, rtol=1e-12)
    with pytest.raises(SlackoptError, match="exists"):
        write_results(df, path)


def test_a_store_reads_as_a_results_table(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    df = compare([TINY], FAST, [0.5], store=store, progress=False)
    _same(read_results(store), df)


# ----------------------------------------------------------------------------- command line
def test_cli_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slackopt.cli import main

    out = tmp_path / "t.csv"
    store = tmp_path / "s.sqlite"
    rc = main(["compare", str(TINY), "--solvers", "keep-all,slackswap", "--budgets", "1.0,0.5",
               "--store", str(store), "--out", str(out), "--json"])
    o, e = capsys.readouterr()
    assert rc == 0, e
    doc = json.loads(o)
    assert doc["runs"] == 4 and doc["runs_now"] == 4 and doc["out"] == str(out)
    assert [r["solver"] for r in doc["rows"]] == ["keep-all", "slackswap"] * 2
    assert doc["rows"][2]["step_time_s"] is None  # keep_all at 0.5 P: infeasible, no step
    assert len(read_results(out)) == 4
    rc = main(["compare", str(TINY), "--solvers", "keep-all,slackswap", "--budgets", "1.0,0.5",
               "--store", str(store)])
    o, e = capsys.readouterr()
    assert rc == 0 and "4 runs: 0 run now, 4 from the store" in o
    rc = main(["compare", str(TINY), "--solvers", "keep-all,slackswap", "--budgets", "1.0,0.5",
               "--store", str(store), "--time-limit-for", "slackswap=30", "--json"])
    o, e = capsys.readouterr()
    doc = json.loads(o)
    assert rc == 0 and doc["runs_now"] == 2  # slackswap's runs have another key now
    assert [r["time_limit_s"] for r in doc["rows"]] == [None, 30.0] * 2
    assert "tiny_a100-pcie4" in o and "slackswap" in o
    for args, words in [
        (["--solvers", "nope", "--budgets", "0.5"], ["unknown solver 'nope'"]),
        (["--solvers", "keep-all", "--budgets", "0.5,,0.3"], ["comma-separated"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--out", str(out)], ["exists"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--out", str(tmp_path / "x.xlsx")],
         ["unknown results format"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--store", str(out)],
         ["not a slackopt compare store"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--time-limit-for", "keep-all"],
         ["--time-limit-for", "is not NAME=SECONDS"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--time-limit-for", "keep-all=-3"],
         ["--time-limit-for", "finite number of seconds >= 0, or none"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--time-limit-for", "keep-all=inf"],
         ["--time-limit-for", "finite number of seconds >= 0, or none"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--time-limit-for", "keep-all=5",
          "--time-limit-for", "keep-all=6"], ["--time-limit-for", "given twice"]),
        (["--solvers", "keep-all", "--budgets", "0.5", "--time-limit-for", "milp=30"],
         ["time limit for 'milp' (--time-limit-for"]),
    ]:
        rc = main(["compare", str(TINY), *args])
        o, e = capsys.readouterr()
        assert rc == 2 and o == "" and "Traceback" not in e, (args, e)
        for w in words:
            assert w in e, (w, e)


def test_cli_compare_says_which_folders_it_created(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--store and --out in missing folders: the folders are created and stderr says so
    (stdout stays one JSON document); existing folders get no note."""
    from slackopt.cli import main

    store = tmp_path / "runs" / "2026" / "s.sqlite"
    out = tmp_path / "tables" / "t.csv"
    args = ["compare", str(TINY), "--solvers", "keep-all", "--budgets", "1.0", "--json"]
    rc = main([*args, "--store", str(store), "--out", str(out)])
    o, e = capsys.readouterr()
    assert rc == 0, e
    assert json.loads(o)["runs_now"] == 1 and store.is_file() and out.is_file()
    assert f"slackopt: note: created the folder {store.parent} for --store" in e
    assert f"slackopt: note: created the folder {out.parent} for --out" in e
    rc = main([*args, "--store", str(store), "--out", str(out), "--force"])
    o, e = capsys.readouterr()
    assert rc == 0 and json.loads(o)["runs_from_store"] == 1
    assert "created the folder" not in e


# ----------------------------------------------------------------------------- bound sources
class _Bounded:
    """SlackSwap's plan with a lower bound at `share` of the way from T* to its step
    (valid: never above the plan's step); `certified_bounds` as the class says."""

    name = "bounded_test"
    params: dict[str, Any] = {}
    certified_bounds = False
    share = 0.5

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        res = get_solver("slackswap").solve(instance, budget_bytes)
        from slackopt import simulate

        step = simulate(instance, res.plan, budget_bytes).step_time_s
        lb = instance.ideal_time_s + self.share * (step - instance.ideal_time_s)
        return SolveResult(plan=res.plan, solver=self.name, status="bounded",
                           lower_bound_s=lb)


class _Certified(_Bounded):
    name = "certified_test"
    certified_bounds = True
    share = 0.25


def test_each_bound_says_where_it_comes_from() -> None:
    """bound_source: T* (what keep-all and the genetic search state) is "T* (trivial)"
    whichever solver states it; a solver that certifies its bounds gives "certified",
    another "solver-reported". best_bound_source names the source of the bound the gap is
    measured against: the largest, certified before reference before solver-reported on a
    tie, T* when nothing beats it."""
    from slackopt.compare.gaps import bound_source

    assert bound_source(None, 1.0, True) is None
    assert bound_source(float("nan"), 1.0, True) is None
    assert bound_source(1.0, 1.0, False) == bound_source(0.9, 1.0, True) == "T* (trivial)"
    assert bound_source(1.0 + 1e-12, 1.0, True) == "T* (trivial)"  # float rounding of T*
    assert bound_source(1.01, 1.0, True) == "certified"
    assert bound_source(1.01, 1.0, False) == "solver-reported"

    df = compare([TINY], ["keep-all", "slackswap", _Bounded(), _Certified()], [1.0, 0.5],
                 progress=False)
    src = {(r.solver, r.budget_fraction): r.bound_source for r in df.itertuples()}
    assert src[("keep-all", 1.0)] == src[("keep-all", 0.5)] == "T* (trivial)"
    assert src[("slackswap", 1.0)] == "T* (trivial)" and src[("slackswap", 0.5)] is None
    assert src[("bounded_test", 0.5)] == "solver-reported"
    assert src[("certified_test", 0.5)] == "certified"
    half = df[df["budget_fraction"] == 0.5]
    # the uncertified bound is the larger (half way vs a quarter): the gap is against it
    assert set(half["best_bound_source"]) == {"solver-reported"}
    assert (half["best_lower_bound_s"] == half.loc[half["solver"] == "bounded_test",
                                                   "lower_bound_s"].iloc[0]).all()
    assert set(df[df["budget_fraction"] == 1.0]["best_bound_source"]) == {"T* (trivial)"}
    # without it, the certified one; with a larger reference, the reference
    rest = df[df["solver"] != "bounded_test"]
    g = add_gaps(rest)
    assert set(g[g["budget_fraction"] == 0.5]["best_bound_source"]) == {"certified"}
    cert = rest.query("solver == 'certified_test' and budget_fraction == 0.5")[
        "lower_bound_s"].iloc[0]
    assert cert > rest["ideal_time_s"].iloc[0]
    ref = {"format": "slackopt-references", "schema_version": 1,
           "entries": [{"instance": "tiny_a100-pcie4", "budget_fraction": 0.5,
                        "lower_bound_s": cert}]}
    assert set(add_gaps(rest, ref).query("budget_fraction == 0.5")["best_bound_source"]) \
        == {"certified"}  # a tie: certified first
    ref["entries"][0]["lower_bound_s"] = cert * (1 + 1e-6)
    assert set(add_gaps(rest, ref).query("budget_fraction == 0.5")["best_bound_source"]) \
        == {"reference"}


def test_a_store_of_schema_2_gains_the_bound_source(tmp_path: Path) -> None:
    """A version-2 store (before ``bound_source``) is migrated: its rows have no recorded
    source (a bound above T* among them counts as solver-reported), new rows have one."""
    store = tmp_path / "v2.sqlite"
    compare([TINY], [_Certified()], [0.5], store=store, progress=False)
    con = sqlite3.connect(store)
    con.execute('ALTER TABLE runs DROP COLUMN "bound_source"')
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    df = compare([TINY], [_Certified(), "keep-all"], [0.5], store=store, progress=False)
    assert df.attrs == {"runs_from_store": 1, "runs_now": 1}
    assert df["bound_source"].tolist() == [None, "T* (trivial)"]
    assert set(df["best_bound_source"]) == {"solver-reported"}
    con = sqlite3.connect(store)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        == ("3",)
    con.close()
