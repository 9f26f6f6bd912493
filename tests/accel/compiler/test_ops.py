"""Every lowering feature of the op table, end to end on the cmodel.

For each small graph of :mod:`op_cases` and preset: the whole graph must run
on the DLA as one subgraph, every tensor the DLA computes must equal the
int8 CPU reference of the op table byte for byte (``tengine_host.verify``),
and the result must track onnxruntime's fp32 (the reference follows the op's
meaning, not only the hardware's).  Structural expectations (tiles, weight
reuse, split width, ...) are checked on the compiled operations.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from accel.compiler.engine import ConvOp, PdpOp, SdpOp
from accel.compiler.ops import activation
from accel.compiler.ops.concat import Piece, merge_chains
from accel.config import get_preset
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tengine_host.verify import verify_run

from .op_cases import CASES

PARAMS = [pytest.param(c, p, id=f"{c.name}-{p}") for c in CASES for p in c.presets]


def _run(case, preset, tmp_path):
    model = case.build()
    path = tmp_path / f"{case.name}.onnx"
    onnx.save(model, path)
    graph = load_model(path)
    rng = np.random.default_rng(7)
    shape = graph.tensors[graph.inputs[0]].shape
    samples = [{graph.inputs[0]: rng.normal(0, 1, shape).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    dla = get_device("nvdla", preset=preset, capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        out, _, report = verify_run(ex, samples[0])
        parts = [(dev.name, len(sub.nodes)) for dev, sub in ex.partition.parts]
        handle = next(h for d, _, h in ex.prepared if d.name == "nvdla")
        handle.compiled.stats = list(handle.runtime.backend.stats)   # the cmodel's op records
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, samples[0])
    return graph, table, parts, report, handle.compiled, out, want


@pytest.mark.parametrize("case, preset", PARAMS)
def test_op_runs_on_the_dla_bit_exact_and_tracks_fp32(case, preset, tmp_path):
    graph, table, parts, report, compiled, out, want = _run(case, preset, tmp_path)
    assert parts == [("nvdla", len(graph.nodes))], parts
    assert report.bit_exact, report.summary()
    assert report.layers_checked == len({t for n in graph.nodes for t in n.outputs}) \
        - len(compiled.fused)
    (name,) = graph.outputs
    got, ref = out[name].ravel().astype(np.float64), want[0].ravel().astype(np.float64)
    cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref)))
    assert cos >= case.cosine, f"cosine {cos:.5f} to onnxruntime"
    if case.lsb is not None:
        err = np.abs(got - ref).max() / table[name]["scale"]
        assert err <= case.lsb, f"max error {err:.2f} output LSBs"


def _compiled(name: str, preset: str, tmp_path):
    case = next(c for c in CASES if c.name == name)
    return _run(case, preset, tmp_path)[4]


def test_row_tiles_reuse_resident_weights(tmp_path):
    compiled = _compiled("conv_rows_weights_reused", "nv_small", tmp_path)
    ops = compiled.ops
    assert len(ops) > 1 and all(isinstance(op, ConvOp) for op in ops)
    assert [op.cbuf.weight_reuse for op in ops] == [False] + [True] * (len(ops) - 1)
    assert [op.cbuf.skip_weight_release for op in ops] == [True] * (len(ops) - 1) + [False]
    # the tiles cover the output rows once, in order, each with its own padding
    rows = [(op.dst.offset // op.dst.layout.line_stride, op.dst.layout.height) for op in ops]
    assert sum(h for _, h in rows) == 96 and rows[0][0] == 0
    assert ops[0].pads[0] == 1 and ops[-1].pads[2] == 1 and ops[0].pads[2] == 0
    # the cmodel computed the later tiles with the weights kept in the CBUF (the last run's
    # records: one per tile)
    convs = [s.details["cbuf"]["weights"] for s in compiled.stats if s.unit == "CONV"][-len(ops):]
    assert convs == ["fetched"] + ["reused"] * (len(ops) - 1)


def test_streamed_weights_are_fetched_per_tile(tmp_path):
    """96 x 576-byte kernels need 14 of 32 banks; streaming them through 2 leaves room for
    taller row tiles, and the plan with fewer operations wins."""
    ops = _compiled("conv_rows_streamed", "nv_small", tmp_path).ops
    assert len(ops) == 2 and not any(op.cbuf.weight_reuse for op in ops)
    assert {op.cbuf.weight_banks for op in ops} == {2}


def test_large_layer_is_cut_in_kernel_slices_or_streams(tmp_path):
    ops = _compiled("conv_kernel_slices", "nv_small", tmp_path).ops
    kernels = sorted({op.kernel[0] for op in ops})
    banks = {op.cbuf.data_banks + op.cbuf.weight_banks for op in ops}
    assert max(banks) <= 32 and sum(op.kernel[0] for op in ops if op.dst.offset == 0) >= 8
    assert kernels and all(k % 8 == 0 for k in kernels)


def test_depthwise_runs_as_atom_blocks(tmp_path):
    ops = _compiled("depthwise_stride2", "nv_small", tmp_path).ops
    convs = [op for op in ops if isinstance(op, ConvOp)]
    # 24 channels in blocks of one 8-channel atom, each its own block-diagonal conv
    assert [op.kernel for op in convs] == [(8, 8, 3, 3)] * 3


def test_wide_max_pool_uses_split_width(tmp_path):
    (pool,) = [op for op in _compiled("maxpool_split_width", "nv_small", tmp_path).ops
               if isinstance(op, PdpOp)]
    assert pool.split is not None and pool.split.n == 5   # 600 columns, 128 per slice


def test_global_pools(tmp_path):
    # averages sum in the CACC (one rounding, the output's own scale): 4 blocks of 8 channels
    ops = _compiled("gap_13_conv", "nv_small", tmp_path).ops
    assert sum(isinstance(op, ConvOp) and op.kernel[2:] == (13, 13) for op in ops) == 4
    # 12 x 40 pixels are read as a 20 x 24 map: one kernel covers them
    ops = _compiled("gap_12x40_reviewed", "nv_small", tmp_path).ops
    assert [op.kernel[2:] for op in ops if isinstance(op, ConvOp)][-4:] == [(20, 24)] * 4
    # 1600 pixels fit no 32 x 32 kernel: exact-partition PDP averages
    ops = _compiled("gap_40_passes", "nv_small", tmp_path).ops
    assert [op.kernel for op in ops if isinstance(op, PdpOp)] == [(8, 8), (5, 5)]
    ops = _compiled("maxpool_13_chain", "nv_small", tmp_path).ops
    assert [op.kernel for op in ops if isinstance(op, PdpOp)] == [(8, 8), (6, 6)]
    # a 32 x 32 kernel fits nv_small's CBUF; nv_large's 32-lane kernel groups would need
    # 32 weight banks of its 16: PDP averages at the input's scale, then the SDP rescales
    ops = _compiled("gap_32_rescaled", "nv_small", tmp_path).ops
    assert {op.kernel[2:] for op in ops if isinstance(op, ConvOp)} >= {(32, 32)}
    assert not any(isinstance(op, PdpOp) for op in ops)
    ops = _compiled("gap_32_rescaled", "nv_large", tmp_path).ops
    assert [op.kernel for op in ops if isinstance(op, PdpOp)] == [(8, 8), (4, 4)]
    assert isinstance(ops[-1], SdpOp) and ops[-1].name.endswith("rescale")


def test_concat_writes_in_place_and_copies_only_the_bound_input(tmp_path):
    ops = _compiled("concat_channels", "nv_small", tmp_path).ops
    assert not any(isinstance(op, SdpOp) for op in ops)
    ops = _compiled("concat_with_input", "nv_small", tmp_path).ops
    assert sum(isinstance(op, SdpOp) for op in ops) == 1


@pytest.mark.parametrize("preset, expected", [
    # atoms of 8: channels 0-15 copied, 16-19 moved into the atom 16-23, 24-31 filled
    ("nv_small", [("copy", SdpOp, 16), ("move", ConvOp, 8), ("fill0", SdpOp, 8)]),
    # one 32-channel atom: the 20 channels moved, the 12 pad lanes set by the same pass
    ("nv_large", [("move", ConvOp, 32)]),
])
def test_channel_pads_off_atoms_move_only_the_shared_atom(preset, expected, tmp_path):
    ops = _compiled("pad_channels_unaligned", preset, tmp_path).ops
    pad = [op for op in ops if op.name.rsplit(".", 1)[-1] in ("copy", "move", "fill0")]
    assert [(op.name.rsplit(".", 1)[-1], type(op), op.dst.shape[0]) for op in pad] == expected


def test_merges_move_each_piece_into_the_surfaces_it_reaches():
    """Four 24-channel slots on 32-channel atoms (PP-OCR's FPN concat on nv_large): each
    surface takes the two pieces that reach it, each read as its one atom."""
    group = [Piece(f"t{i}", 24 * i, 24) for i in range(4)]
    chains = merge_chains(group, 32, 80 * 80)
    steps = [[(st.piece.tensor, st.src, st.out, st.move) for st in chain] for chain in chains]
    assert steps == [
        [("t0", (0, 24), (0, 32), (0, 0, 24)), ("t1", (0, 24), (0, 32), (24, 0, 8))],
        [("t1", (0, 24), (32, 32), (0, 8, 16)), ("t2", (0, 24), (32, 32), (16, 0, 16))],
        [("t2", (0, 24), (64, 32), (0, 16, 8)), ("t3", (0, 24), (64, 32), (8, 0, 24))],
    ]
    # the moved lanes cover the span once: every output channel from exactly one input one
    for chain in chains:
        lanes = sorted(st.out[0] + st.move[0] + i for st in chain for i in range(st.move[2]))
        assert lanes == list(range(chain[0].out[0], chain[0].out[0] + 32))
    # a piece wider than an atom is read from the atoms that land in the surface only
    wide = merge_chains([Piece("a", 0, 12), Piece("b", 12, 40)], 8, 96 * 96)
    assert [[(st.piece.tensor, st.src, st.out) for st in chain] for chain in wide] == [
        [("a", (0, 8), (0, 8))],
        [("a", (8, 4), (8, 8)), ("b", (0, 8), (8, 8))],
        [("b", (0, 16), (16, 8))], [("b", (8, 16), (24, 8))], [("b", (16, 16), (32, 8))],
        [("b", (24, 16), (40, 8))], [("b", (32, 8), (48, 4))],
    ]
    # on a small map the extra operations cost more than they save: one chain, a move
    # per piece over the whole span
    (small,) = merge_chains(group, 32, 8 * 8)
    assert [(st.src, st.out, st.move) for st in small] == [
        ((0, 24), (0, 96), (24 * i, 0, 24)) for i in range(4)]


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_a_merge_is_one_move_out_of_its_staging_buffer(preset, tmp_path):
    """Pieces 12, 20, 5, 40: two groups sharing surfaces on either atom size; their
    producers write them into staging buffers, each piece from an atom of its own, and
    one 0/1 convolution per group moves them (bit-exact: the case's own test)."""
    atom = 8 if preset == "nv_small" else 32
    ops = _compiled("concat_unaligned_by_surface", preset, tmp_path).ops
    merges = {op.name.split(".t")[0]: op for op in ops if ".merge" in op.name}
    staged = {name: (op.src.buffer, op.src.shape[0], op.dst.shape[0])
              for name, op in merges.items()}
    slots = {"nv_small": {"merge0": (16 + 24, 32), "merge32": (8 + 40, 45)},
             "nv_large": {"merge0": (32 + 32, 32), "merge32": (32 + 64, 45)}}[preset]
    assert {name.rsplit(".", 1)[-1]: (c, k) for name, (_, c, k) in staged.items()} == slots
    assert all(".staging" in buffer for buffer, _, _ in staged.values())
    assert not any(".stage" in op.name for op in ops)     # every piece written in place
    assert all(c % atom == 0 for _, c, _ in staged.values())


def test_a_staging_name_taken_by_a_tensor_of_the_graph_merges_by_chains(tmp_path,
                                                                        monkeypatch):
    from accel.compiler.ops import concat
    # every staging buffer named as a tensor of the graph: the concat's first input
    monkeypatch.setattr(concat, "_staging_name", lambda out, group, atom: group[0].tensor)
    graph, table, parts, report, compiled, out, want = _run(
        next(c for c in CASES if c.name == "concat_unaligned_by_surface"), "nv_large",
        tmp_path)
    assert report.bit_exact, report.summary()
    merges = [op for op in compiled.ops if ".merge" in op.name]
    # surface by surface (through a staging buffer: one move of the 45-channel span)
    assert merges and all(op.dst.shape[0] <= 32 for op in merges)


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_merges_without_a_staging_buffer_move_surface_by_surface(preset, tmp_path,
                                                                 monkeypatch):
    from accel.compiler.ops import concat
    monkeypatch.setattr(concat, "_staging", lambda *args: None)
    graph, table, parts, report, compiled, out, want = _run(
        next(c for c in CASES if c.name == "concat_unaligned_by_surface"), preset, tmp_path)
    assert report.bit_exact, report.summary()
    merges = [op for op in compiled.ops if ".merge" in op.name]
    assert merges and all(op.dst.shape[0] <= (8 if preset == "nv_small" else 32)
                          for op in merges), [(op.name, op.dst.shape) for op in merges]


def test_a_split_piece_inside_an_atom_is_moved_and_the_aligned_one_viewed(tmp_path):
    for preset in ("nv_small", "nv_large"):
        ops = _compiled("split_channels_unaligned", preset, tmp_path).ops
        moves = [op for op in ops if ".move" in op.name]
        # piece 12..39 out of the surfaces from 8 (nv_small) or 0 (nv_large)
        assert [(op.dst.shape[0], op.src.shape[0]) for op in moves] == \
            [(28, 32 if preset == "nv_small" else 40)], preset
        assert not any(".copy" in op.name for op in ops)    # the first piece is a view


def test_a_focus_stem_takes_two_copies_per_pixel_phase(tmp_path):
    ops = _compiled("focus", "nv_small", tmp_path).ops
    copies = [op.name.rsplit(".", 1)[-1] for op in ops if isinstance(op, SdpOp)]
    assert copies == ["rows", "cols0"] * 4
    # the image's 3-channel phases share atoms in the 12-channel stack: each phase's last
    # copy writes an atom of the staging buffer, one 0/1 convolution merges them
    (merge,) = [op for op in ops if ".merge" in op.name]
    assert (merge.src.shape[0], merge.dst.shape[0]) == (4 * 8, 12)


def test_compilation_is_deterministic(tmp_path):
    """The same model and calibration give a byte-identical loadable."""
    from accel.compiler import compile_subgraph
    from accel.compiler.ops.conv import choose_block
    from accel.compiler.tiling import plan_conv

    case = next(c for c in CASES if c.name == "concat_with_input")
    path = tmp_path / "m.onnx"
    onnx.save(case.build(), path)
    graph = load_model(path)
    rng = np.random.default_rng(3)
    table = calibrate(graph, [{"x": rng.normal(size=(1, 32, 8, 8)).astype(np.float32)}],
                      progress=False)
    blobs = []
    for _ in range(2):
        plan_conv.cache_clear()
        choose_block.cache_clear()
        blobs.append(compile_subgraph(load_model(path), table, get_preset("nv_small")).to_bytes())
    assert blobs[0] == blobs[1] and len(blobs[0]) > 1000


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_hard_swish_with_channel_factors(preset, tmp_path):
    """``channel_scale[c] * HardSwish(input_scale[c] * x)`` (set by channel-group
    equalization, not ONNX): bit-exact to the int8 reference and close to the formula
    computed plainly, with factors 1/16..16 that no per-tensor rescale could hide; a
    table per channel, so the gate and the product in two SDP passes, not one table."""
    case = next(c for c in CASES if c.name == "hard_swish")
    path = tmp_path / "hs.onnx"
    onnx.save(case.build(), path)
    graph = load_model(path)
    (node,) = [n for n in graph.nodes if n.op_type == "HardSwish"]
    rng = np.random.default_rng(11)
    inward, outward = 2.0 ** rng.uniform(-4, 4, 32), 2.0 ** rng.uniform(-4, 4, 32)
    node.attrs.update(input_scale=inward, channel_scale=outward)
    assert not activation.table_route(node, get_preset(preset))
    shape = graph.tensors[graph.inputs[0]].shape
    samples = [{graph.inputs[0]: rng.normal(0, 1, shape).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    assert table[node.inputs[0]].get("zero_point", 0) == 0
    with Executor(graph, [get_device("nvdla", preset=preset, capture=True),
                          get_device("cpu")], table) as ex:
        out, env, report = verify_run(ex, samples[0])
        assert [d.name for d, _ in ex.partition.parts] == ["nvdla"]
    assert report.bit_exact, report.summary()
    x = interpret(graph, samples[0], keep_all=True)[node.inputs[0]].astype(np.float64)
    u = x * inward.reshape(1, -1, 1, 1)
    want = u * np.clip(u / 6 + 0.5, 0, 1) * outward.reshape(1, -1, 1, 1)
    got = out[node.outputs[0]].astype(np.float64)
    # per channel: each channel's error against its own range (a missing or inverted
    # factor would be off by up to 256 times)
    peak = np.abs(want).max(axis=(0, 2, 3))
    err = np.abs(got - want).max(axis=(0, 2, 3))
    assert np.all(err <= 0.1 * peak + 2 * table[node.outputs[0]]["scale"]), err / peak


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_a_sum_scaling_its_first_input_per_channel(preset, tmp_path):
    """``input_scale[c] * a + b`` (set by channel-group equalization where a residual
    stream meets its branch): bit-exact to the int8 reference and close to the formula
    computed plainly, with factors 1/16..16, the ReLU fused."""
    case = next(c for c in CASES if c.name == "add_relu")
    path = tmp_path / "add.onnx"
    onnx.save(case.build(), path)
    graph = load_model(path)
    (node,) = [n for n in graph.nodes if n.op_type == "Add"]
    assert node.attrs.get("activation") == "Relu"
    rng = np.random.default_rng(12)
    c = graph.tensors[node.outputs[0]].shape[1]
    factor = 2.0 ** rng.uniform(-4, 4, c)
    node.attrs["input_scale"] = factor
    shape = graph.tensors[graph.inputs[0]].shape
    samples = [{graph.inputs[0]: rng.normal(0, 1, shape).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    with Executor(graph, [get_device("nvdla", preset=preset, capture=True),
                          get_device("cpu")], table) as ex:
        out, _, report = verify_run(ex, samples[0])
        assert [d.name for d, _ in ex.partition.parts] == ["nvdla"]
    assert report.bit_exact, report.summary()
    env = interpret(graph, samples[0], keep_all=True)
    a, b = (env[t].astype(np.float64) for t in node.inputs)
    want = np.maximum(a * factor.reshape(1, -1, 1, 1) + b, 0)
    got = out[node.outputs[0]].astype(np.float64)
    peak = np.abs(want).max(axis=(0, 2, 3))
    err = np.abs(got - want).max(axis=(0, 2, 3))
    # a missing or inverted factor would put a channel off by up to 256 times
    assert np.all(err <= 0.1 * peak + 3 * table[node.outputs[0]]["scale"]), err / peak


def test_transposed_convolution_phases_hand_computed():
    from accel.compiler.ops.convtranspose import axis_phases

    # 4 taps, stride 2, padding 1 over 5 inputs -> 10 outputs.  Even outputs 2m take
    # x[m - 1] w[3] + x[m] w[1]: taps (3, 1) from input m - 1 (one row of padding first);
    # odd ones 2m + 1 take x[m] w[2] + x[m + 1] w[0]: taps (2, 0), one row of padding last
    even, odd = axis_phases(5, 4, 2, 1, 10)
    assert (even.taps, even.start, even.end, even.pads, even.count) == ((3, 1), 0, 5, (1, 0), 5)
    assert (odd.taps, odd.start, odd.end, odd.pads, odd.count) == ((2, 0), 0, 5, (0, 1), 5)
    # 3 taps, stride 2, no padding over 4 inputs -> 9 outputs: the even phase has 5
    # (taps 2 and 0 from inputs m - 1, m), the odd one 4 (tap 1), computed as 5
    even, odd = axis_phases(4, 3, 2, 0, 9)
    assert (even.taps, even.pads, even.count, even.size) == ((2, 0), (1, 1), 5, 5)
    assert (odd.taps, odd.pads, odd.count, odd.size) == ((1,), (0, 1), 4, 5)
    # a stride larger than the kernel leaves a phase no tap reaches
    assert "no tap" in axis_phases(4, 1, 2, 0, 7)


def test_a_decoder_deconvolution_is_four_phase_convolutions(tmp_path):
    ops = _compiled("convtranspose_4x4_s2_p1", "nv_small", tmp_path).ops
    phases = [op for op in ops if isinstance(op, ConvOp) and ".phase" in op.name]
    assert len(phases) == 4 and all(op.kernel[2:] == (2, 2) for op in phases)
    # the layer's own multiply-accumulates (no inserted zeros): 16 x 24 x 16 taps per input
    assert sum(op.macs for op in phases) == 16 * 24 * 16 * 7 * 6


def test_an_fc_over_more_features_than_a_cube_has_channels(tmp_path):
    from accel.compiler.ops.conv import line_weights

    compiled = _compiled("fc_wider_than_a_cube", "nv_small", tmp_path)
    (fc,) = [p for p in compiled.plans.values() if getattr(p, "line", False)]
    # 9000 features as 1125 pixels of 8 lanes, cut into 36 strips of <= 32 pixels
    assert (fc.geom.c, fc.geom.w) == (8, 1125) and fc.strips.count == 36
    (conv,) = [op for op in compiled.ops if isinstance(op, ConvOp)]
    assert conv.kernel[1] == 36 * 8 and max(conv.kernel[2:]) <= 32
    # feature f lands at lane f % 8 of pixel f // 8; lanes past the features weigh 0
    w = np.arange(2 * 19, dtype=np.float64).reshape(2, 19, 1, 1) + 1
    relaid = line_weights(w, 19, 8)
    assert relaid.shape == (2, 8, 1, 3)
    assert relaid[1, 18 % 8, 0, 18 // 8] == w[1, 18, 0, 0] and relaid[:, 3:, 0, 2].sum() == 0


def test_mirrored_rows_hand_computed():
    from accel.compiler.ops.pad import mirrored

    # rows a0..a5 reflect-padded by 3 before and 2 after: a3 a2 a1 | a0 .. a5 | a4 a3
    assert [mirrored(r, 3, 6, "reflect") for r in (0, 1, 2, 9, 10)] == [3, 2, 1, 4, 3]
    assert [mirrored(r, 3, 6, "edge") for r in (0, 2, 9, 10)] == [0, 0, 5, 5]


@pytest.mark.parametrize("f", [1, 2, 4])
def test_bilinear_taps_are_the_half_pixel_interpolation(f):
    """Each output phase's two taps and weights against the half_pixel definition
    computed in floats: output ``o`` samples input ``(o + 0.5) / f - 0.5``, weighted
    linearly between its two neighbours (clamped at the border, as the replicate pad
    does)."""
    from accel.compiler.ops.resize import bilinear_taps
    n = 5
    for o in range(f * n):
        i, d = divmod(o, f)
        first, weights = bilinear_taps(f, d)
        x = (o + 0.5) / f - 0.5
        lo = int(np.floor(x))
        frac = x - lo
        want = np.zeros(n + 2)              # over the padded input, index + 1
        for k, wk in ((lo, 1 - frac), (lo + 1, frac)):
            want[min(max(k, -1), n) + 1] += wk
        got = np.zeros(n + 2)
        for k, wk in zip((i - 1 + first, i + first), weights, strict=True):
            got[k + 1] += wk / (2 * f)
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=f"f={f} output {o}")
