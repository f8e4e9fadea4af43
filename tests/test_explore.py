"""slackopt explore: the grid of plans, the figure's frames against the evaluator, the
self-contained page, and the command's checks of its output and options. (The page in a
real browser: tests/test_browser.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import slackopt
from slackopt import explore
from slackopt.cli import main
from slackopt.errors import SlackoptError, SolverError
from slackopt.io import load_instance

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ROOT / "instances" / "teaching" / "chain8_a100-pcie4.json"


@pytest.fixture(scope="module")
def grid() -> tuple[slackopt.Instance, list[explore.Frame]]:
    inst = load_instance(CHAIN)
    return inst, explore.solve_grid(inst, ["slackswap", "keep-all"], [1.0, 0.7, 0.4])


def test_the_grid_is_each_solver_at_each_budget(grid) -> None:
    inst, frames = grid
    assert [f.fraction for f in frames] == [1.0, 0.7, 0.4]
    for f in frames:
        assert f.budget_bytes == slackopt.budget_bytes(inst, f.fraction)
        assert [r.solver for r in f.runs] == ["slackswap", "keep-all"]
        ref = slackopt.solve(inst, "slackswap", f.budget_bytes, seed=0)
        run = f.runs[0]
        assert np.array_equal(run.plan.decisions, ref.plan.decisions)
        assert run.evaluation.trace  # simulated with its trace
        assert run.evaluation.step_time_s == ref.evaluation.step_time_s
    # keep-all runs at P; below it its plan runs out of memory, and the page says so
    assert frames[0].runs[1].evaluation.feasible
    over = frames[1].runs[1]
    assert over.status == "infeasible" and not over.evaluation.feasible
    assert "keep-all (infeasible): infeasible" in explore._run_line(over, int(inst.P))


def test_each_slider_step_shows_its_own_budget(grid) -> None:
    inst, frames = grid
    fig = explore.figure(inst, frames)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["1.00", "0.70", "0.40"]
    # shown first: the budget nearest 0.5 P where slackswap's plan runs (not at 0.4 P)
    assert fig.layout.sliders[0].active == 1
    for f, step in zip(frames, steps, strict=True):
        vis, layout = step.args
        shown = [t for t, v in zip(fig.data, vis["visible"], strict=True) if v]
        heat = [t for t in shown if t.type == "heatmap"]
        assert len(heat) == 1
        for run, row in zip(f.runs, heat[0].z, strict=True):  # each tensor's decision
            if run.plan is None:
                assert all(np.isnan(row))
            else:
                assert list(row) == [float(d) for d in run.plan.decisions]
        budget = [t for t in shown if t.name == "budget M" and t.x[0] is not None]
        assert budget[0].y[0] == pytest.approx(f.budget_bytes / 1e9)  # drawn in GB
        # the memory curve ends at the step's end and never exceeds M
        mem = [t for t in shown if t.type == "scatter" and t.name == "slackswap: in use"]
        ev = f.runs[0].evaluation
        assert max(mem[0].y) <= f.budget_bytes / 1e9 + 1e-12
        title = layout["title.text"]
        assert f"({f.fraction:.2f} P)" in title
        if ev.feasible:
            assert mem[0].x[-1] == pytest.approx(ev.step_time_s * 1e3)
            assert f"slackswap: step {ev.step_time_s * 1e3:.4g} ms ({ev.throughput:.1%} " \
                "of ideal)" in title
        else:  # 0.4 P: below the smallest budget slackswap reaches on this chain
            assert f.fraction == 0.4 and "slackswap (infeasible): infeasible" in title


def test_the_page_is_self_contained(grid) -> None:
    inst, frames = grid
    text = explore.page(inst, frames)
    assert len(text.encode()) < 10e6
    assert not re.search(r"<script[^>]+src=", text)  # Plotly inlined, nothing fetched
    assert not re.search(r"<(link|img|iframe)[^>]+(href|src)=", text)  # (no request at all:
    # tests/test_browser.py refuses every request leaving the machine)
    assert "Plotly.newPlot" in text and inst.name in text


def test_bad_grids_are_refused() -> None:
    inst = load_instance(CHAIN)
    with pytest.raises(SlackoptError, match="no solvers"):
        explore.solve_grid(inst, [], [0.5])
    with pytest.raises(SlackoptError, match="fraction"):
        explore.solve_grid(inst, ["slackswap"], [0.0])
    with pytest.raises(SolverError):
        explore.solve_grid(inst, ["no-such-solver"], [0.5])


def test_the_command_writes_once_then_needs_force(tmp_path: Path, capsys) -> None:
    out = tmp_path / "page.html"
    args = ["explore", str(CHAIN), "-o", str(out), "--budgets", "0.9,0.5", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["written"] == [str(out)] and doc["bytes"] == out.stat().st_size
    assert [b["fraction"] for b in doc["budgets"]] == [0.9, 0.5]
    first = out.read_bytes()
    assert main(args) == 2  # an existing page is not replaced without --force
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == first
    assert main([*args, "--force", "--solvers", "checkpoint"]) == 0
    assert out.read_bytes() != first


@pytest.mark.parametrize(("extra", "message"), [
    (["-o", "page.png"], "HTML"),
    (["-o", "page.html", "--budgets", "0.5,x"], "--budgets"),
    (["-o", "page.html", "--budgets", "-0.5"], "--budgets"),
    (["-o", "page.html", "--solvers", "no-such-solver"], "no-such-solver"),
])
def test_the_command_refuses_bad_input(tmp_path: Path, capsys, extra: list[str],
                                       message: str) -> None:
    extra = [str(tmp_path / x) if x.startswith("page.") else x for x in extra]
    assert main(["explore", str(CHAIN), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_the_command_never_writes_over_the_instance(tmp_path: Path, capsys) -> None:
    inst = tmp_path / "i.html"
    inst.write_bytes(CHAIN.read_bytes())
    assert main(["explore", str(inst), "-o", str(inst), "--force"]) == 2
    assert "reads" in capsys.readouterr().err
    assert inst.read_bytes() == CHAIN.read_bytes()
