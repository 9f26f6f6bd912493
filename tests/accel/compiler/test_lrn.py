"""ONNX LRN on the CDP: bit-exact against the independent int8 reference, close to fp32.

Each graph is calibrated, compiled (:func:`accel.compiler.compile_subgraph`),
loaded from its flatbuffer by the runtime and run on the cmodel through the
firmware; the output must equal :mod:`accel.golden.int8_lrn` on the plan's
integers byte for byte.  Against fp32 the error is measured two ways:

* the op's own error, against the fp32 LRN of the dequantized int8 input:
  the LUT's interpolation plus the output rounding, asserted <= 0.5 +
  ``lut_error_lsb`` (measured 0.02-0.50 LSB, ``lut_error_lsb`` <= 0.004);
* end to end, against onnxruntime on the float input, which adds the input's
  quantization (up to ``0.5 * s_in / s_out`` output LSBs): measured 0.51-0.89
  LSB on the seven graphs of :data:`CASES` (1.03 with alpha = 0.5), asserted
  <= 1.0 LSB there.
"""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from accel.backends import get_backend
from accel.compiler import compile_subgraph, supports
from accel.compiler.ops import TABLE, lrn
from accel.compiler.reference import run_reference
from accel.config import get_preset
from accel.golden import int8_lrn
from accel.layout import pack_feature, unpack_feature
from accel.runtime.umd import Runtime
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.model import load_model
from tengine_host.ops.lrn import lrn as lrn_fp32
from tengine_host.quant import calibrate, quantize_activation
from tengine_host.verify import verify_run

GARBAGE = -77  # what the padded lanes of the input's last atom hold in memory


def _model(shape, size, alpha=1e-4, beta=0.75, bias=1.0, opset=13) -> onnx.ModelProto:
    node = helper.make_node("LRN", ["x"], ["y"], name="lrn", size=size, alpha=alpha,
                            beta=beta, bias=bias)
    g = helper.make_graph([node], "lrn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(m)
    return m


def _relu(rng, shape, peak=5.0):
    return (np.maximum(rng.normal(0, 1, shape), 0) * peak).astype(np.float32)


def _normal(rng, shape):
    return rng.normal(0, 1, shape).astype(np.float32)


# (preset, shape, size, alpha, beta, bias, inputs): C is never a whole number of atoms
# (nv_small 8, nv_large 32 channels), so the size-9 windows of the last channels cross
# the padded lanes; C < size puts the halo on both sides of every window
CASES = [
    ("nv_small", (1, 13, 5, 6), 3, 1e-4, 0.75, 1.0, _normal),
    ("nv_small", (1, 21, 4, 3), 5, 1e-4, 0.75, 2.0, _relu),
    ("nv_small", (1, 13, 3, 5), 9, 1e-3, 0.75, 1.0, _relu),
    ("nv_small", (1, 4, 3, 3), 9, 1e-2, 0.75, 2.0, _normal),
    ("nv_large", (1, 13, 5, 6), 3, 1e-4, 0.75, 1.0, _relu),
    ("nv_large", (1, 37, 4, 3), 5, 1e-3, 1.0, 1.0, _normal),
    ("nv_large", (1, 45, 3, 4), 9, 1e-4, 0.75, 1.0, _relu),
]


def _setup(preset, shape, size, alpha, beta, bias, gen, seed=5):
    cfg = get_preset(preset)
    model = _model(shape, size, alpha, beta, bias)
    graph = load_onnx(model)
    rng = np.random.default_rng(seed)
    samples = [{"x": gen(rng, shape)} for _ in range(6)]
    table = calibrate(graph, samples, progress=False)
    compiled = compile_subgraph(graph, table, cfg)
    return cfg, model, graph, table, compiled, samples[0]["x"]


def _run_dla(compiled, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run the loadable on a fresh cmodel; ``(output, output incl. padded lanes)``.  The
    input's padded lanes hold :data:`GARBAGE`."""
    cfg = compiled.cfg
    (src,), (dst,) = compiled.inputs, compiled.outputs
    rt = Runtime(cfg, get_backend("cmod", cfg))
    rt.load(compiled.to_bytes())
    (inp,), (out,) = rt.inputs, rt.outputs
    rt.bind_input(inp.memory.bind_id, pack_feature(x_q[0], src.layout, pad_value=GARBAGE))
    rt.submit()
    raw = rt.read_output(out.memory.bind_id)
    lay = dst.layout
    padded = dataclasses.replace(lay, channels=lay.surfaces * lay.channels_per_atom)
    return unpack_feature(raw, lay)[None], unpack_feature(raw, padded)


@pytest.fixture(scope="module", params=CASES,
                ids=[f"{c[0]}-C{c[1][1]}-size{c[2]}" for c in CASES])
def case(request):
    cfg, model, graph, table, compiled, x = _setup(*request.param)
    x_q = quantize_activation(x, table["x"]["scale"])
    y, y_padded = _run_dla(compiled, x_q)
    return dict(cfg=cfg, model=model, graph=graph, table=table, compiled=compiled, x=x,
                x_q=x_q, y=y, y_padded=y_padded, plan=compiled.plans["lrn"])


def test_dla_is_bit_exact_with_the_reference(case):
    (op,) = case["compiled"].ops
    assert op.local_size == case["plan"].size
    want = run_reference(case["graph"], case["compiled"].plans, {"x": case["x_q"]})["y"]
    assert want.dtype == np.int8 and want.shape == case["y"].shape
    np.testing.assert_array_equal(case["y"], want)
    # not a trivial output: it reaches at least half the int8 range
    assert np.abs(want.astype(int)).max() >= 64


def test_saturating_input_stays_bit_exact(case):
    """Three times the calibrated range: int8 inputs at -128/127, window sums up to
    size * 128**2 (the far end of the second table) and saturating outputs."""
    x_q = quantize_activation(3 * case["x"], case["table"]["x"]["scale"])
    assert (x_q == -128).any() or (x_q == 127).any()
    y, _ = _run_dla(case["compiled"], x_q)
    np.testing.assert_array_equal(y, lrn.reference(case["plan"], [x_q])[0])


def test_padded_output_lanes_are_written_as_zero(case):
    """The CDP writes whole atoms: the lanes past C of the last one hold 0 (v = 0)."""
    c = case["x_q"].shape[1]
    assert c % case["cfg"].atom_size, "C must not be a whole number of atoms"
    np.testing.assert_array_equal(case["y_padded"][c:], 0)


@pytest.mark.parametrize("preset, channels", [("nv_small", 13), ("nv_large", 37)])
def test_windows_crossing_the_last_channels(preset, channels):
    """Strong normalization (alpha = 0.5), size 9: the windows of the last 4 channels reach
    past C into the padded lanes (garbage in memory) and beyond the cube.  The DLA treats
    them as zeros - ONNX's padding - bit for bit like the reference; read as data they
    would change those channels."""
    cfg, _, graph, table, compiled, x = _setup(preset, (1, channels, 3, 4), 9, 0.5, 0.75,
                                               1.0, _normal)
    x_q = quantize_activation(x, table["x"]["scale"])
    y, y_padded = _run_dla(compiled, x_q)
    p = compiled.plans["lrn"]
    np.testing.assert_array_equal(y, lrn.reference(p, [x_q])[0])
    c_pad = y_padded.shape[0]
    x_read = np.full((1, c_pad, 3, 4), GARBAGE, np.int8)
    x_read[:, :channels] = x_q
    read = lrn.reference(dataclasses.replace(p, out_shape=x_read.shape), [x_read])[0]
    changed = np.flatnonzero((read[0, :channels] != y[0]).any(axis=(1, 2)))
    assert changed.size and changed.min() >= channels - 4, changed
    # and the op's own error stays at the output rounding plus the LUT's share
    s_in, s_out = table["x"]["scale"], table["y"]["scale"]
    exact_in = lrn_fp32(x_q.astype(np.float64) * s_in, size=9, alpha=0.5, beta=0.75,
                        bias=1.0)
    assert np.abs(y * s_out - exact_in).max() / s_out <= 0.5 + p.lut_error_lsb + 1e-6


def test_reference_tracks_fp32(case):
    p, table = case["plan"], case["table"]
    size, alpha, beta, bias = p.size, p.alpha, p.beta, p.bias
    s_in, s_out = table["x"]["scale"], table["y"]["scale"]
    got = case["y"].astype(np.float64) * s_out
    # the op's own error: fp32 LRN of exactly the int8 input the DLA saw
    exact_in = lrn_fp32(case["x_q"].astype(np.float64) * s_in, size=size, alpha=alpha,
                        beta=beta, bias=bias)
    assert p.lut_error_lsb < 0.01
    assert np.abs(got - exact_in).max() / s_out <= 0.5 + p.lut_error_lsb + 1e-6
    # end to end against onnxruntime on the float input
    sess = ort.InferenceSession(case["model"].SerializeToString(),
                                providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": case["x"]})
    assert np.abs(got - want).max() / s_out <= 1.0


def test_perturbed_lut_entry_is_caught(case, monkeypatch):
    """One LUT entry that the data uses, changed in the plan: the reference no longer
    matches the DLA, only where that entry interpolates; compiled with the same change,
    the DLA matches the changed reference again."""
    p, x_q = case["plan"], case["x_q"]
    s = int8_lrn.square_sums(x_q.astype(np.int64), p.size)
    first_le = not p.underflow_lo
    first, second = (p.le, p.lo) if first_le else (p.lo, p.le)
    # an interior entry of a segment that a typical sum falls in
    s0 = int(np.median(s[s > 0]))
    tab = first if s0 <= first.end else second
    idx = min(max((s0 - tab.start) >> tab.select, 1), len(tab.entries) - 2)
    step = 1 << tab.select
    lo_s, hi_s = tab.start + (idx - 1) * step, tab.start + (idx + 1) * step
    entries = list(tab.entries)
    entries[idx] -= entries[idx] // 4
    bad_tab = dataclasses.replace(tab, entries=tuple(entries))
    bad = dataclasses.replace(p, **{"le" if tab is p.le else "lo": bad_tab})

    ref_bad = lrn.reference(bad, [x_q])[0]
    diff = ref_bad != case["y"]
    assert diff.any()
    assert np.all((s[diff] > lo_s) & (s[diff] < hi_s))

    monkeypatch.setitem(TABLE, "LRN", dataclasses.replace(
        TABLE["LRN"], plan=lambda node, graph, cfg, scales: bad))
    compiled = compile_subgraph(case["graph"], case["table"], case["cfg"])
    y_bad, _ = _run_dla(compiled, x_q)
    np.testing.assert_array_equal(y_bad, ref_bad)
    assert (y_bad != case["y"]).any()


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_conv_relu_lrn_pool_verified_in_one_subgraph(preset, tmp_path):
    """AlexNet's block (conv, ReLU, LRN 5, max pool) through the nvdla device: one DLA
    subgraph, every tensor it computes equal to the int8 reference of the partition."""
    rng = np.random.default_rng(11)
    w = rng.normal(0, 0.3, (20, 3, 3, 3)).astype(np.float32)
    b = rng.normal(0, 0.1, 20).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1] * 4),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("LRN", ["r"], ["n"], name="lrn", size=5, alpha=1e-4,
                              beta=0.75, bias=1.0),
             helper.make_node("MaxPool", ["n"], ["y"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2])]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 20, 4, 4])],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = tmp_path / "block.onnx"
    onnx.save(model, path)
    graph = load_model(path)
    samples = [{"x": rng.normal(0, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    with Executor(graph, [get_device("nvdla", preset=preset, capture=True),
                          get_device("cpu")], table) as ex:
        out, _, report = verify_run(ex, samples[0])
        parts = [(dev.name, len(sub.nodes)) for dev, sub in ex.partition.parts]
    assert parts == [("nvdla", len(graph.nodes))], parts
    assert report.bit_exact, report.summary()
    assert "n" in report.checked
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, samples[0])
    got = out["y"].astype(np.float64).ravel()
    cos = float(got @ want.ravel() / (np.linalg.norm(got) * np.linalg.norm(want)))
    assert cos >= 0.999


# ------------------------------------------ the reference against NVIDIA's own goldens
# every nv_small CDP trace that runs LRN (no bypass) with a linear LE table, the case the
# reference models: sizes 3/5/9, LE and LO priorities, and a 1x1x1 cube (seven padded
# lanes and the halo in its window); the others bypass the square sum or the multiplier
# or use an exponential LE table
LINEAR_TRACES = ["cdp_1x1x1_lrn3_int8_0", "cdp_8x8x32_lrn5_int8_0", "cdp_8x8x32_lrn9_int8_0",
                 "cdp_8x8x64_lrn3_int8_1", "cdp_8x8x64_lrn3_int8_2"]


def _sext(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _play_lrn_trace(trace_dir):
    """Registers, LUT, memory and CRC checks of a trace, with its CDP op computed by
    :mod:`accel.golden.int8_lrn` (the cmodel is not involved)."""
    from accel.regs import UNITS
    from accel.trace.script import parse_cfg, parse_dat

    regs: dict[str, int] = {}
    tables, table, addr = ([0] * 65, [0] * 257), 0, 0
    mem: dict[int, np.ndarray] = {}
    checks = []
    for cmd in parse_cfg(trace_dir / f"{trace_dir.name}.cfg"):
        a = cmd.args
        if cmd.name == "mem_init":
            mem[int(a[1], 0)] = np.zeros(int(a[2], 0), np.uint8)
        elif cmd.name == "mem_load":
            offs, data = parse_dat(trace_dir / a[2])
            base = int(a[1], 0)
            (start,) = [b for b in mem if b <= base < b + mem[b].size]
            mem[start][base - start + offs] = data
        elif cmd.name == "reg_write":
            name, value = a[0].removesuffix("_0"), int(a[1], 0)
            regs[name] = value
            if name == "NVDLA_CDP.S_LUT_ACCESS_CFG":
                table, addr = value >> 16 & 1, value & 0x3FF
            elif name == "NVDLA_CDP.S_LUT_ACCESS_DATA":
                tables[table][addr] = _sext(value, 16)
                addr = min(addr + 1, len(tables[table]) - 1)
        elif cmd.name == "check_crc":
            checks.append((int(a[2], 0), int(a[3], 0), int(a[4], 0)))

    def fld(reg: str, field: str) -> int:
        unit, rname = reg.split(".")
        (f,) = [f for f in UNITS[unit].registers[rname].fields if f.name == field]
        return regs.get(reg, 0) >> f.lsb & ((1 << f.width) - 1)

    def addr38(name: str) -> int:
        high = fld(f"NVDLA_CDP.S_LUT_{name}_HIGH", f"LUT_{name}_HIGH")
        return (_sext(high, 6) << 32) | regs.get(f"NVDLA_CDP.S_LUT_{name}_LOW", 0)

    assert fld("NVDLA_CDP.D_FUNC_BYPASS", "SQSUM_BYPASS") == 0
    assert fld("NVDLA_CDP.D_FUNC_BYPASS", "MUL_BYPASS") == 0
    assert fld("NVDLA_CDP.S_LUT_CFG", "LUT_LE_FUNCTION") == 1          # linear
    slopes = {}
    for t in ("LE", "LO"):
        for kind, key in (("UFLOW", "u"), ("OFLOW", "o")):
            slopes[t + key] = (
                _sext(fld(f"NVDLA_CDP.S_LUT_{t}_SLOPE_SCALE", f"LUT_{t}_SLOPE_{kind}_SCALE"), 16),
                _sext(fld(f"NVDLA_CDP.S_LUT_{t}_SLOPE_SHIFT", f"LUT_{t}_SLOPE_{kind}_SHIFT"), 5))
    info = "NVDLA_CDP.S_LUT_INFO"
    le = int8_lrn.Table(tuple(tables[0]), addr38("LE_START"),
                        _sext(fld(info, "LUT_LE_INDEX_SELECT"), 6), slopes["LEu"], slopes["LEo"])
    lo = int8_lrn.Table(tuple(tables[1]), addr38("LO_START"),
                        _sext(fld(info, "LUT_LO_INDEX_SELECT"), 6), slopes["LOu"], slopes["LOo"])
    assert (le.end, lo.end) == (addr38("LE_END"), addr38("LO_END"))
    cfg = "NVDLA_CDP.S_LUT_CFG"
    lut = int8_lrn.Lut(le, lo, fld(cfg, "LUT_UFLOW_PRIORITY") == 1,
                       fld(cfg, "LUT_OFLOW_PRIORITY") == 1, fld(cfg, "LUT_HYBRID_PRIORITY") == 1)
    in_off = _sext(regs["NVDLA_CDP.D_DATIN_OFFSET"], 8)    # the CDP pads with the low byte
    in_cvt = (in_off, _sext(regs["NVDLA_CDP.D_DATIN_SCALE"], 16),
              regs["NVDLA_CDP.D_DATIN_SHIFTER"])
    out_cvt = (_sext(regs["NVDLA_CDP.D_DATOUT_OFFSET"], 25),
               _sext(regs["NVDLA_CDP.D_DATOUT_SCALE"], 16), regs["NVDLA_CDP.D_DATOUT_SHIFTER"])
    size = 2 * fld("NVDLA_CDP.D_LRN_CFG", "NORMALZ_LEN") + 3

    atom = get_preset("nv_small").atom_size
    w, h, c = (regs[f"NVDLA_CDP_RDMA.D_DATA_CUBE_{d}"] + 1 for d in ("WIDTH", "HEIGHT",
                                                                     "CHANNEL"))
    surfaces = -(-c // atom)

    def cube_bytes(base: int, line: int, surf: int):
        (start,) = [b for b in mem if b <= base < b + mem[b].size]
        s, y, x, lane = np.meshgrid(np.arange(surfaces), np.arange(h), np.arange(w),
                                    np.arange(atom), indexing="ij")
        idx = base - start + s * surf + y * line + x * atom + lane
        return mem[start], idx                             # [S, H, W, atom]

    buf, idx = cube_bytes(regs["NVDLA_CDP_RDMA.D_SRC_BASE_ADDR_LOW"],
                          regs["NVDLA_CDP_RDMA.D_SRC_LINE_STRIDE"],
                          regs["NVDLA_CDP_RDMA.D_SRC_SURFACE_STRIDE"])
    x = buf[idx].view(np.int8).transpose(0, 3, 1, 2).reshape(surfaces * atom, h, w).copy()
    x[c:] = in_off                                         # lanes past C read the offset
    y = int8_lrn.lrn_int8(x, size, lut, in_cvt, out_cvt)  # padded lanes computed as well
    buf, idx = cube_bytes(regs["NVDLA_CDP.D_DST_BASE_ADDR_LOW"],
                          regs["NVDLA_CDP.D_DST_LINE_STRIDE"],
                          regs["NVDLA_CDP.D_DST_SURFACE_STRIDE"])
    buf[idx] = y.reshape(surfaces, atom, h, w).transpose(0, 2, 3, 1).view(np.uint8)
    results = []
    for base, n, golden in checks:
        (start,) = [b for b in mem if b <= base < b + mem[b].size]
        results.append((zlib.crc32(mem[start][base - start:base - start + n].tobytes()),
                        golden))
    return size, results


@pytest.mark.conformance
@pytest.mark.parametrize("name", LINEAR_TRACES)
def test_reference_reproduces_nvidia_trace_goldens(name):
    """The reference, fed the registers and memory of NVIDIA's trace test, writes the
    output whose CRC the trace checks: sums, LUT and converters agree with NVIDIA's
    model without our cmodel in between."""
    from tests.conftest import shared_path

    size, results = _play_lrn_trace(shared_path("nvdla", "traces", "nv_small", name))
    assert size in (3, 5, 9)           # the 1x1x1 "lrn3" trace programs a local size of 5
    assert results and all(got == want for got, want in results), results


# ------------------------------------------------------------------- what is refused
def _graph(shape, size, **attrs):
    m = _model(shape, 3, **attrs)
    m.graph.node[0].attribute[[a.name for a in m.graph.node[0].attribute].index("size")].i \
        = size
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            list(shape)))
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             list(shape)))
    return load_onnx(m)


@pytest.mark.parametrize("shape, size, attrs, reason", [
    ((1, 16, 4, 4), 4, {}, "size 4: the CDP sums over 3, 5, 7, 9 channels"),
    ((1, 16, 4, 4), 11, {}, "size 11: the CDP sums over 3, 5, 7, 9 channels"),
    ((1, 16, 4), 3, {}, "input rank 3: the CDP normalizes NCHW cubes (rank 4)"),
    ((1, 16, 4, 4, 2), 5, {}, "input rank 5: the CDP normalizes NCHW cubes (rank 4)"),
    ((1, 16, 4, 4), 3, {"bias": 0.0}, "bias 0 <= 0: the denominator reaches 0"),
    ((1, 16, 4, 4), 3, {"alpha": -1e-4}, "alpha -0.0001 < 0"),
])
def test_refusals_name_the_value(shape, size, attrs, reason):
    graph = _graph(shape, size, **attrs)
    ok, why = supports(graph.nodes[0], graph, get_preset("nv_small"))
    assert not ok and why.startswith(reason), why


def test_preset_without_cdp_is_refused():
    graph = _graph((1, 16, 4, 4), 5)
    cfg = dataclasses.replace(get_preset("nv_small"), cdp=False)
    assert supports(graph.nodes[0], graph, cfg) == (False, "preset nv_small has no CDP")
    assert supports(graph.nodes[0], graph, get_preset("nv_small")) == (True, "")


# ------------------------------------------------- the reference's arithmetic by hand
def test_round_shift_by_hand():
    rs = int8_lrn.round_shift
    assert rs(np.array([5, -5, 6, -6, 7, 1, -1]), 2).tolist() == [1, -1, 2, -2, 2, 0, 0]
    assert rs(np.array([2, -2, 3, -3]), 1).tolist() == [1, -1, 2, -2]   # halves away from 0
    assert rs(np.array([7, -7]), 0).tolist() == [7, -7]
    assert rs(np.array([3, -3]), -3).tolist() == [24, -24]              # negative: multiply
    assert rs(np.array([(1 << 40) + (1 << 19)]), 20).tolist() == [(1 << 20) + 1]


def _table(entries, start=0, sel=0, under=(0, 0), over=(0, 0)):
    return int8_lrn.Table(tuple(entries), start, sel, under, over)


def test_linear_table_by_hand():
    t = _table([0, 100, 50], start=10, sel=4, under=(3, 1), over=(-5, -2))
    s = np.array([10, 11, 18, 26, 42, 44, 7, 50])
    val, under, over = int8_lrn.table_lookup(s, t)
    # S=10: t=0 underflow, 0 + round(0 * 3/2); S=11: idx 0, frac 1/16: 100/16 = 6.25 -> 6;
    # S=18: frac 8/16 -> 50; S=26: idx 1, frac 0 -> 100; S=42: t=32, idx 2 = N: overflow
    # at the end (42): 50 + 0; S=44: 50 + 2 * (-5 * 4) = 10; S=7: t=-3: 0 + round(-9/2)
    # = -5 (half away from zero); S=50: 50 + 8 * -20 = -110
    assert val.tolist() == [0, 6, 50, 100, 50, 10, -5, -110]
    assert under.tolist() == [True, False, False, False, False, False, True, False]
    assert over.tolist() == [False] * 4 + [True, True, False, True]
    # the fraction rounds half away from zero: (1 - 0) * 1/2 and (-1 - 0) * 1/2
    half = int8_lrn.table_lookup(np.array([1, 3]), _table([0, 1, -1], sel=1))[0]
    assert half.tolist() == [1, 0]
    neg = int8_lrn.table_lookup(np.array([1]), _table([0, -1, 0], sel=1))[0]
    assert neg.tolist() == [-1]
    # index select above 16 keeps the top 16 fraction bits (truncating)
    # (t = 2**17 + 3 and + 4: fraction 0x8000 and 0x8001, times -32768 / 2**16)
    big = int8_lrn.table_lookup(np.array([(1 << 17) + 3, (1 << 17) + 4]),
                                _table([0, -32768, 0], sel=18))[0]
    assert big.tolist() == [-16384, -16385]              # -16384.5 -> -16385
    # results saturate to int16
    sat = int8_lrn.table_lookup(np.array([20]), _table([30000, 32767], start=10,
                                                       over=(100, -3)))[0]
    assert sat.tolist() == [32767]


def test_priorities_by_hand():
    le = _table([10] * 65, start=0, sel=0)            # hits S = 1..63, overflows >= 64
    lo = _table([20] * 257, start=32, sel=0)          # hits S = 33..287
    lut = lambda u, o, h: int8_lrn.Lut(le, lo, u, o, h)  # noqa: E731
    s = np.array([0, 5, 40, 100, 300, 32])
    # 0: both under; 5: LE only; 40: both hit (hybrid); 100: LO only; 300: both over;
    # 32: LE hit, LO under (one hit)
    assert int8_lrn.lut_lookup(s, lut(False, False, False)).tolist() == [10, 10, 10, 20, 10, 10]
    assert int8_lrn.lut_lookup(s, lut(True, True, True)).tolist() == [20, 10, 20, 20, 20, 10]


def test_square_sums_at_the_channel_edges():
    v = np.arange(1, 6).reshape(5, 1, 1)                 # 1 2 3 4 5
    assert int8_lrn.square_sums(v, 3).ravel().tolist() == [5, 14, 29, 50, 41]
    assert int8_lrn.square_sums(v, 5).ravel().tolist() == [14, 30, 55, 54, 50]
    assert int8_lrn.square_sums(v, 9).ravel().tolist() == [55] * 5
    assert int8_lrn.square_sums(v[:1], 5).ravel().tolist() == [1]


def test_lrn_int8_by_hand():
    """Two channels, LUT constant 2**14 (LO only): out = round(x * 2**14 * 3 / 2**16)."""
    le = _table([0] * 65, start=1 << 20, sel=0)
    lo = _table([1 << 14] * 257, start=0, sel=10, over=(0, 0))
    lut = int8_lrn.Lut(le, lo, True, True, True)
    x = np.array([[[[2]], [[-6]]]], dtype=np.int8)
    y = int8_lrn.lrn_int8(x, 3, lut, out_cvt=(0, 3, 16))
    assert y.ravel().tolist() == [2, -5]                  # 1.5 -> 2, -4.5 -> -5
    y = int8_lrn.lrn_int8(np.array([[[[127]]]], dtype=np.int8), 3, lut, out_cvt=(0, 3, 14))
    assert y.ravel().tolist() == [127]                    # 381 saturates
