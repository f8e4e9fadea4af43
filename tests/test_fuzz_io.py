"""Fuzzing the instance and plan loaders through the command line (issue 7, case 12).

Hypothesis starts from a valid instance document and a valid plan document
(``test_io.small_instance``) and mutates them: wrong types, missing and extra fields,
NaN/Infinity tokens, negative, fractional and huge numbers (1e400, 2**70, 5000 digits),
dangling references, reader-before-producer orders and recipe cycles, duplicate names and
duplicate JSON keys, wrong formats and schema versions, deep nesting, lone surrogates,
non-UTF-8 bytes, truncation and empty files. Each input is run through ``slackopt
describe``, ``slackopt solve ... --solver keep_all --budget 1.0`` or ``slackopt simulate``
in-process (:func:`slackopt.cli.main`) and must end with exit status 2 and one message on
stderr naming the file (and the field, for a document that parses), or with status 0 when
the mutation happened to leave a valid file; never status 1 or a traceback. How long a
refusal takes is measured in ``benchmarks/timings.py``, not asserted here.

The examples are derandomized (the same ones on every run) and bounded, about 10 s in all
on two cores. ``atheris`` (coverage-guided) installs from wheels for CPython 3.11 on x86-64
Linux; ``benchmarks/fuzz_io_atheris.py`` is an optional harness for it, run briefly by
:func:`test_atheris_harness_runs` when atheris is installed and ``SLACKOPT_ATHERIS=1``
(instrumenting the imports takes about 45 s), skipped otherwise; atheris is not a CI
requirement.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slackopt import io
from slackopt.cli import main
from slackopt.plan import Plan
from tests.test_io import small_instance

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=100, deadline=1000, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
INSTANCE = small_instance()
INSTANCE_DOC = io.instance_to_dict(INSTANCE)
PLAN_DOC = io.plan_to_dict(Plan.from_mapping(INSTANCE, {"x0": "keep", "x1": "recomp",
                                                        "x2": "swap"}), INSTANCE)
WHOLE_FILE = ("not valid JSON", "file is empty", "not UTF-8", "nested too deeply",
              "top level is")


# ----------------------------------------------------------------------------- runner
@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fuzz")
    io.save_instance(INSTANCE, d / "instance.json")
    io.save_plan(Plan.from_mapping(INSTANCE, {"x0": "keep", "x1": "recomp", "x2": "swap"}),
                 d / "plan.json", INSTANCE)
    # warm up imports, entry points and the compiled evaluator (numba compiles or loads
    # its cache on first use) outside the timed examples
    for argv in (["describe", str(d / "instance.json")],
                 ["solve", str(d / "instance.json"), "--solver", "keep-all", "--budget", "1.0"],
                 ["solve", str(d / "instance.json"), "--solver", "slackswap", "--budget", "0.5"],
                 ["simulate", str(d / "instance.json"), str(d / "plan.json"), "--budget",
                  "0.5"]):
        main([*argv, "--json"])
    return d


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def check(capsys: pytest.CaptureFixture[str], workdir: Path, data: bytes, kind: str,
          must_fail: bool, words: tuple[str, ...] = ()) -> None:
    """Write `data` and load it through the CLI; assert a clean outcome."""
    path = workdir / f"fuzz_{kind}.json"
    path.write_bytes(data)
    if kind == "plan":
        cmds = [["simulate", str(workdir / "instance.json"), str(path), "--json"]]
    else:
        cmds = [["describe", str(path), "--json"],
                ["solve", str(path), "--solver", "keep-all", "--budget", "1.0", "--json"]]
    for argv in cmds:
        rc, out, err = run_cli(capsys, argv)
        assert "Traceback" not in out + err
        assert rc in ((2,) if must_fail else (0, 2)), (rc, err, data[:300])
        if rc == 2:
            assert out == "" and err.startswith("slackopt: error: ")
            assert str(path) in err and "Fix: " in err, err
            assert "field '" in err or any(w in err for w in WHOLE_FILE), err
            for w in words:
                assert w in err, (w, err)
        else:
            json.loads(out)  # a valid answer: one JSON document


# ----------------------------------------------------------------------------- mutations
def _paths(doc: Any, loc: tuple = ()) -> list[tuple]:
    """Every location in `doc` (the root excluded)."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*loc, k))
            out.extend(_paths(v, (*loc, k)))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((*loc, i))
            out.extend(_paths(v, (*loc, i)))
    return out


def _get(doc: Any, loc: tuple) -> Any:
    for part in loc:
        doc = doc[part]
    return doc


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=3),
    max_leaves=6)


@st.composite
def mutated(draw: st.DrawFn, base: dict) -> tuple[bytes, bool]:
    """(file bytes, must fail) for one structural or textual mutation of `base`."""
    doc = copy.deepcopy(base)
    paths = _paths(doc)
    kind = draw(st.sampled_from([
        "replace", "delete", "extra", "dup_item", "rename", "nonfinite", "huge",
        "negative", "dup_key", "version", "format", "nest", "truncate", "bytes",
        "surrogate", "empty", "top"]))
    must_fail = True
    if kind == "replace":
        loc = draw(st.sampled_from(paths))
        _get(doc, loc[:-1])[loc[-1]] = draw(junk)
        must_fail = False          # some replacements are valid (a new category, ...)
    elif kind == "delete":
        loc = draw(st.sampled_from([p for p in paths if isinstance(p[-1], str)]))
        del _get(doc, loc[:-1])[loc[-1]]
        must_fail = False          # optional fields have defaults
    elif kind == "extra":
        dicts = [()] + [p for p in paths if isinstance(_get(doc, p), dict)]
        loc = draw(st.sampled_from(dicts))
        target = _get(doc, loc)
        key = draw(st.sampled_from(["__reduce__", "!!python/object", "extra", "eval"]))
        target[key] = draw(st.sampled_from(["os.system('touch PWNED')",
                                            "!!python/object/apply:os.system ['x']", 1]))
        must_fail = not (loc and loc[-1] in ("meta", "params", "runtime_params"))
        must_fail = must_fail and "meta" not in loc
    elif kind == "dup_item":
        lists = [p for p in paths if isinstance(_get(doc, p), list) and _get(doc, p)]
        if lists:
            loc = draw(st.sampled_from(lists))
            lst = _get(doc, loc)
            lst.append(copy.deepcopy(lst[draw(st.integers(0, len(lst) - 1))]))
            must_fail = loc in (("ops",), ("tensors",)) or loc[-1] == "readers"
        else:              # a plan: a decision named twice is a duplicate JSON key
            kind = "dup_key"
    elif kind == "rename":     # dangling references, orders, cycles
        names = [p for p in paths if p[-1] in ("name", "producer") or
                 (len(p) >= 2 and p[-2] in ("readers", "ops", "inputs"))]
        loc = draw(st.sampled_from(names or [("instance",)]))
        _get(doc, loc[:-1])[loc[-1]] = draw(st.sampled_from(
            ["f0", "f1", "f2", "b0", "b1", "b2", "regen", "x0", "x1", "x2", "g1", "nope"]))
        must_fail = False
    text = json.dumps(doc, ensure_ascii=False)
    if kind == "nonfinite":
        nums = list(re.finditer(r'(?<=: )-?\d[\d.e+-]*', text))
        m = draw(st.sampled_from(nums))
        tok = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]))
        text = text[:m.start()] + tok + text[m.end():]
    elif kind == "huge":
        m = draw(st.sampled_from(list(re.finditer(r'"(size_bytes|workspace_bytes|'
                                                  r'transient_bytes|schema_version)": \d+',
                                                  text))))
        big = draw(st.sampled_from([str(2**70), "9" * 5000, str(2**53 + 1)]))
        text = text[:m.start()] + f'"{m.group(1)}": {big}' + text[m.end():]
    elif kind == "negative":
        m = draw(st.sampled_from(list(re.finditer(
            r'"(size_bytes|workspace_bytes|duration_s|bytes_per_s|schema_version)": ', text))))
        text = text[:m.end()] + "-" + text[m.end():]
        must_fail = text[m.end() + 1] != "0" or text[m.end() + 2] == "."   # -0 is 0
    elif kind == "dup_key":
        m = draw(st.sampled_from(list(re.finditer(r'"(name|size_bytes|format|'
                                                  r'decisions|ops)": ', text))))
        text = text[:m.start()] + m.group(0) + '"dup", ' + text[m.start():]
    elif kind == "version":
        v = draw(st.sampled_from([0, 2, -1, 1.0, "1", None, True, [1], 2**70]))
        doc["schema_version"] = v
        text = json.dumps(doc)
    elif kind == "format":
        v = draw(st.sampled_from(["slackopt-plan", "slackopt-instance", "", "x", 1, None,
                                  ["slackopt-instance"], {"a": 1}]))
        if v == base["format"]:
            v = "other"
        doc["format"] = v
        text = json.dumps(doc)
    elif kind == "nest":
        depth = draw(st.sampled_from([70, 900, 5000, 100_000]))
        where = draw(st.sampled_from(["meta", "top"]))
        deep = "[" * depth + "]" * depth
        text = deep if where == "top" else text.replace('"meta": {', f'"meta": {{"x": {deep}, ',
                                                        1)
    elif kind == "truncate":
        text = text[: draw(st.integers(1, len(text) - 1))]
    elif kind == "surrogate":
        text = text.replace('"x1"', '"x\\ud800"', 1) if '"x1"' in text else \
            text.replace('"name": "', '"name": "\\udfff', 1)
    elif kind == "empty":
        text = draw(st.sampled_from(["", "   \n", "\n\t"]))
    elif kind == "top":
        text = draw(st.sampled_from(["null", "[]", "1", '"slackopt-instance"', "true"]))
    data = text.encode("utf-8")
    if kind == "bytes":
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\x80\x80",
                                                  b"\xed\xa0\x80"])) + data[pos:]
    return data, must_fail


# ----------------------------------------------------------------------------- tests
@pytest.mark.slow
@SETTINGS
@given(case=mutated(INSTANCE_DOC))
def test_fuzz_instance_files(capsys, workdir, case) -> None:
    data, must_fail = case
    check(capsys, workdir, data, "instance", must_fail)


@pytest.mark.slow
@SETTINGS
@given(case=mutated(PLAN_DOC))
def test_fuzz_plan_files(capsys, workdir, case) -> None:
    data, must_fail = case
    check(capsys, workdir, data, "plan", must_fail)


@pytest.mark.parametrize("text, words", [
    ('{"format": ["slackopt-instance"], "schema_version": 1}', ("format", "list")),
    ('{"format": {"a": 1}, "schema_version": 1}', ("format",)),
    ("[" * 900 + "]" * 900, ()),
])
def test_crashes_found_by_fuzzing_are_user_errors(capsys, workdir, text, words) -> None:
    check(capsys, workdir, text.encode(), "instance", True, words)


def test_found_deep_meta_huge_integer_and_surrogate(capsys, workdir) -> None:
    base = json.dumps(INSTANCE_DOC)
    deep = base.replace('"meta": {', '"meta": {"x": ' + "[" * 900 + "]" * 900 + ", ", 1)
    check(capsys, workdir, deep.encode(), "instance", True, ("meta.x", "nested more than 64"))
    huge = base.replace('"size_bytes": 1000', '"size_bytes": ' + "9" * 5000, 1)
    check(capsys, workdir, huge.encode(), "instance", True, ("digits",))
    sur = base.replace('"meta": {', '"meta": {"\\udfff": 1, ', 1)
    check(capsys, workdir, sur.encode(), "instance", True, ("meta", "surrogate"))


def test_files_are_data_never_code(capsys, workdir) -> None:
    """Strings that would run code under pickle, eval or yaml.load stay strings."""
    doc = copy.deepcopy(INSTANCE_DOC)
    doc["meta"] = {"__reduce__": "os.system('touch PWNED')",
                   "yaml": "!!python/object/apply:os.system ['touch PWNED']"}
    doc["tensors"][0]["category"] = "__import__('os').system('touch PWNED')"
    path = workdir / "evil.json"
    path.write_text(json.dumps(doc))
    rc, out, err = run_cli(capsys, ["describe", str(path), "--json"])
    assert rc == 0 and not (workdir / "PWNED").exists() and not Path("PWNED").exists()
    assert io.load_instance(path).meta == doc["meta"]
    path.write_bytes(b"\x80\x04\x95cos\nsystem\n.")       # a pickle stream
    rc, out, err = run_cli(capsys, ["describe", str(path)])
    assert rc == 2 and "not UTF-8" in err or "not valid JSON" in err
    # Nothing in the loaders or the CLI can execute or unpickle file contents.
    cli = sorted(str(f.relative_to(ROOT)) for f in (ROOT / "slackopt" / "cli").glob("*.py"))
    assert len(cli) > 5
    io_files = sorted(str(f.relative_to(ROOT)) for f in (ROOT / "slackopt" / "io").glob("*.py"))
    assert len(io_files) > 4
    for f in (*io_files, *cli, "slackopt/instance.py", "slackopt/plan.py"):
        src = (ROOT / f).read_text()
        for bad in ("pickle", "eval(", "exec(", "yaml", "marshal", "shelve"):
            assert bad not in src.replace("never pickle", "").replace("never pickles", "")\
                .replace("or unpickled", ""), (f, bad)


@pytest.mark.skipif(os.environ.get("SLACKOPT_ATHERIS") != "1",
                    reason="opt-in: set SLACKOPT_ATHERIS=1 (atheris instruments its imports "
                    "for about 45 s before the first input)")
def test_atheris_harness_runs() -> None:
    """The optional coverage-guided harness runs 30 inputs without a crash."""
    pytest.importorskip("atheris")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fuzz_io_atheris.py"),
                        "-runs=30", "-seed=1"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
