"""Checkmate training graphs as instances (``slackopt import checkmate``).

A Checkmate graph (Jain et al., MLSys 2020; the ``DFGraph`` of its repository, and the
same graphs as Moccasin's repository ships them) is a ``networkx`` node-link JSON
document: ``{"directed": true, "graph": {"name": ...}, "nodes": [{"id", "name",
"backward", "cost_cpu", "cost_ram"}, ...], "links": [{"source", "target"}, ...]}``
(``"edges"`` is accepted for ``"links"``, as networkx 3.4 writes it). An edge u -> v
means v reads u's output. What the instance makes of it (docs/workloads.md, "Checkmate
graphs"):

- **Ops.** Every node is one op, in the order the file lists them (or
  ``graph["order"]``, a list of node ids, when present); that order must be topological,
  with every forward node (``backward`` false) before every backward one. Duration =
  ``cost_cpu`` x the unit given (``--cost-unit``: a time per unit; or ``flops``: the
  roofline of ``--gpu`` for that many FLOPs writing ``cost_ram`` bytes). The file does
  not say its unit, so it must be given.
- **Tensors.** Every node produces one tensor of ``cost_ram`` bytes (its output), read
  by its successors, held from its start to the end of its last reader. A forward
  node's output read by a backward node is a *saved* tensor; a backward node's output is
  a gradient (kept until its readers end). Parameters, their gradients and the graph's
  input are model state, outside the budget (``cost_ram_parameters`` is not in the
  file). No workspace.
- **Recipes.** A saved tensor is rebuilt by re-running its node; its saved forward
  predecessors are the recipe's inputs (resident when the rebuild runs: kept, fetched
  back, or rebuilt first), and a predecessor that is not saved is rebuilt inside the
  same recipe (its bytes transient), up to ``max_recipe_ops`` nodes, else the tensor is
  not rebuildable (c = inf). A node without predecessors reads the graph's input, which
  is always there.
- **Layers.** A forward node's layer is its position among the forward nodes; a backward
  node takes the highest layer of the forward outputs it reads (-1 if none).

Where Checkmate's model differs: Checkmate may also rematerialise a value in the forward
pass and may drop and recompute gradients; slackopt decides only the saved activations
(keep, swap or recompute before the backward readers), as the SlackSwap paper's model
does.

Source: Checkmate (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor
Rematerialization", MLSys 2020), section 3 (the graph and its costs); networkx
``node_link_data``.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slackopt.errors import FileFormatError, SlackoptError, json_problem
from slackopt.hardware import GEMM_EFF, GPU, Link, host_memory_limit, resolve_gpu, roofline_s
from slackopt.hardware import link as link_preset
from slackopt.instance import Instance, Op, Recipe, Tensor

GENERATOR = "checkmate"
"""``Instance.meta["generator"]`` of an imported Checkmate graph."""

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_UNIT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us|µs|ns)?\s*$")
COST_UNIT_FORMS = ("a time per unit of cost_cpu (1us, 10ns, 0.5ms, 1s; a bare number is "
                   "seconds) or 'flops'")


def parse_cost_unit(text: str) -> float | str:
    """The ``--cost-unit``: seconds per unit of ``cost_cpu`` (float > 0), or "flops".

    Raises:
        SlackoptError: anything else (names the forms).
    """
    t = str(text).strip()
    if t.lower() == "flops":
        return "flops"
    m = _UNIT_RE.match(t)
    value = float(m.group(1)) * _TIME_UNITS[m.group(2) or "s"] if m else math.nan
    if not (value > 0 and math.isfinite(value)):
        raise SlackoptError(f"--cost-unit '{text}' is not {COST_UNIT_FORMS}")
    return value


def read_checkmate(path: str | Path, *, cost_unit: str | float, gpu: str | GPU = "a100",
                   link: str | Link | None = None, name: str | None = None,
                   max_recipe_ops: int = 6, host_memory_bytes: int | str | None = None
                   ) -> Instance:
    """Read a Checkmate graph file (JSON, or gzip-compressed JSON) as an instance.

    Args:
        path: the file.
        cost_unit: seconds per unit of ``cost_cpu``, a time text (:func:`parse_cost_unit`)
            or "flops".
        gpu, link: the hardware (presets, a GPU file, or objects; link default: the
            GPU's).
        name: the instance name (default: the graph's ``name``, else the file's stem).
        max_recipe_ops: longest recompute recipe (nodes, >= 1).
        host_memory_bytes: the pinned-host limit (bytes, "gpu", or None: unlimited).

    Returns:
        The :class:`Instance` (module docstring: what each part becomes).

    Raises:
        FileFormatError: unreadable, not JSON, or a field missing or wrong (names the file,
            the field and the fix).
        SlackoptError: a bad cost unit, GPU, link or host limit.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise FileFormatError(str(p), "", f"cannot read it: {e}",
                              "give a Checkmate graph (node-link JSON)") from None
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise FileFormatError(str(p), "", json_problem(e),
                              "give a Checkmate graph (node-link JSON)") from None
    return checkmate_instance(doc, source=str(p), cost_unit=cost_unit, gpu=gpu, link=link,
                              name=name or None, max_recipe_ops=max_recipe_ops,
                              host_memory_bytes=host_memory_bytes, default_name=p.stem)


def checkmate_instance(doc: Any, *, cost_unit: str | float, gpu: str | GPU = "a100",
                       link: str | Link | None = None, name: str | None = None,
                       max_recipe_ops: int = 6, host_memory_bytes: int | str | None = None,
                       source: str = "<checkmate graph>", default_name: str = "checkmate"
                       ) -> Instance:
    """A parsed Checkmate graph document as an instance (see :func:`read_checkmate`;
    `source` names the document in messages, `default_name` is used without a graph
    name)."""
    unit = cost_unit if isinstance(cost_unit, float) else parse_cost_unit(str(cost_unit))
    if not (isinstance(max_recipe_ops, int) and max_recipe_ops >= 1):
        raise SlackoptError("max_recipe_ops must be an integer >= 1")
    try:
        g = gpu if isinstance(gpu, GPU) else resolve_gpu(str(gpu))
        lk = link if isinstance(link, Link) else link_preset(
            str(link) if link is not None else g.default_link)
        host = host_memory_limit(host_memory_bytes, g)
    except KeyError as e:
        raise SlackoptError(str(e.args[0])) from None
    except ValueError as e:
        raise SlackoptError(str(e)) from None
    nodes, order, edges = _read_graph(doc, source)

    def bad(field: str, problem: str, fix: str) -> FileFormatError:
        return FileFormatError(source, field, problem, fix)

    pos = {nid: k for k, nid in enumerate(order)}
    for e, (u, v) in enumerate(edges):
        if pos[u] >= pos[v]:
            raise bad(f"links[{e}]", f"edge {u!r} -> {v!r} goes against the node order "
                      "(a node must come after every node it reads)",
                      "list the nodes in execution order, or give graph.order")
    phase = {nid: ("bwd" if nodes[nid]["backward"] else "fwd") for nid in order}
    first_bwd = next((k for k, nid in enumerate(order) if phase[nid] == "bwd"), len(order))
    late = next((nid for nid in order[first_bwd:] if phase[nid] == "fwd"), None)
    if late is not None:
        raise bad(f"nodes[id={late!r}].backward", f"forward node {late!r} comes after the "
                  f"backward node {order[first_bwd]!r}",
                  "list every forward node before the backward ones")
    if first_bwd == 0 or first_bwd == len(order):
        raise bad("nodes", "the graph has no " + ("forward" if first_bwd == 0 else "backward")
                  + " node", "give a training graph (forward and backward nodes)")

    # unique op names: the node's name, its id appended where names repeat
    label: dict[Any, str] = {}
    seen: dict[str, int] = {}
    for nid in order:
        seen[nodes[nid]["name"]] = seen.get(nodes[nid]["name"], 0) + 1
    for nid in order:
        nm = nodes[nid]["name"]
        label[nid] = nm if seen[nm] == 1 else f"{nm}#{nid}"
    succ: dict[Any, list[Any]] = {nid: [] for nid in order}
    pred: dict[Any, list[Any]] = {nid: [] for nid in order}
    for u, v in edges:
        succ[u].append(v)
        pred[v].append(u)
    for nid in order:
        succ[nid].sort(key=pos.__getitem__)
        pred[nid].sort(key=pos.__getitem__)

    fwd = order[:first_bwd]
    layer = {nid: k for k, nid in enumerate(fwd)}
    for nid in order[first_bwd:]:
        reads = [layer[u] for u in pred[nid] if phase[u] == "fwd"]
        layer[nid] = max(reads) if reads else -1
    ops = []
    for nid in order:
        n = nodes[nid]
        if unit == "flops":
            dur = roofline_s(g, float(n["cost_cpu"]), float(n["cost_ram"]), GEMM_EFF)
        else:
            dur = float(n["cost_cpu"]) * float(unit)
        ops.append(Op(label[nid], phase[nid], dur, layer[nid], "other", 0,
                      float(n["cost_cpu"]) if unit == "flops" else 0.0))
    saved = {nid for nid in fwd if any(phase[v] == "bwd" for v in succ[nid])}
    tensors = []
    not_rebuildable = 0
    for nid in order:
        recipe = None
        if nid in saved:
            recipe = _recipe(nid, pred, saved, label, nodes, pos, max_recipe_ops)
            not_rebuildable += recipe is None
        tensors.append(Tensor(label[nid], int(nodes[nid]["cost_ram"]), label[nid],
                              tuple(label[v] for v in succ[nid]), recipe,
                              "grad" if phase[nid] == "bwd" else "activation"))
    graph = doc.get("graph") if isinstance(doc.get("graph"), Mapping) else {}
    title = name or (str(graph.get("name")) if graph.get("name") else default_name)
    meta = {"generator": GENERATOR,
            "params": {"cost_unit": unit, "max_recipe_ops": max_recipe_ops},
            "gpu": g.name, "link": lk.name,
            "checkmate": {"source": Path(source).name, "nodes": len(order),
                          "forward": len(fwd), "backward": len(order) - len(fwd),
                          "edges": len(edges), "saved": len(saved),
                          "not_rebuildable": not_rebuildable}}
    return Instance(title, ops, tensors, lk, meta=meta, host_memory_bytes=host)


def _recipe(target: Any, pred: Mapping[Any, list[Any]], saved: set[Any],
            label: Mapping[Any, str], nodes: Mapping[Any, Mapping[str, Any]],
            pos: Mapping[Any, int], max_ops: int) -> Recipe | None:
    """Re-run `target`; saved forward predecessors are inputs, the others are rebuilt in
    the recipe (transient), up to `max_ops` nodes; None beyond."""
    chain: list[Any] = []
    inputs: list[Any] = []
    stack = [target]
    while stack:
        nid = stack.pop()
        if nid in chain:
            continue
        chain.append(nid)
        if len(chain) > max_ops:
            return None
        for u in pred[nid]:
            if u in saved and u != target:
                if u not in inputs:
                    inputs.append(u)
            elif u not in chain:
                stack.append(u)
    transient = sum(int(nodes[x]["cost_ram"]) for x in chain if x != target)
    return Recipe(tuple(label[x] for x in sorted(chain, key=pos.__getitem__)),
                  tuple(label[x] for x in sorted(inputs, key=pos.__getitem__)), transient)


def _read_graph(doc: Any, source: str) -> tuple[dict[Any, dict[str, Any]], list[Any],
                                                  list[tuple[Any, Any]]]:
    """The nodes (by id), the node order and the edges of a node-link document, each
    field checked (FileFormatError names it)."""
    fix = "give a Checkmate graph: networkx node-link JSON with backward, cost_cpu, cost_ram"
    if not isinstance(doc, Mapping):
        raise FileFormatError(source, "", "not a JSON object", fix)
    if doc.get("directed", True) is not True:
        raise FileFormatError(source, "directed", "the graph is not directed", fix)
    if doc.get("multigraph", False):
        raise FileFormatError(source, "multigraph", "a multigraph", "give a simple graph")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise FileFormatError(source, "nodes", "missing, empty or not a list", fix)
    nodes: dict[Any, dict[str, Any]] = {}
    file_order = []
    for k, n in enumerate(raw_nodes):
        where = f"nodes[{k}]"
        if not isinstance(n, Mapping) or "id" not in n:
            raise FileFormatError(source, where, "not an object with an id", fix)
        nid = n["id"]
        if not isinstance(nid, (int, str)) or isinstance(nid, bool):
            raise FileFormatError(source, f"{where}.id", f"{nid!r} is not an integer or a "
                                  "string", "give each node an integer or string id")
        if nid in nodes:
            raise FileFormatError(source, f"{where}.id", f"id {nid!r} repeats",
                                  "give each node its own id")
        if not isinstance(n.get("backward"), bool):
            raise FileFormatError(source, f"{where}.backward", "missing or not true/false",
                                  "mark each node backward: true or false")
        cpu, ram = n.get("cost_cpu"), n.get("cost_ram")
        if not (isinstance(cpu, (int, float)) and not isinstance(cpu, bool)
                and math.isfinite(cpu) and cpu >= 0):
            raise FileFormatError(source, f"{where}.cost_cpu", f"{cpu!r} is not a finite "
                                  "number >= 0", "give each node its compute cost")
        if not (isinstance(ram, (int, float)) and not isinstance(ram, bool)
                and math.isfinite(ram) and ram >= 0 and float(ram).is_integer()):
            raise FileFormatError(source, f"{where}.cost_ram", f"{ram!r} is not a whole "
                                  "number of bytes >= 0", "give each node its output's bytes")
        nm = n.get("name", str(nid))
        if not isinstance(nm, str) or not nm.strip():
            raise FileFormatError(source, f"{where}.name", f"{nm!r} is not a name",
                                  "give a non-empty name or leave it out")
        nodes[nid] = {"name": nm.strip(), "backward": n["backward"], "cost_cpu": cpu,
                      "cost_ram": int(ram)}
        file_order.append(nid)
    graph = doc.get("graph") if isinstance(doc.get("graph"), Mapping) else {}
    order = file_order
    if "order" in graph:
        order = graph["order"]
        if not (isinstance(order, list) and sorted(map(repr, order)) == sorted(
                map(repr, file_order)) and len(set(map(repr, order))) == len(order)):
            raise FileFormatError(source, "graph.order", "not a list of every node id once",
                                  "list each node id once, or leave graph.order out")
        order = [next(i for i in file_order if repr(i) == repr(x)) for x in order]
    key = "links" if "links" in doc else "edges"
    raw_edges = doc.get(key, [])
    if not isinstance(raw_edges, list):
        raise FileFormatError(source, key, "not a list", fix)
    edges = []
    seen = set()
    for e, lk in enumerate(raw_edges):
        if not isinstance(lk, Mapping) or lk.get("source") not in nodes \
                or lk.get("target") not in nodes:
            raise FileFormatError(source, f"{key}[{e}]", "source or target is not a node id",
                                  "give each edge the ids of two nodes")
        u, v = lk["source"], lk["target"]
        if u == v:
            raise FileFormatError(source, f"{key}[{e}]", f"a loop on node {u!r}",
                                  "remove the edge")
        if (u, v) not in seen:
            seen.add((u, v))
            edges.append((u, v))
    return nodes, order, edges


__all__ = ["COST_UNIT_FORMS", "GENERATOR", "checkmate_instance", "parse_cost_unit",
           "read_checkmate"]
