"""Instance and plan files: round trips and clear errors for bad files (slackopt.io)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import numpy as np
import pytest

from slackopt import io
from slackopt.errors import FileFormatError, PlanError, SlackoptError
from slackopt.hardware import Link
from slackopt.instance import Instance, Op, Recipe, Tensor
from slackopt.plan import Plan


def small_instance(name: str = "small") -> Instance:
    """Three forward ops, three backward ops and one rebuild-only op; three saved tensors
    (x0 unrebuildable, x1 rebuilt by f1 from x0, x2 regenerated from x1) and two gradients."""
    ops = [
        Op("f0", "fwd", 1e-3, 0, "gemm", 0, 1e9),
        Op("f1", "fwd", 2.000000000000001e-3, 0, "gemm", 16, 2e9),
        Op("f2", "fwd", 0.1 + 0.2, 1, "dropout", random=True),
        Op("b2", "bwd", 3e-3, 1),
        Op("b1", "bwd", 4e-3, 0, never_recompute=False),
        Op("b0", "bwd", 2e-3, 0),
        Op("regen", "rebuild", 1e-4, 1, "dropout"),
    ]
    tensors = [
        Tensor("x0", 1000, "f0", ("f1", "b1"), None, "block_input"),
        Tensor("x1", 2000, "f1", ("f2", "b2"), Recipe(("f1",), ("x0",), 0), "qkv"),
        Tensor("x2", 3000, "f2", ("b2",), Recipe(("regen",), ("x1",), 500), "mask"),
        Tensor("g2", 400, "b2", ("b1",), None, "grad"),
        Tensor("g1", 500, "b1", ("b0",), None, "grad"),
    ]
    return Instance(name, ops, tensors, Link("pcie4", 25e9, 0.85, 1e-5),
                    meta={"generator": "hand", "params": {"layers": 2, "shape": (1, 2)}})


@pytest.fixture
def inst() -> Instance:
    return small_instance()


@pytest.fixture
def doc(inst: Instance) -> dict:
    return io.instance_to_dict(inst)


def _write(tmp_path: Path, text: str, name: str = "bad.json") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _load_error(tmp_path: Path, d: dict | str) -> FileFormatError:
    p = _write(tmp_path, d if isinstance(d, str) else json.dumps(d))
    with pytest.raises(FileFormatError) as ei:
        io.load_instance(p)
    assert str(p) in str(ei.value)
    return ei.value


# ----------------------------------------------------------------------------- round trips
def test_instance_round_trip_arrays_identical(tmp_path: Path, inst: Instance) -> None:
    path = io.save_instance(inst, tmp_path / "i.json")
    back = io.load_instance(path)
    for a in ("s", "r", "d", "c", "rho", "start_s", "end_s"):
        np.testing.assert_array_equal(getattr(back, a), getattr(inst, a))
        assert getattr(back, a).dtype == getattr(inst, a).dtype
    assert back.P == inst.P and back.A == inst.A
    assert back.ideal_time_s == inst.ideal_time_s
    assert back.ops == inst.ops
    assert back.tensors == inst.tensors
    assert back.link == inst.link
    assert back.name == inst.name
    assert back.meta == {"generator": "hand", "params": {"layers": 2, "shape": [1, 2]}}


def test_instance_file_is_deterministic_and_fixed_point(tmp_path: Path, inst: Instance) -> None:
    a = io.save_instance(inst, tmp_path / "a.json").read_text()
    b = io.save_instance(io.load_instance(tmp_path / "a.json"), tmp_path / "b.json").read_text()
    assert a == b
    d = json.loads(a)
    assert list(d)[:2] == ["format", "schema_version"]
    assert d["format"] == "slackopt-instance" and d["schema_version"] == 1
    assert "NaN" not in a and "Infinity" not in a


def test_instance_from_dict_accepts_defaults_and_numpy(inst: Instance) -> None:
    d = io.instance_to_dict(inst)
    for op in d["ops"]:
        for k in ("layer", "kind", "workspace_bytes", "flops", "never_recompute", "random"):
            op.pop(k)
    d["ops"][0]["duration_s"] = np.float64(1e-3)
    d["tensors"][0]["size_bytes"] = np.int64(1000)
    d["tensors"][0]["readers"] = ("f1", "b1")
    del d["meta"]
    back = io.instance_from_dict(d)
    np.testing.assert_array_equal(back.s, inst.s)
    assert back.ops[2].random is False  # default


def test_zero_tensor_instance_round_trip(tmp_path: Path) -> None:
    empty = Instance("empty", [Op("f", "fwd", 1e-3), Op("b", "bwd", 1e-3)], [],
                     Link("x", 1e9))
    back = io.load_instance(io.save_instance(empty, tmp_path / "e.json"))
    assert back.n_saved == 0 and back.P == 0 and back.ideal_time_s == empty.ideal_time_s


def test_plan_round_trip(tmp_path: Path, inst: Instance) -> None:
    plan = Plan.from_mapping(inst, {"x1": "swap", "x2": "recomp"})
    path = io.save_plan(plan, tmp_path / "p.json", inst, meta={"solver": "hand",
                                                               "budget_bytes": np.int64(5)})
    d = json.loads(path.read_text())
    assert d["format"] == "slackopt-plan" and d["instance"] == "small"
    assert d["decisions"] == {"x0": "keep", "x1": "swap", "x2": "recomp"}
    assert d["meta"] == {"solver": "hand", "budget_bytes": 5}
    back = io.load_plan(path, inst)
    assert back == plan
    assert back.counts() == {"keep": 1, "swap": 1, "recomp": 1}


def test_plan_without_instance_name(tmp_path: Path, inst: Instance) -> None:
    plan = Plan.keep_all(inst)
    path = io.save_plan(plan, tmp_path / "p.json")
    assert json.loads(path.read_text())["instance"] is None
    assert io.load_plan(path, inst) == plan


def test_save_plan_checks_instance(tmp_path: Path, inst: Instance) -> None:
    plan = Plan(np.array([2, 0, 0]), inst.saved_names)  # x0 has no recipe
    with pytest.raises(PlanError):
        io.save_plan(plan, tmp_path / "p.json", inst)
    assert not (tmp_path / "p.json").exists()


# ----------------------------------------------------------------------------- writing
def test_never_overwrites_without_flag(tmp_path: Path, inst: Instance) -> None:
    p = tmp_path / "i.json"
    p.write_text("precious")
    with pytest.raises(io.OutputExistsError, match="--force") as ei:
        io.save_instance(inst, p)
    assert isinstance(ei.value, SlackoptError)
    assert p.read_text() == "precious"
    io.save_instance(inst, p, overwrite=True)
    assert io.load_instance(p).name == "small"
    with pytest.raises(io.OutputExistsError):
        io.save_plan(Plan.keep_all(inst), p, inst)


def test_write_leaves_no_temporary_files(tmp_path: Path, inst: Instance) -> None:
    io.save_instance(inst, tmp_path / "sub" / "i.json")
    io.save_instance(inst, tmp_path / "sub" / "i.json", overwrite=True)
    assert sorted(os.listdir(tmp_path / "sub")) == ["i.json"]


def test_meta_that_json_cannot_store_is_refused(tmp_path: Path, inst: Instance) -> None:
    bad = Instance("m", inst.ops, inst.tensors, inst.link, meta={"x": float("nan")})
    with pytest.raises(FileFormatError, match="meta.x"):
        io.save_instance(bad, tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


# ----------------------------------------------------------------------------- bad files
def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="file not found"):
        io.load_instance(tmp_path / "nope.json")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="directory"):
        io.load_instance(tmp_path)


@pytest.mark.parametrize("text", ["", "hello", "{\"format\": ", "\x80\x81"])
def test_not_json(tmp_path: Path, text: str) -> None:
    e = _load_error(tmp_path, text)
    assert e.field == ""
    assert "JSON" in str(e) or "empty" in str(e) or "UTF-8" in str(e)


def test_pickle_is_not_read(tmp_path: Path, inst: Instance) -> None:
    import pickle

    p = tmp_path / "i.pkl"
    p.write_bytes(pickle.dumps({"format": "slackopt-instance"}))
    with pytest.raises(FileFormatError):
        io.load_instance(p)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers(tmp_path: Path, doc: dict, token: str) -> None:
    text = json.dumps(doc).replace('"duration_s": 0.001', f'"duration_s": {token}', 1)
    assert token in text
    e = _load_error(tmp_path, text)
    assert e.field == "ops[0].duration_s"
    assert "non-finite" in e.problem and "finite number" in e.fix


def test_nan_in_meta(tmp_path: Path, doc: dict) -> None:
    text = json.dumps(doc).replace('"generator": "hand"', '"generator": NaN')
    assert _load_error(tmp_path, text).field == "meta.generator"


def test_negative_size(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][2]["size_bytes"] = -5
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[2].size_bytes"
    assert "'x2'" in str(e) and ">= 0" in str(e)


def test_fractional_size(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][1]["size_bytes"] = 2000.5
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[1].size_bytes" and "integer" in e.problem


def test_string_for_number(tmp_path: Path, doc: dict) -> None:
    doc["ops"][3]["duration_s"] = "3ms"
    e = _load_error(tmp_path, doc)
    assert e.field == "ops[3].duration_s" and "op 'b2'" in e.problem


def test_missing_field(tmp_path: Path, doc: dict) -> None:
    del doc["tensors"][1]["producer"]
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[1].producer"
    assert "missing" in e.problem and "'x1'" in e.problem


def test_missing_top_level_field(tmp_path: Path, doc: dict) -> None:
    del doc["link"]
    assert _load_error(tmp_path, doc).field == "link"


def test_extra_field(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][1]["colour"] = "red"
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[1].colour"
    assert "unknown field" in e.problem and "size_bytes" in e.fix  # lists allowed fields


def test_extra_field_in_recipe_and_top(tmp_path: Path, doc: dict) -> None:
    d2 = copy.deepcopy(doc)
    d2["tensors"][2]["recipe"]["cost"] = 1
    assert _load_error(tmp_path, d2).field == "tensors[2].recipe.cost"
    doc["comment"] = "hi"
    assert _load_error(tmp_path, doc).field == "comment"


def test_bad_phase_value(tmp_path: Path, doc: dict) -> None:
    doc["ops"][0]["phase"] = "forward"
    e = _load_error(tmp_path, doc)
    assert e.field == "ops[0].phase" and "'fwd'" in e.problem


@pytest.mark.parametrize(("where", "field", "words"), [
    ("producer", "tensors[1].producer", "does not exist"),
    ("reader", "tensors[1].readers[1]", "does not exist"),
    ("recipe_op", "tensors[2].recipe.ops[0]", "does not exist"),
    ("recipe_input", "tensors[2].recipe.inputs[0]", "does not exist"),
])
def test_dangling_reference(tmp_path: Path, doc: dict, where: str, field: str,
                            words: str) -> None:
    if where == "producer":
        doc["tensors"][1]["producer"] = "ghost"
    elif where == "reader":
        doc["tensors"][1]["readers"][1] = "ghost"
    elif where == "recipe_op":
        doc["tensors"][2]["recipe"]["ops"] = ["ghost"]
    else:
        doc["tensors"][2]["recipe"]["inputs"] = ["ghost"]
    e = _load_error(tmp_path, doc)
    assert e.field == field
    assert "'ghost'" in e.problem and words in e.problem


def test_duplicate_tensor_name(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][2]["name"] = "x0"
    doc["tensors"][2]["recipe"] = None
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[2].name" and "duplicate" in e.problem


def test_duplicate_op_name(tmp_path: Path, doc: dict) -> None:
    doc["ops"][4]["name"] = "f1"
    e = _load_error(tmp_path, doc)
    assert e.field == "ops[4].name" and "duplicate" in e.problem


def test_duplicate_json_key(tmp_path: Path, doc: dict) -> None:
    text = json.dumps(doc).replace('"size_bytes": 2000', '"size_bytes": 2000, "size_bytes": 7')
    e = _load_error(tmp_path, text)
    assert e.field == "tensors[1].size_bytes" and "more than once" in e.problem


def test_reader_before_producer(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][1]["readers"].append("f0")
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[1].readers[2]" and "before" in e.problem


def test_phase_order(tmp_path: Path, doc: dict) -> None:
    doc["ops"][3], doc["ops"][2] = doc["ops"][2], doc["ops"][3]
    e = _load_error(tmp_path, doc)
    assert e.field.startswith("ops[") and e.field.endswith(".phase")


def test_bad_link(tmp_path: Path, doc: dict) -> None:
    doc["link"]["bytes_per_s"] = 0
    assert _load_error(tmp_path, doc).field == "link.bytes_per_s"


@pytest.mark.parametrize("link,field,words", [
    ({"d2h_bytes_per_s": 0, "h2d_bytes_per_s": 4e9}, "link.d2h_bytes_per_s",
     ">= 0.001 B/s, got 0"),
    ({"d2h_bytes_per_s": 1e9, "h2d_bytes_per_s": -4e9}, "link.h2d_bytes_per_s",
     ">= 0.001 B/s, got -4"),
    ({"d2h_bytes_per_s": 1e9, "h2d_bytes_per_s": "4e9"}, "link.h2d_bytes_per_s", "number"),
    ({"d2h_bytes_per_s": 1e-308, "h2d_bytes_per_s": 1e9}, "link.d2h_bytes_per_s",
     ">= 0.001 B/s"),
    ({"d2h_bytes_per_s": 1e9}, "link.h2d_bytes_per_s", "only d2h_bytes_per_s"),
    ({"bytes_per_s": 1e9, "h2d_bytes_per_s": 4e9}, "link.h2d_bytes_per_s", "disagrees"),
    ({"bytes_per_s": 1e9, "d2h_bytes_per_s": 2e9, "h2d_bytes_per_s": 1e9},
     "link.d2h_bytes_per_s", "disagrees"),
    ({}, "link.bytes_per_s", "no bandwidth"),
])
def test_bad_link_directions(tmp_path: Path, doc: dict, link: dict, field: str,
                             words: str) -> None:
    """A per-direction bandwidth that is not a number > 0 (>= 0.001 B/s), a direction given
    alone, both styles given with different values, or no bandwidth: an error naming the
    file and the field."""
    doc["link"] = {"name": "l", **link}
    e = _load_error(tmp_path, doc)
    assert e.field == field and words in str(e), str(e)


def test_asymmetric_link_round_trip_and_symmetric_written_the_old_way(tmp_path: Path,
                                                                      inst: Instance) -> None:
    """A link with two bandwidths is written per direction and read back equal; a
    symmetric one, however it was given, is written as one bytes_per_s (old readers read
    it), and both styles consistent in one file load."""
    asym = Instance(inst.name, inst.ops, inst.tensors,
                    Link("c2c", d2h_bytes_per_s=170e9, h2d_bytes_per_s=420e9))
    doc = io.instance_to_dict(asym)
    assert doc["link"] == {"name": "c2c", "d2h_bytes_per_s": 170e9, "h2d_bytes_per_s": 420e9,
                           "duplex_factor": 0.85, "copy_latency_s": 1e-5}
    back = io.load_instance(io.save_instance(asym, tmp_path / "a.json"))
    assert back.link == asym.link and not back.link.symmetric
    with pytest.raises(ValueError, match="d2h_bytes_per_s or h2d_bytes_per_s"):
        back.link.bytes_per_s  # noqa: B018 (one W would be the wrong one for a direction)
    sym = Instance(inst.name, inst.ops, inst.tensors,
                   Link("p", d2h_bytes_per_s=25e9, h2d_bytes_per_s=25e9))
    assert io.instance_to_dict(sym)["link"] == {"name": "p", "bytes_per_s": 25e9,
                                                "duplex_factor": 0.85, "copy_latency_s": 1e-5}
    both = io.instance_to_dict(sym)
    both["link"].update(d2h_bytes_per_s=25e9, h2d_bytes_per_s=25e9)
    assert io.load_instance(_write(tmp_path, json.dumps(both))).link == sym.link


def test_paper_file_reads_both_directions_equal_and_gives_the_same_results(
        tmp_path: Path) -> None:
    """instances/paper/bert-large_a100-pcie4.json (one bytes_per_s) loads with both
    directions at 25 GB/s, is written back byte for byte, and SlackSwap at 0.3 P plans and
    simulates exactly what it did before links had two directions (0.09986183722105439 s,
    d2h 721420672 B: the figures of commit c1e091c), as with the link given per direction."""
    from slackopt import solve

    src = Path(__file__).resolve().parent.parent / "instances/paper/bert-large_a100-pcie4.json"
    inst = io.load_instance(src)
    assert inst.link.d2h_bytes_per_s == inst.link.h2d_bytes_per_s == 25e9
    assert io.save_instance(inst, tmp_path / "b.json").read_bytes() == src.read_bytes()
    per_dir = Instance(inst.name, inst.ops, inst.tensors,
                       Link(inst.link.name, d2h_bytes_per_s=25e9, h2d_bytes_per_s=25e9,
                            duplex_factor=inst.link.duplex_factor,
                            copy_latency_s=inst.link.copy_latency_s))
    r, r2 = solve(inst, "slackswap", 0.3), solve(per_dir, "slackswap", 0.3)
    assert r.evaluation.step_time_s == 0.09986183722105439
    assert r.evaluation.d2h_bytes == 721420672
    assert r2.evaluation.to_dict() == r.evaluation.to_dict()


@pytest.mark.parametrize("version", [0, 2, 99, "1", None, 1.0, True])
def test_wrong_schema_version(tmp_path: Path, doc: dict, version: object) -> None:
    doc["schema_version"] = version
    if version is None:
        del doc["schema_version"]
    e = _load_error(tmp_path, doc)
    assert e.field == "schema_version"
    assert "1" in (e.problem + e.fix)
    if version is not None:
        assert "reads instance files of schema version 1" in e.problem
    if version in (2, 99):
        assert "upgrade slackopt" in e.fix


@pytest.mark.parametrize("fmt", ["slackopt-plan", "something-else", None])
def test_wrong_format(tmp_path: Path, doc: dict, fmt: object) -> None:
    doc["format"] = fmt
    if fmt is None:
        del doc["format"]
    e = _load_error(tmp_path, doc)
    assert e.field == "format"
    if fmt == "slackopt-plan":
        assert "plan file" in e.problem


def test_top_level_not_object(tmp_path: Path) -> None:
    assert "list" in _load_error(tmp_path, "[1, 2]").problem


def test_error_message_has_file_field_and_fix(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][2]["size_bytes"] = -5
    msg = str(_load_error(tmp_path, doc))
    assert msg.startswith(str(tmp_path / "bad.json"))
    assert "field 'tensors[2].size_bytes'" in msg and "Fix:" in msg


def test_the_first_bad_tensor_ends_the_check(tmp_path: Path, doc: dict) -> None:
    # The first bad tensor is named, with its range and a fix in bytes; no count of the
    # rest.
    doc["tensors"][0]["size_bytes"] = -1
    doc["tensors"][1]["size_bytes"] = -1
    e = _load_error(tmp_path, doc)
    assert e.field == "tensors[0].size_bytes" and "more problem" not in e.problem
    assert e.problem == "tensor 'x0': size_bytes must be an integer in [0, 2**53], got -1"
    assert e.fix == "use a whole number of bytes >= 0"


def test_a_bad_last_tensor_is_named(tmp_path: Path, doc: dict) -> None:
    doc["tensors"][-1]["producer"] = 7
    e = _load_error(tmp_path, doc)
    last = len(doc["tensors"]) - 1
    assert e.field == f"tensors[{last}].producer" and "valid string" in e.problem


@pytest.mark.parametrize("where", ["op", "tensor", "recipe", "link", "meta", "top"])
def test_repeated_keys_are_found_on_the_fast_path(tmp_path: Path, doc: dict,
                                                  where: str) -> None:
    # The fast loader's parser keeps the last of repeated keys; the key count catches it
    # and the exact path names the key.
    text = json.dumps(doc, separators=(",", ":"))
    target = {"op": '"duration_s":', "tensor": '"size_bytes":', "link": '"bytes_per_s":',
              "meta": '"generator":', "top": '"name":'}.get(where)
    if where == "recipe":
        i = text.index('"transient_bytes":')
        text = text[:i] + '"transient_bytes":0,' + text[i:]
    else:
        i = text.index(target)
        j = text.index(",", i)
        text = text[:i] + text[i:j] + "," + text[i:j] + text[j:]
    e = _load_error(tmp_path, text)
    assert "appears more than once" in e.problem, e


@pytest.mark.parametrize("gap", [" ", "\t", "\n", "\r", " \n", "\t ", "\r\n"])
def test_a_key_repeated_behind_whitespace_before_its_colon_is_named(
        tmp_path: Path, doc: dict, gap: str) -> None:
    # The key count sees only keys written as "key": ; a repeated key with whitespace
    # (mixed kinds too) before its colon must send the file to the exact path.
    text = json.dumps(doc, separators=(",", ":"))
    i = text.index('"duration_s":')
    j = text.index(",", i)
    text = text[:j] + ',"duration_s"' + gap + text[i + len('"duration_s"'):j] + text[j:]
    e = _load_error(tmp_path, text)
    assert "appears more than once" in e.problem and e.field == "ops[0].duration_s", e


def test_a_clean_file_loads_on_either_path_to_the_same_instance(tmp_path: Path, doc: dict
                                                                ) -> None:
    compact = _write(tmp_path, json.dumps(doc, separators=(",", ":")))
    a = io.load_instance(compact)
    spaced = _write(tmp_path, json.dumps(doc, indent=2).replace('": ', '" : '), "b.json")
    b = io.load_instance(spaced)  # a space before a colon: read by the exact path
    assert io.instance_to_dict(a) == io.instance_to_dict(b) == io.instance_to_dict(
        io.instance_from_dict(doc))


# ----------------------------------------------------------------------------- bad plans
@pytest.fixture
def plan_doc(inst: Instance) -> dict:
    return io.plan_to_dict(Plan.from_mapping(inst, {"x1": "swap"}), inst)


def _plan_error(tmp_path: Path, inst: Instance, d: dict | str) -> FileFormatError:
    p = _write(tmp_path, d if isinstance(d, str) else json.dumps(d), "plan.json")
    with pytest.raises(FileFormatError) as ei:
        io.load_plan(p, inst)
    assert str(p) in str(ei.value)
    return ei.value


def test_plan_missing_decisions_named(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    del plan_doc["decisions"]["x1"]
    del plan_doc["decisions"]["x2"]
    e = _plan_error(tmp_path, inst, plan_doc)
    assert e.field == "decisions" and "'x1'" in e.problem and "'x2'" in e.problem


def test_plan_unknown_name(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    plan_doc["decisions"]["ghost"] = "keep"
    e = _plan_error(tmp_path, inst, plan_doc)
    assert e.field == "decisions.ghost" and "not a tensor" in e.problem


def test_plan_unsaved_tensor(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    plan_doc["decisions"]["g1"] = "swap"
    e = _plan_error(tmp_path, inst, plan_doc)
    assert e.field == "decisions.g1" and "not a saved tensor" in e.problem


def test_plan_bad_decision(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    plan_doc["decisions"]["x0"] = "drop"
    e = _plan_error(tmp_path, inst, plan_doc)
    assert e.field == "decisions.x0" and "'recomp'" in e.problem


def test_plan_recomp_of_unrebuildable(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    plan_doc["decisions"]["x0"] = "recomp"
    e = _plan_error(tmp_path, inst, plan_doc)
    assert e.field == "decisions.x0" and "cannot be rebuilt" in e.problem


def test_plan_bad_policy_and_extra(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    d = copy.deepcopy(plan_doc)
    d["policy"] = "lru"
    assert _plan_error(tmp_path, inst, d).field == "policy"
    plan_doc["solver"] = "x"
    assert _plan_error(tmp_path, inst, plan_doc).field == "solver"


def test_plan_wrong_format_and_version(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    e = _plan_error(tmp_path, inst, io.instance_to_dict(inst))
    assert e.field == "format" and "instance file" in e.problem
    plan_doc["schema_version"] = 2
    e = _plan_error(tmp_path, inst, plan_doc)
    assert e.field == "schema_version" and "plan files of schema version 1" in e.problem


def test_plan_not_json_and_nan(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    assert _plan_error(tmp_path, inst, "{oops").field == ""
    text = json.dumps({**plan_doc, "meta": {"b": 1}}).replace('"b": 1', '"b": NaN')
    assert _plan_error(tmp_path, inst, text).field == "meta.b"


def test_plan_mentions_other_instance(tmp_path: Path, inst: Instance, plan_doc: dict) -> None:
    plan_doc["instance"] = "gpt2-xl_a100-pcie4"
    del plan_doc["decisions"]["x0"]
    assert "gpt2-xl_a100-pcie4" in _plan_error(tmp_path, inst, plan_doc).problem


@pytest.mark.parametrize("edit,field,words", [
    (lambda d: d["link"].update(bytes_per_s=1e-308), "link.bytes_per_s", ">= 0.001 B/s"),
    (lambda d: d["link"].update(copy_latency_s=1e308), "link.copy_latency_s", "<= 1e+09 s"),
    (lambda d: d["link"].update(name="pcie\x1b[31m"), "link.name", "printable"),
    (lambda d: d["ops"][1].update(kind="gemm\x07"), "ops[1].kind", "printable"),
    (lambda d: d["tensors"][2].update(category="\x1b[2J"), "tensors[2].category", "printable"),
    (lambda d: d["tensors"][1]["recipe"].update(ops=["f1", "f1"]), "tensors[1].recipe.ops[1]",
     "more than once"),
])
def test_link_extremes_control_characters_and_repeated_recipe_ops(tmp_path: Path, doc: dict,
                                                                  edit, field, words) -> None:
    """Found by fuzzing: a 1e-308 B/s link made copy times overflow, control characters in
    kinds, categories and link names reached the terminal, a recipe op listed twice was
    charged twice. Each is now a FileFormatError naming the field."""
    edit(doc)
    e = _load_error(tmp_path, doc)
    assert e.field == field and words in e.problem


def test_files_without_optional_fields_load_like_full_ones(tmp_path: Path, inst: Instance) -> None:
    """save_instance writes every field (the one load path, objects built by
    pydantic-core); a file without the optional fields, or with ``"storage": null``, goes
    through the exact path: the same Instance either way, and a bad value beside a missing
    optional field is reported once (no extra problem)."""
    full = io.instance_to_dict(inst)
    sparse = json.loads(json.dumps(full))
    for o in sparse["ops"]:
        del o["layer"], o["flops"]
    sparse["tensors"][0]["storage"] = None
    a = io.load_instance(io.save_instance(inst, tmp_path / "full.json"))
    b = io.load_instance(_write(tmp_path, json.dumps(sparse), "sparse.json"))
    assert a.tensors == b.tensors == inst.tensors
    assert [o.layer for o in b.ops] == [-1] * len(b.ops) and a.ops == inst.ops
    assert a.c.tobytes() == b.c.tobytes() and a.P == b.P == inst.P
    only_null = json.loads(json.dumps(full))   # the fast schema takes it; the key count not
    only_null["tensors"][1]["storage"] = None
    only_null["tensors"][2]["mutated_by"] = []
    assert io.load_instance(_write(tmp_path, json.dumps(only_null), "n.json")).tensors \
        == inst.tensors
    dup = json.dumps(only_null).replace('"mutated_by": []', '"mutated_by": [], "mutated_by": []')
    assert _load_error(tmp_path, dup).field == "tensors[2].mutated_by"   # repeated key
    bad = json.loads(json.dumps(full))
    del bad["ops"][1]["layer"]
    bad["ops"][1]["duration_s"] = -1.0
    e = _load_error(tmp_path, bad)
    assert e.field == "ops[1].duration_s" and "more problem" not in e.problem
