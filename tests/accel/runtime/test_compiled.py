"""Compiled loadables run through Runtime + firmware on the cmodel, bit-exact.

A small ONNX graph (conv+ReLU with stride 2 and uneven padding -> conv with
vertical dilation 2 -> flatten -> FC+ReLU) is calibrated and compiled for every preset; each DLA
subgraph's flatbuffer is loaded by :class:`Runtime`, run on the cmod backend
and every output element is compared with the independent int8 reference
``accel.golden.int8_ref`` given the layer parameters the compiler chose and the
geometry this test built the graph with.  A last check against onnxruntime
(fp32) keeps the chosen parameters honest.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accel.backends import get_backend
from accel.compiler import compile_subgraph
from accel.config import PRESETS, get_preset
from accel.golden.int8_ref import conv2d_int8, fc_int8
from accel.layout import pack_feature, unpack_feature
from accel.runtime.umd import Runtime
from tengine_host.frontend import load_onnx
from tengine_host.passes import run_passes
from tengine_host.quant import calibrate, quantize_activation

CFG = get_preset("nv_small")
RNG_SEED = 20240607
# geometry built into the graph, used by the reference (not read back from the compiler)
# K=40 / 36 cross an atom and an ATOMIC_K group on every preset (8..32 bytes / kernels)
A = dict(k=40, kernel=(3, 3), stride=(2, 2), dilation=(1, 1),
         pads=(1, 0, 1, 2))                  # ONNX order (top, left, bottom, right)
B = dict(k=36, kernel=(2, 3), stride=(1, 1), dilation=(2, 1), pads=(1, 1, 1, 1))
IN_SHAPE = (1, 3, 9, 7)
FC_OUT = 12


def _out_hw(h: int, w: int, g: dict) -> tuple[int, int]:
    (r, s), (sy, sx), (t, left, b, right) = g["kernel"], g["stride"], g["pads"]
    (dy, dx) = g["dilation"]
    return ((h + t + b - (r - 1) * dy - 1) // sy + 1,
            (w + left + right - (s - 1) * dx - 1) // sx + 1)


def _model(rng: np.random.Generator) -> onnx.ModelProto:
    c, h, w = IN_SHAPE[1:]
    ah, aw = _out_hw(h, w, A)
    bh, bw = _out_hw(ah, aw, B)
    feat = B["k"] * bh * bw
    inits = {
        "wa": rng.normal(0, 0.4, (A["k"], c, *A["kernel"])),
        "ba": rng.normal(0, 0.3, A["k"]),
        "wb": rng.normal(0, 0.2, (B["k"], A["k"], *B["kernel"])),
        "bb": rng.normal(0, 0.3, B["k"]),
        "wf": rng.normal(0, 0.1, (FC_OUT, feat)),
        "bf": rng.normal(0, 0.2, FC_OUT),
    }
    nodes = [
        helper.make_node("Conv", ["x", "wa", "ba"], ["ya"], name="conv_a",
                         kernel_shape=list(A["kernel"]), strides=list(A["stride"]),
                         dilations=list(A["dilation"]), pads=list(A["pads"])),
        helper.make_node("Relu", ["ya"], ["ra"], name="relu_a"),
        helper.make_node("Conv", ["ra", "wb", "bb"], ["yb"], name="conv_b",
                         kernel_shape=list(B["kernel"]), strides=list(B["stride"]),
                         dilations=list(B["dilation"]), pads=list(B["pads"])),
        helper.make_node("Flatten", ["yb"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["yf"], name="fc", transB=1),
        helper.make_node("Relu", ["yf"], ["out"], name="relu_f"),
    ]
    graph = helper.make_graph(
        nodes, "conv_conv_fc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(IN_SHAPE))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, FC_OUT])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(RNG_SEED)
    model = _model(rng)
    graph = load_onnx(model)
    run_passes(graph)                       # fuses the two Relus into their producers
    samples = [{"x": rng.normal(0, 1, IN_SHAPE).astype(np.float32)} for _ in range(8)]
    # x is among the calibration samples, so no tensor of its run saturates int8
    # (the onnxruntime comparison then measures rounding error, not clipping)
    x = samples[0]["x"]
    table = calibrate(graph, samples, progress=False)
    return model, graph, table, x


def _run_on_cmod(compiled, x_q: np.ndarray, backend=None) -> tuple[np.ndarray, Runtime]:
    """Load the serialized loadable, bind ``x_q`` [1,C,H,W], run, unpack the output.

    A fresh cmodel unless ``backend`` (a device already used) is given.
    """
    (src,), (dst,) = compiled.inputs, compiled.outputs
    cfg = compiled.cfg
    rt = Runtime(cfg, backend or get_backend("cmod", cfg))
    rt.load(compiled.to_bytes())            # the flatbuffer, not the in-memory object
    (inp,), (out,) = rt.inputs, rt.outputs
    rt.bind_input(inp.memory.bind_id, pack_feature(x_q[0], src.layout))
    rt.submit()
    y = unpack_feature(rt.read_output(out.memory.bind_id), dst.layout)
    return y[None], rt


def _conv_ref(x_q: np.ndarray, layer, g: dict) -> np.ndarray:
    return conv2d_int8(x_q, layer.quant.weight, stride=g["stride"], pads=g["pads"],
                       dilation=g["dilation"], **layer.quant.reference_kwargs())


@pytest.mark.parametrize("preset", list(PRESETS))
def test_conv_conv_bit_exact_on_cmod(setup, preset):
    _, graph, table, x = setup
    convs = [n for n in graph.nodes if n.op_type == "Conv"]
    assert [n.attrs.get("activation") for n in convs] == ["Relu", None]
    sub = graph.subgraph(convs, name="convs")
    compiled = compile_subgraph(sub, table, get_preset(preset))
    la, lb = (compiled.plans[n.name] for n in convs)
    assert (la.quant.relu, lb.quant.relu) == (True, False)

    x_q = quantize_activation(x, table["x"]["scale"])
    got, rt = _run_on_cmod(compiled, x_q)

    ya = _conv_ref(x_q, la, A)
    want = _conv_ref(ya, lb, B)
    assert got.shape == want.shape == (1, B["k"], *_out_hw(*_out_hw(*IN_SHAPE[2:], A), B))
    mismatch = np.argwhere(got != want)
    assert mismatch.size == 0, (f"{len(mismatch)} of {want.size} bytes differ; first "
                                f"(n,k,h,w)={tuple(mismatch[0])}: got "
                                f"{got[tuple(mismatch[0])]}, want {want[tuple(mismatch[0])]}")
    # the data are not degenerate: both signs and many distinct values
    assert (want < 0).any() and (want > 0).any() and len(np.unique(want)) > 20
    assert ya.min() >= 0 and (ya > 0).mean() > 0.2       # ReLU'd, not all zero
    # every byte of the output surface, including the padded lanes of the last
    # atom (channels 36.. up to the atom), which the layout rule says the SDP writes as 0
    (out,) = rt.outputs
    raw = rt.read_output(out.memory.bind_id)
    layout = compiled.outputs[0].layout
    np.testing.assert_array_equal(raw, pack_feature(want[0], layout))
    # two conv ops ran, each with its SDP on the fly (per-op cmodel records)
    stats = rt.backend.stats
    assert [s.unit for s in stats] == ["CONV", "CONV"]
    assert all(s.sdp.details["flying"] for s in stats)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_fc_bit_exact_on_cmod(setup, preset):
    _, graph, table, _ = setup
    (fc,) = [n for n in graph.nodes if n.op_type == "Gemm"]
    compiled = compile_subgraph(graph.subgraph([fc], name="fc"), table, get_preset(preset))
    layer = compiled.plans[fc.name]
    rng = np.random.default_rng(RNG_SEED + 1)
    feat = graph.tensors[fc.inputs[0]].shape[1]
    x_q = rng.integers(-128, 128, (1, feat), dtype=np.int8)
    got, _ = _run_on_cmod(compiled, x_q[:, :, None, None])
    want = fc_int8(x_q, layer.quant.weight[:, :, 0, 0], **layer.quant.reference_kwargs())
    assert got.shape == (1, FC_OUT, 1, 1)
    np.testing.assert_array_equal(got[:, :, 0, 0], want)
    assert (want > 0).any() and (want == 0).any()      # ReLU active on some outputs


def test_compiled_chain_tracks_onnxruntime(setup):
    """DLA convs -> host flatten -> DLA FC, dequantized, vs onnxruntime fp32."""
    model, graph, table, x = setup
    convs = [n for n in graph.nodes if n.op_type == "Conv"]
    (fc,) = [n for n in graph.nodes if n.op_type == "Gemm"]
    cc = compile_subgraph(graph.subgraph(convs, name="convs"), table, CFG)
    cf = compile_subgraph(graph.subgraph([fc], name="fc"), table, CFG)
    yb, _ = _run_on_cmod(cc, quantize_activation(x, table["x"]["scale"]))
    # the host flatten keeps values; requantize at the FC's input scale
    flat = yb.reshape(1, -1).astype(np.float64) * cc.outputs[0].scale
    fin = cf.inputs[0]
    yf, _ = _run_on_cmod(cf, quantize_activation(flat, fin.scale)[:, :, None, None])
    out = cf.outputs[0]
    got = yf[:, :, 0, 0].astype(np.float64) * out.scale

    (want,) = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, {"x": x})
    peak = float(np.abs(want).max())
    assert peak > 20 * out.scale            # a real signal, many LSBs tall
    # three int8 layers: measured 2.2 output LSBs at most; allow 4
    err = np.abs(got - want).max() / out.scale
    assert err <= 4.0, f"max error {err:.2f} output LSBs (peak {peak:.3f}): {got} vs {want}"


def test_loadables_take_turns_on_one_device(setup):
    """An odd number of conv ops leaves the hardware's consumer pointers on group 1;
    the next loadable (new Runtime, same device) must program that group."""
    _, graph, table, x = setup
    convs = [n for n in graph.nodes if n.op_type == "Conv"]
    (fc,) = [n for n in graph.nodes if n.op_type == "Gemm"]
    cc = compile_subgraph(graph.subgraph(convs, name="convs"), table, CFG)
    cf = compile_subgraph(graph.subgraph([fc], name="fc"), table, CFG)
    x_q = quantize_activation(x, table["x"]["scale"])
    la, lb = (cc.plans[n.name] for n in convs)
    want_c = _conv_ref(_conv_ref(x_q, la, A), lb, B)
    fc_in = graph.tensors[fc.inputs[0]].shape[1]
    f_q = np.random.default_rng(RNG_SEED + 2).integers(-128, 128, (1, fc_in), dtype=np.int8)
    fq = cf.plans[fc.name].quant
    want_f = fc_int8(f_q, fq.weight[:, :, 0, 0], **fq.reference_kwargs())
    backend = get_backend("cmod", CFG)
    ops = []
    for compiled, feed, want in ((cc, x_q, want_c), (cf, f_q.reshape(1, fc_in, 1, 1), want_f),
                                 (cc, x_q, want_c), (cf, f_q.reshape(1, fc_in, 1, 1), want_f)):
        got, _ = _run_on_cmod(compiled, feed, backend)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        ops.append(len(backend.stats))        # the records of this submit alone
    assert ops == [2, 1, 2, 1]                # every conv op ran, nothing accumulates
