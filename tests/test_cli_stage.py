"""Pipeline stages on the command line: ``make`` and ``profile`` with ``--schedule``,
``slackopt stage`` (a single-pass file into a stage's), ``describe`` of a stage, and the
one-line errors of their options (slackopt.cli._schedule)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slackopt import io, workloads
from slackopt.pipeline import hop_time_s, stage_timing, stage_units
from slackopt.stage import boundary_bytes, build_stage
from tests.helpers import assert_user_error, run

STAGE_1F1B = ("--schedule", "1f1b", "--stages", "4", "--stage", "1", "--microbatches", "6")


def _same(a, b) -> None:
    """Two instances that plan alike: ops, tensors, units and their derived arrays."""
    assert io.instance_to_dict(a)["ops"] == io.instance_to_dict(b)["ops"]
    assert io.instance_to_dict(a)["tensors"] == io.instance_to_dict(b)["tensors"]
    assert a.scheduled_units == b.scheduled_units
    assert (a.P, a.A, a.ideal_time_s) == (b.P, b.A, b.ideal_time_s)
    assert np.array_equal(a.start_s, b.start_s)


def test_make_with_a_schedule_writes_the_stage(capsys, tmp_path: Path) -> None:
    """make --schedule is build_stage of the workload: 1F1B stage 1 of 4 with 6
    microbatches has 12 units in torch's order, holds p - i = 3 microbatches, and the
    file records the schedule; --json reports it."""
    out = tmp_path / "s.json"
    rc, text, err = run(capsys, "make", "chain", "-o", out, *STAGE_1F1B, "--json")
    assert rc == 0, err
    doc = json.loads(text)
    want = build_stage(workloads.make("chain"), "1f1b", 1, 4, 6)
    got = io.load_instance(out)
    _same(got, want)
    assert got.name == want.name == "chain8-seed0_a100-pcie4@1f1b-p4s1m6"
    assert [(u.kind, u.microbatch) for u in got.units] == [
        (u.kind, u.microbatch) for u in stage_units("1f1b", 1, 4, 6)]
    sch = doc["schedule"]
    assert {k: sch[k] for k in ("name", "stage", "stages", "microbatches", "chunks")} == {
        "name": "1f1b", "stage": 1, "stages": 4, "microbatches": 6, "chunks": 1}
    assert (sch["units"], sch["in_flight_peak"]) == (12, 3)
    assert got.meta["schedule"]["hop_s"] == sch["hop_s"] == hop_time_s(
        boundary_bytes(workloads.make("chain")))
    busy = float(got.durations_s.sum())
    assert sch["idle_s"] == pytest.approx(got.ideal_time_s - busy, abs=1e-15) and sch["idle_s"] > 0
    assert doc["ideal_time_s"] == got.ideal_time_s


def test_hop_and_interconnect_set_the_earliest_starts(capsys, tmp_path: Path) -> None:
    """--hop-s 0 gives the earliest starts of a pipeline without communication time;
    --interconnect nvlink4 the boundary tensor's copy time over NVLink."""
    base = workloads.make("chain")
    rc, _, err = run(capsys, "make", "chain", "-o", tmp_path / "a.json", *STAGE_1F1B,
                     "--hop-s", "0")
    assert rc == 0, err
    got = io.load_instance(tmp_path / "a.json")
    unit_s = got.meta["schedule"]["unit_s"]
    timing = stage_timing("1f1b", 1, 4, 6, durations=unit_s, hop_s=0.0)
    starts = np.array([u.earliest_start_s for u in got.units])
    assert np.allclose(starts, timing.start_s - timing.start_s[0], rtol=0, atol=1e-12)
    rc, _, err = run(capsys, "make", "chain", "-o", tmp_path / "b.json", *STAGE_1F1B,
                     "--interconnect", "nvlink4")
    assert rc == 0, err
    assert io.load_instance(tmp_path / "b.json").meta["schedule"]["hop_s"] == hop_time_s(
        boundary_bytes(base), "nvlink4")


def test_stage_command_turns_a_single_pass_file_into_the_stage(capsys, tmp_path: Path) -> None:
    """slackopt stage equals make --schedule; it names the stage with --name, refuses a
    file that is already a stage and never writes over the file it reads."""
    one = tmp_path / "one.json.gz"
    assert run(capsys, "make", "chain", "-o", one)[0] == 0
    rc, text, err = run(capsys, "stage", one, "-o", tmp_path / "st.json", "--schedule",
                        "zb-h1", "--stages", "2", "--stage", "0", "--microbatches", "4",
                        "--name", "my-stage")
    assert rc == 0, err
    assert "Schedule" in text and "zb-h1" in text and "microbatches in flight" in text
    got = io.load_instance(tmp_path / "st.json")
    want = build_stage(io.load_instance(one), "zb-h1", 0, 2, 4)
    assert got.name == "my-stage"
    assert [(u.kind, u.microbatch) for u in got.units] == [
        (u.kind, u.microbatch) for u in want.units]
    assert {u.kind for u in got.units} == {"F", "B", "W"}
    assert (got.P, got.ideal_time_s, got.n_saved) == (want.P, want.ideal_time_s, want.n_saved)
    rc, out, err = run(capsys, "stage", tmp_path / "st.json", "-o", tmp_path / "x.json",
                       "--schedule", "1f1b", "--stages", "2", "--stage", "0",
                       "--microbatches", "4")
    assert_user_error(rc, out, err, "already a pipeline stage")
    rc, out, err = run(capsys, "stage", one, "-o", one, "--force", *STAGE_1F1B)
    assert_user_error(rc, out, err, "a file this command reads")
    assert io.load_instance(one).single_pass


def test_describe_shows_the_schedule(capsys, tmp_path: Path) -> None:
    """describe of a stage: the schedule (name, stage, stages, microbatches, chunks, hop,
    in-flight peak) and T*, as a table and in --json; a single pass has no schedule."""
    out = tmp_path / "s.json"
    assert run(capsys, "make", "chain", "-o", out, "--schedule", "interleaved-1f1b",
               "--stages", "2", "--stage", "0", "--microbatches", "4", "--chunks", "2")[0] == 0
    inst = io.load_instance(out)
    rc, text, err = run(capsys, "describe", out)
    assert rc == 0, err
    for words in ("Schedule", "interleaved-1f1b", "chunks v", "hop between stages",
                  "microbatches in flight, at most", "ideal step T*", "idle in T* (bubbles)"):
        assert words in text, words
    rc, text, err = run(capsys, "describe", out, "--json")
    doc = json.loads(text)
    assert doc["ideal_time_s"] == inst.ideal_time_s
    sch = doc["schedule"]
    assert (sch["name"], sch["stage"], sch["stages"], sch["microbatches"], sch["chunks"],
            sch["units"]) == ("interleaved-1f1b", 0, 2, 4, 2, 16)
    # torch's order of stage 0 of 2, 4 microbatches, 2 chunks: F0 F1 F0c1 F1c1 F2 B0c1
    # F3 B1c1 ...: 5 (microbatch, chunk) passes begun before the first backward ends
    assert [str(u) for u in stage_units("interleaved-1f1b", 0, 2, 4, 2)][:8] == [
        "F0", "F1", "F0c1", "F1c1", "F2", "B0c1", "F3", "B1c1"]
    assert sch["in_flight_peak"] == 5
    assert sch["hop_s"] == inst.meta["schedule"]["hop_s"] > 0
    one = tmp_path / "one.json"
    assert run(capsys, "make", "chain", "-o", one)[0] == 0
    rc, text, err = run(capsys, "describe", one, "--json")
    assert "schedule" not in json.loads(text)


@pytest.mark.parametrize(("change", "words"), [
    ({"name": "nonsense"}, "'nonsense' is not one of gpipe"),
    ({"stage": 99}, "stage: 99 must be below stages = 4"),
    ({"microbatches": -3}, "microbatches: -3 must be an integer >= 1"),
    ({"microbatches": 8}, "runs other units than the instance's"),
    ({"name": "gpipe"}, "runs other units than the instance's"),
])
def test_describe_refuses_a_schedule_record_that_is_not_the_stage(
        capsys, tmp_path: Path, change: dict, words: str) -> None:
    """A stage file whose meta.schedule names no schedule, or one whose unit order is not
    the file's units, is refused (exit 2, naming the file and meta.schedule), not shown."""
    out = tmp_path / "s.json"
    assert run(capsys, "make", "chain", "-o", out, *STAGE_1F1B)[0] == 0
    doc = json.loads(out.read_text())
    doc["meta"]["schedule"].update(change)
    out.write_text(json.dumps(doc))
    rc, text, err = run(capsys, "describe", out)
    assert_user_error(rc, text, err, str(out), "meta.schedule", words)


@pytest.mark.parametrize(("args", "option", "rule"), [
    (("--schedule", "1f1b", "--stages", "4", "--stage", "4", "--microbatches", "6"),
     "--stage", "4 must be below stages = 4"),
    (("--schedule", "1f1b", "--stages", "4", "--stage", "0", "--microbatches", "3"),
     "--microbatches", "1f1b needs microbatches >= stages"),
    (("--schedule", "interleaved-1f1b", "--stages", "4", "--stage", "0", "--microbatches",
      "9", "--chunks", "2"), "--microbatches", "a multiple of its rounds"),
    (("--schedule", "1f1b", "--stages", "4", "--stage", "0", "--microbatches", "6",
      "--chunks", "2"), "--chunks", "1f1b runs one model chunk a stage"),
    (("--schedule", "1f1b", "--stages", "0", "--stage", "0", "--microbatches", "6"),
     "--stages", "must be an integer >= 1"),
    (("--schedule", "pipedream", "--stages", "4", "--stage", "0", "--microbatches", "6"),
     "--schedule", "'pipedream' is not one of gpipe, 1f1b"),
    (("--schedule", "1f1b", "--stages", "4", "--microbatches", "6"), "--stage",
     "required with --schedule"),
    (("--stages", "4",), "--stages", "needs --schedule"),
    (("--hop-s", "0.001",), "--hop-s", "needs --schedule"),
    ((*STAGE_1F1B, "--hop-s", "-1"), "--hop-s", "must be a finite number of seconds >= 0"),
    ((*STAGE_1F1B, "--hop-s", "inf"), "--hop-s", "must be a finite number of seconds >= 0"),
    ((*STAGE_1F1B, "--hop-s", "0.1", "--interconnect", "ib-ndr"), "--hop-s",
     "give --hop-s or --interconnect, not both"),
    ((*STAGE_1F1B, "--interconnect", "pcie"), "--interconnect", "'pcie' is not one of"),
    (("--schedule", "1f1b", "--stages", "4", "--stage", "0", "--microbatches", "1025"),
     "--microbatches", "1025 x 1 chunk(s) is over 1024 passes a stage"),
    (("--schedule", "interleaved-1f1b", "--stages", "4", "--stage", "0", "--microbatches",
      "516", "--chunks", "2"), "--microbatches", "516 x 2 chunk(s) is over 1024 passes"),
])
def test_bad_schedule_options_exit_2_naming_the_option(capsys, tmp_path: Path, args,
                                                       option: str, rule: str) -> None:
    out = tmp_path / "s.json"
    rc, text, err = run(capsys, "make", "chain", "-o", out, *args)
    assert_user_error(rc, text, err, f"'{option}'", rule)
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.torch
def test_profile_with_a_schedule(capsys, tmp_path: Path) -> None:
    """profile --schedule builds the stage from the profiled microbatch: --name names the
    stage, the profile's metadata stays under meta["base"], and the --json document has
    both the profile's keys and the schedule."""
    pytest.importorskip("torch")
    from tests import torch_models  # noqa: F401  (factories load it by name)

    out = tmp_path / "p.json"
    one = tmp_path / "one.json"
    common = ("--fake", "tests.torch_models:gpt_factory", "-i", "2x16", "--gpu", "h100")
    assert run(capsys, "profile", *common, "-o", one)[0] == 0
    rc, text, err = run(capsys, "profile", *common, "-o", out, "--name", "gpt-stage",
                        "--schedule", "gpipe", "--stages", "2", "--stage", "1",
                        "--microbatches", "3", "--json")
    assert rc == 0, err
    doc = json.loads(text)
    got = io.load_instance(out)
    base = io.load_instance(one)
    assert got.name == doc["name"] == "gpt-stage"
    assert (doc["fake"], doc["gpu"], doc["schedule"]["name"], doc["schedule"]["units"]) == (
        True, "h100", "gpipe", 6)
    assert got.meta["base"]["meta"]["fake"] is True
    assert got.meta["base"]["name"] == base.name
    want = build_stage(base, "gpipe", 1, 2, 3)
    assert (got.n_ops, got.n_saved, got.P) == (want.n_ops, want.n_saved, want.P)
    assert got.ideal_time_s == want.ideal_time_s
    rc, text, err = run(capsys, "profile", *common, "-o", tmp_path / "q.json",
                        "--schedule", "gpipe", "--stages", "2", "--stage", "2",
                        "--microbatches", "3")
    assert_user_error(rc, text, err, "'--stage'", "2 must be below stages = 2")
    assert not (tmp_path / "q.json").exists()


def test_a_stage_without_bubbles_shows_no_idle_time() -> None:
    """GPipe's last stage runs its units back to back: T* is its busy time, and the
    summation's rounding (1e-17 s on the chain) is not shown as idle; stage 0 idles."""
    from slackopt.cli._schedule import schedule_doc

    last = build_stage(workloads.make("chain"), "gpipe", 3, 4, 4)
    first = build_stage(workloads.make("chain"), "gpipe", 0, 4, 4)
    assert schedule_doc(last)["idle_s"] == 0.0
    assert last.ideal_time_s == pytest.approx(float(last.durations_s.sum()), rel=1e-12)
    assert schedule_doc(first)["idle_s"] == first.ideal_time_s - float(first.durations_s.sum())
    assert schedule_doc(first)["idle_s"] > 0


def test_a_long_container_is_counted_in_words_that_agree() -> None:
    from slackopt.cli._output import brief

    assert brief({"a" * 70: 1}) == "(1 entry; see --json)"
    assert brief({"a" * 40: 1, "b" * 40: 2}) == "(2 entries; see --json)"
    assert brief(["x" * 70]) == "(1 item; see --json)"
    assert brief(list(range(40))) == "(40 items; see --json)"
