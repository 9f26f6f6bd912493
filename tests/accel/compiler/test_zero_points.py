"""Zero points on the DLA: every op family bit-exact against the int8 reference with
asymmetric one-signed tensors, and hand-computed edge cases against plain numpy.

The op cases (:mod:`zp_cases`) are calibrated on one-signed inputs and given zero
points by :func:`assign_zero_points`; each runs as one DLA subgraph on the cmodel, every
DLA tensor must equal the int8 CPU reference byte for byte (``verify_run``), and the
output must track onnxruntime's fp32.  The edge cases build graphs whose int8
arithmetic is exact (power-of-two rescales, weights at their quantization scale), so a
plain-numpy computation in real numbers - zero padding, ``x = (q - z) * s`` - predicts
every code the DLA writes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from accel.compiler import CompileError, compile_subgraph
from accel.compiler.lut import int8_table
from accel.config import get_preset
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.frontend import load_onnx
from tengine_host.model import load_model
from tengine_host.passes import run_passes
from tengine_host.quant import calibrate
from tengine_host.quant.table import QuantTable
from tengine_host.quant.weights import dequantize, quantize_activation, round_half_away
from tengine_host.quant.zero_point import assign_zero_points
from tengine_host.verify import verify_run

from . import zp_cases
from .zp_cases import CASES

PARAMS = [pytest.param(c, p, id=f"{c.name}-{p}") for c in CASES for p in c.presets]


def _zero_pointed(graph, table, op: str, asymmetric: bool = False) -> bool:
    """Some node of type ``op`` reads or writes a tensor with a zero point (with
    ``asymmetric``, one other than -128: a signed tensor's)."""
    return any(table[t].get("zero_point") not in ((0, None, -128) if asymmetric else (0, None))
               for n in graph.nodes if n.op_type == op
               for t in [*n.inputs, *n.outputs] if t in table)


def _check_case(case, preset, tmp_path, asymmetric: bool = False) -> None:
    model = case.build()
    path = tmp_path / f"{case.name}.onnx"
    onnx.save(model, path)
    graph = load_model(path)
    rng = np.random.default_rng(11)
    shape = graph.tensors[graph.inputs[0]].shape
    samples = [{graph.inputs[0]: np.abs(rng.normal(0, 1, shape)).astype(np.float32)}
               for _ in range(4)]
    table = assign_zero_points(graph, calibrate(graph, samples, progress=False))
    assert _zero_pointed(graph, table, case.op, asymmetric), \
        f"no {case.op} node reads a{'n asymmetric' if asymmetric else ''} zero point"
    dla = get_device("nvdla", preset=preset, capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        out, _, report = verify_run(ex, samples[0])
        parts = [(dev.name, len(sub.nodes)) for dev, sub in ex.partition.parts]
    assert parts == [("nvdla", len(graph.nodes))], parts
    assert report.bit_exact, report.summary()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, samples[0])
    (name,) = graph.outputs
    got, ref = out[name].ravel().astype(np.float64), want.ravel().astype(np.float64)
    cos = float(got @ ref / (np.linalg.norm(got) * np.linalg.norm(ref)))
    assert cos >= case.cosine, f"cosine {cos:.5f} to onnxruntime"


@pytest.mark.parametrize("case, preset", PARAMS)
def test_op_with_zero_points_is_bit_exact_and_tracks_fp32(case, preset, tmp_path):
    _check_case(case, preset, tmp_path)


#: cases no asymmetric zero point reaches: a squeeze-excite's gate multiplies a tensor
#: that keeps the product's one zero point, and a leaky shortcut added to a branch that
#: spans both signs shares its one scale, which gains nothing from an asymmetric step.
#: (A product's inputs, HardSwish's included, take -2**k: on [-0.1 t, t] -64, a step
#: two thirds of the symmetric one.)
NOT_ASYMMETRIC = {"squeeze_excite_gate", "add_residual"}


@pytest.mark.parametrize("case, preset", [p for p in PARAMS
                                          if p.values[0].name not in NOT_ASYMMETRIC])
def test_op_with_asymmetric_zero_points_is_bit_exact_and_tracks_fp32(case, preset, tmp_path,
                                                                     monkeypatch):
    """The same cases with a leaky ReLU (slope 0.1) where they have a ReLU: tensors in
    about [-0.1 t, t] take a zero point near -116 and a step 0.55 times the symmetric."""
    def leaky(g, x: str, cin: int, cout: int, k: int = 1) -> str:
        return g.op("LeakyRelu", [g.conv(x, cin, cout, k)], alpha=0.1)

    monkeypatch.setattr(zp_cases, "_relu", leaky)
    _check_case(case, preset, tmp_path, asymmetric=True)


# ------------------------------------------------------------------ hand-computed cases

def _model(nodes, inits, x_shape, y_shape) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _graph(model: onnx.ModelProto):
    """The graph as ``load_model`` makes it (activations fused into their producers)."""
    graph = load_onnx(model)
    run_passes(graph)
    return graph


def _run_dla(graph, table, x: np.ndarray, preset: str = "nv_small"):
    """``(int8 input codes, int8 output codes)`` as the DLA holds them, checked bit-exact
    against the int8 reference."""
    dla = get_device("nvdla", preset=preset, capture=True)
    with Executor(graph, [dla], table) as ex:
        _, _, report = verify_run(ex, {"x": x})
        assert report.bit_exact, report.summary()
        (_, _, handle), = ex.prepared
        return handle.captured["x"], handle.captured["y"]


def _codes(y: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """Plain ``sat8(round_half_away(y / scale) + zero_point)``."""
    return np.clip(round_half_away(y / scale) + zero_point, -128, 127).astype(np.int64)


def test_conv_border_sees_zero_and_relu_zero_is_code_minus_128():
    """A 3x3 convolution, pads 1, weights +-0.5 (exact at their scale 0.5/127), a ReLU.

    Input and output have zero point -128 and scales chosen so that the rescale is
    2**-10 exactly: plain numpy on the real input ``(q + 128) * s_in`` with zero
    padding, rounded to the output codes, predicts every code.  Padding with 0
    instead of the zero point would add ``-128 * w`` per border tap; a ReLU that
    clamped the codes instead of the values would not give -128 for negative sums."""
    w = np.where(np.arange(18).reshape(2, 1, 3, 3) % 3 == 0, -0.5, 0.5).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])
    relu = helper.make_node("Relu", ["c"], ["y"])
    graph = _graph(_model([node, relu], [numpy_helper.from_array(w, "w")], (1, 1, 6, 5),
                             (1, 2, 6, 5)))
    s_in = 2 / 255
    s_out = 1024 * s_in * (0.5 / 127)
    table = QuantTable({"x": {"scale": s_in, "zero_point": -128},
                        "y": {"scale": s_out, "zero_point": -128}})
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 2, (1, 1, 6, 5)).astype(np.float32)
    x[0, 0, 2:4, 1:3] = 0.0                      # some outputs are exactly 0 or negative
    q_in, q_out = _run_dla(graph, table, x)
    real = (q_in.astype(np.float64) + 128) * s_in
    padded = np.pad(real[0, 0], 1)
    want = np.zeros((2, 6, 5))
    for k in range(2):
        for i in range(6):
            for j in range(5):
                want[k, i, j] = max(0.0, float((padded[i:i + 3, j:j + 3] * w[k, 0]).sum()))
    np.testing.assert_array_equal(q_out[0], _codes(want, s_out, -128))
    assert (q_out[0][want == 0] == -128).all() and (want == 0).sum() > 5
    # the border is where the padding shows: code 0 (x = 128 * s_in) would move it
    border = np.pad(real[0, 0], 1, constant_values=128 * s_in)
    moved = [max(0.0, float((border[0:3, j:j + 3] * w[0, 0]).sum())) for j in range(5)]
    assert (_codes(np.array(moved), s_out, -128) != q_out[0, 0, 0]).any()


def test_average_pool_pads_with_the_zero_point():
    """A ReLU'd input that is 0 everywhere pools to code -128 (the value 0) at every
    output, the padded border included: the PDP adds the zero point per padded cell.
    With random data the codes are the plain mean (zero padding, the window's full size
    as divisor) within one code (the PDP's floor(65536/k) reciprocals)."""
    pool = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], count_include_pad=1)
    graph = _graph(_model([pool], [], (1, 8, 7, 7), (1, 8, 4, 4)))
    table = QuantTable({"x": {"scale": 1 / 255, "zero_point": -128},
                        "y": {"scale": 1 / 255, "zero_point": -128}})
    _, q_out = _run_dla(graph, table, np.zeros((1, 8, 7, 7), np.float32))
    assert (q_out == -128).all()
    x = np.random.default_rng(4).uniform(0, 1, (1, 8, 7, 7)).astype(np.float32)
    q_in, q_out = _run_dla(graph, table, x)
    real = np.pad((q_in.astype(np.float64) + 128) / 255, ((0, 0), (0, 0), (1, 1), (1, 1)))
    mean = np.stack([real[..., i:i + 7:2, j:j + 7:2] for i in range(3) for j in range(3)]).mean(0)
    assert np.abs(q_out - _codes(mean, 1 / 255, -128)).max() <= 1


def test_lookup_table_is_indexed_by_the_code():
    """With zero points in and out the identity's table is the codes themselves, and
    code -128 (x = 0) of a sigmoid reads sigmoid(0) = 0.5 at the output's grid."""
    s = 1 / 255
    np.testing.assert_array_equal(int8_table(lambda v: v, s, s, -128, -128),
                                  np.arange(-128, 128))
    t = int8_table(lambda v: 1 / (1 + np.exp(-v)), 4 / 255, s, -128, -128)
    assert t[0] == round(0.5 * 255) - 128 and t[-1] == round(255 / (1 + np.exp(-4))) - 128


def _lrn_graph():
    node = helper.make_node("LRN", ["x"], ["y"], size=5, alpha=1e-2, beta=0.75, bias=1.0)
    return _model([node], [], (1, 13, 4, 5), (1, 13, 4, 5))


def test_lrn_with_zero_points_is_bit_exact_and_accurate():
    """LRN of a one-signed input (the CDP's input converter takes the zero point off and
    the channel halo still adds 0): within an output step of fp32 LRN of the dequantized
    input, as with symmetric tables (test_lrn)."""
    from tengine_host.ops.lrn import lrn as lrn_fp32

    model = _lrn_graph()
    graph = _graph(model)
    rng = np.random.default_rng(5)
    samples = [{"x": (np.maximum(rng.normal(0, 1, (1, 13, 4, 5)), 0) * 5).astype(np.float32)}
               for _ in range(4)]
    table = assign_zero_points(graph, calibrate(graph, samples, progress=False))
    assert table.zero_point("x") == table.zero_point("y") == -128
    q_in, q_out = _run_dla(graph, table, samples[0]["x"])
    x = dequantize(q_in, table.scale("x"), -128)
    want = lrn_fp32(x, size=5, alpha=1e-2, beta=0.75, bias=1.0)
    got = dequantize(q_out, table.scale("y"), -128)
    assert np.abs(got - want).max() / table.scale("y") <= 0.6


def test_zero_points_improve_a_relu_network():
    """Four ReLU'd convolutions and an average pool on one-signed images: the int8
    reference with zero points tracks fp32 better on held-out inputs than symmetric
    quantization of the same calibration (twice the resolution per one-signed tensor)."""
    from tests.accel.compiler.op_cases import G

    g = G(5)
    x = g.input((1, 8, 16, 16))
    y = x
    for cin, cout in ((8, 16), (16, 16), (16, 32), (32, 32)):
        y = g.op("Relu", [g.conv(y, cin, cout, 3)])
    graph = _graph(g.model([g.op("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])]))
    rng = np.random.default_rng(6)

    def image():
        return {"x": rng.uniform(0, 1, (1, 8, 16, 16)).astype(np.float32)}
    sym = calibrate(graph, [image() for _ in range(8)], progress=False)
    asym = assign_zero_points(graph, sym)
    from tengine_host.interpreter import interpret

    held_out = [image() for _ in range(6)]
    (out,) = graph.outputs
    sqnr = {}
    for name, table in (("sym", sym), ("zp", asym)):
        cpu = get_device("cpu", precision="int8")
        noise = power = 0.0
        with Executor(graph, [cpu], table) as ex:
            for feeds in held_out:
                want = interpret(graph, feeds)[out].astype(np.float64)
                got = ex.run(feeds)[out].astype(np.float64)
                noise += float(((got - want) ** 2).sum())
                power += float((want ** 2).sum())
        sqnr[name] = 10 * np.log10(power / noise)
    # measured 34.2 dB symmetric, 36.9 dB with zero points (weights add their own noise)
    assert sqnr["zp"] >= sqnr["sym"] + 2.0, sqnr


# ------------------------------------------------------------------ refusals

def _add_graph():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    return _graph(_model(nodes, [], (1, 8, 4, 4), (1, 8, 4, 4)))


def test_tied_tensors_with_different_zero_points_are_refused():
    """A maximum compares codes: its inputs share one zero point.  A sum need not."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"]),
             helper.make_node("Max", ["a", "b"], ["y"])]
    graph = _graph(_model(nodes, [], (1, 8, 4, 4), (1, 8, 4, 4)))
    table = {t: {"scale": 0.01, "zero_point": -128} for t in ("x", "a", "b", "y")}
    table["b"]["zero_point"] = 0
    with pytest.raises(CompileError, match="'a', 'b' must share one zero point"):
        compile_subgraph(graph, table, get_preset("nv_small"))
    compile_subgraph(_add_graph(), table, get_preset("nv_small"))


def test_products_take_one_zero_point_of_the_form_minus_2_to_the_k():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["x"], ["b"]),
             helper.make_node("Mul", ["a", "b"], ["y"])]
    graph = _graph(_model(nodes, [], (1, 8, 4, 4), (1, 8, 4, 4)))
    table = {t: {"scale": 0.01, "zero_point": -128} for t in ("x", "a", "b", "y")}
    with pytest.raises(CompileError, match="both inputs have zero points"):
        compile_subgraph(graph, table, get_preset("nv_large"))
    table["a"]["zero_point"], table["b"]["zero_point"] = 0, -3
    with pytest.raises(CompileError, match="zero point -3; only 0 or -2\\*\\*k"):
        compile_subgraph(graph, table, get_preset("nv_large"))
    table["b"]["zero_point"] = -16
    compile_subgraph(graph, table, get_preset("nv_large"))
    # the rule calibration asks: the main input keeps its zero point, the operand not
    sym = QuantTable({t: {"scale": 0.01, "min": 0.0, "max": 1.27} for t in table})
    zp = assign_zero_points(graph, sym)
    assert (zp.zero_point("a"), zp.zero_point("b")) == (-128, 0)


def test_hard_sigmoid_needs_its_upper_bound_at_code_127():
    node = helper.make_node("HardSigmoid", ["x"], ["y"], alpha=0.2, beta=0.5)
    graph = _graph(_model([node], [], (1, 8, 4, 4), (1, 8, 4, 4)))
    table = {"x": {"scale": 0.05}, "y": {"scale": 1 / 127, "zero_point": -128}}
    with pytest.raises(CompileError, match="1 is code -1 < 127"):
        compile_subgraph(graph, table, get_preset("nv_small"))
    table["y"]["scale"] = 1 / 255
    compile_subgraph(graph, table, get_preset("nv_small"))


def test_symmetric_tables_compile_as_before():
    """An explicit zero point 0 is the absent one: the same loadable, byte for byte."""
    graph = _add_graph()
    table = {t: {"scale": 0.01} for t in ("x", "a", "b", "y")}
    explicit = {t: {"scale": 0.01, "zero_point": 0} for t in table}
    cfg = get_preset("nv_small")
    assert compile_subgraph(graph, table, cfg).to_bytes() == \
        compile_subgraph(graph, explicit, cfg).to_bytes()
    x = np.linspace(0, 1, 128).reshape(1, 8, 4, 4)
    assert quantize_activation(x, 0.01, 0).tolist() == quantize_activation(x, 0.01).tolist()
