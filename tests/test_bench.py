"""The benchmark suite's references (benchmarks/bench_references.py,
slackopt.compare.benchrefs) and ``slackopt bench`` (slackopt.compare.bench), on a suite of
one small instance built here, with references from the exact MILP (optimal on it)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from slackopt.compare import ResultStore, compare, load_references, read_results
from slackopt.compare.bench import geometric_mean_gap, leaderboard
from slackopt.compare.benchrefs import update_references
from slackopt.errors import FileFormatError
from slackopt.instance import budget_bytes
from slackopt.io import load_instance, load_plan, plan_from_dict
from slackopt.simulate import simulate
from tests.helpers import assert_user_error, run

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "small" / "tiny-layers1_a100-pcie4.json"
BUDGETS = (0.5, 0.7)
"""0.5 P: the MILP proves a step above T*; 0.7 P: T* itself."""


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("bench_references",
                                                  ROOT / "benchmarks" / "bench_references.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_suite(folder: Path) -> Path:
    """A one-instance suite in `folder`: the instance file and its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / TINY.name
    shutil.copy(TINY, f)
    doc = {"format": "slackopt-bench-manifest", "version": 1,
           "generator": {"script": "tests/test_bench.py"},
           "instances": [{"file": f.name, "name": load_instance(f).name,
                          "sha256": hashlib.sha256(f.read_bytes()).hexdigest()}]}
    (folder / "manifest.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def refsuite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite with references.json written by the script: the MILP plus two cheap
    planners, at 0.5 and 0.7 P, kept in suite/store.sqlite."""
    d = make_suite(tmp_path_factory.mktemp("bench") / "suite")
    rc = _script().main(["--suite", str(d), "--budgets", "0.5,0.7", "--time-limit", "30",
                         "--solvers", "milp,slackswap,checkpoint", "--quiet",
                         "--store", str(d / "store.sqlite")])
    assert rc == 0
    return d


def _copy(refsuite: Path, dst: Path) -> Path:
    shutil.copytree(refsuite, dst)
    return dst


# ----------------------------------------------------------------------------- leaderboard
def test_leaderboard_values_by_hand() -> None:
    """Two solvers, two rows each: the geometric mean of (1 + gap) minus 1, the maximum,
    feasible counts and planning times, worked out by hand; a gap of 0 counts as a factor
    1, an infeasible row counts in rows but not in the gaps."""
    df = pd.DataFrame({
        "solver": ["a", "a", "b", "b"], "params": ["{}"] * 4,
        "feasible": [True, True, True, False],
        "gap_to_bound": [0.0, 0.21, 0.44, math.nan],
        "gap_to_best": [0.0, 0.1, 0.2, math.nan],
        "planning_time_s": [1.0, 3.0, 0.5, math.nan]})
    b = leaderboard(df).set_index("solver")
    assert b.loc["a", "rows"] == 2 and b.loc["a", "feasible"] == 2
    assert b.loc["a", "gap_to_bound_geomean"] == pytest.approx(0.1, rel=1e-12)  # sqrt(1.21)
    assert b.loc["a", "gap_to_bound_max"] == 0.21
    assert b.loc["a", "gap_to_best_geomean"] == pytest.approx(1.1 ** 0.5 - 1, rel=1e-12)
    assert b.loc["a", "planning_time_median_s"] == 2.0
    assert b.loc["a", "planning_time_max_s"] == 3.0
    assert b.loc["b", "rows"] == 2 and b.loc["b", "feasible"] == 1
    assert b.loc["b", "gap_to_bound_geomean"] == pytest.approx(0.44, rel=1e-12)
    assert b.loc["b", "gap_to_best_max"] == 0.2
    assert b.loc["b", "planning_time_median_s"] == 0.5
    assert geometric_mean_gap([0.0, 0.0]) == 0.0 and math.isnan(geometric_mean_gap([]))


# ----------------------------------------------------------------------------- references
@pytest.mark.slow
def test_references_are_certified_and_below_every_plan(refsuite: Path) -> None:
    """Every row: a bound from a certified source (the MILP proves 0.5 P optimal above
    T*), at most the best step, whose plan file simulates to it; and at most the step of
    every barrier-free plan the store kept, each simulated here again."""
    doc = json.loads((refsuite / "references.json").read_text())
    inst = load_instance(refsuite / TINY.name)
    rows = {r["budget_fraction"]: r for r in doc["rows"]}
    assert sorted(rows) == list(BUDGETS)
    assert rows[0.5]["bound_source"] == "certified"
    assert rows[0.5]["lower_bound_s"] > inst.ideal_time_s
    with ResultStore(refsuite / "store.sqlite") as st:
        plans = list(st.plans().values())
    assert len(plans) >= 5  # milp, slackswap at both budgets, checkpoint at 0.7
    for frac, r in rows.items():
        m = budget_bytes(inst, frac)
        assert r["budget_bytes"] == m and r["status"] == "optimal"
        assert r["bound_source"] in ("certified", "T* (trivial)")
        assert r["lower_bound_s"] <= r["best_step_s"]
        ev = simulate(inst, load_plan(refsuite / r["best_plan"], inst), m)
        assert ev.feasible and ev.step_time_s == r["best_step_s"]
        assert r["provenance"]["lower_bound"]["solver"] in ("milp", None)
        assert r["provenance"]["best_plan"]["code_id"]
        for text in plans:
            ev = simulate(inst, plan_from_dict(json.loads(text), inst), m)
            if ev.feasible:
                assert r["lower_bound_s"] <= ev.step_time_s * (1 + 1e-12)


def test_rerun_and_worse_candidates_never_make_a_row_worse(refsuite: Path,
                                                            tmp_path: Path) -> None:
    """The same command again runs nothing (the store) and changes nothing; candidates
    that are worse (checkpoint alone, and a milp row whose bound is lowered on purpose)
    leave every row as it was."""
    d = _copy(refsuite, tmp_path / "suite")
    before = (d / "references.json").read_text()
    with ResultStore(d / "store.sqlite") as st:
        n = len(st.keys())
    script = _script()
    assert script.main(["--suite", str(d), "--budgets", "0.5,0.7", "--time-limit", "30",
                        "--solvers", "milp,slackswap,checkpoint", "--quiet",
                        "--store", str(d / "store.sqlite")]) == 0
    with ResultStore(d / "store.sqlite") as st:
        assert len(st.keys()) == n
    assert script.main(["--suite", str(d), "--budgets", "0.5,0.7", "--quiet",
                        "--solvers", "checkpoint", "--store", str(d / "store.sqlite")]) == 0
    after = json.loads((d / "references.json").read_text())
    old = json.loads(before)
    strip = [{k: v for k, v in r.items() if k != "provenance"} for r in after["rows"]]
    assert strip == [{k: v for k, v in r.items() if k != "provenance"} for r in old["rows"]]
    # a weaker certified bound and a slower plan for the same rows
    from slackopt.compare.bench import load_manifest

    suite = load_manifest(d / "manifest.json")
    df = compare([d / TINY.name], ["milp"], list(BUDGETS), time_limit_s=30.0,
                 store=d / "store.sqlite", progress=False, plans=True)
    df["lower_bound_s"] = df["lower_bound_s"] * 0.9
    ck = compare([d / TINY.name], ["checkpoint"], [0.7], progress=False, plans=True)
    upd = update_references(suite, pd.concat([df, ck], ignore_index=True), BUDGETS,
                            d / "references.json")
    assert upd.changes == [] and upd.bugs == []
    again = json.loads((d / "references.json").read_text())
    assert [r["lower_bound_s"] for r in again["rows"]] == [r["lower_bound_s"]
                                                           for r in old["rows"]]
    assert [r["best_step_s"] for r in again["rows"]] == [r["best_step_s"] for r in old["rows"]]


def test_runs_start_from_the_references_best_plans(refsuite: Path, tmp_path: Path) -> None:
    """--start-from-references: each run gets its row's best plan (reference_plans reads
    them back to the recorded steps); a milp that, cold, only has its floor plans (every
    plan search off, 0.01 s) then returns the recorded best on every row, under store
    keys of their own."""
    from slackopt.compare.bench import load_manifest
    from slackopt.compare.benchrefs import reference_plans

    d = _copy(refsuite, tmp_path / "suite")
    refs = json.loads((d / "references.json").read_text())
    inst = load_instance(d / TINY.name)
    plans = reference_plans(load_manifest(d / "manifest.json"), d / "references.json")
    assert sorted(plans) == sorted((inst.name, r["budget_bytes"]) for r in refs["rows"])
    for r in refs["rows"]:
        ev = simulate(inst, plans[(inst.name, r["budget_bytes"])], r["budget_bytes"])
        assert ev.step_time_s == r["best_step_s"]
    cold = '[["milp", {"enum_plans": 0, "lns_plans": 0, "local_search": false, ' \
           '"warm_start": false}]]'
    args = ["--suite", str(d), "--budgets", "0.5,0.7", "--time-limit", "0.01", "--quiet",
            "--solvers", cold, "--store", str(d / "cold.sqlite")]
    assert _script().main(args) == 0
    assert _script().main([*args, "--start-from-references"]) == 0
    with ResultStore(d / "cold.sqlite") as st:
        rows = st.rows()
    assert len(rows) == 4
    best = {r["budget_bytes"]: r["best_step_s"] for r in refs["rows"]}
    steps = [(int(r["budget_bytes"]), r["step_time_s"]) for r in rows.to_dict("records")]
    assert sorted(t for m, t in steps if t == best[m]) == sorted(best.values())
    assert any(t > best[m] for m, t in steps)      # the cold runs: the floor plans only
    after = json.loads((d / "references.json").read_text())
    assert [r["best_step_s"] for r in after["rows"]] == [r["best_step_s"] for r in refs["rows"]]
    # a sweep over some of the budgets starts from those rows' plans only (compare refuses
    # a start plan outside its sweep: the script failed so with --budgets 0.5 alone)
    half = reference_plans(load_manifest(d / "manifest.json"), d / "references.json", [0.5])
    assert sorted(half) == [(inst.name, r["budget_bytes"]) for r in refs["rows"]
                            if r["budget_fraction"] == 0.5]
    args[args.index("0.5,0.7")] = "0.5"
    assert _script().main([*args, "--start-from-references"]) == 0
    # without a references file there is nothing to start from: refused, exit 2
    rc = _script().main(["--suite", str(d), "--budgets", "0.5", "--quiet", "--solvers",
                         "checkpoint", "--references", str(d / "missing.json"),
                         "--store", str(d / "x.sqlite"), "--start-from-references"])
    assert rc == 2 and not (d / "missing.json").exists()


@pytest.mark.slow
def test_only_rows_that_started_from_a_plan_say_so(refsuite: Path, tmp_path: Path) -> None:
    """update_references' `started`: the provenance note goes to those rows only."""
    from slackopt.compare.bench import load_manifest
    from slackopt.compare.benchrefs import STARTED_NOTE

    d = _copy(refsuite, tmp_path / "suite")
    inst = load_instance(d / TINY.name)
    refs = json.loads((d / "references.json").read_text())
    for r in refs["rows"]:      # make both rows improvable: a bound of T*, no plan
        r.update(lower_bound_s=inst.ideal_time_s, best_step_s=None, best_plan=None)
    (d / "references.json").write_text(json.dumps(refs))
    df = compare([d / TINY.name], ["milp"], list(BUDGETS), time_limit_s=30.0,
                 progress=False, plans=True)
    m5 = budget_bytes(inst, 0.5)
    update_references(load_manifest(d / "manifest.json"), df, BUDGETS, d / "references.json",
                      started={(inst.name, m5)})
    rows = json.loads((d / "references.json").read_text())["rows"]
    src = {r["budget_bytes"]: r["provenance"]["best_plan"]["source"] for r in rows}
    assert src == {m5: "run" + STARTED_NOTE, budget_bytes(inst, 0.7): "run"}


def test_a_certified_bound_above_a_plan_is_a_bug_not_recorded(refsuite: Path,
                                                                tmp_path: Path) -> None:
    """A milp row whose certified bound lies above its own re-simulated plan (made so on
    purpose) is reported as a bug and changes nothing."""
    from slackopt.compare.bench import load_manifest

    d = _copy(refsuite, tmp_path / "suite")
    before = (d / "references.json").read_text()
    df = compare([d / TINY.name], ["milp"], [0.5], time_limit_s=30.0,
                 store=d / "store.sqlite", progress=False, plans=True)
    df["lower_bound_s"] = df["step_time_s"] * 1.01
    upd = update_references(load_manifest(d / "manifest.json"), df, [0.5],
                            d / "references.json")
    assert len(upd.bugs) == 1 and "above a re-simulated plan" in upd.bugs[0]
    assert json.loads((d / "references.json").read_text())["rows"] == \
        json.loads(before)["rows"]


def test_load_references_reads_the_bench_format(refsuite: Path, tmp_path: Path) -> None:
    """Bench rows become entries matched by instance name and bytes; a malformed row is
    refused naming the row and the field."""
    path = refsuite / "references.json"
    ents = load_references(path)
    assert [e["instance"] for e in ents] == ["tiny-layers1_a100-pcie4"] * 2
    assert ents[0]["instance_file"] == TINY.name
    doc = json.loads(path.read_text())
    cases = [(0, "bound_source", "solver-reported", "rows[0].bound_source"),
             (1, "budget_bytes", None, "rows[1].budget_bytes"),
             (0, "lower_bound_s", 1.0, "rows[0].lower_bound_s"),  # above its best step
             (1, "best_step_s", -1.0, "rows[1].best_step_s"),
             (0, "below_floor", "no", "rows[0].below_floor"),
             (0, "status", "great", "rows[0].status"),
             (1, "best_plan", "../../etc/passwd", "rows[1].best_plan"),
             (1, "best_plan", "/tmp/plan.json", "rows[1].best_plan"),
             (1, "best_plan", "plans/missing.json", "rows[1].best_plan"),
             (0, "best_plan", None, "rows[0].best_plan"),   # beside a best_step_s
             (1, "lower_bound_s", "MISSING", "rows[1].lower_bound_s"),
             (0, "best_step_s", "MISSING", "rows[0].best_step_s"),
             (0, "below_floor", "MISSING", "rows[0].below_floor"),
             (1, "budget_bytes", "REPEAT", "rows[1]")]      # rows[0]'s instance and budget
    for k, key, value, field in cases:
        bad = json.loads(json.dumps(doc))
        if value == "MISSING":
            del bad["rows"][k][key]
        elif value == "REPEAT":
            bad["rows"][k][key] = bad["rows"][0][key]
        else:
            bad["rows"][k][key] = value
        f = refsuite / "bad.json"  # beside the plans its rows name
        f.write_text(json.dumps(bad))
        try:
            with pytest.raises(FileFormatError, match=re.escape(f"field '{field}'")):
                load_references(f)
        finally:
            f.unlink()


# ----------------------------------------------------------------------------- the command
def test_bench_command_end_to_end(refsuite: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """slackopt bench writes the table, the markdown leaderboard and the figure; on every
    row the reference bound is at most the simulated step; the leaderboard's numbers are
    those of the table."""
    d = _copy(refsuite, tmp_path / "suite")
    out = tmp_path / "res" / "b.csv"
    rc, text, err = run(capsys, "bench", "--solvers", "slackswap,checkpoint", "--suite", d,
                        "--out", out, "--store", tmp_path / "b.sqlite", "--time-limit", "60",
                        "--time-limit-for", "checkpoint=5")
    assert rc == 0, err
    df = read_results(out)
    assert len(df) == 4 and set(df["budget_fraction"]) == set(BUDGETS)  # the references'
    limits = dict(zip(df["solver"], df["time_limit_s"], strict=True))
    assert limits == {"slackswap": 60.0, "checkpoint": 5.0}
    refs = {r["budget_bytes"]: r for r in json.loads((d / "references.json").read_text())
            ["rows"]}
    ok = df[df["feasible"]]
    assert len(ok) >= 2
    for r in ok.itertuples():
        assert refs[r.budget_bytes]["lower_bound_s"] <= r.step_time_s
        assert r.best_bound_source in ("reference", "certified", "T* (trivial)")
    ss = ok[ok["solver"] == "slackswap"]
    md = (tmp_path / "res" / "b.leaderboard.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| slackswap"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["2", str(len(ss))]
    assert cells[3] == f"{geometric_mean_gap(ss['gap_to_bound']):.2%}"
    assert cells[4] == f"{ss['gap_to_bound'].max():.2%}"
    assert (tmp_path / "res" / "b.leaderboard.png").read_bytes()[:4] == b"\x89PNG"
    assert "slackswap" in text and "new best known" not in text


def test_bench_refuses_a_changed_file(refsuite: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    d = _copy(refsuite, tmp_path / "suite")
    with open(d / TINY.name, "a", encoding="utf-8") as f:
        f.write("\n")
    rc, out, err = run(capsys, "bench", "--solvers", "slackswap", "--suite", d / "manifest.json")
    assert_user_error(rc, out, err, TINY.name, "sha256", "regenerate the suite with "
                      "tests/test_bench.py")
    assert len(err.splitlines()) == 1


def test_bench_suite_not_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    import slackopt.compare.bench as bench

    monkeypatch.setattr(bench, "BENCH_MANIFEST", tmp_path / "nowhere" / "manifest.json")
    rc, out, err = run(capsys, "bench", "--solvers", "slackswap", "--suite", "bench")
    assert_user_error(rc, out, err, "pass --suite path/to/manifest.json")


def _record_all_swap(d: Path, row: dict[str, Any]) -> float:
    """Write the every-tensor-swapped plan over `row`'s best plan file; its step (s),
    slower than the row's best."""
    from slackopt.compare.benchrefs import write_plan
    from slackopt.plan import SWAP, Plan

    inst = load_instance(d / TINY.name)
    plan = Plan(np.full(inst.n_saved, SWAP, dtype=np.int8), inst.saved_names)
    ev = simulate(inst, plan, row["budget_bytes"])
    assert ev.feasible and ev.step_time_s > row["best_step_s"] * 1.01
    write_plan(plan, inst, row["budget_bytes"], ev.step_time_s, d / row["best_plan"], {})
    return float(ev.step_time_s)


def test_a_recorded_best_that_its_plan_file_contradicts_is_a_bug(
        refsuite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A row whose best_step_s was raised by hand (its plan file runs faster): a plan
    between the two is not recorded over that file; the row is reported, left as is."""
    d = _copy(refsuite, tmp_path / "suite")
    path = d / "references.json"
    doc = json.loads(path.read_text())
    r07 = next(r for r in doc["rows"] if r["budget_fraction"] == 0.7)
    plan_before = (d / r07["best_plan"]).read_bytes()
    r07["best_step_s"] *= 1.5
    path.write_text(json.dumps(doc))
    store = tmp_path / "b.sqlite"
    rc, out, err = run(capsys, "bench", "--solvers", "slackswap", "--suite", d,
                       "--store", store, "--json")
    assert rc == 0 and len(json.loads(out)["new_bests"]) == 1, err
    assert _script().main(["--suite", str(d), "--budgets", "0.7", "--from-store", str(store),
                           "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "runs in" in err and "not in its best_step_s" in err, err
    assert (d / r07["best_plan"]).read_bytes() == plan_before
    assert json.loads(path.read_text())["rows"] == doc["rows"]


def test_a_new_best_is_announced_and_its_command_records_it(
        refsuite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the reference best plan at 0.7 P replaced by a slower one on purpose (every
    tensor swapped, its file and step), slackswap's plan is a new best known; the command
    printed records it from the store (re-simulated)."""
    d = _copy(refsuite, tmp_path / "suite")
    path = d / "references.json"
    doc = json.loads(path.read_text())
    r07 = next(r for r in doc["rows"] if r["budget_fraction"] == 0.7)
    r07["best_step_s"] = _record_all_swap(d, r07)
    path.write_text(json.dumps(doc))
    store = tmp_path / "b.sqlite"
    rc, out, err = run(capsys, "bench", "--solvers", "slackswap", "--suite", d,
                       "--store", store, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert len(res["new_bests"]) == 1
    nb = res["new_bests"][0]
    assert nb["budget_fraction"] == 0.7 and nb["step_time_s"] < r07["best_step_s"]
    cmd = nb["command"].split()
    assert cmd[:2] == ["python", "benchmarks/bench_references.py"]
    assert cmd[cmd.index("--from-store") + 1] == str(store)
    assert _script().main(cmd[2:] + ["--quiet"]) == 0
    row = next(r for r in json.loads(path.read_text())["rows"] if r["budget_fraction"] == 0.7)
    assert row["best_step_s"] == nb["step_time_s"]
    assert row["provenance"]["best_plan"]["solver"] == "slackswap"
    assert row["provenance"]["best_plan"]["source"] == f"store {store.name}"


def test_a_reference_bound_above_a_plan_is_reported(
        refsuite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reference bound raised above slackswap's step (and its best step with it, so
    the file itself is consistent) is a bug: reported on stderr and in the JSON, exit 1,
    and the gap is negative, not clamped."""
    d = _copy(refsuite, tmp_path / "suite")
    path = d / "references.json"
    doc = json.loads(path.read_text())
    for r in doc["rows"]:
        r["lower_bound_s"] = r["best_step_s"] = r["best_step_s"] * 2
    path.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "bench", "--solvers", "slackswap", "--suite", d, "--json")
    assert rc == 1
    res = json.loads(out)
    assert res["violations"] and all(v["bound_source"] == "reference"
                                     for v in res["violations"])
    assert "BUG:" in err and "is above slackswap's simulated step" in err
    assert all(row["gap_to_bound_max"] < 0 for row in res["leaderboard"])


def test_the_store_keeps_the_plans(tmp_path: Path) -> None:
    """compare's store keeps each run's plan; read back (a rerun) they are the same and
    simulate to the row's step."""
    store = tmp_path / "s.sqlite"
    a = compare([TINY], ["slackswap", "checkpoint"], [0.7], store=store, progress=False,
                plans=True)
    b = compare([TINY], ["slackswap", "checkpoint"], [0.7], store=store, progress=False,
                plans=True)
    assert b.attrs["runs_now"] == 0 and list(a["plan"]) == list(b["plan"])
    inst = load_instance(TINY)
    for r in b.itertuples():
        ev = simulate(inst, plan_from_dict(json.loads(r.plan), inst), int(r.budget_bytes))
        assert ev.feasible and ev.step_time_s == r.step_time_s


def test_rounding_alone_changes_no_row(refsuite: Path, tmp_path: Path) -> None:
    """A row's best step raised and its bound lowered by 1e-12 (relative) on purpose: the
    same plans and bounds again differ from them by float rounding only (below
    VIOLATION_RTOL) and change nothing. A bound lowered by 1e-6 and a slower recorded plan
    (every tensor swapped, its file and step) are replaced."""
    from slackopt.compare.bench import load_manifest

    d = _copy(refsuite, tmp_path / "suite")
    path = d / "references.json"
    doc = json.loads(path.read_text())
    r05 = next(r for r in doc["rows"] if r["budget_fraction"] == 0.5)
    best, lb = r05["best_step_s"], r05["lower_bound_s"]
    df = compare([d / TINY.name], ["milp"], [0.5], time_limit_s=30.0,
                 store=d / "store.sqlite", progress=False, plans=True)
    assert df["step_time_s"].iloc[0] == best and df["lower_bound_s"].iloc[0] == lb
    suite = load_manifest(d / "manifest.json")

    def row() -> dict[str, Any]:
        return next(r for r in json.loads(path.read_text())["rows"]
                    if r["budget_fraction"] == 0.5)

    r05.update(best_step_s=best * (1 + 1e-12), lower_bound_s=lb * (1 - 1e-12))
    path.write_text(json.dumps(doc))
    upd = update_references(suite, df, [0.5], path)
    assert upd.bugs == [] and upd.changes == []
    assert (row()["best_step_s"], row()["lower_bound_s"]) == (best * (1 + 1e-12),
                                                              lb * (1 - 1e-12))
    r05.update(best_step_s=_record_all_swap(d, {**r05, "best_step_s": best}),
               lower_bound_s=lb * (1 - 1e-6))
    path.write_text(json.dumps(doc))
    upd = update_references(suite, df, [0.5], path)
    assert upd.bugs == [] and len(upd.changes) == 2, upd.changes
    assert (row()["best_step_s"], row()["lower_bound_s"]) == (best, lb)


def test_bench_checks_out_before_it_runs(refsuite: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--out that names a file the bench reads (even with --force), or whose folder is a
    file, is refused before any run: the store stays empty and the suite unchanged."""
    d = _copy(refsuite, tmp_path / "suite")
    before = {f.name: f.read_bytes() for f in d.rglob("*") if f.is_file()}
    (tmp_path / "notes.txt").write_text("mine")
    store = tmp_path / "b.sqlite"
    plan = d / json.loads((d / "references.json").read_text())["rows"][0]["best_plan"]
    for out_path, words in ((d / "references.json", ("a file this bench reads",)),
                            (plan, ("a file this bench reads",)),
                            (d / "manifest.json", ("a file this bench reads",)),
                            (d / TINY.name, ("a file this bench reads",)),
                            (tmp_path / "notes.txt" / "r.csv", ("notes.txt is a file",))):
        rc, out, err = run(capsys, "bench", "--solvers", "slackswap", "--suite", d,
                           "--store", store, "--out", out_path, "--force")
        assert_user_error(rc, out, err, str(out_path), *words)
    assert not store.exists()
    assert {f.name: f.read_bytes() for f in d.rglob("*") if f.is_file()} == before
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("args, words", [
    (["--budgets", "abc"], ["--budgets 'abc'", "fractions of P"]),
    (["--solvers", '["milp",'], ["--solvers", "JSON"]),
    (["--solvers", '[["milp"]]'], ["--solvers", "[name, {params}]"]),
], ids=["budgets", "json", "entry"])
def test_bench_references_bad_arguments_exit_2(refsuite: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               args: list[str], words: list[str]) -> None:
    d = _copy(refsuite, tmp_path / "suite")
    before = (d / "references.json").read_bytes()
    rc = _script().main(["--suite", str(d), "--quiet", "--store",
                         str(tmp_path / "s.sqlite"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.startswith("bench_references: error: ") and all(w in err for w in words), err
    assert (d / "references.json").read_bytes() == before
