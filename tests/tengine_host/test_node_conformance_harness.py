"""The node-case harness scores what the ONNX spec defines and nothing else.

Cast from float to an integer type is "undefined if OOR": onnx generates the
expected outputs of its node cases with the installed ml_dtypes, whose answer for
out-of-range values changed (0.5 wraps -9.0 to int4 7, 0.7 gives 0).  The harness
leaves those elements out and still compares the rest exactly.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.tengine_host.node_conformance import _compare, _spec_undefined


def _cast_model(to: int) -> onnx.ModelProto:
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    graph = helper.make_graph([node], "cast", [helper.make_tensor_value_info("x", 1, [6])],
                              [helper.make_tensor_value_info("y", to, [6])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


X = np.array([-9.0, -8.0, 0.0, 7.0, 8.0, np.nan], np.float32)


def test_float_to_int4_marks_out_of_range_and_nan():
    mask = _spec_undefined(_cast_model(TensorProto.INT4), {"x": X})["y"]
    assert mask.tolist() == [True, False, False, False, True, True]


def test_float_to_uint2_marks_negative_and_above_three():
    x = np.array([-1.0, 0.0, 3.0, 4.0], np.float32)
    model = _cast_model(TensorProto.UINT2)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 4
    mask = _spec_undefined(model, {"x": x})["y"]
    assert mask.tolist() == [True, False, False, True]


@pytest.mark.parametrize("undefined_as", [7, 0], ids=["wrapped", "zero"])
def test_either_answer_for_undefined_elements_passes(undefined_as):
    mask = _spec_undefined(_cast_model(TensorProto.INT4), {"x": X})["y"]
    got = np.array([7, -8, 0, 7, -8, 0], ml_dtypes.int4)  # two's complement wrap
    want = np.array([undefined_as, -8, 0, 7, undefined_as, 0], ml_dtypes.int4)
    _compare("y", got, want, 1e-3, 1e-7, mask)


def test_a_wrong_defined_element_still_fails():
    mask = _spec_undefined(_cast_model(TensorProto.INT4), {"x": X})["y"]
    got = np.array([7, -8, 1, 7, -8, 0], ml_dtypes.int4)  # 0.0 -> 1 is wrong
    want = np.array([0, -8, 0, 7, 0, 0], ml_dtypes.int4)
    with pytest.raises(AssertionError):
        _compare("y", got, want, 1e-3, 1e-7, mask)


def test_float_to_float_and_int_to_int_casts_are_fully_defined():
    assert _spec_undefined(_cast_model(TensorProto.FLOAT16), {"x": X}) == {}
    model = _cast_model(TensorProto.INT8)
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.INT32
    assert _spec_undefined(model, {"x": np.array([300, 1, 2, 3, 4, 5], np.int32)}) == {}
