"""Random small instances, plans and budgets for the evaluator's property tests
(tests/test_simulate_properties.py, tests/test_fastsim.py), and their hypothesis settings."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from slackopt import Instance, Link, Op, Plan, Recipe, Tensor


@st.composite
def instances(draw):
    """Random forward/backward schedules with saved tensors, temporaries and recipes."""
    n_f = draw(st.integers(1, 6))
    n_b = draw(st.integers(1, 6))
    dur = st.floats(0.0, 2.0, allow_nan=False)
    ops = [Op(f"f{i}", "fwd", draw(dur), workspace_bytes=draw(st.integers(0, 30)))
           for i in range(n_f)]
    ops += [Op(f"b{i}", "bwd", draw(dur), workspace_bytes=draw(st.integers(0, 30)))
            for i in range(n_b)]
    tensors = []
    saved = []
    for j in range(draw(st.integers(0, 6))):
        p = draw(st.integers(0, n_f - 1))
        fwd_readers = draw(st.lists(st.integers(p + 1, n_f), max_size=2, unique=True))
        bwd_readers = draw(st.lists(st.integers(0, n_b - 1), min_size=1, max_size=3,
                                    unique=True))
        readers = tuple([f"f{i}" for i in sorted(fwd_readers) if i < n_f]
                        + [f"b{i}" for i in sorted(bwd_readers)])
        earlier = [t for t in saved if ops[int(t[1])].name <= f"f{p}" and
                   int(t[1]) <= p]
        recipe = None
        if draw(st.booleans()):
            ins = draw(st.lists(st.sampled_from([t[0] for t in earlier]), unique=True,
                                max_size=2)) if earlier else []
            recipe = Recipe((f"f{p}",), tuple(ins), draw(st.integers(0, 20)))
        name = f"t{j}"
        tensors.append(Tensor(name, draw(st.integers(0, 100)), f"f{p}", readers, recipe))
        saved.append((name, p))
    for j in range(draw(st.integers(0, 3))):  # temporaries and gradients
        i = draw(st.integers(0, n_f + n_b - 2))
        tensors.append(Tensor(f"tmp{j}", draw(st.integers(0, 50)), ops[i].name,
                              (ops[i + 1].name,)))
    w_d2h = draw(st.sampled_from([10.0, 100.0, 1000.0]))
    w_h2d = draw(st.sampled_from([w_d2h, w_d2h, 10.0, 40.0, 1000.0]))  # often asymmetric
    link = Link("l", None, draw(st.sampled_from([0.5, 0.85, 1.0])),
                draw(st.sampled_from([0.0, 0.01])), d2h_bytes_per_s=w_d2h,
                h2d_bytes_per_s=w_h2d)
    return Instance("rand", ops, tensors, link)


@st.composite
def cases(draw):
    inst = draw(instances())
    dec = []
    for k in range(inst.n_saved):
        choices = [0, 1, 2] if np.isfinite(inst.c[k]) else [0, 1]
        dec.append(draw(st.sampled_from(choices)))
    plan = Plan(np.array(dec, dtype=np.int8), inst.saved_names)
    M = draw(st.integers(0, max(1, int(inst.P * 1.5))))
    return inst, plan, M


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
