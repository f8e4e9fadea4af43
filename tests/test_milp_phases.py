"""Where a milp run's time goes (issue 47, item 3): ``info["phases"]`` names, per phase,
how much it lifted the certified bound and lowered the plan, and which sources it raised;
``slackopt solve --solver milp`` prints them as a table (docs/exact-tier.md, "What each
phase lifted and lowered").

Checked on real runs: each phase's lift is its bound less the bound before it (T* before
the first), each drop the plan before it less its plan; the lifts add up to the final
bound less T*, the drops to the first plan less the final one; after each phase the
bound is the largest of T* and every source raised so far; the enumeration's closing
lift ends at the simulated step of the returned plan.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from slackopt import io
from slackopt.cli._output import fmt_time
from slackopt.simulate import simulate
from slackopt.solver import solve
from tests.helpers import run

SMALL = Path(__file__).resolve().parent.parent / "instances" / "small"


def check_phases(res, T_star: float) -> list[dict]:
    """Assert the invariants of the module docstring on `res`'s ``info["phases"]``;
    returns the phases."""
    phases = res.info["phases"]
    lower_before, upper_before = T_star, None
    raised: dict[str, float] = {}
    for p in phases:
        assert p["lifted_s"] == p["lower_s"] - lower_before, p
        if upper_before is None:
            assert p["lowered_s"] is None, p
        else:
            assert p["lowered_s"] == upper_before - p["upper_s"], p
        for src, v in p["sources"].items():
            assert v > raised.get(src, -math.inf), (src, p)
            raised[src] = v
        assert p["lower_s"] == max([T_star, *raised.values()]), p
        lower_before, upper_before = p["lower_s"], p["upper_s"]
    assert raised == res.info["bounds"]
    assert math.fsum(p["lifted_s"] for p in phases) == pytest.approx(
        res.lower_bound_s - T_star, rel=1e-12, abs=0.0)
    first_plan = next(p["upper_s"] for p in phases if p["upper_s"] is not None)
    drops = [p["lowered_s"] for p in phases if p["lowered_s"] is not None]
    assert math.fsum(drops) == pytest.approx(first_plan - res.info["upper_bound_s"],
                                             rel=1e-12, abs=1e-18)
    return phases


def test_phase_lifts_and_drops_add_up_on_a_chain():
    """chain8 at 0.5 P: the seeds find the first plan, the deficit bound lifts, the
    searches lower, and the enumeration's lift closes the gap at the optimum."""
    inst = io.load_instance(SMALL / "chain8-seed0_a100-pcie4.json")
    M = int(0.5 * inst.P)
    res = solve(inst, "milp", M, time_limit_s=60.0, seed=0)
    assert res.status == "optimal"
    T_star = float(inst.ideal_time_s)
    phases = check_phases(res, T_star)
    by = {p["phase"]: p for p in phases}
    assert phases[0]["phase"] == "seeds" and phases[0]["lifted_s"] == 0.0
    # the deficit bound phase raised both its sources, and its lift is theirs over T*
    d = by["deficit_bound"]
    assert set(d["sources"]) == {"deficit", "deficit_lagrange"}
    assert d["lifted_s"] == max(d["sources"].values()) - T_star > 0
    # the searches only lower; the bound phases only lift
    for name in ("local_search", "kicks"):
        if name in by:
            assert by[name]["lifted_s"] == 0.0 and by[name]["sources"] == {}
    for name in ("deficit_bound", "checkpoint_bound", "timing_lp"):
        assert by[name]["lowered_s"] == 0.0
    # the enumeration closes: its bound is the returned plan's simulated step
    e = phases[-1]
    assert e["phase"] == "enumeration" and e["lifted_s"] > 0
    step = simulate(inst, res.plan, M).step_time_s
    assert e["lower_s"] == e["upper_s"] == res.lower_bound_s == step


def test_solve_prints_the_phase_table(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``slackopt solve --solver milp`` prints each phase that ran with its plan, bound,
    drop and lift as --json reports them (a console wide enough to keep rows whole)."""
    monkeypatch.setenv("COLUMNS", "200")
    path = SMALL / "chain8-seed0_a100-pcie4.json"
    args = ("solve", path, "-s", "milp", "-b", "50%", "--seed", "0", "--time-limit", "60")
    rc, out, err = run(capsys, *args, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    phases = check_phases(_Res(doc), float(io.load_instance(path).ideal_time_s))
    assert len(phases) > 2
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    table = out[out.index("Phases: where the plan and the bound moved"):]
    table = table[:table.index("└")]
    rows = [ln for ln in table.splitlines() if ln.startswith("│")]
    assert len(rows) == len(phases)
    for row, p in zip(rows, phases, strict=True):
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[:5] == [p["phase"], fmt_time(p["upper_s"]), fmt_time(p["lower_s"]),
                             fmt_time(p["lowered_s"]), fmt_time(p["lifted_s"])]
        assert cells[5] == (", ".join(p["sources"]) or "-")


class _Res:
    """The fields of a result that :func:`check_phases` reads, from solve's --json."""

    def __init__(self, doc: dict) -> None:
        self.info = doc["info"]
        self.lower_bound_s = doc["lower_bound_s"]
