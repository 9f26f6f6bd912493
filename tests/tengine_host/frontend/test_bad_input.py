"""Frontend errors a user can hit, each named clearly, and load-time shape values."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.frontend import OnnxImportError, load_onnx
from tengine_host.interpreter import interpret


def _model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _relu(shape):
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", shape)], [_vi("y", None)])


def test_open_spatial_dims_need_input_shape():
    m = _relu(["N", 3, "H", "W"])
    with pytest.raises(OnnxImportError, match=r"input 'x' has dynamic dimensions \[N,3,H,W\]; "
                                              r"fix them with --input-shape x="):
        load_onnx(m)
    assert load_onnx(m, input_shapes={"x": (2, 3, 5, 7)}).tensors["y"].shape == (2, 3, 5, 7)


def test_input_shape_must_fit_static_dims_and_name_an_input():
    m = _relu(["N", 3, 8])
    with pytest.raises(OnnxImportError, match=r"x=1,4,8 does not fit the model's \[N,3,8\]"):
        load_onnx(m, input_shapes={"x": (1, 4, 8)})
    with pytest.raises(OnnxImportError, match=r"x=1,3 does not fit"):
        load_onnx(m, input_shapes={"x": (1, 3)})
    with pytest.raises(OnnxImportError, match=r"\['img'\], which are not model inputs; inputs: x"):
        load_onnx(m, input_shapes={"img": (1, 3, 8)})


def test_opset_older_than_7_is_refused():
    with pytest.raises(OnnxImportError, match="opset 6 is older than the oldest supported "
                                              "opset 7"):
        load_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1])],
                         [_vi("y", None)], opset=6))


def test_unknown_domain_names_op_node_and_opset():
    m = _model([helper.make_node("Fancy", ["x"], ["y"], name="n3", domain="com.acme")],
               [_vi("x", [1])], [_vi("y", None)])
    m.opset_import.append(helper.make_opsetid("com.acme", 1))
    with pytest.raises(OnnxImportError, match=r"op com.acme::Fancy \(node 'n3', opset 13\)"):
        load_onnx(m)


def test_dangling_input_and_missing_output_are_named():
    m = _model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [_vi("x", [1])],
               [_vi("y", None)])
    with pytest.raises(OnnxImportError, match=r"node 'r' \(Relu\) reads \['ghost'\]"):
        load_onnx(m)
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [1])], [_vi("z", None)])
    with pytest.raises(OnnxImportError, match="graph output 'z' is not produced"):
        load_onnx(m)


def test_empty_bytes_and_bad_attribute_values():
    with pytest.raises(OnnxImportError, match="holds no ONNX graph"):
        load_onnx(b"")
    m = _model([helper.make_node("Resize", ["x", "", "s"], ["y"], name="rs", mode="bicubic")],
               [_vi("x", [1, 1, 2, 2])], [_vi("y", None)],
               [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")])
    with pytest.raises(OnnxImportError, match=r"node 'rs' \(Resize, opset 13\): Resize mode "
                                              r"'bicubic' not in nearest, linear, cubic"):
        load_onnx(m)


def test_shape_deciding_input_must_be_known():
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rsh")],
               [_vi("x", [2, 3]), _vi("s", [2], TensorProto.INT64)], [_vi("y", None)])
    with pytest.raises(OnnxImportError, match=r"node 'rsh'.*input 's' decides the output shape "
                                              r"and must be known when the model is loaded"):
        load_onnx(m)


def test_shape_arithmetic_is_known_at_load_time():
    # Reshape to [N, -1] computed as Concat(Gather(Shape(x), 0), [-1]): common in exports.
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    g = load_onnx(_model(nodes, [_vi("x", ["B", 2, 3, 4])], [_vi("y", None)], inits),
                  input_shapes={"x": (5, 2, 3, 4)})
    assert g.tensors["y"].shape == (5, 24)
    assert g.tensors["sh"].dtype == np.int64 and g.tensors["target"].shape == (2,)
    x = np.arange(120, dtype=np.float32).reshape(5, 2, 3, 4)
    np.testing.assert_array_equal(interpret(g, {"x": x})["y"], x.reshape(5, 24))


def test_feeds_with_wrong_shape_dtype_or_name():
    g = load_onnx(_relu([2, 3]))
    with pytest.raises(ValueError, match=r"input 'x' has shape \(3, 2\), the graph expects "
                                         r"\(2, 3\)"):
        interpret(g, {"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match="input 'x' has dtype int64, the graph expects float32"):
        interpret(g, {"x": np.zeros((2, 3), np.int64)})
    with pytest.raises(ValueError, match=r"\['y0'\] are not inputs"):
        interpret(g, {"x": np.zeros((2, 3), np.float32), "y0": np.zeros(1)})
    # Same kind, other width: converted.
    assert interpret(g, {"x": -np.ones((2, 3))})["y"].dtype == np.float32


def test_constant_only_graph_output():
    c = helper.make_node("Constant", [], ["k"], value_floats=[1.0, 2.0])
    g = load_onnx(_model([c], [], [_vi("k", [2])]))
    np.testing.assert_array_equal(interpret(g, {})["k"], np.array([1, 2], np.float32))
