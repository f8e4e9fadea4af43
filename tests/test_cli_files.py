"""The files of the `slackopt` command (docs/cli.md, "Files and exit status"): no command
writes over a file it reads, with or without --force (symbolic and hard links included);
an infeasible budget is an answer for every solver (exit 0, no plan file); plot --plan
draws under the budget the plan file records and names the solver."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slackopt.io.outputs import same_file
from tests import test_cli
from tests.helpers import assert_user_error, run
from tests.test_io import small_instance

ROOT = Path(__file__).resolve().parents[1]
files = test_cli.files
"""The fixture of tests/test_cli.py: inst.json (small_instance), keep.json, their dir."""


def _unchanged(*paths: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in paths}


def assert_refused(rc: int, out: str, err: str, output: Path, read: Path, role: str) -> None:
    """Exit 2, one message naming the output, the file read (its path) and its role."""
    assert_user_error(rc, out, err, str(output), str(read), role, "reads")


# ----------------------------------------------------------------------------- same_file
def test_same_file_sees_through_links_and_dots(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text("{}")
    (tmp_path / "sub").mkdir()
    sym, hard = tmp_path / "sym.json", tmp_path / "hard.json"
    sym.symlink_to(a)
    os.link(a, hard)
    assert same_file(a, sym) and same_file(hard, a) and same_file(tmp_path / "sub/../a.json", a)
    assert not same_file(a, tmp_path / "b.json")       # b does not exist
    assert same_file(tmp_path / "new.json", tmp_path / "sub/../new.json")  # neither exists
    b = tmp_path / "b.json"
    b.write_text("{}")
    assert not same_file(a, b)                         # same bytes, another file


# ----------------------------------------------------------------------------- solve
def test_solve_never_writes_over_what_it_reads(capsys: pytest.CaptureFixture[str],
                                               files: dict[str, Path]) -> None:
    """-o naming the instance (as given, through a symbolic link, through a hard link)
    or the --start-plan file is refused, --force or not; both files are named."""
    inst, keep, d = files["inst"], files["keep"], files["dir"]
    before = _unchanged(inst, keep)
    sym, hard = d / "sym.json", d / "hard.json"
    sym.symlink_to(inst)
    os.link(inst, hard)
    for out_path in (inst, sym, hard, d / "." / "inst.json"):
        for force in ((), ("--force",)):
            rc, out, err = run(capsys, "solve", inst, "-s", "keep-all", "-b", "1.0", "-o",
                               out_path, *force)
            assert_refused(rc, out, err, out_path, inst, "the instance file")
    rc, out, err = run(capsys, "solve", inst, "-s", "keep-all", "-b", "1.0", "--start-plan",
                       keep, "-o", keep, "--force", "--json")
    assert_refused(rc, out, err, keep, keep, "the --start-plan file")
    assert _unchanged(inst, keep) == before
    rc, out, err = run(capsys, "solve", inst, "-s", "keep-all", "-b", "1.0", "-o",
                       d / "plan.json")
    assert rc == 0 and (d / "plan.json").is_file(), err


# ----------------------------------------------------------------------------- compare
def test_compare_out_never_writes_over_an_instance_or_the_references(
        capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    inst, d = files["inst"], files["dir"]
    refs = d / "refs.json"
    refs.write_text(json.dumps({"format": "slackopt-references", "schema_version": 1,
                                "entries": []}))
    before = _unchanged(inst, refs)
    for out_path, read, role in ((inst, inst, "an instance file"),
                                 (refs, refs, "the references file")):
        rc, out, err = run(capsys, "compare", inst, "--solvers", "keep-all", "--budgets", "1.0",
                           "--references", refs, "--out", out_path, "--force")
        assert_refused(rc, out, err, out_path, read, role)
    assert _unchanged(inst, refs) == before


# ----------------------------------------------------------------------------- bench
def test_bench_out_through_a_link_is_refused(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    """bench --out (and the leaderboard files beside it) through a symbolic link to an
    instance of the suite: refused before any run, with the shared check's words."""
    from tests.test_bench import make_suite

    d = make_suite(tmp_path / "suite")
    inst = next(p for p in d.iterdir() if p.name != "manifest.json")
    before = _unchanged(inst, d / "manifest.json")
    link = tmp_path / "r.csv"
    link.symlink_to(inst)
    rc, out, err = run(capsys, "bench", "--solvers", "keep-all", "--suite", d, "--out", link,
                       "--force")
    assert_refused(rc, out, err, link, inst, "an instance of the suite")
    assert "this bench reads" in err
    md = tmp_path / "s.leaderboard.md"
    md.symlink_to(d / "manifest.json")
    rc, out, err = run(capsys, "bench", "--solvers", "keep-all", "--suite", d, "--out",
                       tmp_path / "s.csv", "--force")
    assert_refused(rc, out, err, md, d / "manifest.json", "the suite's manifest")
    assert _unchanged(inst, d / "manifest.json") == before
    assert not (tmp_path / "s.csv").exists()


# ----------------------------------------------------------------------------- plot
def test_plot_never_writes_over_what_it_reads(capsys: pytest.CaptureFixture[str],
                                              files: dict[str, Path]) -> None:
    """An instance file may be named x.png (files are recognised by content): plot
    timeline/memory/planmap/costs refuse -o naming it; --plan and the results table
    likewise (the table through a link named like a figure)."""
    inst, keep, d = files["inst"], files["keep"], files["dir"]
    png = d / "inst.png"
    png.write_bytes(inst.read_bytes())
    plan_png = d / "keep.svg"
    plan_png.write_bytes(keep.read_bytes())
    before = _unchanged(png, plan_png)
    for kind in ("timeline", "memory", "planmap", "costs"):
        rc, out, err = run(capsys, "plot", kind, png, "-o", png, "--force")
        assert_refused(rc, out, err, png, png, "the instance file")
    rc, out, err = run(capsys, "plot", "memory", png, "--plan", plan_png, "-o", plan_png,
                       "--force")
    assert_refused(rc, out, err, plan_png, plan_png, "the --plan file")
    rc, out, err = run(capsys, "compare", inst, "--solvers", "keep-all", "--budgets", "1.0",
                       "--out", d / "r.csv")
    assert rc == 0, err
    link = d / "fig.png"
    link.symlink_to(d / "r.csv")
    for kind in ("curves", "quality"):
        rc, out, err = run(capsys, "plot", kind, d / "r.csv", "-o", link, "--force")
        assert_refused(rc, out, err, link, d / "r.csv", "the results file")
    assert _unchanged(png, plan_png) == before


# ----------------------------------------------------------------------------- profile
@pytest.mark.torch
def test_profile_never_writes_over_its_config_or_factory(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path) -> None:
    """profile -o naming the Hugging Face config it reads (the file, or the config.json of
    the folder given), or the .py file of the factory: refused with --force."""
    pytest.importorskip("torch")
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    cfg = cfg_dir / "config.json"
    cfg.write_text((ROOT / "instances" / "configs" / "gpt2-xl" / "config.json").read_text())
    factory = tmp_path / "model.py"
    factory.write_text("def make():\n    raise AssertionError('never called')\n")
    before = _unchanged(cfg, factory)
    for target, out_path, read, role in (
            (f"hf:{cfg}", cfg, cfg, "the Hugging Face config"),
            (f"hf:{cfg_dir}", cfg, cfg, "the Hugging Face config"),
            (f"{factory}:make", factory, factory, "the factory's module file")):
        rc, out, err = run(capsys, "profile", target, "-i", "1x8", "--fake", "--gpu", "h100",
                           "-o", out_path, "--force")
        assert_refused(rc, out, err, out_path, read, role)
    assert _unchanged(cfg, factory) == before


# ----------------------------------------------------------------------------- infeasible
@pytest.mark.parametrize("solver, params", [
    ("keep-all", []), ("checkpoint", []), ("slackswap", []), ("vdnn", []),
    ("milp", ["--time-limit", "20"]),
    ("genetic", ["-p", "generations=2", "-p", "population=6", "--seed", "0"]),
])
def test_an_infeasible_budget_is_an_answer_for_every_solver(
        capsys: pytest.CaptureFixture[str], files: dict[str, Path], solver: str,
        params: list[str]) -> None:
    """0.5 P of the small instance (no plan runs below 5,400 B of its 6,400): every
    solver exits 0 with status infeasible and a smallest budget, writes no plan file
    (milp returns none; the others return a plan over M) and leaves an existing one as it
    was, with a note on stderr, never an error line."""
    inst, d = files["inst"], files["dir"]
    out_plan = d / "plan.json"
    rc, out, err = run(capsys, "solve", inst, "-s", solver, "-b", "0.5", *params, "-o",
                       out_plan, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and doc["plan_file"] is None
    assert doc["min_budget_bytes"] >= 5_400
    assert not out_plan.exists()
    assert "error" not in err
    assert f"slackopt: note: {out_plan} not written" in err and "status infeasible" in err
    out_plan.write_text("mine")
    rc, out, err = run(capsys, "solve", inst, "-s", solver, "-b", "0.5", *params, "-o",
                       out_plan, "--force")
    assert rc == 0 and out_plan.read_text() == "mine", err
    assert "smallest budget" in out or "the best plan found runs at" in out \
        or "this solver returns a plan that runs at" in out


def test_a_feasible_plan_is_written_with_its_provenance(capsys: pytest.CaptureFixture[str],
                                                         files: dict[str, Path]) -> None:
    out_plan = files["dir"] / "plan.json"
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "milp", "-b", "90%", "-o",
                       out_plan, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["status"] == "optimal" and doc["plan_file"] == str(out_plan)
    meta = json.loads(out_plan.read_text())["meta"]
    assert meta["solver"] == "milp" and meta["budget_bytes"] == 5_760
    assert meta["status"] == "optimal" and meta["feasible"] is True


# ----------------------------------------------------------------------------- plot --plan
def test_plot_plan_uses_its_budget_and_names_its_solver(
        capsys: pytest.CaptureFixture[str], files: dict[str, Path],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """plot --plan draws under the budget the plan file records (milp's plan at 0.9 P:
    5,760 B), as simulate does, unless --budget says otherwise; a file without one is
    drawn at P; each title names the solver and the file."""
    from slackopt import plot

    figs: list = []
    real_save = plot.save
    monkeypatch.setattr(plot, "save", lambda fig, path, **kw: figs.append(fig)
                        or real_save(fig, path, **kw))
    inst, d = files["inst"], files["dir"]
    plan = d / "milp.json"
    assert run(capsys, "solve", inst, "-s", "milp", "-b", "90%", "-o", plan)[0] == 0
    rc, out, err = run(capsys, "simulate", inst, plan, "--json")
    sim = json.loads(out)
    for kind in ("timeline", "memory", "planmap"):
        rc, out, err = run(capsys, "plot", kind, inst, "--plan", plan, "-o",
                           d / f"{kind}.png", "--json")
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["budget_bytes"] == sim["budget_bytes"] == 5_760
        assert "recorded in the plan file" in err
        (r,) = doc["runs"]
        assert r["solver"] == "milp" and r["status"] == "optimal"
        assert r["label"] == "milp (milp.json)"
        assert r["evaluation"]["step_time_s"] == sim["evaluation"]["step_time_s"]
    timeline, memory, planmap = figs
    assert timeline.axes[0].get_title(loc="left").startswith("milp (milp.json): step ")
    assert "plan of milp (milp.json): step " in memory.axes[0].get_title()
    assert "Plan map of small, plan of milp (milp.json) under M = 5.76 kB (90% of P)" in \
        planmap.axes[0].get_title().replace("\n", " ")
    rc, out, err = run(capsys, "plot", "memory", inst, "--plan", plan, "--budget", "1.0",
                       "-o", d / "m1.png", "--json")
    assert rc == 0 and json.loads(out)["budget_bytes"] == small_instance().P
    rc, out, err = run(capsys, "plot", "memory", inst, "--plan", files["keep"], "-o",
                       d / "m2.png", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["budget_bytes"] == small_instance().P
    assert doc["runs"][0]["label"] == "keep.json" and doc["runs"][0]["solver"] is None
    assert "records no budget" in err


def test_plot_solved_runs_name_their_solver(capsys: pytest.CaptureFixture[str],
                                            files: dict[str, Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """One solver: its panel, memory title and plan-map title name it (default budget
    0.5 P without --plan)."""
    from slackopt import plot

    figs: list = []
    monkeypatch.setattr(plot, "save", lambda fig, path, **kw: figs.append(fig) or Path(path))
    for kind in ("timeline", "memory", "planmap"):
        rc, out, err = run(capsys, "plot", kind, files["inst"], "-s", "checkpoint", "-o",
                           files["dir"] / f"{kind}.png", "--json")
        assert rc == 0, err
        assert json.loads(out)["budget_bytes"] == small_instance().P // 2
    assert figs[0].axes[0].get_title(loc="left").startswith("checkpoint: infeasible")
    assert "plan of checkpoint: infeasible" in figs[1].axes[0].get_title()
    assert "plan of checkpoint under M" in figs[2].axes[0].get_title().replace("\n", " ")


def test_plot_of_a_solver_without_a_plan_says_the_smallest_budget(
        capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    """milp returns no plan at 0.5 P of the small instance: nothing to draw (exit 2), and
    the message gives the smallest budget as solve does; slackswap's plan over M is
    drawn (the figure shows where it runs out)."""
    rc, out, err = run(capsys, "plot", "memory", files["inst"], "-s", "milp", "-b", "0.5",
                       "-o", files["dir"] / "m.png")
    assert_user_error(rc, out, err, "solver 'milp' returned no plan (status infeasible)",
                      "nothing to draw", "5.4 kB (0.844 of P)")
    assert not (files["dir"] / "m.png").exists()
    rc, out, err = run(capsys, "plot", "memory", files["inst"], "-s", "slackswap", "-b", "0.5",
                       "-o", files["dir"] / "m.png", "--json")
    assert rc == 0 and json.loads(out)["runs"][0]["evaluation"]["feasible"] is False, err
