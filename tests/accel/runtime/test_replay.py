"""Recorded and learned replays of a task give the bytes a full run gives.

The firmware records a task's first run and replays it later
(:mod:`accel.runtime.replay`); the cmodel learns, on the first replay, which
op enable started which pipeline and afterwards launches the ops directly
(:mod:`accel.cmod.fast.replay`).  These tests check the replays against
independent references on a network with every kind of op a replay resolves
(convolutions with their SDP, a PDP pool, an SDP reading a second tensor, a
fully-connected layer): the int8 CPU reference of each DLA tensor, bit for
bit, over many inferences with different inputs; and check that a state the
learned steps did not see (descriptor memory rewritten, a register the
recording leaves alone changed) is not replayed from the old assumptions.
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from accel.cmod.fast import replay as cmod_replay
from accel.regs import by_address, lookup
from accel.runtime import replay as runtime_replay
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.passes import run_passes
from tengine_host.quant import calibrate
from tengine_host.verify import verify_run

SHAPE = (1, 8, 12, 12)


def _graph():
    rng = np.random.default_rng(11)
    inits = {"w1": rng.normal(0, 0.3, (16, 8, 3, 3)), "b1": rng.normal(0, 0.2, 16),
             "w2": rng.normal(0, 0.3, (16, 16, 1, 1)), "b2": rng.normal(0, 0.2, 16),
             "wf": rng.normal(0, 0.3, (10, 16)), "bf": rng.normal(0, 0.2, 10)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"]),
        helper.make_node("Add", ["c2", "p1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    g = helper.make_graph(
        nodes, "replay", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    graph = load_onnx(model)
    run_passes(graph)
    return graph


def _samples(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(0, 1, SHAPE).astype(np.float32)} for _ in range(n)]


@pytest.fixture(scope="module")
def model():
    graph = _graph()
    return graph, calibrate(graph, _samples(6, 1), progress=False)


def _executor(graph, table) -> Executor:
    return Executor(graph, [get_device("nvdla", preset="nv_small", capture=True),
                            get_device("cpu")], table)


def _handle(ex: Executor):
    (handle,) = [h for d, _, h in ex.prepared if d.name == "nvdla"]
    return handle


def _prepared(handle) -> list[cmod_replay.Prepared]:
    recs = handle.runtime.firmware._recordings
    return [r.prepared for rs in recs.values() for r in rs if r.prepared is not None]


def test_learned_replays_are_bit_exact_over_many_inputs(model):
    graph, table = model
    with _executor(graph, table) as ex:
        assert [d.name for d, _ in ex.partition.parts] == ["nvdla"]
        handle = _handle(ex)
        report = None
        for sample in _samples(10, 2):
            _, _, report = verify_run(ex, sample, report)
            assert report.bit_exact, report.summary()
        fw = handle.runtime.firmware
        prepared = _prepared(handle)
        kinds = {u for s in handle.runtime.backend.stats for u in [s.unit]}
    assert report.layers_checked >= 5
    assert kinds >= {"CONV", "PDP", "SDP"}, kinds
    # one full run per starting state of the group pointers, then replays; each
    # replay after the first one of its recording ran the learned steps
    assert fw.run_counts["replayed"] >= 6, fw.run_counts
    runs = {k: sum(p.runs[k] for p in prepared) for k in ("learning", "learned", "unlearned")}
    assert runs["learning"] == len(prepared) >= 1
    assert runs["learned"] == fw.run_counts["replayed"] - runs["learning"] > 0
    assert runs["unlearned"] == 0
    # the learned steps launch ops directly: no op enable of the pipelines is played as
    # a CSB write any more
    steps = prepared[0].learned.steps
    assert sum(s[0] == cmod_replay.LAUNCH for s in steps) >= 4
    for s in steps:
        if s[0] == cmod_replay.WRITE:
            reg = by_address(s[1])
            assert not (reg.name == "D_OP_ENABLE" and reg.unit in cmod_replay._LEARNED_UNITS)



def test_learned_op_enables_are_stored_with_the_configuration(model):
    """An op enable that starts nothing replaces its whole register (OP_EN is its only
    field), so the fast steps store it in the bulk update of the configuration around
    it.  A pointer write keeps the consumer bit the hardware sets: a masked store in
    the learned steps; the fast steps store the value it left when learned (the same
    start gives the same consumers), so they hold no masked store of either."""
    graph, table = model
    with _executor(graph, table) as ex:
        for sample in _samples(4, 3):
            ex.run(sample)
        dla = _handle(ex).runtime.backend.dla
        learned = [p.learned for p in _prepared(_handle(ex)) if p.learned is not None]
    assert learned
    enables, pointers = set(), {}
    for name in cmod_replay._LEARNED_UNITS:
        regs = dla.regs[name]
        off = regs.unit.registers["D_OP_ENABLE"].offset
        enables |= {(id(g), off) for g in regs.groups}
        # every bit but the producer's (the consumer among them) is left as it is
        written = sum(f.mask for f in regs.unit.registers["S_POINTER"].fields
                      if "w" in f.access)
        pointers[(id(regs.stores()[0]), regs.pointer_offset)] = ~written & 0xFFFFFFFF
    status = lookup("NVDLA_GLB.S_INTR_STATUS").address

    def clears(steps: list[tuple]) -> list[int]:
        return [t[2] for t in steps if t[0] == cmod_replay.WRITE and t[1] == status]

    for lr in learned:
        stores = [s for s in lr.steps if s[0] in (cmod_replay.STORE, cmod_replay.LAUNCH)]
        enable_steps = [s for s in stores if (id(s[1]), s[2]) in enables]
        pointer_steps = [s for s in stores if (id(s[1]), s[2]) in pointers]
        assert enable_steps and pointer_steps
        assert all(s[3] == 0 for s in enable_steps)
        assert all(s[3] == pointers[(id(s[1]), s[2])] != 0 for s in pointer_steps)
        # a batch's span keeps the learned steps themselves (it plays them only to learn
        # its effect and when that does not hold); the steps between spans are merged
        spans = [s[1] for s in lr.fast if s[0] == cmod_replay.SPAN]
        assert spans
        in_spans = {id(t) for span in spans for t in span.steps}
        learned_ids = {id(t) for t in lr.steps}
        for span in spans:
            assert all(id(t) in learned_ids for t in span.steps
                       if t[0] not in (cmod_replay.BATCH, cmod_replay.DONE))
        assert not [s for s in lr.fast if s[0] == cmod_replay.STORE]
        merged = {(id(store), off) for s in lr.fast if s[0] == cmod_replay.MERGED
                  for store, updates in s[1] for off in updates}
        merged |= {(id(store), off) for s in lr.fast if s[0] == cmod_replay.MERGED
                   for store, off, _value in s[2]}
        assert {(id(s[1]), s[2]) for s in stores
                if s[0] == cmod_replay.STORE and id(s) not in in_spans} <= merged
        # the interrupt clears the firmware writes to GLB are played as direct clears of
        # the same bits, in the same places
        assert not clears(lr.fast)
        played = []
        for s in lr.fast:
            if s[0] == cmod_replay.CLEAR:
                played.append(s[1])
            elif s[0] == cmod_replay.SPAN:
                played += clears(s[1].steps)
        assert played == clears(lr.steps) and played


def test_what_a_run_decoded_and_recorded_is_not_kept_past_its_use(model):
    """The decoded descriptors live for their run; a recording the cmodel has prepared keeps
    only the register reads its validity check compares (its preamble), not the writes."""
    graph, table = model
    with _executor(graph, table) as ex:
        handle = _handle(ex)
        for sample in _samples(4, 4):
            ex.run(sample)
        fw = handle.runtime.firmware
        recs = [r for rs in fw._recordings.values() for r in rs]
    assert fw._ops is None and fw._net is None and not fw._running and not fw._decoded
    prepared = [r for r in recs if r.prepared is not None]
    assert prepared       # (a recording not replayed yet keeps its events to prepare)
    for r in prepared:
        assert r.preamble() and [(e[1], e[2]) for e in r.events] == r.preamble()

def test_a_full_run_from_another_state_does_not_decode_again(model, monkeypatch):
    """The task's full runs from its other starting states (the group pointers a run
    leaves) take the descriptors decoded by the first, and give the same bytes."""
    from accel.runtime import firmware

    decoded = []
    original = firmware.decode_op
    monkeypatch.setattr(firmware, "decode_op",
                        lambda *a: decoded.append(a[2]) or original(*a))
    graph, table = model
    with _executor(graph, table) as ex:
        fw = _handle(ex).runtime.firmware
        for s in _samples(3, 5):
            _, _, report = verify_run(ex, s)
            assert report.bit_exact, report.summary()
        assert fw.run_counts["full"] >= 2
    assert sorted(decoded) == list(range(len(decoded))), "an op was decoded twice"


def test_rewritten_descriptors_are_decoded_again(model):
    graph, table = model
    samples = _samples(4, 3)
    with _executor(graph, table) as ex:
        handle = _handle(ex)
        rt = handle.runtime
        for s in samples[:3]:
            verify_run(ex, s)
        fw = rt.firmware
        full = fw.run_counts["full"]
        # write the network descriptor's own bytes back: same content, new version
        (addrs,) = fw._recordings
        first = addrs[0]
        rt.backend.write_mem(first, rt.backend.read_mem(first, 16))
        _, _, report = verify_run(ex, samples[3])
        assert report.bit_exact, report.summary()
        assert fw.run_counts["full"] == full + 1


def test_a_changed_inherited_register_is_not_replayed_from_the_learned_steps(model):
    graph, table = model
    samples = _samples(10, 4)
    with _executor(graph, table) as ex:
        handle = _handle(ex)
        # each starting state of the group pointers has its recording (three here): run
        # until every one has been learned
        for s in samples[:9]:
            verify_run(ex, s)
        prepared = _prepared(handle)
        assert prepared and all(p.learned is not None for p in prepared)
        inherited = [i for p in prepared for i in p.learned.inherited]
        assert inherited, "the firmware writes every configuration register the ops read"
        # a register the recording never writes, e.g. a performance-counter enable:
        # changed behind the firmware's back, the learned launches cannot assume it
        before = {id(p): dict(p.runs) for p in prepared}
        for store, off, value in inherited:
            store[off] = value ^ 1
        _, _, report = verify_run(ex, samples[9])
        for store, off, value in inherited:
            store[off] = value
        assert report.bit_exact, report.summary()
        after = {id(p): dict(p.runs) for p in prepared}
        changed = [k for k in after if after[k] != before[k]]
        assert changed and all(after[k]["unlearned"] == before[k]["unlearned"] + 1
                               for k in changed)


def test_a_moved_consumer_pointer_is_not_replayed_from_the_learned_steps(model, monkeypatch):
    """The fast steps store each pointer write with the consumer it found when learned:
    they are played only from the learned consumers of every learned unit."""
    graph, table = model
    with _executor(graph, table) as ex:
        for s in _samples(9, 4):
            ex.run(s)
        dla = _handle(ex).runtime.backend.dla
        prepared = _prepared(_handle(ex))
    producers = {name: regs.producer for name, regs in dla.regs.items()}
    (nxt,) = [p for p in prepared if p.pointers == producers]
    assert nxt.learned is not None
    played = []
    monkeypatch.setattr(cmod_replay, "_play", lambda d, steps, hook: played.append(steps))
    assert cmod_replay.run(dla, nxt, None) and played[-1] is nxt.learned.fast
    for name in cmod_replay._LEARNED_UNITS:
        regs = dla.regs[name]
        regs.flip_consumer()
        try:
            assert cmod_replay.run(dla, nxt, None)
        finally:
            regs.flip_consumer()
        assert played[-1] is nxt.steps, name
    assert nxt.runs["unlearned"] == len(cmod_replay._LEARNED_UNITS)


def test_learned_runs_pause_the_cycle_collector_and_restore_it(model):
    """The collector is off while learned steps play (a completion hook sees it so), on
    again after the run, and left off when the caller had turned it off."""
    import gc

    graph, table = model
    seen: list[bool] = []

    def hook(_index: int) -> None:
        seen.append(gc.isenabled())

    with _executor(graph, table) as ex:
        for s in _samples(6, 5):      # both starting states recorded, prepared and learned
            verify_run(ex, s)
        handle = _handle(ex)
        dla, prepared = handle.runtime.backend.dla, _prepared(handle)
        learned = sum(p.runs["learned"] for p in prepared)
        assert gc.isenabled()
        assert any(cmod_replay.run(dla, p, hook) for p in prepared)
        assert gc.isenabled()
        gc.disable()
        try:
            assert any(cmod_replay.run(dla, p, hook) for p in prepared)
            assert not gc.isenabled()
        finally:
            gc.enable()
        assert sum(p.runs["learned"] for p in prepared) == learned + 2
    assert seen and not any(seen)


def test_an_op_is_decoded_once_whichever_register_group_it_lands_in(model):
    """The second run of a task starts from other group pointers, so each op lands in the
    other register group, over what another op left there.  The firmware writes the
    registers an op leaves unused as well, so the cmodel, which keeps decoded ops by
    their register values, finds every op of the later runs among those of the first."""
    graph, table = model
    with _executor(graph, table) as ex:
        samples = _samples(5, 9)
        ex.run(samples[0])
        dla = _handle(ex).runtime.backend.dla
        first = set(dla.fast.plans.keys())
        for sample in samples[1:]:
            ex.run(sample)
        runs = _handle(ex).runtime.firmware.run_counts
    assert runs["full"] >= 2          # two starting states: each op ran in both groups
    assert first and set(dla.fast.plans.keys()) == first


def test_recorded_events_read_back_as_logged():
    """A recording keeps its events as 32-bit words; they read back as the tuples logged,
    extremes included, and a truncated log keeps its first events."""
    logged = [(runtime_replay.WRITE, 0x5004, 0xFFFFFFFF), (runtime_replay.READ, 0xA004, 0x10001),
              (runtime_replay.WAIT, 0x3, 0x1), (runtime_replay.CALL, 7),
              (runtime_replay.WRITE, 0, 0)]
    events = runtime_replay.Events()
    for ev in logged:
        events.append(*ev)
    assert len(events) == 5 and list(events) == logged
    events.truncate(2)
    assert list(events) == logged[:2]


def test_learned_inferences_keep_nothing(model):
    """Once the replays are learned, an inference leaves nothing behind: no register log,
    no firmware events or op records that accumulate, no new recordings or plans."""
    graph, table = model
    samples = _samples(4, 12)
    with Executor(graph, [get_device("nvdla", preset="nv_small"), get_device("cpu")],
                  table) as ex:
        for i in range(12):
            ex.run(samples[i % 4])
        tracemalloc.start()
        try:
            for i in range(8):          # tracemalloc's own tables settle
                ex.run(samples[i % 4])
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for i in range(40):
                ex.run(samples[i % 4])
            gc.collect()
            after = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert after - before < 16 * 1024, f"{after - before} bytes kept by 40 inferences"
