"""Which rows of the MILP's full tier close the gap: the model's optimum with every row,
with one row family switched off, and in the exact tier, against the true optimum found
by simulating every plan (the enumerated instances of tests/helpers_milp.py).

Run: python benchmarks/milp_rows.py

Prints one line per instance: how far (%) each model's optimum lies below the enumerated
optimum (0% = the model is exact there) and the SCIP solve time (s). Switches:
:func:`slackopt.solvers.milp.build_model`'s ``admission``, ``fifo``, ``lagging`` and
``integral_copies`` (the admission rule needs integral copies, so both go together).
Nothing here is asserted by tests; the README quotes the figures.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package

from slackopt.solvers.milp import _ScipBackend, build_model  # noqa: E402
from tests.helpers_milp import enumerated, instance  # noqa: E402

CASES = [("unet1", 0.75), ("hand", 0.6), ("unet2-b16-pcie5", 0.8), ("chain5-nvlink", 0.65)]
VARIANTS = [("full", "full", {}), ("-admission", "full", dict(admission=False)),
            ("-fifo", "full", dict(fifo=False)), ("-lagging", "full", dict(lagging=False)),
            ("-integral", "full", dict(integral_copies=False, admission=False)),
            ("exact", "exact", {})]


def main() -> None:
    for key, frac in CASES:
        inst = instance(key)
        M = int(frac * inst.P)
        opt = min(enumerated(key, frac).values())
        cells = []
        for name, tier, kw in VARIANTS:
            m = build_model(inst, M, tier=tier, **kw)
            t0 = time.perf_counter()
            sol = _ScipBackend(m.lin, threads=1, seed=0, rel_gap=1e-6).solve(60, None)
            v = sol.objective if sol.status == "optimal" else sol.bound
            cells.append(f"{name} {(opt - v * m.t_unit) / opt:.2%} "
                         f"({time.perf_counter() - t0:.1f} s)")
        print(f"{key} at {frac:g} P: " + ", ".join(cells), flush=True)


if __name__ == "__main__":
    main()
