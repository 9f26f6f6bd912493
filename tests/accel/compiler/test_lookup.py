"""Element-wise functions (Sigmoid, Tanh, Swish, Erf, Gelu, Mish, Softplus, Softsign,
Elu, Selu, Celu, Abs, Neg) by a lookup table: the SDP's, or the CDP's; HardSwish too
where the CDP is the table (two SDP passes where the SDP has a LUT).

* the table builder and the reference's LUT evaluator on hand-computed values;
* every one of the 256 int8 inputs through the compiled loadable on the cmodel
  gives ``sat8(round(f(s_in * q) / s_out))`` with ``f`` from Python's ``math``
  (the table is exact: one rounding) and equals the op table's reference;
  on presets with the SDP's LUT and on those without it (nv_small, nv_medium_512),
  where the CDP with its LRN datapath bypassed is the table; the CDP route also at
  two scales and with zero points on both sides;
* a configuration with neither LUT keeps the function on the CPU (the reason names
  it); Exp stays on the CPU;
* ``Mul(x, Sigmoid(x))`` becomes one Swish on the host, which agrees with
  onnxruntime on the spelled-out graph;
* a convolution and the lookup after it fuse into one pass
  (:mod:`accel.compiler.fusion`) with the same output bytes as two passes,
  fewer cycles and less memory, every tile included; not when the
  intermediate is read elsewhere or X2 is taken;
* a chain of element-wise passes (a table, a scale, an offset) between two
  convolutions folds into one table pass where that is estimated cheaper, with the
  same output bytes as the passes one by one and the reference's (nv_small: into
  the CDP; nv_large: into the convolution's Y stage, while two X passes stay two);
  not when an intermediate is read elsewhere;
* a table after a transposed convolution (whose rows two copies interleave into its
  output) folds into the copies, on both kinds of table, with the same output bytes;
  not when the deconvolution's output is read elsewhere; the check that the copies
  cover their buffer exactly once on hand-made regions.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from accel.backends import get_backend
from accel.compiler import compile_subgraph, supports
from accel.compiler.engine import CdpOp, ConvOp, SdpOp
from accel.compiler.fusion import _tiles
from accel.compiler.lut import int8_table, lo_table_lut
from accel.compiler.reference import run_reference
from accel.compiler.tensors import Region
from accel.config import get_preset
from accel.golden.int8_ref import sdp_lut_int8
from accel.layout import CubeLayout, pack_feature, unpack_feature
from accel.runtime.umd import Runtime
from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.passes import run_passes
from tengine_host.quant import calibrate, quantize_activation
from tests.accel.runtime.task_builder import hand_lo_lut

SHAPE = (1, 16, 4, 4)          # 256 elements: one per int8 value


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


def _elu(v: float, alpha: float = 1.0) -> float:
    return v if v > 0 else alpha * math.expm1(v)


#: each function written plainly with Python's ``math`` (ONNX's definitions and default
#: attributes: Selu's are its float32 constants)
FUNCTIONS = {
    "Sigmoid": _sigmoid,
    "Tanh": math.tanh,
    "Swish": lambda v: v * _sigmoid(v),
    "Erf": math.erf,
    "Gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))),
    "Mish": lambda v: v * math.tanh(math.log1p(math.exp(v))),
    "Softplus": lambda v: math.log1p(math.exp(v)),
    "Softsign": lambda v: v / (1 + abs(v)),
    "Elu": _elu,
    "Selu": lambda v: 1.05070102214813232421875 * _elu(v, 1.67326319217681884765625),
    "Celu": lambda v: max(0.0, v) + min(0.0, math.expm1(v)),
    "Abs": abs,
    "Neg": lambda v: -v,
}
#: where the CDP is the table (presets without the SDP's LUT), also HardSwish
CDP_FUNCTIONS = {**FUNCTIONS, "HardSwish": lambda v: v * max(0.0, min(1.0, v / 6 + 0.5))}
#: presets with the SDP's LUT, and without it
SDP_LUT_PRESETS, CDP_PRESETS = ("nv_large", "nv_small_256_full"), ("nv_small", "nv_medium_512")
#: the first opset with each op (Swish 24, Gelu 20, Mish 18, Celu 12)
OPSETS = {"Swish": 24, "Gelu": 20, "Mish": 18}


def _round_half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


# ------------------------------------------------------------------ the table

def test_table_hand_computed():
    sig = int8_table(lambda x: 1 / (1 + np.exp(-x)), 0.05, 1 / 127)
    assert sig.shape == (256,)
    assert sig[128] == 64            # sigmoid(0) * 127 = 63.5: halves away from zero
    assert sig[0] == 0               # sigmoid(-6.4) * 127 = 0.21
    assert sig[148] == 93            # sigmoid(1.0) * 127 = 92.84
    assert sig[255] == 127           # sigmoid(6.35) * 127 = 126.78
    tanh = int8_table(np.tanh, 0.02, 1 / 127)
    assert (tanh[178], tanh[78], tanh[128]) == (97, -97, 0)     # tanh(+-1) * 127 = +-96.72
    # outputs beyond the int8 range saturate, infinities too
    big = int8_table(np.exp, 10.0, 1.0)
    assert big[128] == 1 and big[129] == 127 and big[255] == 127 and big[0] == 0


def test_table_refuses_undefined_functions_and_bad_scales():
    with pytest.raises(ValueError, match=r"undefined \(NaN\) at 128 of the 256 int8 inputs"):
        int8_table(np.log, 0.1, 0.1)
    with pytest.raises(ValueError, match="scales must be positive"):
        int8_table(np.tanh, 0.0, 0.1)
    with pytest.raises(ValueError, match="256 entries, got 10"):
        lo_table_lut(np.zeros(10))
    with pytest.raises(ValueError, match="int16"):
        lo_table_lut(np.full(256, 40000))


def test_lut_parameters_index_the_lo_table_by_the_int8_value():
    lut = lo_table_lut(np.arange(256) * 3 - 300)
    assert lut.method == 1 and lut.linear_only_offset == 0
    assert (lut.hybrid_priority, lut.underflow_priority, lut.overflow_priority) == (1, 1, 1)
    assert lut.linear_only_start == 2**64 - 128            # -128 as the u64 field
    assert lut.linear_exp_start == 2**31 - 1               # every value underflows LE
    assert lut.linear_only_table[256] == lut.linear_only_table[255] == 255 * 3 - 300
    x = np.array([-(2**31), -129, -128, -127, 0, 126, 127, 128, 2**31 - 1])
    # -128 is not above the start (underflow, entry 0); 128 and up overflow (entry 256)
    assert sdp_lut_int8(x, lut).tolist() == [-300, -300, -300, -297, 84, 462, 465, 465, 465]


def test_reference_lut_interpolates_and_extrapolates_hand_computed():
    x = np.array([0, 5, 6, 7, 8, -3, -4, 1030, 1023])
    # 5: i 1, r 1 -> (10*3 + 20*1) / 4 = 12.5 -> 13;  6: (10*2 + 20*2) / 4 = 15;
    # 7: 17.5 -> 18;  8: 20;  0: underflow T[0] + 0;  -3: 0 + round(-9 / 2) = -5;
    # -4: -6;  1030: overflow (index 257) T[256] + round(6 * 5 / 4) = 2560 + 8;
    # 1023: i 255, r 3 -> (2550 * 1 + 2560 * 3) / 4 = 2557.5 -> 2558
    assert sdp_lut_int8(x, hand_lo_lut()).tolist() == [0, 13, 15, 18, 20, -5, -6, 2568, 2558]


def test_reference_refuses_tables_it_does_not_model():
    lut = hand_lo_lut()
    lut.linear_exp_start = 0            # the LE table could now be chosen
    with pytest.raises(ValueError, match="only LO-table lookups"):
        sdp_lut_int8(np.zeros(3, np.int64), lut)


# ------------------------------------------------------- on the DLA (cmodel)

def _model(op: str, opset: int = 14, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], name=op.lower(), **attrs)
    g = helper.make_graph([node], op, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(SHAPE))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(SHAPE))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _run(compiled, x_q: np.ndarray) -> np.ndarray:
    cfg = compiled.cfg
    (src,), (dst,) = compiled.inputs, compiled.outputs
    rt = Runtime(cfg, get_backend("cmod", cfg))
    rt.load(compiled.to_bytes())
    (inp,), (out,) = rt.inputs, rt.outputs
    rt.bind_input(inp.memory.bind_id, pack_feature(x_q[0], src.layout))
    rt.submit()
    return unpack_feature(rt.read_output(out.memory.bind_id), dst.layout)[None]


@pytest.mark.parametrize("op,preset", [(op, p) for p in SDP_LUT_PRESETS for op in FUNCTIONS]
                         + [(op, p) for p in CDP_PRESETS for op in CDP_FUNCTIONS])
def test_every_int8_input_gives_the_function_rounded_once(op, preset):
    model = _model(op, opset=OPSETS.get(op, 14))
    graph = load_onnx(model)
    rng = np.random.default_rng(3)
    samples = [{"x": rng.normal(0, 2, SHAPE).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    compiled = compile_subgraph(graph, table, get_preset(preset))
    x_q = (np.arange(256) - 128).reshape(SHAPE).astype(np.int8)
    got = _run(compiled, x_q)
    s_in, s_out = table["x"]["scale"], table["y"]["scale"]
    f = CDP_FUNCTIONS[op]
    want = np.array([min(127, max(-128, _round_half_away(f(s_in * q) / s_out)))
                     for q in range(-128, 128)]).reshape(SHAPE)
    np.testing.assert_array_equal(got, want)
    ref = run_reference(graph, compiled.plans, {"x": x_q})["y"]
    np.testing.assert_array_equal(got, ref)
    (op_,) = compiled.ops
    if get_preset(preset).sdp_lut:
        assert isinstance(op_, SdpOp) and op_.program.lut is not None
    else:       # the CDP as a table, as NVIDIA's nv_small cdp_8x8x32_lrn3 tests program it
        assert isinstance(op_, CdpOp) and op_.sqsum_bypass and op_.mul_bypass
        assert op_.in_cvt == (-128, 1, 0) and op_.out_cvt == (0, 1, 0)
        assert op_.lut.linear_only_start == 0 and op_.lut.linear_only_offset == 0


@pytest.mark.parametrize("zero_points", [(0, 0), (-37, 21)])
@pytest.mark.parametrize("scales", [(0.02, 1 / 127), (0.11, 0.05)])
def test_the_cdp_table_on_nv_small_at_any_scale_and_zero_point(scales, zero_points):
    """The CDP route against the function computed plainly, with zero points on both
    sides: T[q] = sat8(round(SiLU(s_in * (q - z_in)) / s_out) + z_out)."""
    from tengine_host.quant.table import QuantTable

    graph = load_onnx(_model("Swish", opset=24))
    (s_in, s_out), (z_in, z_out) = scales, zero_points
    table = QuantTable({"x": {"scale": s_in, "zero_point": z_in},
                        "y": {"scale": s_out, "zero_point": z_out}})
    compiled = compile_subgraph(graph, table, get_preset("nv_small"))
    x_q = (np.arange(256) - 128).reshape(SHAPE).astype(np.int8)
    got = _run(compiled, x_q)
    f = FUNCTIONS["Swish"]
    want = np.array([min(127, max(-128, _round_half_away(f(s_in * (q - z_in)) / s_out) + z_out))
                     for q in range(-128, 128)]).reshape(SHAPE)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run_reference(graph, compiled.plans, {"x": x_q})["y"], got)


@pytest.mark.parametrize("channels", [13, 16])
@pytest.mark.parametrize("op", ["Sigmoid", "HardSwish"])
def test_the_cdp_table_leaves_the_bytes_and_counters_of_the_lanes_one_by_one(op, channels):
    """The speed layer looks the CDP's exact table up by the byte and counts apart the
    few codes whose LUT counters differ (the -128 the LUT underflows on) on whole atoms
    (16 channels), or counts every code and fills the padded lanes (13 channels, whose
    padding reads -128 too): memory, the padded lanes' bytes included, and every CDP
    register as the plain model leaves them lane by lane."""
    from accel.backends.cmod import CmodBackend
    from accel.cmod import Dla

    shape = (1, channels, 5, 7)
    node = helper.make_node(op, ["x"], ["y"], name="f")
    g = helper.make_graph([node], op, [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(shape))])
    graph = load_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)],
                                        ir_version=8))
    rng = np.random.default_rng(4)
    table = calibrate(graph, [{"x": rng.normal(0, 2, shape).astype(np.float32)}],
                      progress=False)
    cfg = get_preset("nv_small")
    compiled = compile_subgraph(graph, table, cfg)
    x_q = rng.integers(-128, 128, shape).astype(np.int8)
    x_q[0, :, 0] = -128                  # every channel meets the underflow code
    seen = []
    for fast in (True, False):
        dla = Dla(cfg, fast=fast)
        rt = Runtime(cfg, CmodBackend(cfg, dla))
        rt.load(compiled.to_bytes())
        (inp,), (out,) = rt.inputs, rt.outputs
        (src,), (dst,) = compiled.inputs, compiled.outputs
        rt.bind_input(inp.memory.bind_id, pack_feature(x_q[0], src.layout))
        rt.submit()
        y = unpack_feature(rt.read_output(out.memory.bind_id), dst.layout)
        memory = [dla.dram.read(base, size).tobytes() for base, size, _ in dla.dram.regions]
        seen.append((y.tobytes(), memory, dla.regs["NVDLA_CDP"].stores()))
        if fast:
            (key,) = dla.fast.cdp_tables.keys()
            assert dla.fast.cdp_tables.lookup(key).rare.tolist() == [0]
    assert seen[0] == seen[1]


@pytest.mark.parametrize("preset", SDP_LUT_PRESETS)
def test_hard_swish_stays_two_sdp_passes_where_the_sdp_has_a_lut(preset):
    """The gate, then the product: bit-exact against the reference, and within the gate's
    rounding (half a step of 1/127 times the input) and the output's of the function."""
    graph = load_onnx(_model("HardSwish"))
    rng = np.random.default_rng(3)
    table = calibrate(graph, [{"x": rng.normal(0, 2, SHAPE).astype(np.float32)}
                              for _ in range(4)], progress=False)
    compiled = compile_subgraph(graph, table, get_preset(preset))
    assert [type(op) for op in compiled.ops] == [SdpOp, SdpOp]
    assert all(op.program.lut is None for op in compiled.ops)
    x_q = (np.arange(256) - 128).reshape(SHAPE).astype(np.int8)
    got = _run(compiled, x_q)
    np.testing.assert_array_equal(got, run_reference(graph, compiled.plans, {"x": x_q})["y"])
    s_in, s_out = table["x"]["scale"], table["y"]["scale"]
    q = np.arange(256) - 128
    exact = np.array([CDP_FUNCTIONS["HardSwish"](s_in * v) for v in q]) / s_out
    bound = 0.5 + np.abs(q) * s_in / 127 / 2 / s_out + 1e-9
    assert np.all(np.abs(got.reshape(-1) - np.clip(exact, -128, 127)) <= bound)


def test_a_preset_without_any_lut_never_gets_one():
    """Every preset NVIDIA defines has a CDP; a configuration without one (and without
    the SDP's LUT) keeps the function on the CPU and says why, and runs HardSwish as
    the gate and the product (two SDP passes), bit-exact."""
    cfg = dataclasses.replace(get_preset("nv_small"), name="no_cdp", cdp=False)
    graph = load_onnx(_model("Sigmoid"))
    ok, reason = supports(graph.nodes[0], graph, cfg)
    assert not ok
    assert "preset no_cdp has neither" in reason
    graph = load_onnx(_model("HardSwish"))
    rng = np.random.default_rng(5)
    table = calibrate(graph, [{"x": rng.normal(0, 2, SHAPE).astype(np.float32)}],
                      progress=False)
    compiled = compile_subgraph(graph, table, cfg)
    assert [type(op) for op in compiled.ops] == [SdpOp, SdpOp]
    x_q = (np.arange(256) - 128).reshape(SHAPE).astype(np.int8)
    np.testing.assert_array_equal(_run(compiled, x_q),
                                  run_reference(graph, compiled.plans, {"x": x_q})["y"])


def test_exp_stays_on_the_cpu():
    graph = load_onnx(_model("Exp"))
    ok, reason = supports(graph.nodes[0], graph, get_preset("nv_large"))
    assert not ok and "Exp" in reason


# ------------------------------------------------------------------ the host

def _silu_model(extra_reader: bool) -> onnx.ModelProto:
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
             helper.make_node("Mul", ["s", "x"], ["y"], name="mul")]   # operands swapped
    outs = ["y"]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["s"], ["r"], name="relu"))
        outs.append("r")
    g = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(SHAPE))], [helper.make_tensor_value_info(
            o, TensorProto.FLOAT, list(SHAPE)) for o in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_spelled_out_silu_becomes_one_swish_and_agrees_with_onnxruntime():
    model = _silu_model(False)
    graph = load_onnx(model)
    run_passes(graph)
    assert [(n.op_type, n.inputs, n.outputs, n.attrs) for n in graph.nodes] == [
        ("Swish", ["x"], ["y"], {"alpha": 1.0})]
    x = np.random.default_rng(0).normal(0, 3, SHAPE).astype(np.float32)
    got = interpret(graph, {"x": x})["y"]
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_spelled_out_mish_becomes_one_mish_and_agrees_with_onnxruntime():
    nodes = [helper.make_node("Softplus", ["x"], ["sp"], name="softplus"),
             helper.make_node("Tanh", ["sp"], ["t"], name="tanh"),
             helper.make_node("Mul", ["x", "t"], ["y"], name="mul")]
    g = helper.make_graph(nodes, "mish", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(SHAPE))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(SHAPE))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    graph = load_onnx(model)
    run_passes(graph)
    assert [(n.op_type, n.inputs, n.outputs) for n in graph.nodes] == [("Mish", ["x"], ["y"])]
    x = np.random.default_rng(0).normal(0, 3, SHAPE).astype(np.float32)
    got = interpret(graph, {"x": x})["y"]
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sigmoid_read_elsewhere_is_kept():
    graph = load_onnx(_silu_model(True))
    run_passes(graph)
    assert sorted(n.op_type for n in graph.nodes) == ["Mul", "Relu", "Sigmoid"]


# ------------------------------------------------- conv + lookup in one pass

def _conv_then(ops: list[str], cin=16, cout=32, hw=8, seed=0, extra_reader=False,
               prelu=False) -> onnx.ModelProto:
    """x -> Conv (3x3) [-> PRelu] -> each op of ``ops`` in turn; optionally the conv's
    output also feeds an Add with the last result."""
    rng = np.random.default_rng(seed)
    inits = [onnx.numpy_helper.from_array(
        rng.normal(0, np.sqrt(2 / (9 * cin)), (cout, cin, 3, 3)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(rng.normal(0, 0.1, cout).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1] * 4)]
    t = "c"
    if prelu:
        inits.append(onnx.numpy_helper.from_array(
            np.linspace(0.05, 0.3, cout).astype(np.float32).reshape(cout, 1, 1), "slope"))
        nodes.append(helper.make_node("PRelu", [t, "slope"], ["p"], name="prelu"))
        t = "p"
    for i, op in enumerate(ops):
        if op == "SiLU":
            nodes += [helper.make_node("Sigmoid", [t], [f"s{i}"], name=f"sig{i}"),
                      helper.make_node("Mul", [t, f"s{i}"], [f"y{i}"], name=f"mul{i}")]
        else:
            nodes.append(helper.make_node(op, [t], [f"y{i}"], name=f"{op.lower()}{i}"))
        t = f"y{i}"
    if extra_reader:
        nodes.append(helper.make_node("Add", [t, "c"], ["sum"], name="add"))
        t = "sum"
    g = helper.make_graph(nodes, "conv_lut", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, cin, hw, hw])], [helper.make_tensor_value_info(
            t, TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _compile_both(model, preset):
    graph = load_onnx(model)
    run_passes(graph)
    rng = np.random.default_rng(1)
    shape = graph.tensors["x"].shape
    samples = [{"x": rng.normal(0, 1, shape).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    cfg = get_preset(preset)
    return (graph, table, compile_subgraph(graph, table, cfg),
            compile_subgraph(graph, table, cfg, fuse=False))


def _run_full(compiled, x_q):
    """Output and the cmodel's SDP cycle records of one run."""
    cfg = compiled.cfg
    (src,), (dst,) = compiled.inputs, compiled.outputs
    be = get_backend("cmod", cfg)
    rt = Runtime(cfg, be)
    rt.load(compiled.to_bytes())
    (inp,), (out,) = rt.inputs, rt.outputs
    rt.bind_input(inp.memory.bind_id, pack_feature(x_q[0], src.layout))
    rt.submit()
    y = unpack_feature(rt.read_output(out.memory.bind_id), dst.layout)[None]
    return y, sum(int(s.cycles) for s in be.stats)


def _check_same_bytes(graph, table, fused, plain, seed: int = 4) -> None:
    """One random input through both compilations on the cmodel: the same output bytes,
    the reference's, and fewer estimated cycles for the fused one."""
    x = np.random.default_rng(seed).normal(0, 1, graph.tensors["x"].shape).astype(np.float32)
    x_q = quantize_activation(x, table["x"]["scale"])
    (out,) = graph.outputs
    y_fused, cyc_fused = _run_full(fused, x_q)
    y_plain, cyc_plain = _run_full(plain, x_q)
    np.testing.assert_array_equal(y_fused, y_plain)
    np.testing.assert_array_equal(y_fused, run_reference(graph, fused.plans, {"x": x_q})[out])
    assert cyc_fused < cyc_plain


@pytest.mark.parametrize("ops", [["SiLU"], ["Sigmoid"], ["Tanh"]])
def test_conv_and_lookup_fuse_into_one_pass_with_the_same_bytes(ops):
    graph, table, fused, plain = _compile_both(_conv_then(ops), "nv_large")
    assert [type(op) for op in plain.ops] == [ConvOp, SdpOp]
    (conv,) = fused.ops
    assert isinstance(conv, ConvOp) and conv.sdp.lut is not None
    assert fused.fused == {"c": plain.ops[1].name}
    assert "c" not in fused.tensors and "c" in plain.tensors
    _check_same_bytes(graph, table, fused, plain, seed=2)
    assert fused.dram_bytes["activations"] < plain.dram_bytes["activations"]


def test_every_tile_of_a_sliced_conv_takes_the_table():
    graph, table, fused, plain = _compile_both(_conv_then(["Sigmoid"], 64, 96, 48),
                                               "nv_small_256_full")
    convs = [op for op in fused.ops if isinstance(op, ConvOp)]
    assert len(convs) > 1 and all(op.sdp.lut is not None for op in convs)
    assert len(fused.ops) == len(convs)
    x = np.random.default_rng(3).normal(0, 1, graph.tensors["x"].shape).astype(np.float32)
    x_q = quantize_activation(x, table["x"]["scale"])
    np.testing.assert_array_equal(_run_full(fused, x_q)[0], _run_full(plain, x_q)[0])


@pytest.mark.parametrize("kw", [dict(extra_reader=True), dict(prelu=True)],
                         ids=["output-read-twice", "x2-taken-by-prelu"])
def test_no_fusion_when_the_intermediate_is_needed_or_x2_is_busy(kw):
    graph, table, fused, plain = _compile_both(_conv_then(["Sigmoid"], **kw), "nv_large")
    assert fused.fused == {}
    assert any(isinstance(op, SdpOp) and op.program.lut is not None for op in fused.ops)


# ------------------------------------------------- chains of tables as one table

def _chain_model(steps: list, extra_reader: bool = False, seed: int = 0) -> onnx.ModelProto:
    """x -> Conv 3x3 -> each step (an op type, or ``(op, scalar)`` for Mul / Add by a
    constant) -> Conv 3x3 (padded: the host cannot fold an offset into it); optionally
    the first step's output also feeds the last convolution's output through an Add."""
    rng = np.random.default_rng(seed)
    cin, cmid = 8, 16
    inits = [onnx.numpy_helper.from_array(
        rng.normal(0, 0.3, (cmid, cin, 3, 3)).astype(np.float32), "w0"),
        onnx.numpy_helper.from_array(rng.normal(0, 0.2, (cmid, cmid, 3, 3))
                                     .astype(np.float32), "w1")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c"], name="conv0", pads=[1] * 4)]
    t, first = "c", None
    for i, step in enumerate(steps):
        op, *const = step if isinstance(step, tuple) else (step,)
        ins = [t]
        if const:
            inits.append(onnx.numpy_helper.from_array(np.array(const, np.float32), f"k{i}"))
            ins.append(f"k{i}")
        nodes.append(helper.make_node(op, ins, [f"e{i}"], name=f"{op.lower()}{i}"))
        t = f"e{i}"
        first = first or t
    nodes.append(helper.make_node("Conv", [t, "w1"], ["y"], name="conv1", pads=[1] * 4))
    out = "y"
    if extra_reader:
        nodes.append(helper.make_node("Add", ["y", first], ["sum"], name="add_back"))
        out = "sum"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, cin, 12, 12])], [helper.make_tensor_value_info(
            out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _between(compiled) -> list:
    """The operations between the first convolution and the last."""
    convs = [i for i, op in enumerate(compiled.ops) if isinstance(op, ConvOp)]
    return compiled.ops[convs[0] + 1:convs[-1]]


@pytest.mark.parametrize("preset", ["nv_small", "nv_medium_512"])
def test_a_chain_of_element_wise_passes_is_one_cdp_table(preset):
    """HardSwish, a scale and an offset (PP-LCNet's learnable affine block after it):
    three passes one by one, one CDP table folded, the same bytes."""
    graph, table, fused, plain = _compile_both(
        _chain_model(["HardSwish", ("Mul", 0.476), ("Add", -0.37)]), preset)
    assert len(_between(plain)) >= 2 and isinstance(_between(plain)[0], CdpOp)
    (folded,) = _between(fused)
    assert isinstance(folded, CdpOp)
    assert set(fused.fused) == {t for t in graph.tensors if t.startswith("e")} - {
        next(n.outputs[0] for n in reversed(graph.nodes) if n.op_type != "Conv")}
    assert set(fused.fused.values()) == {folded.name}
    _check_same_bytes(graph, table, fused, plain)


def test_a_table_and_a_scale_fold_into_the_convolution_on_nv_large():
    graph, table, fused, plain = _compile_both(_chain_model(["Sigmoid", ("Add", 0.25)]),
                                               "nv_large")
    assert len(_between(plain)) == 2
    assert _between(fused) == []
    assert fused.ops[0].sdp.lut is not None
    _check_same_bytes(graph, table, fused, plain)


def test_two_x_passes_stay_where_the_table_is_slower():
    """On nv_large the SDP's X stages take 16 elements a cycle, its Y stage 4: a scale and
    an offset stay two passes there; on nv_small (1 a cycle each) they fold."""
    steps = ["Relu", ("Mul", 0.476), ("Add", -0.37)]
    _, _, fused, _ = _compile_both(_chain_model(steps), "nv_large")
    assert len(_between(fused)) >= 2
    assert all(isinstance(op, SdpOp) and op.program.lut is None for op in _between(fused))
    graph, table, fused, plain = _compile_both(_chain_model(steps), "nv_small")
    assert [type(op) for op in _between(fused)] == [CdpOp]
    _check_same_bytes(graph, table, fused, plain)


def test_no_folding_when_an_intermediate_is_read_elsewhere():
    graph, _, fused, plain = _compile_both(
        _chain_model(["HardSwish", ("Mul", 0.476), ("Add", -0.37)], extra_reader=True),
        "nv_small")
    first = next(n.outputs[0] for n in graph.nodes if n.op_type == "HardSwish")
    assert first not in fused.fused and first in fused.tensors


# ------------------------------------ a table folded into the passes that write its input

def _deconv_then_sigmoid(extra_reader: bool = False) -> onnx.ModelProto:
    """x -> ConvTranspose 2x2 / stride 2 (PP-OCR's text-map upsampling: four pointwise
    phases, two row copies) -> Sigmoid; optionally the deconvolution's output is also
    added to the result."""
    rng = np.random.default_rng(5)
    w = onnx.numpy_helper.from_array(rng.normal(0, 0.4, (8, 2, 2, 2)).astype(np.float32), "w")
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["d"], name="up", strides=[2, 2],
                              kernel_shape=[2, 2]),
             helper.make_node("Sigmoid", ["d"], ["y"], name="sig")]
    out = "y"
    if extra_reader:
        nodes.append(helper.make_node("Add", ["y", "d"], ["sum"], name="add"))
        out = "sum"
    g = helper.make_graph(nodes, "deconv_sigmoid", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 6, 7])], [helper.make_tensor_value_info(
            out, TensorProto.FLOAT, None)], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("preset, table", [("nv_large", SdpOp), ("nv_small", CdpOp)])
def test_a_table_after_a_deconvolution_folds_into_its_row_copies(preset, table):
    graph, qt, fused, plain = _compile_both(_deconv_then_sigmoid(), preset)
    copies = [op for op in plain.ops if isinstance(op, SdpOp) and op.node == "up"]
    assert len(copies) == 2 and isinstance(plain.ops[-1], table) and plain.ops[-1].node == "sig"
    tables = [op for op in fused.ops if op.node == "sig"]
    assert len(tables) == 2 and all(isinstance(op, table) for op in tables)
    assert [op.src for op in tables] == [op.src for op in copies]
    assert len(fused.ops) == len(plain.ops) - 1
    assert fused.fused == {"d": plain.ops[-1].name} and "d" not in fused.tensors
    _check_same_bytes(graph, qt, fused, plain)


def test_no_fold_into_the_row_copies_when_the_deconvolution_output_is_read_elsewhere():
    _, _, fused, plain = _compile_both(_deconv_then_sigmoid(extra_reader=True), "nv_large")
    assert fused.fused == {} and "d" in fused.tensors
    assert len(fused.ops) == len(plain.ops)


def test_tiles_takes_parts_that_hold_every_element_once():
    lay = CubeLayout(channels=3, height=4, width=5, atom=8, line_stride=40, surf_stride=160)
    whole = Region("b", 0, lay)
    even, odd = (Region("b", dy * 40, dataclasses.replace(lay, height=2, line_stride=80))
                 for dy in (0, 1))
    assert _tiles(whole, [even, odd])
    assert not _tiles(whole, [even, even])                    # a row twice, one never
    assert not _tiles(whole, [even])                          # half of it
    assert not _tiles(whole, [whole.rows(0, 2), whole.rows(1, 2)])       # overlapping
    lanes = dataclasses.replace(lay, channels=2, height=2, line_stride=80)
    assert not _tiles(whole, [Region("b", 0, lanes), Region("b", 40, lanes)])
