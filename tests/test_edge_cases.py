"""Issue 7 edge cases 3, 4, 5, 8, 10 and 11 answered from the command line.

Each test runs ``slackopt solve`` (or ``simulate`` with a hand-written plan file) on a
shipped instance of ``instances/edge/`` (written by ``instances/edge/make_edge_cases.py``,
whose docstring describes them) and checks the answer worked out by hand in the comments.
Units: bytes and seconds; the edge link moves 100 B/s (1 B/s or 10 B/s where noted), no
copy latency.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slackopt import io
from slackopt.cli import main
from slackopt.simulate import simulate
from slackopt.solvers.baselines import UNBOUNDED_BYTES, checkpoint_plan, sqrt_checkpoint_plan
from slackopt.workloads import make

EDGE = Path(__file__).resolve().parents[1] / "instances" / "edge"
approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-12)  # noqa: E731


def solve_json(capsys: pytest.CaptureFixture[str], name: str, solver: str,
               budget: str) -> dict:
    """``slackopt solve instances/edge/<name>.json --solver S --budget B --json``."""
    rc = main(["solve", str(EDGE / f"{name}.json"), "--solver", solver, "--budget", budget,
               "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "Traceback" not in out + err
    return json.loads(out)


def simulate_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str,
                  decisions: dict[str, str], budget: str) -> dict:
    """``slackopt simulate`` of a hand-written plan file on an edge instance."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "slackopt-plan", "schema_version": 1,
                                "instance": name, "decisions": decisions}))
    rc = main(["simulate", str(EDGE / f"{name}.json"), str(plan), "--budget", budget,
               "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


def test_edge_files_are_what_the_script_writes(tmp_path: Path) -> None:
    import runpy
    mod = runpy.run_path(str(EDGE / "make_edge_cases.py"))
    assert mod["main"](["--out", str(tmp_path)]) == 0
    for stem in mod["CASES"]:
        fresh, shipped = (io.instance_to_dict(io.load_instance(d / f"{stem}.json"))
                          for d in (tmp_path, EDGE))
        assert fresh == shipped, "rerun python instances/edge/make_edge_cases.py --force"


# ----------------------------------------------------------------------------- case 3
def test_two_readers_stays_resident_until_the_last_reader(capsys, tmp_path) -> None:
    # a (100 B) is read by b2 and b1; bX between them holds 60 B of workspace. a stays
    # until b1, so the keep-all peak is at bX: P = 100 + 60 = 160 (not the forward 150).
    d = solve_json(capsys, "two_readers", "keep-all", "1.0")
    assert d["status"] == "optimal" and d["peak_bytes_keep_all"] == 160
    ev = d["evaluation"]
    # T* = 1 + 1.5 + 3 * 1 = 5.5 s.
    assert ev["feasible"] and ev["step_time_s"] == approx(5.5) and ev["peak_bytes"] == 160
    # One byte less: keep-all fails at bX (a still resident), smallest budget 160.
    d = solve_json(capsys, "two_readers", "keep-all", "159B")
    assert d["status"] == "infeasible" and d["min_budget_bytes"] == 160
    assert "'bX' cannot allocate 60 B" in d["evaluation"]["failure"]
    # SlackSwap: a cannot be rebuilt and its 1 s D2H ends after (1 - g) T_F of the
    # forward pass it would have to hide in, b's rebuild does not help at bX: it reaches
    # 160 B and no less, and says so.
    d = solve_json(capsys, "two_readers", "slackswap", "155B")
    assert d["status"] == "infeasible" and d["min_budget_bytes"] == 160
    d = solve_json(capsys, "two_readers", "slackswap", "160B")  # M = P: keep-all at T*
    assert d["status"] == "optimal" and d["evaluation"]["step_time_s"] == approx(5.5)
    # The runtime can still run a swap of a at 150 B, by evicting and re-fetching it:
    # D2H [1, 2]; forward ends 2.5; H2D [2.5, 3.5] (b2 waits 1 s); b2 [3.5, 4.5];
    # bX needs 60 B with a resident (160 > 150), nothing in flight: a is evicted,
    # bX [4.5, 5.5]; a comes back [5.5, 6.5] (b1 waits 1 s); b1 [6.5, 7.5].
    d = simulate_json(capsys, tmp_path, "two_readers", {"a": "swap", "b": "keep"}, "150B")
    ev = d["evaluation"]
    assert ev["feasible"] and ev["step_time_s"] == approx(7.5)
    assert ev["stall_bwd_s"] == approx(2.0) and ev["evictions"] == 1
    assert ev["d2h_bytes"] == 100 and ev["h2d_bytes"] == 200 and ev["peak_bytes"] == 150


# ----------------------------------------------------------------------------- case 4
def test_recompute_chain_rebuilds_in_dependency_order(capsys) -> None:
    # x 10, a 20, b 40, c 80 B; f4 holds 100 B. P = 10 + 20 + 40 + 80 + 100 = 250 at f4;
    # T* = 1 + 0.5 + 0.25 + 0.125 + 1 + 4 = 6.875 s.
    d = solve_json(capsys, "recompute_chain", "slackswap", "1.0")
    assert d["peak_bytes_keep_all"] == 250 and d["status"] == "optimal"  # keep-all, T*
    assert d["evaluation"]["step_time_s"] == approx(6.875)
    # M = 150 on a 1 B/s link: keep x and a, recompute b and c. f3 holds x+a+b+c = 150,
    # f4 holds x + a + 100 = 130; bC's rebuild chain: b from a [2.875, 3.125], then c
    # from b [3.125, 3.25] holding x + a + b + c = 150. T = 6.875 + 0.375 = 7.25.
    d = solve_json(capsys, "recompute_chain", "slackswap", "150B")
    ev = d["evaluation"]
    assert d["status"] == "feasible" and d["decisions"] == {"keep": 2, "swap": 0, "recomp": 2}
    assert d["bytes_by_decision"]["recomp"] == 120
    assert ev["step_time_s"] == approx(7.25) and ev["recompute_s"] == approx(0.375)
    assert ev["peak_bytes"] == 150
    # Below 150 B every rebuild of c needs b and a resident with x (150 B); the slow link
    # cannot help: infeasible, smallest budget 150 B (also at a budget of 0 bytes).
    for budget in ("149B", "0B"):
        d = solve_json(capsys, "recompute_chain", "slackswap", budget)
        assert d["status"] == "infeasible" and d["min_budget_bytes"] == 150


def test_swapped_recipe_input_waits_for_its_h2d(capsys, tmp_path) -> None:
    # two_readers with a swapped and b recomputed: a's D2H [1, 2]; forward ends 2.5 and
    # frees a's device copy; b's rebuild needs a: H2D [2.5, 3.5], rebuild b (f2, 1.5 s)
    # [3.5, 5.0]; b2 [5, 6], bX [6, 7], b1 [7, 8]. T = 8 = T* + 1 stall + 1.5 recompute.
    d = simulate_json(capsys, tmp_path, "two_readers", {"a": "swap", "b": "recomp"}, "1000B")
    ev = d["evaluation"]
    assert ev["feasible"] and ev["step_time_s"] == approx(8.0)
    assert ev["stall_bwd_s"] == approx(1.0) and ev["recompute_s"] == approx(1.5)
    assert ev["h2d_bytes"] == 100


# ----------------------------------------------------------------------------- case 5
def test_never_recompute_op_invalidates_its_recipes(capsys, tmp_path) -> None:
    # x 10, a 100 (made by the all-reduce), b 100 (f2 from a), f3 holds 100 B:
    # P = 310 at f3; T* = 1 + 1 + 0.5 + 1 + 3 = 6.5 s.
    d = solve_json(capsys, "never_recompute", "slackswap", "0.9")
    # 279 B: a cannot be rebuilt (its recipe runs the all-reduce), so b is recomputed:
    # f3 holds 210 B, b's rebuild 210 B. T = 6.5 + 0.5 = 7.
    assert d["status"] == "feasible" and d["peak_bytes_keep_all"] == 310
    assert d["decisions"] == {"keep": 2, "swap": 0, "recomp": 1}
    assert d["bytes_by_decision"]["recomp"] == 100
    assert d["evaluation"]["step_time_s"] == approx(7.0)
    d = solve_json(capsys, "never_recompute", "slackswap", "0B")
    assert d["status"] == "infeasible" and d["min_budget_bytes"] == 210
    # A plan that recomputes a is refused when loaded: exit 2, naming the tensor.
    plan = tmp_path / "bad.json"
    plan.write_text(json.dumps({"format": "slackopt-plan", "schema_version": 1,
                                "decisions": {"x": "keep", "a": "recomp", "b": "keep"}}))
    rc = main(["simulate", str(EDGE / "never_recompute.json"), str(plan)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "Traceback" not in err
    assert str(plan) in err and "decisions.a" in err


# ----------------------------------------------------------------------------- case 8
def test_slow_link_shows_as_stalls_not_early_frees(capsys, tmp_path) -> None:
    # a (100 B) and f2's 100 B workspace on a 10 B/s link: P = 200, T* = 4.
    # A swap of a frees a's device copy only when its D2H ends: D2H [1, 11], f2 waits
    # until 11 (forward stall 10), runs [11, 12]; H2D [12, 22] (not before the D2H end),
    # b2 [12, 13], bA waits for the H2D end (9 s): [22, 23]. T = 23.
    d = simulate_json(capsys, tmp_path, "slow_link", {"a": "swap"}, "150B")
    ev = d["evaluation"]
    assert ev["feasible"] and ev["step_time_s"] == approx(23.0)
    assert ev["stall_fwd_s"] == approx(10.0) and ev["stall_bwd_s"] == approx(9.0)
    assert ev["peak_bytes"] == 100
    # SlackSwap will not plan a swap that stalls the forward pass; a cannot be rebuilt,
    # so below P it answers infeasible with P as its smallest budget.
    d = solve_json(capsys, "slow_link", "slackswap", "150B")
    assert d["status"] == "infeasible" and d["min_budget_bytes"] == 200
    d = solve_json(capsys, "slow_link", "slackswap", "1.0")  # keep-all at T*: optimal
    assert d["status"] == "optimal" and d["evaluation"]["step_time_s"] == approx(4.0)


# ----------------------------------------------------------------------------- case 10
@pytest.mark.parametrize("solver", ["slackswap", "keep-all", "checkpoint", "sqrt-checkpoint"])
@pytest.mark.parametrize("budget", ["0B", "0.5", "1.0"])
def test_zero_byte_tensors_fit_any_budget(capsys, solver, budget) -> None:
    # Every tensor has 0 bytes: P = 0, so even M = 0 is keep-all at T* = 4 s.
    d = solve_json(capsys, "zero_bytes", solver, budget)
    assert d["status"] == "optimal" and d["peak_bytes_keep_all"] == 0
    assert d["evaluation"]["step_time_s"] == approx(4.0) and d["evaluation"]["peak_bytes"] == 0
    assert d["decisions"] == {"keep": 2, "swap": 0, "recomp": 0}


@pytest.mark.parametrize("solver", ["slackswap", "keep-all", "checkpoint", "sqrt-checkpoint"])
def test_no_saved_tensors(capsys, solver) -> None:
    # One 64-byte forward temporary, nothing saved: P = 64, nothing to decide.
    d = solve_json(capsys, "no_saved", solver, "1.0")
    assert d["status"] == "optimal" and d["evaluation"]["step_time_s"] == approx(3.0)
    assert d["decisions"] == {"keep": 0, "swap": 0, "recomp": 0}
    for budget in ("0.5", "0B", "63B"):
        d = solve_json(capsys, "no_saved", solver, budget)
        assert d["status"] == "infeasible" and d["min_budget_bytes"] == 64


@pytest.mark.parametrize("solver", ["slackswap", "keep-all", "checkpoint", "sqrt-checkpoint"])
def test_budget_above_p_is_keep_all(capsys, solver) -> None:
    d = solve_json(capsys, "recompute_chain", solver, "2.5P")
    assert d["status"] == "optimal" and d["budget_bytes"] == 625  # keep-all at T*
    assert d["decisions"] == {"keep": 4, "swap": 0, "recomp": 0}
    assert d["evaluation"]["step_time_s"] == approx(6.875)


# ----------------------------------------------------------------------------- case 11
UNET2_NOTE = "not contiguous"


def test_unet2_checkpointing_by_hand(capsys) -> None:
    """unet(2, batch=1, size=8, channels=2, dtype_bytes=4): saved x 512, e0 512, p0 128,
    e1 256, p1 64, k1 512, k0 1024, d0 512 B.

    Keep-all peaks at dec0.conv.b, the first backward op after loss.bwd: x + e0 + p0 +
    e1 + p1 + k1 + k0 (d0 is freed after loss.bwd) + g_d0 512 + g_k0 1024 = 4544 = P.

    Block checkpointing, bottom k levels (layer numbers):
    - k = 1 recomputes e0, p0, k0, d0. loss.bwd needs d0, whose recipe needs k0, whose
      recipe needs k1 (kept) and e0: e0 is rebuilt at the start of the backward pass and,
      read by enc0.pool.b at the very end (the long skip), stays. At dec0.conv.b only p0
      is missing: 4544 - 128 = 4416 B.
    - k = 2 also recomputes e1, p1, k1: rebuilding k0 now rebuilds k1, p1, e1, p0 and e0
      first, all of which stay for their late readers: 4544 B, no gain.
    So the smallest budget checkpointing reaches is 4416 B with k = 1 (a bisection that
    tested k = 2 first called 4416 B infeasible). Recompute time at k = 1: enc0.conv
    (e0) + dec1.conv, dec0.up, dec0.cat (k0) + dec0.conv (d0); p0's enc0.pool is rebuilt
    before enc1.conv.b.
    sqrt(n) checkpointing (segments of ceil(sqrt(2)) = 2 levels) keeps x and k1 and
    recomputes the rest: at dec0.conv.b x + k1 + e0 + k0 + g_d0 + g_k0 = 4096 B.
    """
    d = solve_json(capsys, "unet2", "checkpoint", "1.0")
    T_star = d["evaluation"]["ideal_time_s"]
    assert d["peak_bytes_keep_all"] == 4544 and d["status"] == "optimal"
    assert d["evaluation"]["step_time_s"] == T_star and d["info"]["k"] == 0
    inst = make("unet", layers=2, batch=1, size=8, channels=2, dtype_bytes=4)
    dur = {op.name: op.duration_s for op in inst.ops}
    rebuild = (dur["enc0.conv"] + dur["enc0.pool"] + dur["dec1.conv"] + dur["dec0.up"]
               + dur["dec0.cat"] + dur["dec0.conv"])
    d = solve_json(capsys, "unet2", "checkpoint", "4416B")
    ev = d["evaluation"]
    assert d["status"] == "feasible" and d["info"]["k"] == 1
    assert d["info"]["block_structure"] is False and UNET2_NOTE in d["info"]["note"]
    assert ev["peak_bytes"] == 4416 and ev["recompute_s"] == pytest.approx(rebuild, rel=1e-9)
    assert ev["step_time_s"] == pytest.approx(T_star + rebuild, rel=1e-9)
    d = solve_json(capsys, "unet2", "checkpoint", "4415B")
    assert d["status"] == "infeasible" and d["min_budget_bytes"] == 4416
    assert d["info"]["k"] == 1 and d["info"]["peak_bytes"] == 4416
    d = solve_json(capsys, "unet2", "sqrt-checkpoint", "4096B")
    assert d["status"] == "feasible" and d["evaluation"]["peak_bytes"] == 4096
    assert d["decisions"] == {"keep": 2, "swap": 0, "recomp": 6}
    d = solve_json(capsys, "unet2", "sqrt-checkpoint", "4095B")
    assert d["status"] == "infeasible" and d["min_budget_bytes"] == 4096
    # At M >= P both return keep-all: T = T* (sqrt used to return a 1.32x slower plan).
    for solver in ("checkpoint", "sqrt-checkpoint"):
        d = solve_json(capsys, "unet2", solver, "1.0")
        assert d["decisions"] == {"keep": 8, "swap": 0, "recomp": 0}
        assert d["evaluation"]["step_time_s"] == T_star


def test_unet1_checkpointing_does_not_apply_and_says_so(capsys, tmp_path) -> None:
    # One level: dec0.conv.b reads k0, whose recipe reads p0 and e0; e0 (the long skip)
    # and p0 stay for enc0.pool.b and mid.conv.b, x cannot be rebuilt: nothing live at
    # the peak can go, so no checkpoint plan peaks below P.
    path = tmp_path / "unet1.json"
    assert main(["make", "unet", "--layers", "1", "-o", str(path)]) == 0
    capsys.readouterr()
    for solver in ("checkpoint", "sqrt-checkpoint"):
        rc = main(["solve", str(path), "--solver", solver, "--budget", "0.8", "--json"])
        out, err = capsys.readouterr()
        d = json.loads(out)
        assert rc == 0 and d["status"] == "infeasible"
        assert d["min_budget_bytes"] == d["peak_bytes_keep_all"]
        assert d["info"]["applies"] is False and "does not apply" in d["info"]["note"]
        assert d["decisions"]["recomp"] == 0
        rc = main(["solve", str(path), "--solver", solver, "--budget", "0.8"])
        out, err = capsys.readouterr()
        assert rc == 0 and "note: " + solver + " does not apply" in " ".join(out.split())


@pytest.mark.parametrize("levels", [1, 2, 3, 4])
def test_unet_checkpoint_never_exceeds_keep_all(levels) -> None:
    from slackopt import solve
    inst = make("unet", layers=levels)
    P = inst.P
    for frac in np.round(np.arange(0.3, 1.21, 0.1), 2):
        M = int(frac * P)
        for name in ("checkpoint", "sqrt-checkpoint"):
            res = solve(inst, name, M)
            peak = simulate(inst, res.plan, UNBOUNDED_BYTES).peak_bytes
            assert peak <= P, (name, frac)
            assert res.info["peak_bytes"] == peak
            if M >= P:
                assert res.status == "optimal" and res.plan.counts()["recomp"] == 0
                assert res.evaluation.step_time_s == inst.ideal_time_s
            elif res.status == "feasible":
                assert res.evaluation.feasible and peak <= M
            else:
                mb = res.info["min_budget_bytes"]
                assert M < mb <= P and peak == mb
                assert solve(inst, name, mb).status == ("optimal" if mb == P else "feasible")
                if res.info["applies"] is False:
                    assert mb == P and "does not apply" in res.info["note"]
        # The answer is the best rule plan: no k has a smaller peak than reported.
        best = min(simulate(inst, checkpoint_plan(inst, k), UNBOUNDED_BYTES).peak_bytes
                   for k in range(levels + 1))
        res = solve(inst, "checkpoint", 0)
        assert res.info["min_budget_bytes"] == best
    sq = simulate(inst, sqrt_checkpoint_plan(inst), UNBOUNDED_BYTES).peak_bytes
    assert solve(inst, "sqrt-checkpoint", 0).info["min_budget_bytes"] == min(sq, P)
