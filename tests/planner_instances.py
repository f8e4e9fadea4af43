"""Hand-built instances for the planner tests (SlackSwap, baselines).

Times are seconds, sizes bytes; with ``W = 1`` B/s and no copy latency a tensor of s bytes
takes s seconds to copy, so schedules can be checked by hand.
"""

from __future__ import annotations

from slackopt import Instance, Link, Op, Recipe, Tensor


def chain(sizes, costs=None, *, head=4, W=1.0, lat=0.0, fdur=1.0, bdur=1.0,
          readers_next=False):
    """A forward chain F0..F{n-1}, a head op FH, then BH, B{n-1}..B0 (each op 1 s).

    Tensor t_i (size ``sizes[i]``) is produced by F_i and read in backward by B_i (and by
    F_{i+1} if `readers_next`); ``z`` (size `head`) is produced by FH and read by BH.
    ``costs[i]`` is t_i's rebuild time (a rebuild-only op R_i of that duration, no
    inputs), None for c = inf. Ideal schedule: F_i in [i, i+1], FH in [n, n+1] (T_F = n+1),
    BH in [n+1, n+2], B_i in [2n+1-i, 2n+2-i]: r_i = i+1, d_i = 2n+1-i, and t_i is
    released (last backward reader ends) at 2n+2-i.
    """
    n = len(sizes)
    costs = list(costs) if costs is not None else [None] * n
    ops = [Op(f"F{i}", "fwd", fdur, layer=i) for i in range(n)]
    ops.append(Op("FH", "fwd", fdur, layer=-1))
    ops.append(Op("BH", "bwd", bdur, layer=-1))
    ops += [Op(f"B{i}", "bwd", bdur, layer=i) for i in reversed(range(n))]
    ops += [Op(f"R{i}", "rebuild", float(c)) for i, c in enumerate(costs) if c is not None]
    ts = []
    for i, s in enumerate(sizes):
        rd = ((f"F{i + 1}",) if readers_next and i + 1 < n else ()) + (f"B{i}",)
        rec = Recipe((f"R{i}",)) if costs[i] is not None else None
        ts.append(Tensor(f"t{i}", int(s), f"F{i}", rd, rec))
    ts.append(Tensor("z", int(head), "FH", ("BH",), category="logits"))
    return Instance("chain", ops, ts, Link("test", W, 0.85, lat))


def blocks(L=4, *, x=4, a=2, b=6, head=3, W=1.0, lat=0.0, fdur=1.0, bdur=1.0):
    """L blocks of a residual network; block i (layer i) runs

    forward  f{i}.0: x{i} -> a{i};  f{i}.1: a{i} -> b{i};  f{i}.2: (x{i}, b{i}) -> x{i+1}
    backward g{i}.2 reads b{i};  g{i}.1 reads a{i};  g{i}.0 reads x{i}

    x{i} is the block input (category "block_input", c = inf except that nothing
    rebuilds it); a{i} is rebuilt from x{i} by f{i}.0, b{i} from a{i} by f{i}.1. A head
    op H (layer -1) reads x{L} and produces the logits z (read by the loss backward BH).
    Each backward op also makes a 1-byte gradient read by the next backward op.
    """
    ops = [Op("emb", "fwd", fdur, layer=-1)]
    ts = []
    for i in range(L):
        ops += [Op(f"f{i}.0", "fwd", fdur, layer=i), Op(f"f{i}.1", "fwd", fdur, layer=i),
                Op(f"f{i}.2", "fwd", fdur, layer=i)]
    ops.append(Op("H", "fwd", fdur, layer=-1))
    bwd = ["BH"]
    for i in reversed(range(L)):
        bwd += [f"g{i}.2", f"g{i}.1", f"g{i}.0"]
    bwd.append("gemb")
    ops += [Op(nm, "bwd", bdur, layer=(-1 if nm in ("BH", "gemb") else int(nm[1:].split(".")[0])))
            for nm in bwd]
    for i in range(L):
        prod = "emb" if i == 0 else f"f{i - 1}.2"
        ts.append(Tensor(f"x{i}", x, prod, (f"f{i}.0", f"f{i}.2", f"g{i}.0"),
                         category="block_input"))
        ts.append(Tensor(f"a{i}", a, f"f{i}.0", (f"f{i}.1", f"g{i}.1"),
                         Recipe((f"f{i}.0",), (f"x{i}",)), category="act"))
        ts.append(Tensor(f"b{i}", b, f"f{i}.1", (f"f{i}.2", f"g{i}.2"),
                         Recipe((f"f{i}.1",), (f"a{i}",)), category="act"))
    ts.append(Tensor(f"x{L}", x, f"f{L - 1}.2", ("H", "BH"), category="block_output"))
    ts.append(Tensor("z", head, "H", ("BH",), category="logits"))
    for j in range(len(bwd) - 1):
        ts.append(Tensor(f"grad{j}", 1, bwd[j], (bwd[j + 1],), category="grad"))
    return Instance(f"blocks{L}", ops, ts, Link("test", W, 0.85, lat))
