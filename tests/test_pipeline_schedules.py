"""Pipeline schedules (slackopt.pipeline, issue 43 item 2): unit orders checked against
torch.distributed.pipelining, start times computed by hand, in-flight counts, and
properties of every schedule and of the pipeline simulation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slackopt.pipeline import (
    INTERCONNECTS,
    SCHEDULES,
    Unit,
    hop_time_s,
    pipeline_timing,
    schedule_name,
    stage_timing,
    stage_units,
)


def units(text: str) -> tuple[Unit, ...]:
    return tuple(Unit.from_str(u) for u in text.split())


# --- torch.distributed.pipelining gives the same orders ------------------------------------

@pytest.fixture(scope="module")
def torch_schedules():
    return pytest.importorskip("torch.distributed.pipelining.schedules")


class _RecordingStage:
    """Stand-in for a PipelineStage: a single-stage schedule's ``_step_microbatches`` runs
    against it without a process group (no p2p ops), and it records the passes it runs."""

    def __init__(self, stage: int, stages: int) -> None:
        self.stage_index, self.num_stages = stage, stages
        self.is_first, self.is_last = stage == 0, stage == stages - 1
        self.device, self.has_backward = "cpu", False
        self.units: list[Unit] = []

    def _get_init_p2p_neighbors_ops(self):
        return []

    get_fwd_recv_ops = get_fwd_send_ops = get_bwd_recv_ops = get_bwd_send_ops = (
        lambda self, j: [])

    def _prepare_forward_infra(self, *args, **kwargs):
        return None

    def clear_runtime_states(self):
        pass

    def forward_one_chunk(self, j, *args, **kwargs):
        self.units.append(Unit(j, "F"))

    def backward_one_chunk(self, j, **kwargs):
        self.units.append(Unit(j, "B"))

    def perform_reduce_grad(self, *args):
        pass


def _torch_single_order(schedules, cls_name: str, stage: int, stages: int, m: int):
    """The units torch's single-stage schedule runs on ``stage`` (its _step_microbatches)."""
    recorder = _RecordingStage(stage, stages)
    getattr(schedules, cls_name)(recorder, m)._step_microbatches([()] * m, [{}] * m)
    return tuple(recorder.units)


def _torch_multi_orders(schedules, cls_name: str, stages: int, m: int, chunks: int):
    """Per rank, the compute actions torch's runtime executes (pipeline_order_with_comms),
    as units: global stage s is chunk s // stages of rank s % stages; I is our B."""
    from types import SimpleNamespace

    stand_ins = [SimpleNamespace(num_stages=stages * chunks, group_size=stages, group_rank=0,
                                 submod=None, stage_index=c * stages) for c in range(chunks)]
    schedule = getattr(schedules, cls_name)(stand_ins, m)
    kind = {"F": "F", "B": "B", "I": "B", "W": "W"}
    return {rank: tuple(Unit(a.microbatch_index, kind[a.computation_type.value],
                             a.stage_index // stages)
                        for a in actions if a.computation_type.value in kind)
            for rank, actions in schedule.pipeline_order_with_comms.items()}


@pytest.mark.torch
@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages, m", [(1, 1), (2, 4), (3, 3), (3, 7), (4, 9), (5, 5)])
def test_single_stage_orders_are_torchs(torch_schedules, name, stages, m):
    cls_name = SCHEDULES[name].torch_class
    for i in range(stages):
        assert stage_units(name, i, stages, m) == _torch_single_order(
            torch_schedules, cls_name, i, stages, m), (name, stages, m, i)


@pytest.mark.torch
@pytest.mark.parametrize("name, stages, m, chunks", [
    ("interleaved-1f1b", 2, 4, 2), ("interleaved-1f1b", 4, 8, 2), ("interleaved-1f1b", 3, 6, 3),
    ("interleaved-1f1b", 4, 3, 2), ("interleaved-1f1b", 4, 10, 2), ("interleaved-1f1b", 1, 3, 2),
    ("interleaved-1f1b", 3, 4, 1),
    ("interleaved-zb", 2, 4, 2), ("interleaved-zb", 4, 8, 2), ("interleaved-zb", 3, 9, 3),
    ("interleaved-zb", 4, 2, 2), ("interleaved-zb", 4, 6, 2),
    ("zb-h1", 2, 4, 1), ("zb-h1", 3, 6, 1), ("zb-h1", 4, 8, 1), ("zb-h1", 4, 3, 1),
    ("zb-h1", 1, 2, 1),
])
def test_multi_stage_orders_are_torchs(torch_schedules, name, stages, m, chunks):
    expected = _torch_multi_orders(torch_schedules, SCHEDULES[name].torch_class, stages, m,
                                   chunks)
    assert {i: stage_units(name, i, stages, m, chunks) for i in range(stages)} == expected


@pytest.mark.torch
@pytest.mark.parametrize("name, stages, m, chunks", [
    ("1f1b", 4, 3, 1), ("interleaved-1f1b", 2, 5, 2), ("interleaved-1f1b", 3, 10, 1),
    ("interleaved-zb", 3, 7, 2), ("zb-h1", 4, 9, 1),
])
def test_rejected_where_torch_rejects(torch_schedules, name, stages, m, chunks):
    cls = getattr(torch_schedules, SCHEDULES[name].torch_class)
    with pytest.raises(ValueError):
        if name == "1f1b":
            cls(_RecordingStage(0, stages), m)
        else:
            _torch_multi_orders(torch_schedules, cls.__name__, stages, m, chunks)
    with pytest.raises(ValueError, match="microbatches"):
        stage_units(name, 0, stages, m, chunks)


@pytest.mark.torch
@pytest.mark.parametrize("torch_name", ["GPipe", "1F1B", "Interleaved1F1B",
                                        "InterleavedZeroBubble"])
def test_torch_names_name_the_same_class(torch_schedules, torch_name):
    cls = torch_schedules.get_schedule_class(torch_name)
    assert SCHEDULES[schedule_name(torch_name)].torch_class == cls.__name__
    assert schedule_name(cls.__name__) == schedule_name(torch_name)


# --- hand-computed timelines --------------------------------------------------------------

def test_1f1b_two_stages_four_microbatches_by_hand():
    # tF = 1, tB = 2, hop 0.5. Stage 1 (last) runs F0 at 1 + 0.5, B0 right after its F0;
    # stage 0's B0 waits for stage 1's B0 (ends 4.5) plus the hop, and so on.
    s0, s1 = pipeline_timing("1f1b", 2, 4, durations={"F": 1.0, "B": 2.0}, hop_s=0.5)
    assert s0.units == units("F0 F1 B0 F2 B1 F3 B2 B3")
    assert s1.units == units("F0 B0 F1 B1 F2 B2 F3 B3")
    assert s0.start_s.tolist() == [0.0, 1.0, 5.0, 7.0, 8.0, 10.0, 12.0, 15.0]
    assert s1.start_s.tolist() == [1.5, 2.5, 4.5, 5.5, 8.5, 9.5, 11.5, 12.5]
    assert s0.end_s.tolist() == [1.0, 2.0, 7.0, 8.0, 10.0, 11.0, 14.0, 17.0]
    assert s0.makespan_s == s1.makespan_s == 17.0
    assert stage_timing("1f1b", 1, 2, 4, durations={"F": 1.0, "B": 2.0},
                        hop_s=0.5).start_s.tolist() == s1.start_s.tolist()


def test_zb_h1_two_stages_by_hand():
    # tF = tB = tW = 1, no hop. Stage 1 defers its first W (stage i defers i), so its B1
    # reaches stage 0 at 5; stage 0 fills the wait for it with W0.
    s0, s1 = pipeline_timing("zb-h1", 2, 2, durations={"F": 1, "B": 1, "W": 1}, hop_s=0.0)
    assert s0.units == units("F0 F1 B0 W0 B1 W1")
    assert s1.units == units("F0 B0 F1 B1 W0 W1")
    assert s0.start_s.tolist() == [0.0, 1.0, 3.0, 4.0, 5.0, 6.0]
    assert s1.start_s.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert s0.makespan_s == 7.0


def test_interleaved_1f1b_two_stages_two_chunks_by_hand():
    # Global stages 0..3 on stages 0, 1, 0, 1. tF = 1, tB = 2, hop 0.5: F0c1 on stage 0
    # waits for F0 (chunk 0) of stage 1 (ends 2.5) plus the hop; B0c1 on stage 1 (the last
    # global stage) follows its own F0c1; B0 on stage 1 waits for B0c1 of stage 0.
    s0, s1 = pipeline_timing("interleaved-1f1b", 2, 2, 2, durations={"F": 1.0, "B": 2.0},
                             hop_s=0.5)
    assert s0.units == units("F0 F1 F0c1 F1c1 B0c1 B1c1 B0 B1")
    assert s1.units == units("F0 F1 F0c1 B0c1 F1c1 B1c1 B0 B1")
    assert s0.start_s.tolist() == [0.0, 1.0, 3.0, 4.0, 8.0, 11.0, 13.0, 16.0]
    assert s1.start_s.tolist() == [1.5, 2.5, 4.5, 5.5, 7.5, 8.5, 10.5, 13.5]
    assert s0.makespan_s == 18.0


def test_per_chunk_durations():
    # Chunk 1 twice as slow as chunk 0 on every stage: the last F0c1 of stage 0 ends later.
    t = stage_timing("interleaved-1f1b", 0, 2, 2, 2, durations={"F": [1.0, 2.0], "B": 2.0},
                     hop_s=0.0)
    assert t.units[2] == Unit(0, "F", 1)
    assert t.end_s[2] - t.start_s[2] == 2.0
    assert t.end_s[0] - t.start_s[0] == 1.0


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_one_microbatch_is_forward_then_backward(name):
    t = stage_timing(name, 0, 1, 1, durations={"F": 0.25, "B": 0.5}, hop_s=1.0)
    assert t.units == (Unit(0, "F"), Unit(0, "B"))
    assert t.start_s.tolist() == [0.0, 0.25]
    assert t.makespan_s == 0.75


# --- activations in flight ----------------------------------------------------------------

def _peak_in_flight(order, freed_by: str) -> int:
    """Largest count of F units begun minus ``freed_by`` units ended, over the order."""
    count = peak = 0
    for u in order:
        if u.kind == "F":
            count += 1
            peak = max(peak, count)
        elif u.kind == freed_by:
            count -= 1
    return peak


@pytest.mark.parametrize("stages, m", [(1, 1), (2, 4), (4, 4), (4, 9), (8, 16)])
def test_1f1b_holds_p_minus_i_and_gpipe_m(stages, m):
    for i in range(stages):
        assert _peak_in_flight(stage_units("1f1b", i, stages, m), "B") == stages - i
        assert _peak_in_flight(stage_units("gpipe", i, stages, m), "B") == m


@pytest.mark.parametrize("stages, m", [(2, 4), (4, 8), (5, 15)])
def test_zb_h1_holds_as_1f1b(stages, m):
    # Qi et al. 2024, 2.1: B frees as under 1F1B; counting until W, every stage holds p.
    for i in range(stages):
        order = stage_units("zb-h1", i, stages, m)
        assert _peak_in_flight(order, "B") == stages - i
        assert _peak_in_flight(order, "W") == stages


# --- errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("args, match", [
    (("pipedream", 0, 2, 4), "schedule: 'pipedream' is not one of"),
    (("1f1b", 2, 2, 4), "stage: 2 must be below stages = 2"),
    (("1f1b", -1, 2, 4), "stage: -1 must be an integer >= 0"),
    (("1f1b", 0, 0, 4), "stages: 0 must be an integer >= 1"),
    (("gpipe", 0, 2, 0), "microbatches: 0 must be an integer >= 1"),
    (("gpipe", 0, 2, 2.0), r"microbatches: 2\.0 must be an integer"),
    (("1f1b", 0, 4, 3), r"microbatches: 1f1b needs microbatches >= stages"),
    (("1f1b", 0, 2, 4, 2), "chunks: 1f1b runs one model chunk a stage"),
    (("zb-h1", 0, 2, 4, 2), "chunks: zb-h1 runs one model chunk a stage"),
    (("interleaved-zb", 0, 2, 4, 0), "chunks: 0 must be an integer >= 1"),
    (("interleaved-1f1b", 0, 2, 5, 2), r"multiple of its rounds .* = 2"),
])
def test_bad_arguments_name_the_argument_and_rule(args, match):
    with pytest.raises(ValueError, match=match):
        stage_units(*args)


@pytest.mark.parametrize("durations, match", [
    ({"F": 1.0}, "1f1b needs F and B"),
    ({"F": 1.0, "B": 1.0, "W": 1.0}, "no W; got B, F, W"),
    ({"F": -1.0, "B": 1.0}, r"durations\['F'\]: -1.0 must be a finite"),
    ({"F": math.inf, "B": 1.0}, r"durations\['F'\]: inf"),
    ({"F": [1.0, 2.0], "B": 1.0}, r"durations\['F'\]: 2 values for 1 chunks"),
])
def test_bad_durations(durations, match):
    with pytest.raises(ValueError, match=match):
        pipeline_timing("1f1b", 2, 4, durations=durations, hop_s=0.0)


def test_split_schedules_need_w_and_hop_must_be_valid():
    with pytest.raises(ValueError, match="zb-h1 needs F, B .* and W"):
        pipeline_timing("zb-h1", 2, 4, durations={"F": 1.0, "B": 1.0}, hop_s=0.0)
    with pytest.raises(ValueError, match="hop_s: -0.1 must be"):
        pipeline_timing("1f1b", 2, 4, durations={"F": 1.0, "B": 1.0}, hop_s=-0.1)
    with pytest.raises(ValueError, match="stage: 3 must be below"):
        stage_timing("1f1b", 3, 2, 4, durations={"F": 1.0, "B": 1.0}, hop_s=0.0)


def test_names_and_units():
    assert schedule_name("Interleaved1F1B") == "interleaved-1f1b"
    assert schedule_name("ScheduleInterleavedZeroBubble") == "interleaved-zb"
    assert schedule_name("ZB-H1") == "zb-h1"
    assert stage_units("GPipe", 0, 1, 2) == units("F0 F1 B0 B1")
    assert [str(Unit(3, "F")), str(Unit(3, "B", 1))] == ["F3", "B3c1"]
    assert Unit.from_str("W12c3") == Unit(12, "W", 3)
    for bad in ("X1", "F", "Fc1", "F1c", "F-1"):
        with pytest.raises(ValueError, match="KIND MICROBATCH"):
            Unit.from_str(bad)
    with pytest.raises(ValueError, match="Unit.kind: 'I'"):
        Unit(0, "I")


# --- communication time -------------------------------------------------------------------

def test_hop_time():
    mib64 = 1 * 4096 * 8192 * 2  # Llama-3-70B hidden state, one sequence of 4,096, BF16
    assert hop_time_s(mib64) == 10e-6 + mib64 / 50e9  # default: InfiniBand NDR
    assert hop_time_s(mib64, "nvlink4") == 10e-6 + mib64 / 450e9
    assert hop_time_s(0, "ib-hdr") == INTERCONNECTS["ib-hdr"].latency_s == 10e-6
    with pytest.raises(ValueError, match="interconnect: 'ethernet' is not one of"):
        hop_time_s(1, "ethernet")
    with pytest.raises(ValueError, match="activation_bytes: -1"):
        hop_time_s(-1)


# --- properties of every schedule and of the simulation -----------------------------------

@st.composite
def pipelines(draw):
    """A valid (schedule, p, m, v) and durations and a hop for it."""
    name = draw(st.sampled_from(sorted(SCHEDULES)))
    spec = SCHEDULES[name]
    p = draw(st.integers(1, 5))
    v = draw(st.integers(1, 3)) if spec.interleaved else 1
    m = draw(st.integers(p if name == "1f1b" else 1, 12))
    if spec.torch_class in ("ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble"):
        m -= m % max(1, m // p)
    time = st.floats(0.0, 4.0, allow_nan=False)
    kinds = "FBW" if spec.split_backward else "FB"
    durations = {k: draw(st.one_of(time, st.lists(time, min_size=v, max_size=v)))
                 for k in kinds}
    return name, p, m, v, durations, draw(st.floats(0.0, 2.0))


@settings(max_examples=150, deadline=None)
@given(pipelines())
def test_every_unit_once_in_dependency_order(case):
    name, p, m, v, _, _ = case
    kinds = "FBW" if SCHEDULES[name].split_backward else "FB"
    for i in range(p):
        order = stage_units(name, i, p, m, v)
        assert sorted(order, key=str) == sorted(
            (Unit(j, k, c) for j in range(m) for k in kinds for c in range(v)), key=str)
        position = {u: n for n, u in enumerate(order)}
        for j in range(m):
            for c in range(v):
                seq = [position[Unit(j, k, c)] for k in kinds]
                assert seq == sorted(seq), (name, p, m, v, i, j, c)


def _dependency_end(end, i, u, p, v, hop):
    """When u of stage i may start by its dependency (pipeline_timing's docstring), from
    ``end``: the end of each (stage, unit)."""
    s = u.chunk * p + i
    if u.kind == "W":
        return end[(i, Unit(u.microbatch, "B", u.chunk))]
    if u.kind == "F":
        other = s - 1
    else:
        other = s + 1 if s < p * v - 1 else None
    if other is None:
        return end[(i, Unit(u.microbatch, "F", u.chunk))]
    if other < 0:
        return 0.0
    rank = other % p
    return end[(rank, Unit(u.microbatch, u.kind, other // p))] + (hop if rank != i else 0.0)


@settings(max_examples=150, deadline=None)
@given(pipelines())
def test_simulation_respects_every_dependency(case):
    name, p, m, v, durations, hop = case
    timings = pipeline_timing(name, p, m, v, durations=durations, hop_s=hop)
    last = max(float(t.end_s.max()) for t in timings)
    end = {(t.stage, u): e for t in timings for u, e in zip(t.units, t.end_s.tolist(), strict=True)}
    for t in timings:
        assert t.makespan_s == last
        prev_end = 0.0
        for k, u in enumerate(t.units):
            d = durations[u.kind]
            assert t.end_s[k] == t.start_s[k] + (d if isinstance(d, float) else d[u.chunk])
            ready = _dependency_end(end, t.stage, u, p, v, hop)
            # one unit at a time, after its dependency, and no later than both allow
            assert t.start_s[k] == max(prev_end, ready), (name, p, m, v, t.stage, str(u))
            prev_end = t.end_s[k]
