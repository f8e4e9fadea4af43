"""The solver contract: every registered solver through slackopt.testing's checks, the
checks themselves catching broken solvers, the runtime registry, parameter validation,
code identity in store keys, and the README's "Your own solver" example run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

import slackopt
from slackopt import KEEP, SWAP, BaseSolver, Outcome, Param, Plan
from slackopt.compare import compare, run_key
from slackopt.compare.code_id import solver_code_id
from slackopt.errors import SolverError
from slackopt.solver import get_solver, registered_solvers, solver_class
from slackopt.solverbase import SolverParamError
from slackopt.testing import (
    CHECKS,
    CheckContext,
    check_bad_params,
    check_base_class,
    check_distinct_keys,
    check_min_budget_reachable,
    check_plans_feasible,
    check_same_seed_same_plan,
    check_solver,
    check_time_limit,
    parametrize_with_checks,
)
from slackopt.workloads.synthetic import chain
from tests.helpers import TORCH_SOLVERS

ROOT = Path(__file__).resolve().parents[1]

_CTX = CheckContext()


@pytest.mark.slow
@parametrize_with_checks([n for n in registered_solvers() if n not in TORCH_SOLVERS], _CTX)
def test_registered_solver_passes_check(solver, check) -> None:
    check(solver)


@pytest.mark.slow
@pytest.mark.torch
@parametrize_with_checks(sorted(TORCH_SOLVERS), _CTX)
def test_registered_torch_solver_passes_check(solver, check) -> None:
    check(solver)


def test_parametrize_with_checks_pairs_every_solver_with_every_check() -> None:
    """One test per (solver, check), ids naming both, the context bound to each check:
    a check that fails names its solver in the test id."""
    mark = parametrize_with_checks([_OverBudget, "keep-all"], _CTX)
    names, params = mark.args
    assert names == ("solver", "check")
    assert [p.id for p in params] == [f"{n}-{c.__name__}" for n in ("over_budget", "keep-all")
                                      for c in CHECKS]
    assert [p.values[0] for p in params] == [_OverBudget] * len(CHECKS) + \
        [solver_class("keep-all")] * len(CHECKS)
    by_id = {p.id: p.values[1] for p in params}
    by_id["keep-all-check_plans_feasible"](solver_class("keep-all"))  # passes
    with pytest.raises(AssertionError, match="reported feasible but the evaluator says"):
        by_id["over_budget-check_plans_feasible"](_OverBudget)
    every = parametrize_with_checks(None, _CTX).args[1]
    assert len(every) == len(registered_solvers()) * len(CHECKS)
    with pytest.raises(SolverError, match="unknown solver 'no-such'"):
        parametrize_with_checks(["no-such"])


def test_the_classic_baselines_are_registered() -> None:
    assert {"keep-all", "checkpoint", "recompute-all", "sqrt-checkpoint", "vdnn",
            "superneurons", "swapadvisor"} <= set(registered_solvers())


# ------------------------------------------------------------------ the checks can fail
class _OverBudget(BaseSolver):
    """Claims keep-all is feasible at every budget."""

    name = "over_budget"

    def plan(self, instance, budget_bytes, run):
        return Outcome(Plan.keep_all(instance), status="feasible")


class _Unseeded(BaseSolver):
    """Swaps a random half, ignoring the seed."""

    name = "unseeded"

    def plan(self, instance, budget_bytes, run):
        rng = np.random.default_rng(int.from_bytes(os.urandom(8), "little"))
        dec = np.where(rng.random(instance.n_saved) < 0.5, SWAP, KEEP).astype(np.int8)
        return Plan(dec, instance.saved_names)


class _WrongMinBudget(BaseSolver):
    """Keep-all, stating a minimum budget of P / 2 (keep-all needs P)."""

    name = "wrong_min_budget"

    def plan(self, instance, budget_bytes, run):
        return Outcome(Plan.keep_all(instance), min_budget_bytes=int(instance.P) // 2)


class _Slow(BaseSolver):
    """Ignores its time limit."""

    name = "slow"

    def plan(self, instance, budget_bytes, run):
        time.sleep(1.2)
        return Plan.keep_all(instance)


def test_check_catches_a_class_not_on_the_base_class() -> None:
    class Plain:
        def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None): ...

    with pytest.raises(AssertionError, match="Plain: is not a slackopt.solverbase.BaseSolver "
                                             "subclass"):
        check_base_class(Plain, _CTX)


def test_check_catches_a_parameter_that_does_not_reach_params() -> None:
    class Ignores(BaseSolver):  # stores a constant: k=5 gives the params (and key) of k=1
        name = "ignores"
        param_specs = {"k": Param(int, min=1)}

        def __init__(self, *, k: int = 1) -> None:
            self.k = 1

        def plan(self, instance, budget_bytes, run):
            return Plan.keep_all(instance)

    with pytest.raises(AssertionError, match=r"k=2 is accepted but params do not change"):
        check_distinct_keys(Ignores, _CTX)


def test_check_catches_a_plan_over_budget() -> None:
    with pytest.raises(AssertionError, match="reported feasible but the evaluator says "
                                             "feasible=False"):
        check_plans_feasible(_OverBudget, _CTX)


def test_check_catches_an_unseeded_solver() -> None:
    with pytest.raises(AssertionError, match="seed 0 gave two answers"):
        check_same_seed_same_plan(_Unseeded, _CTX)


def test_check_catches_an_unreachable_min_budget() -> None:
    with pytest.raises(AssertionError, match="states min_budget_bytes"):
        check_min_budget_reachable(_WrongMinBudget, _CTX)


def test_check_catches_a_solver_past_its_time_limit() -> None:
    ctx = CheckContext(time_limit_s=0.01)  # tolerance 1.5 * 0.01 + 1 = 1.015 s < 1.2 s
    with pytest.raises(AssertionError, match="took"):
        check_time_limit(_Slow, ctx)


def test_check_catches_a_solver_that_validates_its_own_way() -> None:
    class Handmade:  # specs declared, but a plain class: Python's TypeError, no key list
        name = "handmade"
        param_specs = {"k": Param(int, min=1)}

        def __init__(self, *, k: int = 2) -> None:
            self.k = k

    with pytest.raises(AssertionError, match="unknown key 'no_such_param_xyz': raised "
                                             "TypeError, not a SolverError"):
        check_bad_params(Handmade, _CTX)


def test_check_solver_names_the_failed_check() -> None:
    with pytest.raises(AssertionError, match=r"^check_plans_feasible: _OverBudget"):
        check_solver(_OverBudget)


def test_plain_object_solver_fails_the_base_class_check() -> None:
    class Plain:
        name = "plain"
        params: dict = {}

        def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
            raise NotImplementedError

    with pytest.raises(AssertionError, match="is not a slackopt.solverbase.BaseSolver"):
        check_solver(Plain)


# ------------------------------------------------------------------ parameters
def test_params_come_from_the_signature_and_round_trip() -> None:
    from slackopt.solvers.vdnn import VDNN

    v = VDNN(mode="conv", conv_kinds=["gemm"])
    assert v.params == {"mode": "conv", "conv_kinds": ["gemm"], "min_budget_search": True}
    assert VDNN(**v.params) == v
    assert repr(v) == "VDNN(mode='conv', conv_kinds=['gemm'], min_budget_search=True)"


def test_unknown_key_lists_every_valid_key_with_its_range() -> None:
    with pytest.raises(SolverParamError) as e:
        get_solver("sqrt-checkpoint", gg=1)
    assert str(e.value) == ("solver 'sqrt-checkpoint' has no parameter 'gg'; valid keys: "
                            "segment (int >= 1 or None, default None)")


@pytest.mark.parametrize(("kwargs", "rule"), [
    ({"mode": "fast"}, "mode must be str one of {dynamic, none, conv, all}, got 'fast'"),
    ({"min_budget_search": "no"}, "min_budget_search must be bool, got 'no'"),
    ({"conv_kinds": "gemm"}, "conv_kinds must be list of str, got 'gemm'"),
])
def test_bad_values_name_the_rule_and_the_valid_keys(kwargs, rule) -> None:
    with pytest.raises(SolverError) as e:
        get_solver("vdnn", **kwargs)
    assert rule in str(e.value)
    assert "valid keys: mode (str one of {dynamic, none, conv, all}, default 'dynamic'), " \
        "conv_kinds (list of str, default" in str(e.value)


def test_bool_is_not_an_int_and_numpy_ints_are() -> None:
    with pytest.raises(SolverParamError, match="segment must be int >= 1 or None, got True"):
        get_solver("sqrt-checkpoint", segment=True)
    s = get_solver("sqrt-checkpoint", segment=np.int64(3))
    assert s.params == {"segment": 3} and type(s.segment) is int
    json.dumps(s.params)


def test_a_class_without_specs_for_its_keywords_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"missing specs: \['k'\]"):
        class NoSpec(BaseSolver):
            def __init__(self, *, k: int = 1) -> None:
                self.k = k
    with pytest.raises(TypeError, match="must be explicit keywords"):
        class VarKw(BaseSolver):
            def __init__(self, **kw) -> None:
                pass


def test_positional_parameters_are_refused() -> None:
    with pytest.raises(SolverParamError, match="keyword parameters only"):
        solver_class("sqrt-checkpoint")(2)


# ------------------------------------------------------------------ registry
def test_register_refuses_duplicates_and_unregister_frees_the_name() -> None:
    class Mine(_OverBudget):
        name = "mine_for_test"

    slackopt.register_solver("mine_for_test", Mine)
    try:
        assert solver_class("mine_for_test") is Mine
        with pytest.raises(SolverError, match="already registered"):
            slackopt.register_solver("mine_for_test", Mine)
        with pytest.raises(SolverError, match="installed with slackopt.*pick another name"):
            slackopt.register_solver("checkpoint", Mine)  # an entry point's name
    finally:
        slackopt.unregister_solver("mine_for_test")
    assert "mine_for_test" not in registered_solvers()
    with pytest.raises(SolverError, match="no solver named 'mine_for_test' was registered"):
        slackopt.unregister_solver("mine_for_test")
    with pytest.raises(SolverError, match="was registered at runtime"):
        slackopt.unregister_solver("checkpoint")


def test_register_refuses_a_name_other_than_the_class_name() -> None:
    with pytest.raises(SolverError, match="_OverBudget.name is 'over_budget' but it is "
                                          "registered as 'other'"):
        slackopt.register_solver("other", _OverBudget)


def test_file_references_load_and_fail_clearly(tmp_path: Path) -> None:
    f = tmp_path / "mysolver.py"
    f.write_text("from slackopt import BaseSolver, Plan\n"
                 "class K(BaseSolver):\n"
                 "    name = 'k_file'\n"
                 "    def plan(self, instance, budget_bytes, run):\n"
                 "        return Plan.keep_all(instance)\n")
    cls = solver_class(f"{f}:K")
    assert cls.name == "k_file" and cls.__module__.startswith("slackopt_user_")
    assert solver_class(f"{f}:K") is cls  # imported once per process
    with pytest.raises(SolverError, match="has no class 'Nope'; solver classes there: K"):
        solver_class(f"{f}:Nope")
    with pytest.raises(SolverError, match="does not exist"):
        solver_class(f"{tmp_path / 'missing.py'}:K")
    with pytest.raises(SolverError, match="unknown solver 'nope'; registered solvers: "):
        solver_class("nope")


def test_notebook_class_is_refused_before_any_worker_starts(monkeypatch) -> None:
    class Local(_OverBudget):
        name = "local"

    with pytest.raises(SolverError, match=r"defined inside a function .* Fix: save it in a "
                                          r"file and pass 'path/to/file.py:Local'"):
        compare([chain(4)], [Local()], [0.9], workers=2, progress=False)
    fake_main = types.ModuleType("__main__")  # a notebook's __main__ has no __file__
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    Cell = type("Cell", (_OverBudget,), {"name": "cell", "__module__": "__main__"})
    with pytest.raises(SolverError, match="in an interactive session"):
        compare([chain(4)], [Cell()], [0.9], workers=2, progress=False)
    df = compare([chain(4)], [Cell()], [0.9], workers=1, progress=False)
    assert list(df["solver"]) == ["cell"]  # one process: fine


# ------------------------------------------------------------------ code identity
def test_store_key_parts_the_solver_does_not_control() -> None:
    """The seed, the time limit and the code identity are put into the key by run_key
    itself, for every solver (check_distinct_keys checks only the solver's part: its
    name and params)."""
    inst, s = chain(4), solver_class("checkpoint")()
    k = run_key(inst, 10, s, seed=1, time_limit_s=2.0)
    assert len(k) == 64 and k == run_key(inst, 10, s, seed=1, time_limit_s=2.0)
    others = [run_key(inst, 10, s, seed=2, time_limit_s=2.0),
              run_key(inst, 10, s, seed=None, time_limit_s=2.0),
              run_key(inst, 10, s, seed=1, time_limit_s=None),
              run_key(inst, 10, s, seed=1, time_limit_s=2.0, code="edited"),
              run_key(inst, 11, s, seed=1, time_limit_s=2.0)]
    assert len({k, *others}) == 6


def test_code_identity_follows_the_source(tmp_path: Path) -> None:
    src = ("from slackopt import BaseSolver, Plan\n"
           "class K(BaseSolver):\n"
           "    name = 'k'\n"
           "    def plan(self, instance, budget_bytes, run):\n"
           "        return Plan.keep_all(instance)\n")
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(src)
    b.write_text(src + "# edited\n")
    ka, kb = solver_class(f"{a}:K"), solver_class(f"{b}:K")
    assert solver_code_id(ka) != solver_code_id(kb)
    inst = chain(4)
    assert run_key(inst, 10, ka(), seed=0, time_limit_s=None) != \
        run_key(inst, 10, kb(), seed=0, time_limit_s=None)
    # the same source in another file gives the same identity (the text, not the path)
    c = tmp_path / "c.py"
    c.write_text(src)
    kc = solver_class(f"{c}:K")
    assert solver_code_id(kc) == solver_code_id(ka)


def test_store_rows_of_other_code_are_not_returned(tmp_path: Path, monkeypatch) -> None:
    import slackopt.compare as cmp

    store = tmp_path / "runs.sqlite"
    args = ([chain(4)], ["keep-all"], [1.0])
    first = compare(*args, store=store, progress=False)
    assert first.attrs["runs_now"] == 1
    again = compare(*args, store=store, progress=False)
    assert again.attrs["runs_from_store"] == 1
    monkeypatch.setattr(cmp, "solver_code_id", lambda cls: "edited-code")
    edited = compare(*args, store=store, progress=False)
    assert edited.attrs["runs_now"] == 1 and edited.attrs["runs_from_store"] == 0


# ------------------------------------------------ the "Your own solver" example (docs/python.md)
def _readme_blocks() -> dict[str, str]:
    text = (ROOT / "docs" / "python.md").read_text()
    return dict(re.findall(r"<!-- readme-example: (\S+) -->\n```\w+\n(.*?)```", text, re.S))


def test_readme_custom_solver_is_under_60_lines() -> None:
    assert len(_readme_blocks()["greedy_swap.py"].splitlines()) < 60


@pytest.mark.slow
def test_readme_custom_solver_example_runs(tmp_path: Path) -> None:
    blocks = _readme_blocks()
    (tmp_path / "greedy_swap.py").write_text(blocks["greedy_swap.py"])
    (tmp_path / "run.py").write_text(blocks["python"])
    (tmp_path / "instances").symlink_to(ROOT / "instances")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = [ln.split() for ln in out.stdout.splitlines()[1:]]
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("greedy_swap", "0.8", "feasible"), ("keep-all", "0.8", "infeasible"),
        ("greedy_swap", "0.6", "feasible"), ("keep-all", "0.6", "infeasible")]
    exe = Path(sys.executable).with_name("slackopt")
    for line in blocks["cli"].strip().splitlines():
        argv = line.split()
        assert argv[0] == "slackopt"
        res = subprocess.run([str(exe), *argv[1:], "--json"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["solver"] == "greedy_swap" and doc["status"] == "feasible"
        assert doc["evaluation"]["peak_bytes"] <= doc["budget_bytes"]


@pytest.mark.slow
@pytest.mark.parametrize(("solver", "keys"), [
    ("sqrt-checkpoint", "valid keys: segment (int >= 1 or None, default None)"),
    ("milp", "valid keys: backend (str one of {scip, highs, pulp}, default 'scip')"),
])
def test_cli_param_typo_lists_the_valid_keys(solver: str, keys: str) -> None:
    exe = Path(sys.executable).with_name("slackopt")
    inst = ROOT / "instances/teaching/chain8_a100-pcie4.json"
    res = subprocess.run([str(exe), "solve", str(inst), "-s", solver, "--budget", "0.5",
                          "--param", "gg=1"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "'gg'" in res.stderr
    assert keys in res.stderr


def test_min_budget_search_finds_p_for_keep_all_and_stops_at_the_time_limit() -> None:
    class Keeper(BaseSolver):
        name = "keeper"

        def plan(self, instance, budget_bytes, run):
            return Plan.keep_all(instance)

    inst = chain(4)
    half = int(inst.P) // 2
    r = Keeper().solve(inst, half)
    # keep-all fits iff M >= P (its peak is P): every bisection midpoint below P fails,
    # so the search ends at P itself
    assert r.status == "infeasible" and r.objective_s is None
    assert r.info["min_budget_bytes"] == int(inst.P)
    assert not slackopt.simulate(inst, r.plan, int(inst.P) - 1).feasible
    out = Keeper().solve(inst, half, time_limit_s=0)
    assert out.info["min_budget_bytes"] is None
    assert out.info["min_budget_note"] == ("the minimum-budget search stopped at the time "
                                           "limit (0 s)")


def test_genetic_seed_param_is_deprecated_and_cross_rules_name_the_keys() -> None:
    """One seed source: solve(seed=). The old ``seed`` hyperparameter still builds, stays
    in params and keys (stores of earlier runs match), warns when set, and is only the
    fallback of seed=None; the default (0) does not warn, so rebuilding from params of a
    default solver is silent."""
    import warnings

    from slackopt.solvers.genetic import Genetic

    inst = chain(4)
    with pytest.warns(FutureWarning, match=r"solver 'genetic': seed=1: the seed comes from "
                                           r"solve\(seed=\)"):
        a = Genetic(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = Genetic(**Genetic().params)
    assert a.params["seed"] == 1 and b.params["seed"] == 0
    assert run_key(inst, 10, a, seed=None, time_limit_s=None) != \
        run_key(inst, 10, b, seed=None, time_limit_s=None)
    with pytest.raises(SolverParamError, match=r"elites must be < population, got elites=5, "
                                               r"population=4; valid keys: population \(int"):
        Genetic(population=4, elites=5)
    res = Genetic(population=6, generations=1, seeding="random").solve(inst, int(inst.P))
    assert res.seed == 0  # run.seed_or(0): the default seed, reported
    res = Genetic(population=6, generations=1, seeding="random").solve(inst, int(inst.P),
                                                                         seed=3)
    assert res.seed == 3


def test_subclassing_the_solver_protocol_without_solve_is_a_clear_error() -> None:
    """slackopt.Solver is the protocol (any object with solve()); a subclass that writes
    plan() only (BaseSolver's template) is refused at definition, naming BaseSolver,
    instead of returning None from the protocol's stub and failing inside solve()."""
    with pytest.raises(TypeError, match=r"P subclasses slackopt.Solver, the protocol, without "
                                        r"defining solve\(\); it defines plan\(\).*"
                                        r"Subclass slackopt.BaseSolver"):
        class P(slackopt.Solver):
            def plan(self, instance, budget_bytes, run):
                return Plan.keep_all(instance)

    class Own(slackopt.Solver):  # an explicit subclass with its own solve() still works
        name = "own"

        def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
            return slackopt.SolveResult(Plan.keep_all(instance), self.name)

    inst = chain(4)
    assert isinstance(Own(), slackopt.Solver) and not isinstance(object(), slackopt.Solver)
    r = slackopt.solve(inst, Own(), 1.0)
    assert r.status == "feasible" and r.evaluation.feasible

    class Duck:  # duck-typed, but solve() returns no SolveResult
        def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
            return Plan.keep_all(instance)

    with pytest.raises(SolverError, match=r"solver 'Duck': solve\(\) returned Plan, not a "
                                          r"slackopt.SolveResult"):
        slackopt.solve(inst, Duck(), 1.0)


def test_reproduce_gets_fixed_plans_from_the_registered_solvers() -> None:
    from slackopt.experiments.reproduce import _checkpoint_plan, _vdnn_plan
    from slackopt.solvers.baselines import checkpoint_plan
    from slackopt.solvers.vdnn import vdnn_plan
    from slackopt.workloads import make

    inst = make("tiny")
    for k in range(len(inst.blocks) + 2):
        assert _checkpoint_plan(inst, k) == checkpoint_plan(inst, k)
    for cfg in ("none", "conv", "all"):
        assert _vdnn_plan(inst, cfg, int(0.1 * inst.P)) == vdnn_plan(inst, cfg)


def test_compare_table_labels_show_only_changed_params() -> None:
    from slackopt.solver import solver_label as _solver_label

    full = json.dumps(get_solver("vdnn", mode="conv").params)
    assert _solver_label("vdnn", full) == 'vdnn {"mode":"conv"}'
    assert _solver_label("vdnn", json.dumps(get_solver("vdnn").params)) == "vdnn"
    assert _solver_label("keep-all", "{}") == "keep-all"
    assert _solver_label("not_here", '{"k":1}') == 'not_here {"k":1}'  # class unknown


def test_a_file_reference_that_is_not_a_solver_class_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "notasolver.py"
    f.write_text("class NotASolver:\n    pass\n\ndef f():\n    return None\n")
    for attr in ("NotASolver", "f"):
        with pytest.raises(SolverError, match="is not a solver class"):
            solver_class(f"{f}:{attr}")


# ------------------------------------------------------------------ issue 15/17 leftovers
def test_a_solver_without_a_plan_says_so(tmp_path: Path, capsys) -> None:
    """plan() returning None: status "infeasible" with the reason in info["note"], which
    `slackopt solve` prints; a note of the solver's own is kept."""
    from slackopt.cli import main

    class NoPlan(BaseSolver):
        name = "no_plan"

        def plan(self, instance, budget_bytes, run):
            return None

    class NoPlanNoted(NoPlan):
        name = "no_plan_noted"

        def plan(self, instance, budget_bytes, run):
            return Outcome(None, info={"note": "nothing fits"})

    inst = chain(4)
    res = NoPlan().solve(inst, inst.P)
    assert res.status == "infeasible" and res.plan is None
    assert res.info["note"] == "no_plan returned no plan"
    assert res.info["min_budget_bytes"] is None  # no budget up to P gives a plan
    assert NoPlanNoted().solve(inst, inst.P).info["note"] == "nothing fits"
    f = tmp_path / "noplan.py"
    f.write_text("from slackopt import BaseSolver\n"
                 "class NoPlan(BaseSolver):\n"
                 "    name = 'no_plan'\n"
                 "    def plan(self, instance, budget_bytes, run):\n"
                 "        return None\n")
    from slackopt.io import save_instance

    path = save_instance(inst, tmp_path / "chain4.json")
    assert main(["solve", str(path), "--solver", f"{f}:NoPlan", "--budget", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "infeasible" in out and "note: no_plan returned no plan" in out


def test_code_identity_covers_the_solver_folder(tmp_path: Path, monkeypatch) -> None:
    """A user's solver file that imports a helper module from its own folder: editing the
    helper changes the identity; slackopt and installed packages (numpy) are not part of
    it, and the same files in another folder give the same identity."""
    from slackopt.compare.code_id import _code_modules

    def make(folder: Path, helper_text: str) -> type:
        folder.mkdir(exist_ok=True)
        (folder / "kshelper.py").write_text(helper_text)
        (folder / "kssolver.py").write_text(
            "import numpy as np\n"
            "from kshelper import keep\n"
            "from slackopt import BaseSolver\n"
            "class K(BaseSolver):\n"
            "    name = 'k_folder'\n"
            "    def plan(self, instance, budget_bytes, run):\n"
            "        return keep(instance)\n")
        monkeypatch.syspath_prepend(str(folder))
        for mod in [m for m in sys.modules if m == "kshelper" or m.startswith(
                "slackopt_user_")]:
            monkeypatch.delitem(sys.modules, mod)
        cls = solver_class(f"{folder / 'kssolver.py'}:K")
        assert Path(sys.modules["kshelper"].__file__).parent == folder
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(folder)])
        return cls

    helper = ("from slackopt import Plan\n"
              "def keep(instance):\n"
              "    return Plan.keep_all(instance)\n")
    k1 = make(tmp_path / "one", helper)
    assert set(_code_modules(k1)) == {".", "folder:kshelper"}
    id1 = solver_code_id(k1)
    k2 = make(tmp_path / "two", helper)
    assert solver_code_id(k2) == id1  # same files elsewhere: same identity
    k3 = make(tmp_path / "three", helper + "# edited\n")
    assert solver_code_id(k3) != id1


class _SlowFirstCall(BaseSolver):
    """Keeps everything; its first plan() waits 2 s (standing in for kernels compiled on
    a cold cache in ``SLACKOPT_KERNELS=compiled``), longer than the hard deadline of a
    0.5 s limit (1.5 x 0.5 + 1 = 1.75 s); its warm_up only counts its calls."""

    name = "slow-first-call"
    warmed: list[float] = []
    waited = False

    @classmethod
    def warm_up(cls) -> None:
        cls.warmed.append(time.perf_counter())

    def plan(self, instance, budget_bytes, run):
        if not type(self).waited:
            type(self).waited = True
            time.sleep(2.0)
        return Plan.keep_all(instance)


@pytest.mark.slow
def test_what_a_solve_waits_for_is_planning_time_and_counts_against_its_limit() -> None:
    """No warm-up runs outside the clock: the user's wait is the planning time, and
    compare's hard deadline interrupts a run that waits past it."""
    inst = chain(3, seed=0)
    res = _SlowFirstCall().solve(inst, int(inst.P), time_limit_s=0.5)
    assert res.status == "feasible" and res.planning_time_s >= 2.0
    assert slackopt.solve(inst, _SlowFirstCall(), 1.0).planning_time_s < 2.0  # once
    _SlowFirstCall.waited = False
    row = compare([inst], [_SlowFirstCall()], [1.0], time_limit_s=0.5).iloc[0]
    assert row["status"] == "timeout" and row["message"].startswith("interrupted after 1.75 s")
    assert _SlowFirstCall.warmed == []


class _OverBound(BaseSolver):
    """Keeps everything at P and claims a bound 10% above that plan's step."""

    name = "over_bound"

    def plan(self, instance, budget_bytes, run):
        return Outcome(plan=Plan.keep_all(instance), status="optimal",
                       lower_bound_s=1.1 * float(instance.ideal_time_s))


class _PlainOverBound:
    """The same, as a plain object with solve() (no BaseSolver)."""

    def solve(self, instance, budget_bytes, *, time_limit_s=None, seed=None):
        return slackopt.SolveResult(plan=Plan.keep_all(instance), solver="plain",
                                    status="optimal",
                                    lower_bound_s=1.1 * float(instance.ideal_time_s))


@pytest.mark.parametrize("solver", [_OverBound(), _PlainOverBound()])
def test_a_bound_above_the_solvers_own_plan_is_dropped_not_clamped(solver) -> None:
    """A bound above the simulated step of the solver's own plan proves the solver wrong:
    solve() drops it, says why in info["bound_error"], and the status is "feasible"
    (never "optimal" with a gap clamped to 0)."""
    inst = chain(3)
    T = float(inst.ideal_time_s)
    r = slackopt.solve(inst, solver, 1.0)
    assert r.evaluation.step_time_s == T
    assert r.lower_bound_s is None and r.status == "feasible"
    assert r.info["bound_error"]["lower_bound_s"] == pytest.approx(1.1 * T)
    assert r.info["bound_error"]["plan_step_s"] == T
    assert "gap" not in r.info and r.info["plan_proven_optimal"] is False


def test_old_registry_names_resolve_to_the_canonical_ones(capsys) -> None:
    """One naming style (lowercase words joined by hyphens): the old underscore names
    still resolve wherever a name is taken, results carry the canonical name, and only
    canonical names are listed or registrable."""
    from slackopt.cli import main
    from slackopt.solver import SOLVER_ALIASES, canonical_name

    listed = set(registered_solvers())
    assert all(n == n.lower() and "_" not in n for n in listed), sorted(listed)
    assert not listed & set(SOLVER_ALIASES) and set(SOLVER_ALIASES.values()) <= listed
    for old, new in SOLVER_ALIASES.items():
        assert canonical_name(old) == new and solver_class(old) is solver_class(new)
        assert solver_class(new).name == new
    inst = chain(4)
    assert slackopt.solve(inst, "keep_all", 1.0).solver == "keep-all"
    df = compare([inst], ["sqrt_checkpoint", ("recompute_all", {})], [1.0], progress=False)
    assert list(df["solver"]) == ["sqrt-checkpoint", "recompute-all"]
    assert main(["solvers", "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["solvers"]}
    assert "keep-all" in names and "keep_all" not in names
    with pytest.raises(SolverError, match="'keep_all' is the old name of the installed solver "
                                          "'keep-all'"):
        slackopt.register_solver("keep_all", solver_class("keep-all"))
