"""Figures build, carry labels with units, titles and legends, and are written as PNG and
SVG (slackopt.plot, `slackopt plot`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from matplotlib.figure import Figure

import slackopt
from slackopt import plot
from slackopt.compare import compare, write_results
from slackopt.errors import SlackoptError
from slackopt.io import load_instance, save_instance, save_plan

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "instances" / "teaching" / "tiny-gpt_a100-pcie4.json"
CHAIN = ROOT / "instances" / "teaching" / "chain8_a100-pcie4.json"
UNIT = re.compile(r"\([^()]*(?:\b(?:ms|s|GB|MB|kB|B)\b|\u00b5s|%|ps/B)[^()]*\)")


def check(fig: Figure, *, units: bool = True) -> None:
    """Every visible panel has axis labels (with a unit in parentheses), a title exists,
    and a legend exists."""
    assert isinstance(fig, Figure)
    axes = [a for a in fig.axes if a.get_visible()]
    assert axes
    titles = [fig.get_suptitle()] + [a.get_title(loc) for a in axes
                                     for loc in ("center", "left")]
    assert any(t.strip() for t in titles), "no title"
    assert fig.legends or any(a.get_legend() is not None for a in axes), "no legend"
    xlabels = [a.get_xlabel() for a in axes]
    assert any(xlabels), "no x label"
    for a in axes:
        for label in (a.get_xlabel(), a.get_ylabel()):
            if label and units and ("time" in label or "memory" in label
                                    or "throughput" in label or "cost" in label
                                    or "fraction" in label or "gap" in label):
                assert UNIT.search(label), f"no unit in axis label {label!r}"


@pytest.fixture(scope="module")
def tiny():
    inst = load_instance(TINY)
    m = slackopt.budget_bytes(inst, 0.5)
    res = slackopt.solve(inst, "slackswap", m)
    ev = slackopt.simulate(inst, res.plan, m, trace=True)
    ck = slackopt.solve(inst, "checkpoint", m)
    ev2 = slackopt.simulate(inst, ck.plan, m, trace=True)
    return inst, m, res.plan, ev, ev2


@pytest.fixture(scope="module")
def table():
    return compare([TINY, CHAIN], ["keep-all", "checkpoint", "slackswap"], [1.0, 0.7, 0.5],
                   progress=False)


def test_timeline(tiny, tmp_path: Path) -> None:
    inst, m, plan, ev, ev2 = tiny
    fig = plot.timeline(ev, inst)
    check(fig)
    assert "tiny_a100-pcie4" in fig.get_suptitle() and "50% of P" in fig.get_suptitle()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][0] == "compute"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("rebuild" in x for x in labels) and any("stall" in x for x in labels)
    assert any("D2H" in x for x in labels) and any("H2D" in x for x in labels)
    two = plot.timeline({"SlackSwap": ev, "checkpoint": ev2}, inst)
    check(two)
    assert len(two.axes) == 2 and two.axes[1].get_title(loc="left").startswith("checkpoint")
    check(plot.timeline(ev))  # without the instance: one operator colour
    for suffix in (".png", ".svg"):
        path = plot.save(fig, tmp_path / f"t{suffix}")
        assert path.stat().st_size > 1000
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "t.svg").read_bytes()[:500]


def test_timeline_needs_a_trace(tiny) -> None:
    inst, m, plan, *_ = tiny
    with pytest.raises(SlackoptError, match="trace=True"):
        plot.timeline(slackopt.simulate(inst, plan, m), inst)


def test_infeasible_timeline_says_why(tiny) -> None:
    inst, m, *_ = tiny
    ev = slackopt.simulate(inst, slackopt.Plan.keep_all(inst), m, trace=True)
    fig = plot.timeline(ev, inst)
    check(fig)
    assert "infeasible" in fig.axes[0].get_title(loc="left")


def test_memory_profile(tiny) -> None:
    inst, m, plan, ev, ev2 = tiny
    fig = plot.memory_profile(ev, inst)
    check(fig)
    ax = fig.axes[0]
    assert "device memory in use (kB)" == ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(x.startswith("budget M") for x in labels)
    assert any("keep-all peak P" in x for x in labels)
    # Peak drawn <= M.
    line = next(line for line in ax.get_lines() if line.get_label().startswith("this plan"))
    assert max(line.get_ydata()) <= m / 1e3 + 1e-9
    check(plot.memory_profile({"slackswap": ev, "checkpoint": ev2}, inst))


def test_plan_map(tiny) -> None:
    inst, m, plan, *_ = tiny
    fig = plot.plan_map(inst, plan, budget_bytes=m)
    check(fig, units=False)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0] == "embed" and ticks[-1] == "head"
    assert "block input" in [t.get_text() for t in ax.get_yticklabels()]
    assert "50% of P" in ax.get_title()
    with pytest.raises(SlackoptError):
        plot.plan_map(load_instance(CHAIN), plan)


def test_comparison_figures(table, tmp_path: Path) -> None:
    fig = plot.throughput_vs_budget(table)
    check(fig)
    assert len([a for a in fig.axes if a.get_visible()]) == 2
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:3] == ["keep-all", "checkpoint", "slackswap"]
    assert any("no feasible plan" in x for x in labels)
    one = plot.throughput_vs_budget(table, instances=["tiny_a100-pcie4"])
    assert len([a for a in one.axes if a.get_visible()]) == 1
    with pytest.raises(SlackoptError, match="not in the table"):
        plot.throughput_vs_budget(table, instances=["nope"])
    q = plot.planning_time_vs_quality(table)
    check(q)
    assert q.axes[0].get_xscale() == "log"
    check(plot.planning_time_vs_quality(table, quality="throughput"))
    with pytest.raises(SlackoptError, match="quality"):
        plot.planning_time_vs_quality(table, quality="speed")
    with pytest.raises(SlackoptError, match="column"):
        plot.throughput_vs_budget(table.drop(columns=["throughput"]))
    plot.save(fig, tmp_path / "f4.svg")


def test_link_budget_and_costs() -> None:
    fig = plot.link_budget(["tiny", "chain"], ["v100", "h100"])
    check(fig)
    ticks = " ".join(t.get_text() for t in fig.axes[0].get_xticklabels())
    assert "V100" in ticks and "H100" in ticks and "GB/s" in ticks
    with pytest.raises(KeyError):
        plot.link_budget(["tiny"], ["nosuch"])
    c = plot.cost_per_byte(load_instance(CHAIN))
    check(c)
    assert c.axes[0].get_yscale() == "log"
    check(plot.cost_per_byte(load_instance(TINY), by="category"))


def test_save_refuses_unknown_formats(tiny, tmp_path: Path) -> None:
    inst, m, plan, ev, _ = tiny
    with pytest.raises(SlackoptError, match="unknown figure format"):
        plot.save(plot.timeline(ev, inst), tmp_path / "t.jpg")


# ----------------------------------------------------------------------------- command line
@pytest.mark.slow
def test_cli_plot(table, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from slackopt.cli import main

    results = write_results(table, tmp_path / "r.csv")
    plan = tmp_path / "plan.json"
    inst = load_instance(TINY)
    save_plan(slackopt.solve(inst, "slackswap", 0.5).plan, plan, inst)
    runs = [
        ["timeline", TINY, "--solver", "slackswap", "--solver", "checkpoint", "--budget",
         "0.5", "-o", tmp_path / "t.png"],
        ["memory", TINY, "--plan", plan, "--budget", "0.5", "-o", tmp_path / "m.svg"],
        ["planmap", TINY, "--budget", "0.5", "-o", tmp_path / "p.png"],
        ["curves", results, "-o", tmp_path / "c.png"],
        ["quality", results, "-o", tmp_path / "q.png"],
        ["linkbudget", "--workload", "tiny", "--gpu", "a100", "-o", tmp_path / "l.png"],
        ["costs", CHAIN, "-o", tmp_path / "co.png"],
    ]
    for args in runs:
        rc = main(["plot", *map(str, args), "--json"])
        out, err = capsys.readouterr()
        assert rc == 0, (args, err)
        doc = json.loads(out)
        assert doc["kind"] == args[0] and Path(doc["written"][0]).stat().st_size > 1000
    for args, words in [
        (["timeline", TINY, "-o", tmp_path / "t.png"], ["exists", "--force"]),
        (["timeline", TINY, "-o", tmp_path / "t.jpg"], ["unknown figure format"]),
        (["timeline", TINY, "--solver", "nope", "-o", tmp_path / "n.png"], ["unknown solver"]),
        (["curves", tmp_path / "missing.csv", "-o", tmp_path / "x.png"], ["file not found"]),
        (["linkbudget", "--gpu", "nosuch", "-o", tmp_path / "x.png"], ["unknown GPU"]),
        (["nosuchkind", "-o", tmp_path / "x.png"], ["No such command"]),
    ]:
        rc = main(["plot", *map(str, args)])
        out, err = capsys.readouterr()
        assert rc == 2 and out == "" and "Traceback" not in err, (args, err)
        for w in words:
            assert w in err, (w, err)


def test_quality_title_counts_what_it_draws_and_legend_has_only_drawn_solvers(table) -> None:
    """The title says how many runs are drawn and why the others are not (no feasible
    plan; feasible but without the quality's value); solvers and instances without a
    point are not in the legends."""
    half = table[table["budget_fraction"] == 0.5].reset_index(drop=True)
    assert not half[half["solver"] == "keep-all"]["feasible"].any()  # keep-all: over M
    feasible = half["feasible"].astype(bool)
    n_feas = int(feasible.sum())
    assert 0 < n_feas < len(half)
    fig = plot.planning_time_vs_quality(half)
    ax = fig.axes[0]
    head, counts = ax.get_title().split("\n")
    assert counts == (f"{n_feas} of {len(half)} runs drawn; not drawn: "
                      f"{len(half) - n_feas} without a feasible plan")
    legends = [c for c in ax.get_children() if type(c).__name__ == "Legend"]
    solvers = [t.get_text() for t in legends[0].get_texts()]
    assert solvers == [s for s in ("checkpoint", "slackswap")
                       if half[(half["solver"] == s) & feasible].shape[0]]
    assert "keep-all" not in solvers
    # feasible runs without the value asked for (e.g. no lower bound: not barrier-free)
    nob = half.copy()
    nob.loc[nob["solver"] == "checkpoint", "gap_to_bound"] = float("nan")
    n_ck = int((feasible & (nob["solver"] == "checkpoint")).sum())
    fig = plot.planning_time_vs_quality(nob, quality="gap_to_bound")
    counts = fig.axes[0].get_title().split("\n")[1]
    assert counts == (f"{n_feas - n_ck} of {len(half)} runs drawn; not drawn: "
                      f"{len(half) - n_feas} without a feasible plan; {n_ck} feasible, no "
                      "lower bound (not barrier-free)")
    legends = [c for c in fig.axes[0].get_children() if type(c).__name__ == "Legend"]
    assert [t.get_text() for t in legends[0].get_texts()] == ["slackswap"]


def test_titles_wrap_between_phrases() -> None:
    """Plan-map titles break after a comma, semicolon or colon (or before "under M"),
    never inside "5.6 GB (25%)"; a phrase longer than a line alone breaks between words."""
    t = ("Plan map of gpt2-xl under M = 11.57 GB (50% of P)\nkeep 10.2 GB (46%), swap "
         "6.5 GB (29%), recompute 5.6 GB (25%) of A = 22.32 GB; each cell: share of its "
         "bytes per decision")
    assert plot.wrap_title(t, 40).split("\n") == [
        "Plan map of gpt2-xl", "under M = 11.57 GB (50% of P)",
        "keep 10.2 GB (46%), swap 6.5 GB (29%),", "recompute 5.6 GB (25%) of A = 22.32 GB;",
        "each cell:", "share of its bytes per decision"]
    assert plot.wrap_title("a" * 5 + " " + "b" * 5, 6) == "aaaaa\nbbbbb"
    assert all(len(x) <= 30 for x in plot.wrap_title(t, 30).split("\n"))


@pytest.mark.slow
def test_stage_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pipeline stage's memory over its schedule: the units strip (ideal schedule and
    the plan as run), labelled F/B boxes where the evaluator ran them, the keep-all
    warm-up peak annotated with the microbatches in flight (1F1B stage 0 of 2: 2), the
    plan under M; `slackopt plot memory` of a stage draws it."""
    from matplotlib.patches import Rectangle

    from slackopt.stage import build_stage
    from slackopt.workloads import make

    inst = build_stage(make("chain"), "1f1b", 0, 2, 4)
    m = slackopt.budget_bytes(inst, 0.5)
    ev = slackopt.simulate(inst, slackopt.solve(inst, "slackswap", m).plan, m, trace=True)
    fig = plot.stage_memory({"slackswap": ev}, inst)
    check(fig)
    strip, ax = fig.axes
    assert [t.get_text() for t in strip.get_yticklabels()] == ["slackswap (as run)",
                                                               "ideal schedule"]
    names = ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"]
    assert [f"{u.kind}{u.microbatch}" for u in inst.units] == names
    assert [t.get_text() for t in strip.texts] == names + names
    boxes = [p for p in strip.patches if isinstance(p, Rectangle)]
    ideal, run_ = boxes[:8], boxes[8:]
    first = inst.unit_last_op - [u.n_ops for u in inst.units] + 1
    for box, a, b in zip(ideal, inst.start_s[first], inst.end_s[inst.unit_last_op],
                         strict=True):  # the ideal schedule's units, in ms
        assert box.get_x() == pytest.approx(a * 1e3) and box.get_width() == pytest.approx(
            (b - a) * 1e3)
    ran = {e["name"]: e for e in ev.trace if e["lane"] == "compute" and not e["rebuild"]}
    for box, u, last in zip(run_, inst.units, inst.unit_last_op, strict=True):
        end = ran[inst.scheduled_ops[last].name]["end_s"]  # the unit's last op, as run
        assert box.get_x() + box.get_width() == pytest.approx(end * 1e3)
        assert box.get_x() >= u.earliest_start_s * 1e3 - 1e-9  # never before its input
    assert ax.get_xlabel() == "time since the start of the stage's step (ms)"
    assert [t.get_text() for t in ax.texts] == ["keep-all peak: 2 microbatches in flight"]
    keep = next(x for x in ax.get_lines() if x.get_label().startswith("keep everything"))
    assert max(keep.get_ydata()) == pytest.approx(inst.P / 1e9)
    used = next(x for x in ax.get_lines() if x.get_label().startswith("slackswap"))
    assert max(used.get_ydata()) == pytest.approx(ev.peak_bytes / 1e9) and ev.peak_bytes <= m
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "forward unit (F)" in labels and "backward unit (B)" in labels
    assert "stage 0 of 2, 4 microbatches" in fig.get_suptitle()
    path = tmp_path / "stage.json"
    save_instance(inst, path)
    from slackopt.cli import main

    rc = main(["plot", "memory", str(path), "-b", "0.3", "-o", str(tmp_path / "m.png"),
               "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["kind"] == "memory" and (tmp_path / "m.png").stat().st_size > 1000


def test_stage_memory_names_an_infeasible_plan(tmp_path: Path) -> None:
    """A plan that runs out of memory is drawn up to where it stopped, its legend entry
    says so, and the units it never reached are left out of its strip row."""
    from matplotlib.patches import Rectangle

    from slackopt.plan import Plan
    from slackopt.stage import build_stage
    from slackopt.workloads import make

    inst = build_stage(make("chain"), "zb-h1", 0, 2, 4)
    m = slackopt.budget_bytes(inst, 0.3)
    ev = slackopt.simulate(inst, Plan.keep_all(inst), m, trace=True)
    assert not ev.feasible
    fig = plot.stage_memory({"keep-all": ev}, inst)
    check(fig)
    strip, ax = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(x.startswith("keep-all: in use (infeasible, stopped at") for x in labels)
    assert "weight-gradient unit (W)" in labels
    boxes = [p for p in strip.patches if isinstance(p, Rectangle)]
    assert len(inst.units) < len(boxes) < 2 * len(inst.units)
