"""The `slackopt` command: outputs, --json, exit codes and error messages (slackopt.cli)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import slackopt.solver as solver_mod
from slackopt import io
from slackopt.plan import KEEP, RECOMP, Plan
from slackopt.solver import SolveResult
from tests.helpers import assert_user_error, run
from tests.test_io import small_instance


def run_sub(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the command as a process, the way a shell would."""
    return subprocess.run([sys.executable, "-m", "slackopt.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    inst = small_instance()
    i = io.save_instance(inst, tmp_path / "inst.json")
    keep = io.save_plan(Plan.keep_all(inst), tmp_path / "keep.json", inst)
    return {"inst": i, "keep": keep, "dir": tmp_path}


# ----------------------------------------------------------------------------- test solvers
class KeepAllTest:
    """Keeps everything (test solver)."""

    name = "keepall_test"

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None) -> SolveResult:
        ok = budget_bytes >= instance.P
        return SolveResult(Plan.keep_all(instance), self.name, status="feasible" if ok
                           else "infeasible", seed=seed,
                           info={} if ok else {"min_budget_bytes": instance.P})


class NoisyRecompute:
    """Recomputes what it can and prints chatter to stdout (test solver)."""

    name = "noisy_test"

    def __init__(self, level: int = 0) -> None:
        self.level = level

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None) -> SolveResult:
        print("solver chatter on stdout")
        os.write(1, b"C-level chatter on fd 1\n")
        return SolveResult(Plan.uniform(instance, RECOMP), self.name,
                           params={"level": self.level}, info={"level": self.level})


class Broken:
    """Raises an internal error (test solver)."""

    name = "broken_test"

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None) -> SolveResult:
        raise RuntimeError("boom")


class _EP:
    def __init__(self, name: str, obj: Any) -> None:
        self.name, self.value, self._obj = name, f"test_cli:{obj.__name__}", obj

    def load(self) -> Any:
        return self._obj


@pytest.fixture
def test_solvers(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = {"keepall_test": _EP("keepall_test", KeepAllTest),
           "noisy_test": _EP("noisy_test", NoisyRecompute),
           "broken_test": _EP("broken_test", Broken)}
    monkeypatch.setattr(solver_mod, "registered_solvers", lambda: eps)


# ----------------------------------------------------------------------------- basics
def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--help")
    assert rc == 0
    for cmd in ("make", "describe", "solve", "simulate", "solvers"):
        assert cmd in out
    rc, out, _ = run(capsys, "--version")
    assert rc == 0 and out.startswith("slackopt ")


def test_no_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys)
    assert rc == 2 and "Usage" in err and "Traceback" not in out + err


def test_unknown_command_and_missing_option(capsys: pytest.CaptureFixture[str],
                                            files: dict[str, Path]) -> None:
    assert_user_error(*run(capsys, "frobnicate"), "No such command")
    assert_user_error(*run(capsys, "solve", files["inst"], "--solver", "x"), "--budget")
    assert_user_error(*run(capsys, "make", "gpt2-xl", "--seq", "-3", "-o", "x.json"), "--seq")


# ----------------------------------------------------------------------------- solvers
def test_solvers_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "solvers", "--json")
    assert rc == 0
    rows = json.loads(out)["solvers"]
    assert {"slackswap", "keep-all", "checkpoint"} <= {r["name"] for r in rows}
    for r in rows:
        assert set(r) == {"name", "target", "summary", "error"}
        assert (r["summary"] is None) != (r["error"] is None)


def test_solvers_human(capsys: pytest.CaptureFixture[str], test_solvers: None) -> None:
    rc, out, _ = run(capsys, "solvers")
    assert rc == 0 and "keepall_test" in out and "Keeps everything" in out


# ----------------------------------------------------------------------------- simulate
def test_simulate_keep_all_json(capsys: pytest.CaptureFixture[str],
                                files: dict[str, Path]) -> None:
    rc, out, err = run(capsys, "simulate", files["inst"], files["keep"], "--json")
    assert rc == 0, err
    doc = json.loads(out)
    inst = small_instance()
    assert doc["budget_bytes"] == inst.P and doc["budget_fraction"] == 1.0
    assert doc["decisions"] == {"keep": 3, "swap": 0, "recomp": 0}
    ev = doc["evaluation"]
    assert ev["feasible"] is True
    assert ev["step_time_s"] == pytest.approx(inst.ideal_time_s)
    assert ev["peak_bytes"] == inst.P


def test_simulate_budget_in_bytes_and_human(capsys: pytest.CaptureFixture[str],
                                            files: dict[str, Path]) -> None:
    rc, out, err = run(capsys, "simulate", files["inst"], files["keep"], "--budget", "1MB")
    assert rc == 0, err
    assert "Evaluation" in out and "keep" in out and "1 MB" in out


def test_simulate_bad_inputs(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    inst, keep = files["inst"], files["keep"]
    assert_user_error(*run(capsys, "simulate", inst, files["dir"] / "nope.json", "--json"),
                      "nope.json", "file not found")
    assert_user_error(*run(capsys, "simulate", inst, inst), "field 'format'", "instance file")
    assert_user_error(*run(capsys, "simulate", inst, keep, "--budget", "lots"), "budget 'lots'")
    assert_user_error(*run(capsys, "simulate", inst, keep, "--budget", "-1"), "budget")
    d = json.loads(keep.read_text())
    del d["decisions"]["x1"]
    bad = files["dir"] / "missing.json"
    bad.write_text(json.dumps(d))
    assert_user_error(*run(capsys, "simulate", inst, bad, "--json"), "'x1'", "decisions")


def test_bad_instance_file_reports_field(capsys: pytest.CaptureFixture[str],
                                         files: dict[str, Path]) -> None:
    d = json.loads(files["inst"].read_text())
    d["tensors"][1]["size_bytes"] = -1
    bad = files["dir"] / "bad.json"
    bad.write_text(json.dumps(d))
    for cmd in (["simulate", bad, files["keep"]], ["describe", bad],
                ["solve", bad, "-s", "slackswap", "-b", "0.5"]):
        assert_user_error(*run(capsys, *cmd, "--json"), str(bad), "tensors[1].size_bytes",
                          "Fix:")
    bad.write_text('{"format": "slackopt-instance", "schema_version": NaN}')
    assert_user_error(*run(capsys, "describe", bad), "schema_version")


def test_human_output_keeps_brackets(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    inst = small_instance("net[bold]x[/bold]")
    i = io.save_instance(inst, tmp_path / "i.json")
    p = io.save_plan(Plan.keep_all(inst), tmp_path / "p.json", inst)
    rc, out, err = run(capsys, "simulate", i, p)
    assert rc == 0, err
    assert "net[bold]x[/bold]" in out


# ----------------------------------------------------------------------------- solve
def test_solve_json_and_plan_file(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                  test_solvers: None) -> None:
    out_plan = files["dir"] / "out" / "plan.json"
    rc, out, err = run(capsys, "solve", files["inst"], "--solver", "keepall_test",
                       "--budget", "1.0", "--seed", "3", "-o", out_plan, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["status"] == "feasible" and doc["seed"] == 3
    assert doc["decisions"] == {"keep": 3, "swap": 0, "recomp": 0}
    assert doc["bytes_by_decision"]["keep"] == small_instance().A
    assert doc["evaluation"]["feasible"] is True
    assert doc["planning_time_s"] >= 0
    assert doc["plan_file"] == str(out_plan)
    meta = json.loads(out_plan.read_text())["meta"]
    assert meta["solver"] == "keepall_test" and meta["budget_bytes"] == small_instance().P
    # the plan file it wrote is a valid input of simulate
    rc, out, err = run(capsys, "simulate", files["inst"], out_plan, "--json")
    assert rc == 0 and json.loads(out)["evaluation"]["feasible"] is True
    # no overwrite without --force, and the file is untouched
    before = out_plan.read_text()
    assert_user_error(*run(capsys, "solve", files["inst"], "-s", "keepall_test", "-b", "1.0",
                           "-o", out_plan), "--force")
    assert out_plan.read_text() == before
    rc, _, err = run(capsys, "solve", files["inst"], "-s", "keepall_test", "-b", "1.0",
                     "-o", out_plan, "--force")
    assert rc == 0, err


def test_solve_infeasible_is_an_answer(capsys: pytest.CaptureFixture[str],
                                       files: dict[str, Path], test_solvers: None) -> None:
    inst = small_instance()
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "keepall_test", "-b", "0.5")
    assert rc == 0, err
    assert "infeasible" in out
    assert "smallest budget this solver reaches" in out and "1.000 of P" in out
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "keepall_test", "-b", "0.5",
                       "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["status"] == "infeasible"
    assert doc["min_budget_bytes"] == inst.P and doc["min_budget_fraction"] == 1.0
    assert doc["evaluation"]["feasible"] is False and doc["evaluation"]["failure"]


def test_solve_json_stdout_is_one_document(capsys: pytest.CaptureFixture[str],
                                           files: dict[str, Path], test_solvers: None) -> None:
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "noisy_test", "-b", "1.0",
                       "-p", "level=3", "--json")
    assert rc == 0, err
    doc = json.loads(out)  # fails if the chatter reached stdout
    assert doc["params"] == {"level": 3} and doc["info"] == {"level": 3}
    assert doc["decisions"]["recomp"] == 2
    assert "solver chatter" in err


def test_solve_user_errors(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                           test_solvers: None) -> None:
    inst = files["inst"]
    assert_user_error(*run(capsys, "solve", inst, "-s", "nosuch", "-b", "0.5", "--json"),
                      "unknown solver 'nosuch'", "keepall_test")
    assert_user_error(*run(capsys, "solve", inst, "-s", "noisy_test", "-b", "0.5",
                           "-p", "colour=red"), "bad parameters")
    assert_user_error(*run(capsys, "solve", inst, "-s", "noisy_test", "-b", "0.5",
                           "-p", "nonsense"), "KEY=VALUE")
    assert_user_error(*run(capsys, "solve", inst, "-s", "keepall_test", "-b", "x"), "budget")


def test_internal_error_exit_1_without_traceback(capsys: pytest.CaptureFixture[str],
                                                 files: dict[str, Path], test_solvers: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLACKOPT_DEBUG", raising=False)
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "broken_test", "-b", "0.5",
                       "--json")
    assert rc == 1 and out == ""
    assert "internal error" in err and "boom" in err and "Traceback" not in err
    monkeypatch.setenv("SLACKOPT_DEBUG", "1")
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "broken_test", "-b", "0.5")
    assert rc == 1 and "Traceback" in err and "boom" in err


# ----------------------------------------------------------------------------- make / describe
# These use the workload generators (slackopt.workloads.make) and the link-budget report
# (slackopt.linkbudget.report).
MAKE_SMALL = ["--layers", "2", "--seq", "64", "--batch", "1"]


def test_make_and_describe(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "gpt.json"
    rc, out, err = run(capsys, "make", "gpt2-xl", *MAKE_SMALL, "-o", path, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["path"] == str(path) and doc["saved_tensors"] > 0
    inst = io.load_instance(path)
    assert inst.P == doc["peak_bytes"] and inst.meta
    rc, out, err = run(capsys, "describe", path, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["saved_bytes"] == inst.A and d["peak_bytes"] == inst.P
    assert d["forward_time_s"] == inst.forward_time_s and d["ideal_time_s"] == inst.ideal_time_s
    for key in ("intensity", "hideable_fraction", "forward_link_budget_bytes"):
        assert key in d["link_budget"]
    cats = d["saved_by_category"]
    assert sum(c["count"] for c in cats.values()) == inst.n_saved
    assert sum(c["bytes"] for c in cats.values()) == inst.A
    rc, out, err = run(capsys, "describe", path)
    assert rc == 0, err
    assert "keep-all peak P" in out and "Saved tensors by category" in out
    # make refuses to overwrite without --force
    assert_user_error(*run(capsys, "make", "gpt2-xl", *MAKE_SMALL, "-o", path), "--force")
    rc, _, err = run(capsys, "make", "gpt2-xl", *MAKE_SMALL, "-o", path, "--force")
    assert rc == 0, err


def test_describe_shows_both_link_directions_and_refuses_a_bad_link(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """describe shows W_d2h and W_h2d (and the link budget from W_d2h); a file whose link
    gives bytes_per_s and a direction that disagree is a user error naming the field."""
    from slackopt import Instance, Link
    from slackopt.linkbudget import forward_link_budget_bytes

    src = small_instance()
    inst = Instance("asym", src.ops, src.tensors,
                    Link("c2c", d2h_bytes_per_s=170e9, h2d_bytes_per_s=420e9))
    path = io.save_instance(inst, tmp_path / "a.json")
    rc, out, err = run(capsys, "describe", path, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["link_d2h_bytes_per_s"] == 170e9 and d["link_h2d_bytes_per_s"] == 420e9
    assert d["link_budget"]["forward_link_budget_bytes"] == forward_link_budget_bytes(inst)
    assert d["link_budget"]["link_bytes_per_s"] == 170e9
    rc, out, err = run(capsys, "describe", path)
    assert rc == 0, err
    assert "W_d2h" in out and "W_h2d" in out and "170 GB/s" in out and "420 GB/s" in out
    doc = json.loads(path.read_text())
    doc["link"]["bytes_per_s"] = 170e9
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    assert_user_error(*run(capsys, "describe", bad), "bad.json", "link.h2d_bytes_per_s",
                      "disagrees")


def test_make_on_gh200_with_grace_as_the_host_limit(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    path = tmp_path / "gh.json"
    rc, out, err = run(capsys, "make", "tiny", "--gpu", "gh200", "--host-memory", "gpu",
                       "-o", path, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["host_memory_bytes"] == 480e9 and doc["link"] == "gh200-c2c"
    assert (doc["link_d2h_bytes_per_s"], doc["link_h2d_bytes_per_s"]) == (170e9, 416e9)
    rc, out, err = run(capsys, "make", "tiny", "--host-memory", "2GB", "-o", path, "--force",
                       "--json")
    assert rc == 0 and json.loads(out)["host_memory_bytes"] == 2e9, err
    assert_user_error(*run(capsys, "make", "tiny", "--host-memory", "50%", "-o", path,
                           "--force"), "--host-memory", "gpu")
    assert_user_error(*run(capsys, "make", "tiny", "--gpu", "h100", "--host-memory", "gpu",
                           "-o", path, "--force"), "h100", "gh200")


def test_make_unknown_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "x.json"
    assert_user_error(*run(capsys, "make", "nosuchnet", "-o", out_file, "--json"), "nosuchnet")
    assert_user_error(*run(capsys, "make", "gpt2-xl", "--gpu", "tpu9", "-o", out_file), "tpu9",
                      "a100")
    assert_user_error(*run(capsys, "make", "gpt2-xl", "--link", "smoke", "-o", out_file),
                      "smoke", "pcie4")
    assert not out_file.exists()


# ----------------------------------------------------------------------------- real process
@pytest.mark.slow
def test_process_exit_codes_and_streams(files: dict[str, Path]) -> None:
    r = run_sub("describe", files["dir"] / "nope.json", "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert "file not found" in r.stderr and "Traceback" not in r.stderr
    r = run_sub("solve", files["inst"], "--budget", "0.5")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "--solver" in r.stderr
    r = run_sub("simulate", files["inst"], files["keep"], "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["evaluation"]["feasible"] is True
    r = run_sub("solvers", "--json")
    assert r.returncode == 0 and isinstance(json.loads(r.stdout)["solvers"], list)


def test_plan_decisions_are_kept(files: dict[str, Path], tmp_path: Path) -> None:
    inst = small_instance()
    plan = Plan.from_mapping(inst, {"x2": "recomp"})
    p = io.save_plan(plan, tmp_path / "p.json", inst)
    r = run_sub("simulate", files["inst"], p, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["decisions"] == {"keep": 2, "swap": 0, "recomp": 1}
    assert doc["bytes_by_decision"]["recomp"] == int(inst.s[plan.decisions == RECOMP].sum())
    assert doc["bytes_by_decision"]["keep"] == int(inst.s[plan.decisions == KEEP].sum())


def test_simulate_notes_a_plan_made_for_another_instance(tmp_path, capsys):
    from slackopt.cli import main

    a = Path(__file__).parent.parent / "instances" / "teaching" / "tiny-gpt_a100-pcie4.json"
    b = Path(__file__).parent.parent / "instances" / "teaching" / "tiny-gpt_titanx-pcie3.json"
    plan = tmp_path / "plan.json"
    assert main(["solve", str(a), "--solver", "keep-all", "--budget", "1.0", "-o", str(plan),
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["simulate", str(b), str(plan), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["plan_instance"] == "tiny_a100-pcie4"
    assert "was made for instance 'tiny_a100-pcie4'" in out.err


@pytest.mark.parametrize("solver", ["keep-all", "milp"])  # milp has both as keywords too
@pytest.mark.parametrize("param,option", [("time_limit_s=5", "--time-limit"),
                                          ("seed=3", "--seed")])
def test_solve_params_that_have_their_own_option(capsys: pytest.CaptureFixture[str],
                                                 files: dict[str, Path], param: str,
                                                 option: str, solver: str) -> None:
    rc, out, err = run(capsys, "solve", str(files["inst"]), "--solver", solver,
                       "--budget", "0.5", "--param", param)
    assert_user_error(rc, out, err, option)
    assert f"'{param.partition('=')[0]}' is set with {option}, not --param" in err


def test_bad_milp_parameter_is_a_user_error(capsys: pytest.CaptureFixture[str],
                                            files: dict[str, Path]) -> None:
    rc, out, err = run(capsys, "solve", str(files["inst"]), "--solver", "milp",
                       "--budget", "0.5", "--param", "threads=1.5")
    assert_user_error(rc, out, err, "threads must be int >= 1, got 1.5 (not a whole number)")
    assert "valid keys: backend (str one of {scip, highs, pulp}, default 'scip')" in err


# ----------------------------------------------------------------------------- defaults
def test_simulate_uses_the_budget_the_plan_file_records(
        capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    inst = small_instance()
    plan = files["dir"] / "milp.json"
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "milp", "-b", "90%", "-o",
                       plan, "--json")
    assert rc == 0, err
    m = inst.P * 9 // 10  # 5,760 B: milp's plan runs there (slackswap's does not)
    assert json.loads(out)["budget_bytes"] == m == json.loads(plan.read_text())["meta"][
        "budget_bytes"]
    rc, out, err = run(capsys, "simulate", files["inst"], plan, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["budget_bytes"] == m and doc["budget_source"] == "plan_file"
    assert doc["evaluation"]["budget_bytes"] == m
    assert "recorded in the plan file" in err and "--budget" in err
    rc, out, err = run(capsys, "simulate", files["inst"], plan, "--budget", "1.0", "--json")
    doc = json.loads(out)
    assert doc["budget_bytes"] == inst.P and doc["budget_source"] == "option"
    assert doc["plan_budget_bytes"] == m
    # a plan file without a recorded budget (the fixture's) is scored at P, and says so
    rc, out, err = run(capsys, "simulate", files["inst"], files["keep"], "--json")
    doc = json.loads(out)
    assert doc["budget_bytes"] == inst.P and doc["budget_source"] == "default_P"
    assert "records no budget" in err


def test_a_bad_recorded_budget_is_named(capsys: pytest.CaptureFixture[str],
                                        files: dict[str, Path]) -> None:
    doc = json.loads(files["keep"].read_text())
    doc["meta"] = {"budget_bytes": -3}
    bad = files["dir"] / "bad.json"
    bad.write_text(json.dumps(doc))
    assert_user_error(*run(capsys, "simulate", files["inst"], bad), "meta.budget_bytes",
                      "--budget")


def test_an_infeasible_result_has_no_step_time(capsys: pytest.CaptureFixture[str],
                                               files: dict[str, Path]) -> None:
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "keep-all", "-b", "0.5", "--json")
    ev = json.loads(out)["evaluation"]
    assert rc == 0 and ev["feasible"] is False
    assert ev["step_time_s"] is None and ev["throughput"] == 0.0
    assert "cannot allocate" in ev["failure"]
    rc, out, err = run(capsys, "simulate", files["inst"], files["keep"], "-b", "0.5", "--json")
    ev = json.loads(out)["evaluation"]
    assert ev["step_time_s"] is None and ev["throughput"] == 0.0
    rc, out, err = run(capsys, "simulate", files["inst"], files["keep"], "-b", "0.5")
    row = next(line for line in out.splitlines() if "step_time_s" in line)
    assert row.split("│")[2].strip() == "-"


@pytest.mark.parametrize("budget, fix", [("8", "'8P'"), ("1.2", "'1.2GB'")])
def test_a_bare_budget_above_one_is_refused_with_the_fix(
        capsys: pytest.CaptureFixture[str], files: dict[str, Path], budget: str, fix: str
        ) -> None:
    assert_user_error(*run(capsys, "solve", files["inst"], "-s", "keep-all", "-b", budget),
                      "fraction of P", fix)
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "keep-all", "-b", f"{budget}P",
                       "--json")
    assert rc == 0 and json.loads(out)["budget_bytes"] == int(float(budget) *
                                                              small_instance().P)


def test_table_values_take_their_unit_from_the_name() -> None:
    from slackopt.cli._output import fmt_value as _fmt_value

    assert _fmt_value("evaluations_per_s", 620.1) == "620.1/s"   # a rate, not a time
    assert _fmt_value("step_time_s", 0.411) == "411 ms"
    assert _fmt_value("link_bytes_per_s", 25e9) == "25 GB/s"


# ------------------------------------------------------------- issue 15/17 leftovers
def test_param_none_is_read_as_null() -> None:
    """--param KEY=None is JSON's null, as the "or None" of the messages says; other text
    that merely starts with None stays text."""
    from slackopt.cli._options import parse_params as _parse_params
    from slackopt.solver import get_solver

    assert _parse_params(["blocks=None", "a=null", "b= None ", "c=None2", "d=3"]) == \
        {"blocks": None, "a": None, "b": None, "c": "None2", "d": 3}
    solver = get_solver("ckpt-offload", **_parse_params(["blocks=None"]))
    assert solver.params["blocks"] is None


@pytest.mark.parametrize("command", ["solve", "compare"])
def test_time_limit_has_one_rule_in_solve_and_compare(capsys: pytest.CaptureFixture[str],
                                                      files: dict[str, Path],
                                                      command: str) -> None:
    """solve and compare take the same --time-limit: finite seconds >= 0 (inf, nan and
    negative values are refused with the fix); a finite limit runs."""
    args = (["solve", files["inst"], "--solver", "keep-all", "--budget", "1.0"]
            if command == "solve" else
            ["compare", files["inst"], "--solvers", "keep-all", "--budgets", "1.0"])
    for bad in ("inf", "nan", "-1"):
        assert_user_error(*run(capsys, *args, "--time-limit", bad, "--json"), "--time-limit",
                          "must be a finite number >= 0", "leave --time-limit out")
    rc, out, err = run(capsys, *args, "--time-limit", "5", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    row = doc["rows"][0] if command == "compare" else doc
    assert row["status"] == "optimal"  # keep-all under P runs at T*, the lower bound
    if command == "compare":
        assert row["time_limit_s"] == 5.0


def test_time_limit_rule_is_the_api_rule(files: dict[str, Path]) -> None:
    import math

    import slackopt
    from slackopt.compare import compare
    from slackopt.errors import SolverError
    from slackopt.solverbase import check_time_limit

    assert check_time_limit(None) is None and check_time_limit(2) == 2.0
    inst = io.load_instance(files["inst"])
    for bad in (math.inf, math.nan, -1.0, True, "5"):
        with pytest.raises(SolverError, match="must be a finite number >= 0"):
            check_time_limit(bad)
    with pytest.raises(SolverError, match="must be a finite number >= 0"):
        slackopt.solve(inst, "keep-all", 1.0, time_limit_s=math.inf)
    with pytest.raises(SolverError, match="must be a finite number >= 0"):
        compare([inst], ["keep-all"], [1.0], time_limit_s=math.inf, progress=False)


def test_make_limits_name_the_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--layers past the generator's limit names --layers, not the generator's n_layers;
    a generator's own message says which of its parameters the option set."""
    f = tmp_path / "x.json"
    rc, out, err = run(capsys, "make", "chain", "--layers", "100000", "-o", f)
    assert_user_error(rc, out, err, "--layers", "4096")
    assert "n_layers" not in err
    assert_user_error(*run(capsys, "make", "vgg16", "--layers", "12", "-o", f),
                      "11, 13, 16, 19", "--layers sets 'depth'")
    assert not f.exists()


def test_solvers_descriptions_are_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    """`slackopt solvers` shows a docstring's first paragraph without reStructuredText."""
    from slackopt.cli.solve import plain_summary as _plain_summary

    doc = ("Uses :class:`~slackopt.plan.Plan`, :func:`the solver <slackopt.solve>`,\n"
           ":data:`slackopt.x.Y` and ``keep``; *so* **there**.\n\nDetails.")
    assert _plain_summary(doc) == "Uses Plan, the solver, slackopt.x.Y and keep; so there."
    rc, out, _ = run(capsys, "solvers", "--json")
    assert rc == 0
    rows = {r["name"]: r for r in json.loads(out)["solvers"]}
    assert rows["torch-knapsack"]["summary"] == ("PyTorch's activation_memory_budget "
                                                 "selection with PyTorch's knapsack solvers.")
    for r in rows.values():
        assert r["summary"] is None or "`" not in r["summary"], r


def _bad_input_cases(inst: Path) -> list[tuple[list[str], str]]:
    """(argv, the option or word the line must name): usage mistakes click catches
    (values, unknown names, missing arguments) beside ones slackopt's commands catch."""
    solve = ["solve", inst, "--solver", "keep_all", "--budget", "1.0"]
    cmp_ = ["compare", inst, "--solvers", "keep_all"]
    return [
        (solve + ["--time-limit", "-5"], "--time-limit"),
        (cmp_ + ["--budgets", "1.0", "--workers", "-1"], "--workers"),
        (cmp_ + ["--budgets", "0.5,,0.3"], "--budgets"),
        (["compare", inst, "--solvers", '{"keep_all": {}}', "--budgets", "1.0"], "--solvers"),
        (["compare", inst, "--solvers", "[]", "--budgets", "1.0"], "--solvers"),
        (["compare", inst, "--solvers", '[["production", {}]]', "--budgets", "1.0"],
         "a suite, which takes no parameters"),
        (solve + ["--seed", "abc"], "--seed"),
        (solve + ["--param", "g"], "--param"),
        (solve + ["--bogus"], "--bogus"),
        (["solve", inst, "--budget", "1.0"], "--solver"),
        (["frobnicate"], "frobnicate"),
        (["plot", "memory", inst, "-o", "x.png", "--budget", "0.5", "--time-limit", "inf"],
         "--time-limit"),
        (["solve", inst, "--solver", "no_such_solver", "--budget", "1.0"], "no_such_solver"),
        (["solve", str(inst) + ".missing", "--solver", "keep_all", "--budget", "1.0"],
         "file not found"),
    ]


def test_every_bad_input_is_one_error_line(capsys: pytest.CaptureFixture[str],
                                           files: dict[str, Path]) -> None:
    """Usage mistakes (click's: a bad value, an unknown option or command, a missing
    option) print the same single `slackopt: error:` line with exit 2 as the mistakes the
    commands catch themselves, naming the option and where the help is; never click's
    usage block."""
    for argv, word in _bad_input_cases(files["inst"]):
        rc, out, err = run(capsys, *argv)
        assert_user_error(rc, out, err, word)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("slackopt: error: "), (argv, err)
        assert "Usage:" not in err, err
    rc, out, err = run(capsys, "solve", files["inst"], "--solver", "keep_all", "--budget",
                       "1.0", "--seed", "abc")
    assert err.strip().endswith("; see 'slackopt solve --help'"), err


def test_bad_input_line_as_a_process(files: dict[str, Path]) -> None:
    """The same through the installed entry point's code path, as a shell runs it."""
    res = run_sub("compare", files["inst"], "--solvers", "keep_all", "--budgets", "0.5,,0.3")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "slackopt: error: Invalid value for '--budgets': '0.5,,0.3' is not a comma-separated "
        "list of budgets; see 'slackopt compare --help'"], res.stderr


def test_help_names_every_reproduced_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """`slackopt --help` and `reproduce --help` list Figures 6a/6b and the GPU generations
    (what reproduce writes: figure6a.png, figure6b.png, gpu_generations.png)."""
    for args in (["--help"], ["reproduce", "--help"]):
        rc, out, _ = run(capsys, *args)
        text = " ".join(out.split())
        assert rc == 0 and "6a" in text and "6b" in text and "GPU generations" in text, text


def test_every_solver_has_its_own_description(capsys: pytest.CaptureFixture[str]) -> None:
    """`slackopt solvers` describes each solver in its line, never by a pointer elsewhere."""
    rc, out, _ = run(capsys, "solvers", "--json")
    rows = json.loads(out)["solvers"]
    assert rc == 0 and rows
    for r in rows:
        s = r["summary"] or ""
        assert len(s.split()) >= 6 and "docstring" not in s and "see the" not in s, r


@pytest.mark.parametrize("budget, expected", [("100B", 100), ("1kB", 1000), ("431B", 431),
                                              ("1e-4", 43), ("1e-9", 0)])
def test_a_small_budget_with_a_unit_or_a_fraction_is_taken_as_written(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, budget: str, expected: int
        ) -> None:
    """The int-budget guard is for Python's bare ints: a size with a unit, or a fraction,
    that the command line has read is the budget, however small (tiny-gpt: P = 432168 B,
    so each of these is below 0.1% of P and was refused as 'an int')."""
    inst = Path(__file__).resolve().parents[1] / "instances/teaching/tiny-gpt_a100-pcie4.json"
    rc, out, err = run(capsys, "solve", inst, "-s", "keep-all", "-b", budget, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert (doc["budget_bytes"], doc["status"]) == (expected, "infeasible")
    csv = tmp_path / "c.csv"
    rc, out, err = run(capsys, "compare", inst, "--solvers", "keep-all", "--budgets",
                       f"{budget},0.5", "--out", csv, "--json")
    assert rc == 0, err
    rows = {r["budget_bytes"]: r for r in json.loads(out)["rows"]}
    assert rows[expected]["status"] == "infeasible", rows[expected]["message"]
    assert rows[432168 // 2]["status"] == "infeasible"


@pytest.mark.parametrize("value", ["-5GB", "abc", "0.5", "50%", "1.2P", "infGB", "1e30GB"])
def test_a_bad_host_memory_names_the_option_and_its_forms(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str) -> None:
    """--host-memory takes a size with a unit or 'gpu', never a budget's fraction of P: a
    mistake names --host-memory and those forms, not 'budget ... fraction of P'."""
    rc, out, err = run(capsys, "make", "tiny", f"--host-memory={value}", "-o",
                       tmp_path / "x.json")
    assert_user_error(rc, out, err, "--host-memory", f"'{value}'", "a size with a unit",
                      "'gpu'")
    assert len(err.splitlines()) == 1 and "budget" not in err and "fraction" not in err, err
    assert not (tmp_path / "x.json").exists()


def test_a_json_error_names_its_place_once(capsys: pytest.CaptureFixture[str],
                                           files: dict[str, Path]) -> None:
    """Python words a control character in a string "Invalid control character at": the
    line says where once ("... at line 1 column 26"), for a plan file and a GPU file alike
    (slackopt.errors.json_problem)."""
    from slackopt.hardware import gpu_from_file

    bad = files["dir"] / "p.json"
    bad.write_text('{"format": "slackopt-plan\tx"}')
    said = "not valid JSON: Invalid control character at line 1 column 26"
    rc, out, err = run(capsys, "solve", files["inst"], "-s", "keep-all", "-b", "1.0",
                       "--start-plan", bad)
    assert_user_error(rc, out, err, "p.json", said)
    assert "at at" not in err and len(err.splitlines()) == 1, err
    with pytest.raises(ValueError) as e:
        gpu_from_file(str(bad))
    assert str(e.value) == f"{bad}: {said}"


@pytest.mark.parametrize("info, line", [
    ({"min_budget_basis": "best_plan_peak"},
     "the best plan found runs at 1.5 MB (0.500 of P), its peak; smaller budgets were not "
     "searched"),
    ({"min_budget_basis": "proven"},
     "smallest budget any plan runs at: 1.5 MB (0.500 of P) (proven: none runs below it)"),
    ({"min_budget_basis": "found", "min_budget_lower_bytes": 1_200_000},
     "smallest budget found where a plan runs: 1.5 MB (0.500 of P); none runs below 1.2 MB "
     "(proven)"),
    ({"min_budget_basis": "bisection"},
     "this solver returns a plan that runs at 1.5 MB (0.500 of P) (bisection between the "
     "budget asked for and P; it may also reach smaller budgets)"),
    ({"min_budget_basis": "solver"}, "smallest budget this solver reaches: 1.5 MB (0.500 of P)"),
    ({}, "smallest budget this solver reaches: 1.5 MB (0.500 of P)"),
])
def test_min_budget_line_says_what_the_number_is(info: dict, line: str) -> None:
    from slackopt.cli._output import min_budget_line as _min_budget_line
    assert _min_budget_line({"min_budget_bytes": 1_500_000, **info}, 1_500_000, 0.5) == line
    assert _min_budget_line(info, None, None) == "smallest budget this solver reaches: unknown"


def test_solve_genetic_infeasible_names_its_plans_peak(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    from slackopt.workloads.synthetic import unet
    path = tmp_path / "unet2.json"
    io.save_instance(unet(2), path)
    rc, out, err = run(capsys, "solve", str(path), "-s", "genetic", "-b", "0.3", "--seed", "0",
                       "-p", "generations=3", "-p", "population=8", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["status"] == "infeasible" and doc["info"]["min_budget_basis"] == "best_plan_peak"
    rc, out, err = run(capsys, "solve", str(path), "-s", "genetic", "-b", "0.3", "--seed", "0",
                       "-p", "generations=3", "-p", "population=8")
    assert rc == 0, err
    assert "the best plan found runs at" in out and "smallest budget this solver" not in out


def test_a_bisected_min_budget_is_not_called_the_smallest() -> None:
    """SlackSwap is not monotone in M on unet(2): the bisection from 0.3 P answers about
    6.3 MB, yet SlackSwap plans a plan that runs at 5.52 MB; so the answer is marked
    "bisection", whose words do not claim a smallest budget."""
    from slackopt import solve
    from slackopt.workloads.synthetic import unet
    inst = unet(2)
    res = solve(inst, "slackswap", int(0.3 * inst.P))
    assert res.status == "infeasible" and res.info["min_budget_basis"] == "bisection"
    assert res.info["min_budget_bytes"] > 5_520_000
    assert solve(inst, "slackswap", 5_520_000).evaluation.feasible
