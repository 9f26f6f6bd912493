"""ONNX import: constants, normalized attributes, shapes, and clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.frontend import OnnxImportError, load_onnx

LENET = Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx"


def _model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_lenet_shapes_and_normalized_attrs():
    g = load_onnx(LENET)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool",
                                            "Flatten", "Gemm", "Relu", "Gemm", "Relu", "Gemm",
                                            "Softmax"]
    conv1 = g.nodes[0]
    assert conv1.attrs["pads"] == [2, 2, 2, 2] and conv1.attrs["strides"] == [1, 1]
    assert conv1.attrs["kernel_shape"] == [5, 5] and conv1.attrs["group"] == 1
    # Hand-computed from the LeNet definition: 8x8 -> pool -> 4x4 -> pool -> 2x2x16 = 64.
    assert g.tensors[g.nodes[2].outputs[0]].shape == (1, 6, 4, 4)
    assert g.tensors[g.nodes[6].outputs[0]].shape == (1, 64)
    assert g.tensors[g.outputs[0]].shape == (1, 10)
    assert g.is_constant(conv1.inputs[1]) and not g.is_constant(conv1.inputs[0])
    assert g.nodes[7].attrs == {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1}


def test_constant_node_becomes_constant_tensor():
    shape = helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(
        np.array([1, -1], dtype=np.int64)))
    m = _model([shape, helper.make_node("Reshape", ["x", "s"], ["y"], name="r")],
               [_vi("x", [2, 3, 4])], [_vi("y", None)])
    g = load_onnx(m)
    assert g.is_constant("s") and g.tensors["y"].shape == (1, 24)
    assert [n.op_type for n in g.nodes] == ["Reshape"]


def test_auto_pad_same_upper_becomes_explicit_pads():
    w = numpy_helper.from_array(np.zeros((2, 1, 4, 4), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
               [_vi("x", [1, 1, 7, 7])], [_vi("y", None)], [w])
    g = load_onnx(m)
    # total pad = (4-1)*2 + 4 - 7 = 3 -> begin 1, end 2 (SAME_UPPER puts the extra at the end).
    assert g.nodes[0].attrs["pads"] == [1, 1, 2, 2]
    assert g.tensors["y"].shape == (1, 2, 4, 4)


def test_unsupported_op_names_type_node_and_opset():
    m = _model([helper.make_node("Hardmax", ["x"], ["y"], name="act7")],
               [_vi("x", [1, 4])], [_vi("y", [1, 4])], opset=13)
    with pytest.raises(OnnxImportError, match=r"op 'Hardmax' \(node 'act7', opset 13\)"):
        load_onnx(m)


def test_truncated_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(LENET.read_bytes()[:1000])
    with pytest.raises(OnnxImportError, match="cut.onnx"):
        load_onnx(bad)


def test_garbage_and_missing_files(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not a protobuf at all \xff\xfe")
    with pytest.raises(OnnxImportError):
        load_onnx(junk)
    with pytest.raises(OnnxImportError, match="does not exist"):
        load_onnx(tmp_path / "nope.onnx")


def test_shape_mismatch_names_the_node():
    w = numpy_helper.from_array(np.zeros((2, 3, 1, 1), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="c0")],
               [_vi("x", [1, 4, 5, 5])], [_vi("y", None)], [w])
    with pytest.raises(OnnxImportError, match="c0.*4 channels"):
        load_onnx(m)


def test_dynamic_batch_defaults_to_one_and_override():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["N", 3])], [_vi("y", None)])
    assert load_onnx(m).tensors["x"].shape == (1, 3)
    assert load_onnx(m, input_shapes={"x": (5, 3)}).tensors["y"].shape == (5, 3)
