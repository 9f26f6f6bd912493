"""Runs of convolutions computed together in learned replays (:mod:`accel.cmod.fast.batch`).

A batch computes its launches' datapaths at the first one's place, so the
checks are: the bytes equal the int8 CPU reference of the network (an
independent path) on every inference; the records, saturation counts and the
whole memory equal those of the same network run one launch at a time; and
convolutions that read what an earlier one of the same shape writes are never
batched - with that check taken out, the result is wrong, which is what the
check is for.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from accel.cmod.dram import Dram
from accel.cmod.fast import batch, gemm, replay
from accel.cmod.sdp import SdpPlan
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.passes import run_passes
from tengine_host.quant import calibrate


def _model(nodes, inits: dict[str, np.ndarray], shape, out: str, out_shape):
    g = helper.make_graph(
        nodes, "batch", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(out_shape))],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                                        ir_version=8))
    run_passes(graph)
    return graph


#: depthwise convolutions (one 8-channel block convolution per channel group: launches with
#: their own weights and biases) with and without ReLU, a grouped convolution of 8-channel
#: groups (block convolutions with dense weights), then a pointwise convolution
SHAPE = (1, 24, 40, 40)


def _depthwise_graph(odd: bool = False):
    """``odd``: one more pointwise convolution, 11 launches in all, so that each run leaves
    the group pointers flipped (and the task is recorded from two starting states)."""
    rng = np.random.default_rng(5)
    c = SHAPE[1]
    inits = {"w1": rng.normal(0, 0.4, (c, 1, 3, 3)), "b1": rng.normal(0, 0.3, c),
             "w2": rng.normal(0, 0.4, (c, 1, 3, 3)), "b2": rng.normal(0, 0.3, c),
             "wg": rng.normal(0, 0.2, (c, 8, 3, 3)), "bg": rng.normal(0, 0.2, c),
             "w3": rng.normal(0, 0.3, (16, c, 1, 1)), "b3": rng.normal(0, 0.2, 16),
             "w4": rng.normal(0, 0.3, (16, 16, 1, 1)), "b4": rng.normal(0, 0.2, 16)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=c),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=c,
                         strides=[2, 2]),
        helper.make_node("Conv", ["c2", "wg", "bg"], ["g"], pads=[1, 1, 1, 1], group=c // 8),
        helper.make_node("Conv", ["g", "w3", "b3"], ["y"]),
    ]
    if not odd:
        del inits["w4"], inits["b4"]
        return _model(nodes, inits, SHAPE, "y", (1, 16, 20, 20))
    nodes.append(helper.make_node("Conv", ["y", "w4", "b4"], ["y2"]))
    return _model(nodes, inits, SHAPE, "y2", (1, 16, 20, 20))


def _chain_graph(n: int = 4):
    """Pointwise convolutions of one shape, each reading the previous one's output."""
    rng = np.random.default_rng(6)
    nodes, inits, t = [], {}, "x"
    for i in range(n):
        inits[f"w{i}"] = rng.normal(0, 0.4, (8, 8, 1, 1))
        inits[f"b{i}"] = rng.normal(0, 0.2, 8)
        nodes.append(helper.make_node("Conv", [t, f"w{i}", f"b{i}"], [f"y{i}"]))
        t = f"y{i}"
    return _model(nodes, inits, (1, 8, 6, 6), t, (1, 8, 6, 6))


def _samples(graph, n: int, seed: int, scale: float = 1.0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shape = tuple(graph.tensors[graph.inputs[0]].shape)
    return [{graph.inputs[0]: rng.normal(0, scale, shape).astype(np.float32)}
            for _ in range(n)]


class _Run:
    """One network on the nvdla device alone; ``batched`` False runs one launch at a time;
    ``capture`` reads each tensor as its op completes (learned replays then play their
    steps one by one, with the completion marks)."""

    def __init__(self, graph, table, batched: bool = True, capture: bool = False,
                 preset: str = "nv_small") -> None:
        self.ex = Executor(graph, [get_device("nvdla", preset=preset, capture=capture)], table)
        self.ex.prerun()
        ((self.device, _, self.handle),) = self.ex.prepared
        self.dla = self.handle.runtime.backend.dla
        self.dla.fast.batch_convs = batched   # read when a recording is learned (its second run)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.ex.postrun()

    def run(self, sample) -> dict[str, np.ndarray]:
        return self.ex.run(sample)

    def infer(self, sample):
        """``(outputs, the int8 reference's outputs dequantized the same way)``."""
        out = self.run(sample)
        ref = self.device.dequantize_outputs(self.handle,
                                             self.device.reference(self.handle, sample))
        return out, ref

    def learned(self) -> list[replay.Learned]:
        recs = self.handle.runtime.firmware._recordings
        return [r.prepared.learned for rs in recs.values() for r in rs
                if r.prepared is not None and r.prepared.learned is not None]

    def spans(self) -> list[replay.Span]:
        return [s[1] for lr in self.learned() for s in lr.fast if s[0] == replay.SPAN]

    def batches(self) -> list[batch.ConvBatch]:
        steps = [s for lr in self.learned() for s in lr.fast]
        steps += [s for sp in self.spans() for s in sp.steps]
        return [s[1] for s in steps if s[0] == replay.BATCH]

    def memory(self) -> list[bytes]:
        dram = self.dla.dram
        return [dram.read(base, size).tobytes() for base, size, _ in dram.regions]


def _run_alike(run: _Run, other: _Run, sample, what: str) -> None:
    """Run ``sample`` on both: ``run``'s outputs equal the int8 reference, and both leave
    the same outputs, op records, memory, registers (counters, pointers, GLB status) and
    CBUF state."""
    out, ref = run.infer(sample)
    for name in ref:
        np.testing.assert_array_equal(out[name], ref[name], err_msg=what)
    other_out = other.run(sample)
    for name in out:
        np.testing.assert_array_equal(out[name], other_out[name], err_msg=what)
    assert [r.as_dict() for r in run.dla.stats] == [r.as_dict() for r in other.dla.stats], what
    assert run.memory() == other.memory(), what
    for name, regs in run.dla.regs.items():
        assert regs.stores() == other.dla.regs[name].stores(), f"{name}, {what}"
    assert run.dla.cbuf.partial_rows == other.dla.cbuf.partial_rows, what


@pytest.fixture(scope="module")
def depthwise():
    graph = _depthwise_graph()
    return graph, calibrate(graph, _samples(graph, 4, 1), progress=False)


def test_batched_launches_match_the_reference_and_the_launches_one_at_a_time(depthwise):
    graph, table = depthwise
    # inputs wider than the calibration's: some outputs saturate in some launches only
    samples = _samples(graph, 6, 2) + _samples(graph, 3, 3, scale=4.0)
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        for i, s in enumerate(samples):
            _run_alike(fast, slow, s, f"sample {i}")
        assert fast.spans() and all(sp.plays["applied"] for sp in fast.spans())
        batches = fast.batches()
        assert not slow.batches()
        # both depthwise layers: three 8-channel block convolutions with their own weights
        assert len(batches) >= 2 and all(len(b) == 3 for b in batches[:2]), \
            [len(b) for b in batches]
        assert len({p.weight_addr for p in batches[0].plans}) == 3


def _tables_graph():
    """Depthwise layers (batched block convolutions), each followed by a function that
    nv_small computes by the CDP's table (each op loads its own)."""
    rng = np.random.default_rng(8)
    c = SHAPE[1]
    inits = {"w1": rng.normal(0, 0.4, (c, 1, 3, 3)), "b1": rng.normal(0, 0.3, c),
             "w2": rng.normal(0, 0.4, (c, 1, 3, 3)), "b2": rng.normal(0, 0.3, c),
             "w3": rng.normal(0, 0.3, (16, c, 1, 1)), "b3": rng.normal(0, 0.2, 16)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=c),
        helper.make_node("Sigmoid", ["c1"], ["s1"]),
        helper.make_node("Conv", ["s1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=c),
        helper.make_node("HardSwish", ["c2"], ["h2"]),
        helper.make_node("Conv", ["h2", "w3", "b3"], ["c3"]),
        helper.make_node("Tanh", ["c3"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "tables", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 40, 40])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)],
                                        ir_version=8))
    run_passes(graph)
    return graph


def test_cdp_tables_load_inside_batches_and_cdp_ops_replay_learned():
    """The firmware loads the next CDP op's table while a layer's block convolutions are
    still to run: those loads do not end the batch, and a span whose steps hold them
    plays them again after its effect (a table is no register).  Every CDP op enable is
    learned as a launch.  Bytes, records, memory and registers equal the launches one
    at a time, and the outputs the int8 reference, on every inference."""
    graph = _tables_graph()
    table = calibrate(graph, _samples(graph, 4, 1), progress=False)
    samples = _samples(graph, 10, 12)
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        for i, s in enumerate(samples):
            _run_alike(fast, slow, s, f"sample {i}")
        spans = [sp for sp in fast.spans() if sp.table_steps]
        assert spans and all(sp.plays["applied"] for sp in spans), [sp.plays for sp in spans]
        cdp_enable = {fast.dla.regs[u].unit.registers["D_OP_ENABLE"].address
                      for u in ("NVDLA_CDP", "NVDLA_CDP_RDMA")}
        for lr in fast.learned():
            assert not [st for st in lr.fast if st[0] == replay.WRITE and st[1] in cdp_enable]
            assert [st for st in lr.steps if st[0] == replay.LAUNCH
                    and st[-1].kind == "cdp"]
    cdp_records = [r for r in fast.dla.stats if r.unit == "CDP"]
    assert len(cdp_records) == 3


def test_a_batch_stays_within_its_bound_of_sums(depthwise, monkeypatch):
    """A batch takes launches while their sums stay within MAX_BATCH_OUTPUTS (a bound on
    its working memory): with room for two of the depthwise layers' 8x40x40 blocks, their
    three launches run as two and one, and still match the launches one at a time."""
    graph, table = depthwise
    bound = 2 * 8 * 40 * 40
    monkeypatch.setattr(batch, "MAX_BATCH_OUTPUTS", bound)
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        for i, s in enumerate(_samples(graph, 4, 31)):
            _run_alike(fast, slow, s, f"sample {i}")
        batches = fast.batches()
        assert batches and all(
            sum(p.geo.k * p.geo.out_h * p.geo.out_w for p in b.plans) <= bound
            for b in batches)
        assert [len(b) for b in batches][:1] == [2]


def _count_saturations(run: _Run) -> list[int]:
    """Record the converter saturations of every convolution as the Dla finishes it: one
    by one, or a batch's all at once."""
    seen: list[int] = []
    one, batch = run.dla.conv_finished, run.dla.fast.batch_finished

    def spy_one(plan, done):
        seen.append(done.sdp_sat)
        one(plan, done)

    def spy_batch(conv_batch):
        seen.extend(conv_batch.saturations["sdp_sat"])
        batch(conv_batch)
    run.dla.conv_finished, run.dla.fast.batch_finished = spy_one, spy_batch
    return seen


def _saturations_batched_and_one_by_one(graph, table, divide: dict[str, float]) -> list[int]:
    """Run ``graph`` batched and launch by launch with the output scales of ``divide``'s
    tensors divided by its values (far below the calibrated ones: converters leave their
    17-bit range); both must leave the same outputs, per-launch saturation counts and
    counter registers.  Returns the counts, in launch order."""
    table = {t: dict(v, scale=v["scale"] / divide.get(t, 1)) for t, v in table.items()}
    sample = _samples(graph, 1, 7)[0]
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        # each starting state of the group pointers is recorded, then learned: the runs
        # after that are batched
        for _ in range(6):
            fast.run(sample)
            slow.run(sample)
        assert fast.batches()
        got, want = _count_saturations(fast), _count_saturations(slow)
        out, ref = fast.infer(sample)
        slow.run(sample)
        for name in ref:
            np.testing.assert_array_equal(out[name], ref[name])
        assert got == want
        off = fast.dla.regs["NVDLA_SDP"].unit.registers["D_PERF_OUT_SATURATION"].offset
        counts = [g[off] for g in fast.dla.regs["NVDLA_SDP"].groups]
        assert counts == [g[off] for g in slow.dla.regs["NVDLA_SDP"].groups]
    return got


def _merged_entries(run: _Run) -> int:
    return sum(len(updates) for lr in run.learned() for s in lr.fast if s[0] == replay.MERGED
               for _store, updates in s[1]) + sum(
        len(s[2]) for lr in run.learned() for s in lr.fast if s[0] == replay.MERGED)


def test_the_fast_steps_leave_every_register_as_the_learned_steps_do(monkeypatch):
    """The fast steps merge the stores between batches and leave out a store of the value
    its register already holds; a run that captures its tensors plays the learned steps
    store by store.  Both leave the same registers, memory and op records after every
    inference, and the fast steps store fewer values than with nothing left out (a chain
    of convolutions of one shape: each one's configuration mostly the one before's)."""
    graph = _chain_graph(6)
    table = calibrate(graph, _samples(graph, 4, 1), progress=False)
    samples = _samples(graph, 5, 7) + _samples(graph, 2, 8, scale=4.0)
    with _Run(graph, table) as fast, _Run(graph, table, capture=True) as stepped:
        for i, s in enumerate(samples):
            _run_alike(fast, stepped, s, f"sample {i}")
        runs = [r.prepared.runs for rs in fast.handle.runtime.firmware._recordings.values()
                for r in rs if r.prepared is not None]
        assert sum(r["learned"] for r in runs) >= 4
        kept = _merged_entries(fast)
    monkeypatch.setattr(replay, "_settled", lambda dla: {})    # nothing known: all stored
    with _Run(graph, table) as every:
        for s in samples[:4]:
            every.run(s)
        assert kept < _merged_entries(every)


def test_the_recordings_of_a_task_share_what_they_hold_alike():
    """A task that flips a group pointer is recorded once per starting state; the two
    recordings' value tuples, merged stores and span effects with the same contents are
    one object each (:class:`accel.cmod.fast.replay.Interned`), the table that found them is
    gone once both and their spans have learned, their batches of the same plans compute
    with the same arrays, and the runs still match the launches one at a time."""
    graph = _depthwise_graph(odd=True)
    table = calibrate(graph, _samples(graph, 4, 1), progress=False)
    samples = _samples(graph, 8, 21)
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        for i, s in enumerate(samples):
            _run_alike(fast, slow, s, f"sample {i}")
        recs = [r.prepared for rs in fast.handle.runtime.firmware._recordings.values()
                for r in rs if r.prepared is not None and r.prepared.learned is not None]
        assert len(recs) == 2 and all(p.interned is None for p in recs)
        assert all(sp.interned is None and sp.effect for sp in fast.spans())

        def values(p):        # each BULK part's value tuple
            return [v for st in p.steps if st[0] == replay.BULK for _, _, v in st[1]]

        def merged(p):        # each merged store's dict
            return [d for st in p.learned.fast if st[0] == replay.MERGED for _, d in st[1]]

        def effects(p):
            return [d for st in p.learned.fast if st[0] == replay.SPAN
                    for _, d in st[1].effect.updates]

        for part in (values, merged, effects):
            a, b = (part(p) for p in recs)
            alike = [(x, y) for x in a for y in b if x == y]
            assert alike, part.__name__
            assert all(x is y for x, y in alike), part.__name__
        # both batch the same plans, and compute with the same weights and operands
        by_plans: dict[tuple, list] = {}
        for b in fast.batches():
            by_plans.setdefault(tuple(map(id, b.plans)), []).append(b)
        twins = [bs for bs in by_plans.values() if len(bs) > 1]
        assert twins
        for bs in twins:
            assert all(b.inputs(fast.dla) is bs[0].inputs(fast.dla) for b in bs)


def test_a_span_leaves_out_what_the_steps_before_it_stored(depthwise, monkeypatch):
    """A span's learned effect leaves out a register the fast steps before it stored with
    the value the span leaves there (every fast run finds it so): the effects are smaller
    than with nothing known (the batched test above checks the registers they leave)."""
    graph, table = depthwise
    samples = _samples(graph, 4, 2)

    def stores(run: _Run) -> int:
        return sum(len(changed) for sp in run.spans() if sp.effect is not None
                   for _, changed in sp.effect.updates)

    with _Run(graph, table) as fast:
        for s in samples:
            fast.run(s)
        kept = stores(fast)
    monkeypatch.setattr(replay.Span, "known", lambda self, dla: set())   # nothing known
    with _Run(graph, table) as every:
        for s in samples:
            every.run(s)
        assert 0 < kept < stores(every)


def test_saturation_counts_are_kept_per_launch(depthwise):
    """The converters of both depthwise layers (ReLU, then signed) saturate, each 8-channel
    block by its own count."""
    got = _saturations_batched_and_one_by_one(*depthwise, {"r1": 3e3, "c2": 1e6})
    assert len(set(got[:3])) == 3 and len(set(got[3:6]) - {0}) >= 1, got

def test_convolutions_reading_an_earlier_ones_output_are_not_batched(monkeypatch):
    graph = _chain_graph()
    table = calibrate(graph, _samples(graph, 4, 1), progress=False)
    samples = _samples(graph, 4, 8)
    with _Run(graph, table) as run:
        for s in samples:
            out, ref = run.infer(s)
            for name in ref:
                np.testing.assert_array_equal(out[name], ref[name])
        assert run.learned() and not run.batches()
    # the same chain with the overlap check taken out: batched, and wrong
    monkeypatch.setattr(batch, "_overlaps", lambda span, spans: False)
    with _Run(graph, table) as run:
        wrong = False
        for s in samples:
            out, ref = run.infer(s)
            wrong |= any(not np.array_equal(out[n], ref[n]) for n in ref)
        assert run.batches() and wrong


def test_a_batch_equals_its_launches_run_one_by_one_with_their_own_truncates(depthwise):
    """CACC truncates and converter settings that differ between the launches of a batch
    (the compiler gives a layer's blocks one truncate; the hardware allows any)."""
    graph, table = depthwise
    sample = _samples(graph, 1, 9, scale=3.0)[0]
    with _Run(graph, table) as run:
        for _ in range(5):
            run.run(sample)
        first = run.batches()[0]
        dla, atom = run.dla, run.dla.cfg.atom_size
        launches = []
        for op, truncate, cvt_shift in zip(first.launches, (0, 3, 7), (0, 1, 4), strict=True):
            sp = op.plan.sdp
            sp = replace(sp, cvt=(sp.cvt[0], sp.cvt[1], sp.cvt[2] + cvt_shift))
            launches.append(replace(op, plan=replace(op.plan, truncate=truncate, sdp=sp)))
        regions = [(base, dla.dram.read(base, size)) for base, size, _ in dla.dram.regions]

        def memory():
            return [dla.dram.read(base, len(data)).tobytes() for base, data in regions]

        first.run(dla)
        unchanged = memory()
        conv_batch = batch.ConvBatch(launches, atom)
        conv_batch.run(dla)
        batched = memory()
        assert batched != unchanged          # the settings made a difference
        for base, data in regions:
            dla.dram.write(base, data)
        one_by_one = [dla._conv_datapath(op.needs_rdma, op.plan) for op in launches]
        assert memory() == batched
        for got, want in zip(map(conv_batch.done, range(len(launches))), one_by_one,
                             strict=True):
            assert (got.cacc_sat, got.sdp_sat, got.sdp.as_dict()) == \
                (want.cacc_sat, want.sdp_sat, want.sdp.as_dict())


def test_depthwise_blocks_are_computed_per_channel(depthwise):
    """Each kernel of a depthwise layer's block convolutions reads only its own channel:
    the batch multiplies each channel by its taps alone (the results are checked against
    the reference and the launches one by one above)."""
    graph, table = depthwise
    with _Run(graph, table) as run:
        for s in _samples(graph, 5, 14):
            run.run(s)
        _, weights, _ = run.batches()[0].inputs(run.dla)
        assert isinstance(weights, batch.Diagonal) and weights.taps.shape == (24, 9)
        grouped = [b for b in run.batches() if b.plans[0].geo.stride_y == 1][-1]
        _, weights, _ = grouped.inputs(run.dla)
        assert not isinstance(weights, batch.Diagonal) and weights.shape == (3, 8, 72)


def test_a_span_whose_registers_differ_runs_its_steps(depthwise, monkeypatch):
    """A span's effect depends on the registers it was learned from: where it plays, it
    holds, and with one of them changed it does not; a span that runs its steps instead
    leaves the same memory, registers and records as one applying its effect."""
    graph, table = depthwise
    samples = _samples(graph, 3, 12, scale=3.0)
    holds = replay._Effect.holds
    seen: list[tuple[bool, bool]] = []

    def probe(effect):        # (as found, with a register it depends on changed)
        depends = [(store, off, value) for store, found in effect.depends
                   for off, value in found.items()]
        store, off, value = depends[len(seen) % len(depends)]
        store[off] = value ^ 1
        changed = holds(effect)
        store[off] = value
        seen.append((holds(effect), changed))
        return seen[-1][0]

    with _Run(graph, table) as applied, _Run(graph, table) as stepped:
        for _ in range(5):
            applied.run(samples[0])
            stepped.run(samples[0])
        monkeypatch.setattr(replay._Effect, "holds", probe)
        applied.run(samples[0])
        assert seen and all(found and not changed for found, changed in seen), seen
        monkeypatch.setattr(replay._Effect, "holds", lambda effect: any(
            sp.effect is effect for sp in applied.spans()) and holds(effect))
        for s in samples:
            applied.run(s)
            stepped.run(s)
            assert applied.memory() == stepped.memory()
            for name, regs in applied.dla.regs.items():
                assert regs.stores() == stepped.dla.regs[name].stores(), name
            assert [r.as_dict() for r in applied.dla.stats] == \
                [r.as_dict() for r in stepped.dla.stats]
        assert all(sp.plays["stepped"] == len(samples) for sp in stepped.spans())
        assert all(sp.plays["applied"] >= len(samples) for sp in applied.spans())


def test_pointwise_convolutions_pixel_by_pixel_equal_the_planes(monkeypatch):
    """Large 1x1 convolutions run pixel by pixel (``FastPaths.pointwise_datapath``: pixels as
    memory holds them, the uint8 x int8 kernels after the ReLU, the offset form before
    it) leave the same bytes, saturation counts and registers as the channel-major
    datapath, with output scales far below the calibrated ones, so that the converters leave their
    17-bit range."""
    if gemm.int_engine() is None:
        pytest.skip("no integer engine here: every GEMM goes to BLAS, channel-major")
    rng = np.random.default_rng(9)
    inits = {"w1": rng.normal(0, 0.2, (64, 64, 1, 1)), "b1": rng.normal(0, 0.2, 64),
             "w2": rng.normal(0, 0.2, (40, 64, 1, 1)), "b2": rng.normal(0, 0.2, 40)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["p1"]),
             helper.make_node("Relu", ["p1"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["y"])]
    graph = _model(nodes, inits, (1, 64, 24, 40), "y", (1, 40, 24, 40))
    table = calibrate(graph, _samples(graph, 4, 1), progress=False)
    table = {t: dict(v, scale=v["scale"] / {"p1": 3e3, "r": 3e3, "y": 1e4}.get(t, 1))
             for t, v in table.items()}
    sample = _samples(graph, 1, 4)[0]
    from accel.cmod.fast import FastPaths
    taken = []
    pointwise = FastPaths.pointwise_datapath

    def spy(self, *args):
        done = pointwise(self, *args)
        taken.append(done is not None)
        return done
    monkeypatch.setattr(FastPaths, "pointwise_datapath", spy)
    forms = set()
    run = gemm.PackedWeights.run

    def form(self, patches, signed=False):
        forms.add(signed)
        return run(self, patches, signed)
    monkeypatch.setattr(gemm.PackedWeights, "run", form)
    in_place = []      # outputs written straight into memory, and the writes counted
    dst_pixels, touched = SdpPlan.dst_pixels, Dram.touched

    def spy_dst(self, dram, atom):
        view = dst_pixels(self, dram, atom)
        in_place.append(("view", self.dst[0]) if view is not None else ("copy",))
        return view

    def spy_touched(self, base, writes=1):
        in_place.append(("touched", base))
        return touched(self, base, writes)
    monkeypatch.setattr(SdpPlan, "dst_pixels", spy_dst)
    monkeypatch.setattr(Dram, "touched", spy_touched)
    with _Run(graph, table, batched=False) as pixels:
        got = _count_saturations(pixels)
        out, ref = pixels.infer(sample)
        memory = pixels.memory()
        off = pixels.dla.regs["NVDLA_SDP"].unit.registers["D_PERF_OUT_SATURATION"].offset
        counts = [g[off] for g in pixels.dla.regs["NVDLA_SDP"].groups]
    assert taken and all(taken), taken
    assert forms == ({False, True} if gemm.int_engine().signed else {False})
    views = [i for i, e in enumerate(in_place) if e[0] == "view"]
    assert views and ("copy",) not in in_place
    assert all(in_place[i + 1] == ("touched", in_place[i][1]) for i in views), in_place
    monkeypatch.setattr(FastPaths, "pointwise_datapath", lambda self, *args: None)
    with _Run(graph, table, batched=False) as planes:
        want = _count_saturations(planes)
        planes.run(sample)
        assert planes.memory() == memory
        assert [g[off] for g in planes.dla.regs["NVDLA_SDP"].groups] == counts
    for name in ref:
        np.testing.assert_array_equal(out[name], ref[name])
    assert got == want and sum(got) > 0, got


def _route_equals_planes(monkeypatch, route: str, graph, table, preset: str,
                         samples: list) -> list[int]:
    """Run ``samples`` launch by launch on ``preset`` with the pixel route ``route`` of
    :class:`~accel.cmod.fast.FastPaths`, which must take every convolution it is asked
    for, then with it declining: the outputs equal the int8 reference both times, and
    the outputs, converter saturations of every launch, memory and counter registers
    are the same.  Returns the saturation counts."""
    from accel.cmod.fast import FastPaths
    taken, pixels = [], getattr(FastPaths, route)

    def spy(self, *args):
        done = pixels(self, *args)
        taken.append(done is not None)
        return done

    def run_all() -> tuple[list, list, list, list]:
        with _Run(graph, table, batched=False, preset=preset) as one:
            seen = _count_saturations(one)
            outs = []
            for sample in samples:
                out, ref = one.infer(sample)
                for name in ref:
                    np.testing.assert_array_equal(out[name], ref[name])
                outs.append(out)
            off = one.dla.regs["NVDLA_SDP"].unit.registers["D_PERF_OUT_SATURATION"].offset
            return outs, seen, one.memory(), [g[off] for g in one.dla.regs["NVDLA_SDP"].groups]

    monkeypatch.setattr(FastPaths, route, spy)
    got = run_all()
    assert taken and all(taken), taken
    monkeypatch.setattr(FastPaths, route, lambda self, *args: None)
    want = run_all()
    for a, b in zip(got[0], want[0], strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    assert got[1:] == want[1:]
    return got[1]


@pytest.mark.parametrize(("preset", "c"), [("nv_small", 64), ("nv_large", 72)])
def test_convolutions_of_patch_rows_pixel_by_pixel_equal_the_planes(monkeypatch, preset, c):
    """3x3 convolutions of ``c`` channels (72: nv_large's last atom of input lanes half
    empty, 40 kernels: its last output atom too) run pixel by pixel
    (``FastPaths.rows_datapath``: patches from the pixels as memory holds them, the
    uint8 x int8 kernels after the ReLU, the offset form before it) and leave the same
    bytes, memory, per-launch converter saturations and counter registers as the
    channel-major datapath; the outputs equal the int8 reference.  Output scales far
    below the calibrated ones make converters saturate."""
    if gemm.int_engine() is None:
        pytest.skip("no integer engine here: every GEMM goes to BLAS, channel-major")
    rng = np.random.default_rng(23)
    inits = {"w1": rng.normal(0, 0.1, (c, c, 3, 3)), "b1": rng.normal(0, 0.2, c),
             "w2": rng.normal(0, 0.1, (40, c, 3, 3)), "b2": rng.normal(0, 0.2, 40)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["p1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["p1"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["y"], pads=[1, 1, 1, 1],
                              strides=[2, 2])]
    graph = _model(nodes, inits, (1, c, 20, 24), "y", (1, 40, 10, 12))
    table = calibrate(graph, _samples(graph, 4, 1), progress=False)
    table = {t: dict(v, scale=v["scale"] / {"p1": 3e3, "r": 3e3, "y": 1e4}.get(t, 1))
             for t, v in table.items()}
    forms, run = set(), gemm.PackedWeights.run

    def form(self, patches, signed=False):
        forms.add(signed)
        return run(self, patches, signed)
    monkeypatch.setattr(gemm.PackedWeights, "run", form)
    saturations = _route_equals_planes(monkeypatch, "rows_datapath", graph, table, preset,
                                       _samples(graph, 2, 4))
    assert forms == ({False, True} if gemm.int_engine().signed else {False})
    assert sum(saturations) > 0, saturations


def _wide_depthwise(c: int = 64):
    """Two depthwise layers of ``c`` channels on 20x20 planes (eight 8-channel blocks each
    on nv_small, rows too short for the row loops), strides 1 and 2, padding, ReLU
    between."""
    rng = np.random.default_rng(13)
    inits = {"w1": rng.normal(0, 0.4, (c, 1, 3, 3)), "b1": rng.normal(0, 0.3, c),
             "w2": rng.normal(0, 0.4, (c, 1, 3, 3)), "b2": rng.normal(0, 0.3, c)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=c),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1], group=c,
                         strides=[2, 2]),
    ]
    graph = _model(nodes, inits, (1, c, 20, 20), "y", (1, c, 10, 10))
    return graph, calibrate(graph, _samples(graph, 4, 1), progress=False)


def test_depthwise_blocks_read_as_pixels_for_the_channels_last_loops(monkeypatch):
    """The batches of :func:`_wide_depthwise` read their inputs as pixels straight into the
    channels-last loops, whose sums go to the pixel-major SDP pass. Bytes equal the int8
    reference and the launches one at a time."""
    graph, table = _wide_depthwise()
    read, pixel_passes = [], []
    pixels = batch.ConvBatch._pixels

    def spy(self, dram):
        got = pixels(self, dram)
        read.append(got is not None)
        return got
    monkeypatch.setattr(batch.ConvBatch, "_pixels", spy)
    run_pixels = batch.PostProcess.run_pixels

    def spy_pass(self, acc):
        pixel_passes.append(acc.shape)
        return run_pixels(self, acc)
    monkeypatch.setattr(batch.PostProcess, "run_pixels", spy_pass)
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        for i, s in enumerate(_samples(graph, 8, 5)):
            out, ref = fast.infer(s)
            slow_out = slow.run(s)
            for name in ref:
                np.testing.assert_array_equal(out[name], ref[name], err_msg=f"sample {i}")
                np.testing.assert_array_equal(out[name], slow_out[name])
            assert fast.memory() == slow.memory(), f"sample {i}"
    assert read and all(read), read
    assert (400, 64) in pixel_passes and (100, 64) in pixel_passes, set(pixel_passes)


@pytest.mark.parametrize(("preset", "c"), [("nv_large", 48), ("nv_large", 64)])
def test_depthwise_blocks_one_at_a_time_pixel_by_pixel_equal_the_planes(monkeypatch, preset,
                                                                         c):
    """Blocks of :func:`_wide_depthwise`'s layers launched one at a time run pixel by pixel
    (``FastPaths.depthwise_datapath``: nv_large's 32-lane atoms, 48 channels in 64 lanes
    whose last 16 sum to 0) and leave the same bytes, memory,
    per-launch converter saturations and counter registers as the channel-major
    datapath; the outputs equal the int8 reference.  Output scales far below the
    calibrated ones make converters saturate."""
    graph, table = _wide_depthwise(c)
    table = {t: dict(v, scale=v["scale"] / {"r1": 3e3, "y": 3e7}.get(t, 1))
             for t, v in table.items()}
    saturations = _route_equals_planes(monkeypatch, "depthwise_datapath", graph, table, preset,
                                       _samples(graph, 3, 21))
    assert sum(saturations) > 0, saturations


def test_channels_last_batches_count_saturations_per_launch():
    """The pixel-major SDP pass of :func:`_wide_depthwise`'s batches counts each 8-channel
    block's converter saturations apart, as the launches one at a time do."""
    got = _saturations_batched_and_one_by_one(*_wide_depthwise(), {"r1": 3e3, "y": 3e7})
    assert len(got) == 16 and len(set(got[:8])) > 1 and len(set(got[8:])) > 1, got


def _tiled_graph():
    """A stem-like 3x3 convolution of three channels, stride 2, and two pointwise ones, on
    planes too large for nv_small's CBUF: the compiler splits each layer into bands of
    rows, each band keeping the layer's weights in the CBUF for the next one
    (SKIP_WEIGHT_RLS, then WEIGHT_REUSE)."""
    rng = np.random.default_rng(17)
    inits = {"w0": rng.normal(0, 0.3, (16, 3, 3, 3)), "b0": rng.normal(0, 0.2, 16),
             "w1": rng.normal(0, 0.2, (32, 16, 1, 1)), "b1": rng.normal(0, 0.2, 32),
             "w2": rng.normal(0, 0.2, (24, 32, 1, 1)), "b2": rng.normal(0, 0.2, 24)}
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["y"]),
    ]
    graph = _model(nodes, inits, (1, 3, 224, 224), "y", (1, 24, 112, 112))
    return graph, calibrate(graph, _samples(graph, 4, 1), progress=False)


def test_bands_reusing_their_layers_weights_batch_like_their_launches_one_at_a_time(
        monkeypatch):
    """The bands of a layer (:func:`_tiled_graph`) join one batch: the weights a band keeps
    are the ones the next reuses; the 1x1 layers' bands as one GEMM of their stacked
    pixels.  Bytes equal the int8 reference; the outputs, records (each band's weights
    "reused" or fetched), memory, registers and the weights left kept in the CBUF equal
    the launches one at a time, with inputs wide enough to saturate some converters."""
    graph, table = _tiled_graph()
    stacked = []
    tiles_run = batch.ConvBatch._bands_run

    def spy(self, dla, raws):
        took = tiles_run(self, dla, raws)
        stacked.append((self.plans[0].geo.r, took))
        return took
    monkeypatch.setattr(batch.ConvBatch, "_bands_run", spy)
    samples = _samples(graph, 3, 2) + _samples(graph, 2, 3, scale=4.0)
    with _Run(graph, table) as fast, _Run(graph, table, batched=False) as slow:
        for i, s in enumerate(samples):
            _run_alike(fast, slow, s, f"sample {i}")
            kept = [r.dla.cbuf.weights for r in (fast, slow)]
            assert (kept[0] is None) == (kept[1] is None)
            if kept[0] is not None:
                assert kept[0].raw.tobytes() == kept[1].raw.tobytes()
        reusing = [b for b in fast.batches() if any(p.use.weight_reuse for p in b.plans)]
        # the pointwise layers' bands and the 3x3 layer's: each band of a batch after its
        # first reuses the weights the one before it keeps (a first band of another height
        # has its own signature: a batch may start with a band that reuses its weights)
        assert {b.plans[0].geo.r for b in reusing} == {1, 3}, [len(b) for b in reusing]
        for b in reusing:
            assert all(batch.reuses(a, p) for a, p in zip(b.plans, b.plans[1:], strict=False))
        records = [r.as_dict() for r in fast.dla.stats if r.unit == "CONV"]
        assert {r["cbuf"]["weights"] for r in records} >= {"reused", "fetched"}
    if gemm.int_engine() is not None:
        assert set(stacked) == {(1, True), (3, False)}, stacked


def test_a_band_reuses_only_the_weights_the_one_before_it_keeps_for_it():
    """:func:`batch.reuses`, field by field on a real band pair: a reuse after a
    convolution that did not keep its weights, or whose kept weights differ in banks,
    size, kernels, layout or address (an unbatched run then raises, notes a refetch or
    reuses other bytes than the batch would read), is not one a batch takes."""
    graph, table = _tiled_graph()
    with _Run(graph, table) as fast:
        for s in _samples(graph, 4, 2):
            fast.run(s)
        pairs = [(a, p) for b in fast.batches()
                 for a, p in zip(b.plans, b.plans[1:], strict=False) if p.use.weight_reuse]
    assert pairs
    prev, plan = pairs[0]
    assert batch.reuses(prev, plan)
    assert not batch.reuses(replace(prev, use=replace(prev.use, skip_weight_rls=False)), plan)
    assert not batch.reuses(prev, replace(plan, use=replace(plan.use, weight_reuse=False)))
    for field, value in (("weight_banks", prev.use.weight_banks + 1),
                         ("data_banks", prev.use.data_banks + 1),
                         ("weight_bytes", prev.use.weight_bytes + 8),
                         ("kernels", prev.use.kernels + 1),
                         ("bytes_per_kernel", prev.use.bytes_per_kernel + 8),
                         ("image", not prev.use.image)):
        assert not batch.reuses(replace(prev, use=replace(prev.use, **{field: value})), plan)
    assert not batch.reuses(replace(prev, weight_addr=prev.weight_addr + 64), plan)
    assert not batch.reuses(replace(prev, weight_size=prev.weight_size + 64), plan)


def test_bands_count_their_saturations_each():
    """A batch of bands counts each band's converter saturations on its own rows of the
    stacked sums: the same counts, launch by launch, as the bands one at a time, with
    output scales far below the calibrated ones."""
    graph, table = _tiled_graph()
    got = _saturations_batched_and_one_by_one(graph, table, {"r0": 1e3, "r1": 1e6, "y": 1e9})
    assert len(got) == 10 and all(got), got      # four 3x3 bands, then two and four 1x1
