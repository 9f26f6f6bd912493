"""lift_1d: 1-D layers over ``[N, C, L]`` become 2-D ones of height 1, checked against
onnxruntime before and after; a 1-D network then runs on the DLA bit-exact."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import lift_1d
from tests.accel.compiler.op_cases import G
from tests.tengine_host.passes.graphs import check, const, model, node, ops

RNG = np.random.default_rng(9)


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32) * 0.3


def test_a_conv1d_block_is_lifted_between_an_unsqueeze_and_a_squeeze():
    nodes = [node("c", "Conv", ["x", "w", "b"], ["a"], kernel_shape=[5], pads=[2, 2],
                  strides=[2], dilations=[1]),
             node("bn", "BatchNormalization", ["a", "s", "bb", "m", "v"], ["n"]),
             node("r", "Relu", ["n"], ["p"]),
             node("mp", "MaxPool", ["p"], ["q"], kernel_shape=[3], strides=[2], pads=[1, 1]),
             node("pr", "PRelu", ["q", "slope"], ["y"])]
    inits = [const("w", _w(6, 4, 5)), const("b", _w(6)), const("s", np.abs(_w(6)) + 0.5),
             const("bb", _w(6)), const("m", _w(6)), const("v", np.abs(_w(6)) + 0.5),
             const("slope", np.abs(_w(6, 1)))]
    g = check(model(nodes, inits, [1, 4, 23]), lift_1d.apply)
    assert ops(g) == ["Unsqueeze", "Conv", "BatchNormalization", "Relu", "MaxPool", "PRelu",
                      "Squeeze"]
    conv = g.nodes[1]
    assert conv.attrs["kernel_shape"] == [1, 5] and conv.attrs["pads"] == [0, 2, 0, 2]
    assert g.tensors[conv.inputs[1]].shape == (6, 4, 1, 5) and g.tensors["y"].shape == (1, 6, 6)


def test_a_residual_concat_and_flatten_head():
    nodes = [node("c1", "Conv", ["x", "w1"], ["a"], kernel_shape=[3], pads=[1, 1]),
             node("add", "Add", ["a", "x"], ["s"]),
             node("cat", "Concat", ["s", "x"], ["t"], axis=1),
             node("gap", "GlobalAveragePool", ["t"], ["u"]),
             node("flat", "Flatten", ["u"], ["f"], axis=1),
             node("fc", "Gemm", ["f", "wf"], ["y"], transB=1)]
    g = check(model(nodes, [const("w1", _w(4, 4, 3)), const("wf", _w(3, 8))], [1, 4, 10]),
              lift_1d.apply)
    assert ops(g) == ["Unsqueeze", "Conv", "Add", "Concat", "GlobalAveragePool", "Flatten",
                      "Gemm"]


def test_two_dimensional_graphs_stay():
    nodes = [node("c", "Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    g = model(nodes, [const("w", _w(2, 3, 3, 3))], [1, 3, 5, 5])
    from tengine_host.frontend import load_onnx
    assert not lift_1d.apply(load_onnx(g))


def _kws():
    """A keyword-spotting-shaped 1-D CNN: MFCC-like 40 x 98 frames, three conv1d blocks
    (ReLU, max pooling), a global average and a classifier."""
    g = G(3)
    x = g.input((1, 40, 98))
    y = x
    for cin, cout in ((40, 32), (32, 48), (48, 64)):
        w = g.const(g.rng.normal(0, np.sqrt(2 / (cin * 5)), (cout, cin, 5)))
        y = g.op("Relu", [g.op("Conv", [y, w, g.const(g.rng.normal(0, .1, cout))],
                               kernel_shape=[5], pads=[2, 2])])
        y = g.op("MaxPool", [y], kernel_shape=[2], strides=[2])
    y = g.op("Flatten", [g.op("GlobalAveragePool", [y])], axis=1)
    return g.model([g.op("Gemm", [y, g.const(g.rng.normal(0, .2, (12, 64))),
                                  g.const(g.rng.normal(0, .1, 12))], transB=1)])


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_a_1d_cnn_runs_on_the_dla_bit_exact(preset, tmp_path):
    import onnx
    import onnxruntime as ort

    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate
    from tengine_host.verify import verify_run

    m = _kws()
    onnx.save(m, tmp_path / "kws.onnx")
    graph = load_model(tmp_path / "kws.onnx")
    rng = np.random.default_rng(4)
    samples = [{"x": rng.normal(0, 1, (1, 40, 98)).astype(np.float32)} for _ in range(4)]
    table = calibrate(graph, samples, progress=False)
    with Executor(graph, [get_device("nvdla", preset=preset, capture=True),
                          get_device("cpu")], table) as ex:
        out, _, report = verify_run(ex, samples[0])
        parts = [(d.name, [n.op_type for n in s.nodes]) for d, s in ex.partition.parts]
    # the input's lift on the CPU, everything else on the DLA
    assert parts[0] == ("cpu", ["Unsqueeze"]) and [d for d, _ in parts] == ["cpu", "nvdla"]
    assert report.bit_exact and report.layers_checked >= 5, report.summary()
    want = ort.InferenceSession(m.SerializeToString()).run(None, samples[0])[0].ravel()
    got = out[graph.outputs[0]].ravel()
    assert got @ want / (np.linalg.norm(got) * np.linalg.norm(want)) >= 0.999


def test_token_tensors_without_a_sequence_layer_stay():
    """[N, T, D] tokens added and activated (a transformer's block) are not lifted: no
    convolution or pooling reads them."""
    from tengine_host.frontend import load_onnx

    nodes = [node("mm", "MatMul", ["x", "w"], ["a"]), node("add", "Add", ["a", "x"], ["s"]),
             node("act", "Relu", ["s"], ["y"])]
    assert not lift_1d.apply(load_onnx(model(nodes, [const("w", _w(8, 8))], [1, 5, 8])))
