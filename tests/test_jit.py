"""How slackopt runs its numba kernels (slackopt/jit.py): compiled from numba's cache when
it holds them all, else as Python with the same results while a background process
compiles them; the record that says which; the compile's coverage of every kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slackopt import jit

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "instances/teaching/tiny-gpt_a100-pcie4.json")
GPT2 = str(ROOT / "instances/paper/gpt2-xl_a100-pcie4.json")

SOLVES = """
import hashlib, json, sys
import slackopt
from slackopt import jit
from slackopt.io import load_instance
from slackopt.simulate import _kernel
from slackopt.solvers import slackswap
from slackopt.workloads.synthetic import chain

out = {"mode": jit.mode(), "plain": [callable(f) and not hasattr(f, "py_func")
                                     for f in (_kernel.run_barrier_free, slackswap._mx_add)]}
def row(r):
    d = hashlib.sha256(r.plan.decisions.tobytes()).hexdigest() if r.plan else None
    return [r.status, d, r.evaluation.step_time_s if r.plan else None, r.lower_bound_s,
            r.info.get("min_budget_bytes")]
for path in sys.argv[1:]:
    inst = load_instance(path)
    for b in (0.9, 0.5, 0.3, 0.1):
        out[f"slackswap {path} {b}"] = row(slackopt.solve(inst, "slackswap", b))
out["milp"] = row(slackopt.solve(chain(4, seed=0), "milp", 0.8, time_limit_s=120, seed=0))
print(json.dumps(out))
"""


def run_solves(mode: str) -> dict:
    res = subprocess.run([sys.executable, "-c", SOLVES, TINY, GPT2], capture_output=True,
                         text=True, timeout=900, env={**os.environ, jit.MODE_ENV: mode})
    assert res.returncode == 0 and res.stderr == "", res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.slow
def test_the_kernels_run_as_python_with_the_results_of_the_compiled_ones() -> None:
    """SLACKOPT_KERNELS=python: every kernel is the plain function, the evaluator its
    reference engine, and SlackSwap's plans (tiny GPT, GPT-2 XL at four budgets, the
    minimum budgets found by bisection) and the MILP's proven optimum of the warm-up
    chain are those of the compiled kernels, digest for digest and bit for bit."""
    py, comp = run_solves("python"), run_solves("compiled")
    assert py.pop("mode") == "python" and py.pop("plain") == [True, True]
    assert comp.pop("mode") == "compiled" and comp.pop("plain") == [False, False]
    assert py == comp
    assert comp["milp"][0] == "optimal"
    assert comp[f"slackswap {TINY} 0.3"][0] == "infeasible"  # the bisection ran


def test_a_bad_mode_is_refused_naming_the_variable() -> None:
    res = subprocess.run([sys.executable, "-m", "slackopt.cli", "solve", TINY, "--solver",
                          "slackswap", "--budget", "0.5"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, jit.MODE_ENV: "fast"})
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["slackopt: error: SLACKOPT_KERNELS='fast': expected one "
                                       "of auto, compiled, python (unset means auto)"]


def test_ready_holds_while_the_recorded_sources_and_index_files_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    src, index = tmp_path / "k.py", tmp_path / "k.nbi"
    src.write_text("def f(x):\n    return x\n")
    index.write_bytes(b"")
    assert jit.state_dir() == tmp_path / "cache" / "slackopt" and not jit.ready()
    rec = jit.record_path()
    rec.parent.mkdir(parents=True)
    rec.write_text(json.dumps({"sources": {str(src): jit._sha256(str(src))},
                               "indexes": [str(index)]}))
    assert jit.ready()
    src.write_text("def f(x):\n    return x + 1\n")      # a kernel changed
    assert not jit.ready()
    src.write_text("def f(x):\n    return x\n")
    assert jit.ready()
    index.unlink()                                         # numba's cache emptied
    assert not jit.ready()
    rec.write_text("{")
    assert not jit.ready()


def test_njit_keeps_numbas_options_and_refuses_a_signature() -> None:
    def f(x):
        return x + 1

    g = jit.njit(inline="always", cache=True)(f)
    assert g(1) == 2
    if jit.compiled():
        assert g.targetoptions["inline"] == "always" and g.py_func is f
    with pytest.raises(TypeError, match="keyword options only"):
        jit.njit("i8(i8)")


@pytest.mark.slow
def test_a_cold_cache_solves_as_python_while_one_background_compile_fills_it(
        tmp_path: Path) -> None:
    """The first command after installing (auto mode, numba's cache empty): it says on
    stderr that the kernels compile in the background and prints the result the compiled
    kernels give; a second command meanwhile starts no second compile; once the compile
    has written its record, a new process runs the kernels compiled, and the compile
    left no kernel uncompiled (each was reached through a solver's warm_up)."""
    env = {k: v for k, v in os.environ.items() if k != jit.MODE_ENV}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    cmd = [sys.executable, "-m", "slackopt.cli", "solve", TINY, "--solver", "slackswap",
           "--budget", "0.5", "--json"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.startswith("slackopt: compiling the numba kernels in the background")
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert second.returncode == 0 and second.stderr == "", second.stderr[-3000:]
    compiled = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                              env={**os.environ, jit.MODE_ENV: "compiled"})
    drop = ("planning_time_s", "plan_file")
    assert ({k: v for k, v in json.loads(first.stdout).items() if k not in drop}
            == {k: v for k, v in json.loads(compiled.stdout).items() if k not in drop})
    log = tmp_path / "cache" / "slackopt" / "slackopt-kernels.log"
    probe = [sys.executable, "-c", "from slackopt import jit; print(jit.ready(), jit.mode())"]
    end = time.monotonic() + 1500
    while "kernels compiled in" not in log.read_text() and time.monotonic() < end:
        time.sleep(5)
    text = log.read_text()
    assert text.count("compiling slackopt's kernels") == 1, text
    assert "kernels compiled in" in text and "not compiled" not in text, text
    res = subprocess.run(probe, capture_output=True, text=True, timeout=300, env=env)
    assert res.stdout.split() == ["True", "compiled"], res.stderr
    rec = json.loads(next((tmp_path / "cache" / "slackopt").glob("slackopt-kernels-*.json"))
                     .read_text())
    assert {Path(p).name for p in rec["sources"]} >= {"_kernel.py", "rules.py", "kernels.py"}
