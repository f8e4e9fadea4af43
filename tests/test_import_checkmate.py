"""Checkmate training graphs as instances (slackopt.importers.checkmate, ``slackopt
import checkmate``). The graphs are written here, in the format the Checkmate and Moccasin
repositories ship (networkx node-link JSON, ``backward``, ``cost_cpu`` and ``cost_ram``
per node); none of their files is used. A small graph is checked field by field by hand;
chains, skips, branches and several backward readers, up to 1,000 nodes, are planned by
every registered solver, and milp's certified bound is at most every plan's simulated
step.
"""

from __future__ import annotations

import gzip
import json
import random

import pytest

from slackopt import solve
from slackopt.cli import main
from slackopt.errors import FileFormatError, SlackoptError
from slackopt.hardware import gpu as gpu_preset
from slackopt.hardware import roofline_s
from slackopt.importers.checkmate import checkmate_instance, parse_cost_unit, read_checkmate
from slackopt.instance import budget_bytes
from slackopt.simulate import simulate
from slackopt.solver import registered_solvers

MB = 2**20


def node(i, name, backward, cpu, ram):
    return {"name": name, "backward": backward, "cost_cpu": cpu, "cost_ram": ram, "id": i}


def doc(nodes, links, name="g", key="links"):
    return {"directed": True, "multigraph": False, "graph": {"name": name}, "nodes": nodes,
            key: [{"source": u, "target": v} for u, v in links]}


def small():
    """x -> a -> b -> Loss, a skip x -> b; backward b_bwd reads b and a (two readers of a),
    a_bwd reads a and x, x_bwd reads x. Costs in units, sizes in bytes."""
    nodes = [node(0, "x", False, 10, 100), node(1, "a", False, 20, 200),
             node(2, "b", False, 30, 300), node(3, "Loss", True, 5, 4),
             node(4, "b_bwd", True, 40, 300), node(5, "a_bwd", True, 50, 200),
             node(6, "x_bwd", True, 60, 100)]
    links = [(0, 1), (1, 2), (0, 2), (2, 3), (3, 4), (2, 4), (1, 4), (4, 5), (1, 5), (0, 5),
             (5, 6), (0, 6)]
    return doc(nodes, links, "small")


def test_small_graph_field_by_field():
    inst = checkmate_instance(small(), cost_unit="1ms", gpu="a100")
    assert [(o.name, o.phase, o.duration_s, o.layer) for o in inst.ops] == [
        ("x", "fwd", 0.010, 0), ("a", "fwd", 0.020, 1), ("b", "fwd", 0.030, 2),
        ("Loss", "bwd", 0.005, 2), ("b_bwd", "bwd", 0.040, 2), ("a_bwd", "bwd", 0.050, 1),
        ("x_bwd", "bwd", 0.060, 0)]
    t = {x.name: x for x in inst.tensors}
    assert [(n, t[n].size_bytes, t[n].readers) for n in ("x", "a", "b")] == [
        ("x", 100, ("a", "b", "a_bwd", "x_bwd")), ("a", 200, ("b", "b_bwd", "a_bwd")),
        ("b", 300, ("Loss", "b_bwd"))]
    assert set(inst.saved_names) == {"x", "a", "b"}
    # recipes: re-run the node; its saved predecessors are the inputs
    assert (t["x"].recipe.ops, t["x"].recipe.inputs) == (("x",), ())
    assert (t["a"].recipe.ops, t["a"].recipe.inputs) == (("a",), ("x",))
    assert (t["b"].recipe.ops, t["b"].recipe.inputs) == (("b",), ("x", "a"))
    assert t["b_bwd"].category == "grad" and t["b_bwd"].recipe is None
    assert inst.ideal_time_s == pytest.approx(0.215)
    # keep-all peak: at b_bwd, x a b (600) + Loss's 4 + b_bwd's 300
    assert inst.P == 904
    assert inst.meta["checkmate"] == {"source": "<checkmate graph>", "nodes": 7, "forward": 3,
                                      "backward": 4, "edges": 12, "saved": 3,
                                      "not_rebuildable": 0}


def test_unsaved_predecessors_are_rebuilt_inside_the_recipe():
    """A forward node no backward node reads is rebuilt inside its readers' recipes
    (transient bytes); past max_recipe_ops nodes there is no recipe (c = inf)."""
    n = 6
    nodes = [node(i, f"f{i}", False, 1, 10 * (i + 1)) for i in range(n)]
    nodes += [node(n, "Loss", True, 1, 1), node(n + 1, "g", True, 1, 1)]
    links = [(i, i + 1) for i in range(n - 1)] + [(n - 1, n), (n, n + 1), (n - 1, n + 1),
                                                  (0, n + 1)]
    inst = checkmate_instance(doc(nodes, links), cost_unit="1us", max_recipe_ops=4)
    assert set(inst.saved_names) == {"f0", "f5"}
    t = inst.tensor("f5")
    assert t.recipe is None  # f5 <- f4 <- f3 <- f2 <- f1 <- f0: five nodes to rebuild
    inst = checkmate_instance(doc(nodes, links), cost_unit="1us", max_recipe_ops=5)
    r = inst.tensor("f5").recipe
    assert (r.ops, r.inputs, r.transient_bytes) == (("f1", "f2", "f3", "f4", "f5"), ("f0",),
                                                    20 + 30 + 40 + 50)
    assert inst.meta["checkmate"]["not_rebuildable"] == 0


def test_order_names_edges_gzip_and_units(tmp_path):
    """graph.order sets the order; networkx 3.4's "edges" key reads as "links"; repeated
    names get their id; a gzip file reads as JSON; --cost-unit forms and flops."""
    d = small()
    d["nodes"] = list(reversed(d["nodes"]))
    d["graph"]["order"] = list(range(7))
    d["edges"] = d.pop("links")
    d["nodes"][0]["name"] = "a"  # x_bwd renamed a: both a's get their id
    (tmp_path / "g.json.gz").write_bytes(gzip.compress(json.dumps(d).encode()))
    inst = read_checkmate(tmp_path / "g.json.gz", cost_unit="10us")
    assert [o.name for o in inst.ops] == ["x", "a#1", "b", "Loss", "b_bwd", "a_bwd", "a#6"]
    assert inst.ops[0].duration_s == pytest.approx(1e-4)
    assert inst.name == "small"
    assert parse_cost_unit("2e-6") == 2e-6 and parse_cost_unit(" 0.5 ms ") == 5e-4
    assert parse_cost_unit("FLOPS") == "flops"
    for bad in ("0", "-1us", "1 min", "us", "nan"):
        with pytest.raises(SlackoptError, match="--cost-unit"):
            parse_cost_unit(bad)
    g = gpu_preset("h100")
    inst = checkmate_instance(small(), cost_unit="flops", gpu="h100")
    assert inst.ops[1].duration_s == roofline_s(g, 20.0, 200.0)
    assert inst.ops[1].flops == 20.0 and inst.link.name == g.default_link


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(nodes=[]), "nodes"),
    (lambda d: d["nodes"][1].pop("backward"), "nodes[1].backward"),
    (lambda d: d["nodes"][2].update(cost_cpu=-1), "nodes[2].cost_cpu"),
    (lambda d: d["nodes"][2].update(cost_ram=1.5), "nodes[2].cost_ram"),
    (lambda d: d["nodes"][3].update(id=0), "nodes[3].id"),
    (lambda d: d["links"].append({"source": 0, "target": 99}), "links[12]"),
    (lambda d: d["links"].append({"source": 2, "target": 1}), "links[12]"),
    (lambda d: d["nodes"][4].update(backward=False), "nodes[id=4].backward"),
    (lambda d: d["graph"].update(order=[0, 1]), "graph.order"),
    (lambda d: d.update(directed=False), "directed"),
])
def test_bad_graphs_name_the_field(tmp_path, capsys, edit, field):
    d = small()
    edit(d)
    with pytest.raises(FileFormatError) as e:
        checkmate_instance(d, cost_unit="1us")
    assert e.value.field == field
    (tmp_path / "bad.json").write_text(json.dumps(d))
    rc = main(["import", "checkmate", str(tmp_path / "bad.json"), "--cost-unit", "1us", "-o",
               str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and field in err and "bad.json" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out.json").exists()


def test_cli_imports_then_solves(tmp_path, capsys):
    (tmp_path / "g.json").write_text(json.dumps(small()))
    rc = main(["import", "checkmate", str(tmp_path / "g.json"), "--cost-unit", "1ms",
               "--gpu", "h100", "-o", str(tmp_path / "i.json"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["checkmate"]["saved"] == 3 and out["link"] == "pcie5"
    assert main(["solve", str(tmp_path / "i.json"), "--solver", "slackswap", "--budget",
                 "1.0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evaluation"]["feasible"]
    # the unit is not in the file: it must be given
    rc = main(["import", "checkmate", str(tmp_path / "g.json"), "-o", str(tmp_path / "j.json")])
    assert rc == 2 and "--cost-unit" in capsys.readouterr().err
    # never written over the graph it reads
    rc = main(["import", "checkmate", str(tmp_path / "g.json"), "--cost-unit", "1us", "-o",
               str(tmp_path / "g.json"), "--force"])
    assert rc == 2 and json.loads((tmp_path / "g.json").read_text())["graph"]["name"] == "small"


def training_graph(n_fwd, *, skip=0, branch=0, readers=2, seed=0):
    """A Checkmate-style training graph: a forward chain of n_fwd nodes, plus a skip edge
    i -> i + skip every skip nodes, plus a side branch (i -> side -> i + 2) every branch
    nodes; Loss; backward nodes in reverse, each reading the gradient chain and the outputs
    of its node and the readers - 1 nodes before it. Costs drawn from `seed`."""
    rnd = random.Random(seed)
    nodes, links, fwd = [], [], []
    k = 0
    for i in range(n_fwd):
        nodes.append(node(k, f"f{i}", False, rnd.randint(50, 400), rnd.randint(8, 64) * MB))
        fwd.append(k)
        k += 1
    for i in range(n_fwd - 1):
        links.append((fwd[i], fwd[i + 1]))
        if skip and i % skip == 0 and i + skip < n_fwd:
            links.append((fwd[i], fwd[i + skip]))
    if branch:
        for i in range(0, n_fwd - 2, branch):
            nodes.append(node(k, f"side{i}", False, rnd.randint(20, 80), rnd.randint(4, 16) * MB))
            links += [(fwd[i], k), (k, fwd[i + 2])]
            k += 1
    # the side nodes must come before their reader: order forward nodes by position
    order = sorted(nodes, key=lambda x: (int(x["name"][4:]) + 0.5 if x["name"].startswith("side")
                                         else int(x["name"][1:])))
    loss = k
    nodes.append(node(loss, "Loss", True, 20, 4))
    links.append((fwd[-1], loss))
    prev, k = loss, k + 1
    for i in reversed(range(n_fwd)):
        nodes.append(node(k, f"f{i}_bwd", True, rnd.randint(100, 800), nodes[fwd[i]]["cost_ram"]))
        links.append((prev, k))
        links += [(fwd[j], k) for j in range(max(0, i - readers + 1), i + 1)]
        prev, k = k, k + 1
    d = doc(order + nodes[loss:], links, f"train{n_fwd}")
    return d


GRAPHS = {
    "chain": dict(n_fwd=30),
    "skips": dict(n_fwd=30, skip=3),
    "branches": dict(n_fwd=30, branch=4),
    "three-readers": dict(n_fwd=30, skip=5, branch=6, readers=3),
}


def plan_with_every_solver(inst, budget, time_limit_s):
    """Every registered solver's plan at `budget`, simulated; returns {solver: step or
    None} and milp's certified lower bound."""
    m = budget_bytes(inst, budget)
    steps, bound = {}, None
    for name in registered_solvers():
        r = solve(inst, name, budget, time_limit_s=time_limit_s, seed=0)
        if name == "milp":
            bound = r.lower_bound_s
        ev = simulate(inst, r.plan, m) if r.plan is not None else None
        steps[name] = ev.step_time_s if ev is not None and ev.feasible else None
    return steps, bound


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(GRAPHS))
def test_every_solver_plans_imported_graphs_and_milp_bounds_them(shape, tmp_path):
    (tmp_path / "g.json").write_text(json.dumps(training_graph(**GRAPHS[shape])))
    inst = read_checkmate(tmp_path / "g.json", cost_unit="1us", gpu="a100")
    assert len(inst.saved_names) >= 30
    for budget in (0.6, 0.35):
        steps, bound = plan_with_every_solver(inst, budget, 5.0)
        feasible = {k: v for k, v in steps.items() if v is not None}
        assert bound is not None and bound >= inst.ideal_time_s - 1e-12
        assert len(feasible) >= 5, steps
        assert all(bound <= v + 1e-9 for v in feasible.values()), (bound, feasible)


@pytest.mark.slow
def test_a_thousand_node_graph_with_skips(tmp_path):
    """499 forward nodes with skips, Loss, 499 backward nodes (999 in all): every solver
    plans it at 0.4 P and milp's certified bound is at most every plan's step."""
    d = training_graph(499, skip=4)
    assert len(d["nodes"]) == 999
    (tmp_path / "g.json").write_text(json.dumps(d))
    inst = read_checkmate(tmp_path / "g.json", cost_unit="1us", gpu="a100")
    steps, bound = plan_with_every_solver(inst, 0.4, 5.0)
    feasible = {k: v for k, v in steps.items() if v is not None}
    assert bound is not None and len(feasible) >= 5, steps
    assert all(bound <= v + 1e-9 for v in feasible.values()), (bound, feasible)
