"""Every pass is checked by running the graph before and after it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.passes import fuse_activation, remove_identity, run_passes

LENET = Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx"


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _chain_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Identity", ["x"], ["x1"], name="id0"),
        helper.make_node("Conv", ["x1", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Dropout", ["c"], ["d"], name="drop"),
        helper.make_node("Relu", ["d"], ["r"], name="relu"),
        helper.make_node("Relu", ["r"], ["r2"], name="relu2"),  # producer is a Relu: not fused
        helper.make_node("Identity", ["r2"], ["y"], name="id_out"),
    ]
    graph = helper.make_graph(nodes, "chain", [_vi("x", [1, 3, 5, 5])], [_vi("y", None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_remove_identity_and_fuse_keep_results():
    g = load_onnx(_chain_model())
    x = {"x": np.random.default_rng(1).standard_normal((1, 3, 5, 5)).astype(np.float32)}
    before = interpret(g, x)["y"]
    assert remove_identity.apply(g)
    run_passes(g, [remove_identity.apply])
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu", "Relu"]
    assert g.outputs == ["y"] and g.nodes[-1].outputs == ["y"]
    np.testing.assert_array_equal(interpret(g, x)["y"], before)
    assert fuse_activation.apply(g)
    assert not fuse_activation.apply(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"]
    assert g.nodes[0].attrs["activation"] == "Relu"
    np.testing.assert_array_equal(interpret(g, x)["y"], before)


def test_relu_not_fused_when_conv_output_has_two_readers():
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["c", "r"], ["y"])]
    graph = helper.make_graph(nodes, "two", [_vi("x", [1, 1, 2, 2])], [_vi("y", None)], [w])
    g = load_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert not fuse_activation.apply(g)


def test_lenet_default_pipeline_fuses_three_relus_and_agrees():
    g = load_onnx(LENET)
    x = {"input": np.random.default_rng(2).random((1, 1, 8, 8), dtype=np.float32)}
    before = interpret(g, x)["probs"]
    assert run_passes(g) >= 1
    ops = [n.op_type for n in g.nodes]
    assert "Relu" not in ops and len(ops) == 13 - 4
    assert sum(n.attrs.get("activation") == "Relu" for n in g.nodes) == 4
    np.testing.assert_allclose(interpret(g, x)["probs"], before, rtol=1e-6, atol=1e-7)
