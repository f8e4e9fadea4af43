"""Every derived array of every shipped instance, pinned by sha256.

The digests were computed by the code before the validation of :class:`Instance` was
rewritten (issue 24, "one validation per field"); a change to how any array is derived
(an element, a dtype, an order) changes its digest. The shipped files that are invalid on
purpose pin their error (field and problem) instead.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from slackopt.errors import FileFormatError
from slackopt.io import load_instance

ROOT = Path(__file__).resolve().parent.parent / "instances"

ARRAYS = ("saved", "s", "r", "d", "c", "rho", "durations_s", "start_s", "end_s", "is_bwd",
          "tensor_size", "tensor_producer_idx", "tensor_last_reader_idx", "is_saved",
          "saved_prod_idx", "saved_ready_idx", "saved_last_fwd_idx", "saved_first_bwd_idx",
          "saved_last_bwd_idx", "static_alloc", "static_free", "workspace", "static_profile",
          "keep_all_profile", "recipe_transient", "recipe_workspace")
"""Array attributes hashed (dtype, shape and bytes of each)."""


def _files() -> list[Path]:
    out = []
    for p in sorted(ROOT.rglob("*.json")):
        with p.open() as f:
            head = f.read(200)
        if '"slackopt-instance"' in head:
            out.append(p)
    return out


def digest(inst) -> str:
    """sha256 over the derived arrays, scalars, recipe lists and rebuild blockers of
    `inst` (and of its lowered instance when it has views)."""
    h = hashlib.sha256()
    for name in ARRAYS:
        a = np.ascontiguousarray(getattr(inst, name))
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    h.update(repr((inst.n_ops, inst.n_fwd, inst.P, inst.A, inst.forward_time_s.hex(),
                   inst.ideal_time_s.hex(), inst.saved_names)).encode())
    h.update(repr([tuple(map(int, x)) for x in inst.recipe_ops]).encode())
    h.update(repr([tuple(map(int, x)) for x in inst.recipe_inputs]).encode())
    h.update(repr([r.tolist() for r in inst.saved_reader_idx]).encode())
    h.update(repr([inst.rebuild_blocker(n) for n in inst.saved_names]).encode())
    if inst.aliased:
        h.update(inst.saved_unit.tobytes())
        h.update(digest(inst.lowered).encode())
    return h.hexdigest()


def outcome(path: Path) -> str:
    """The digest of the instance in `path`, or ``error: field: problem``."""
    try:
        return digest(load_instance(path))
    except FileFormatError as e:
        return f"error: {e.field}: {e.problem}"


PINS = json.loads((Path(__file__).parent / "data" / "instance_pins.json").read_text())


def test_every_shipped_instance_is_pinned():
    assert sorted(PINS) == sorted(str(p.relative_to(ROOT)) for p in _files())


@pytest.mark.parametrize("rel", sorted(PINS))
def test_derived_arrays_bit_for_bit(rel):
    assert outcome(ROOT / rel) == PINS[rel]
