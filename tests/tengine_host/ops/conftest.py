"""Each op is checked against onnxruntime on a one-node model."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret


def _single_node_model(op_type, feeds, consts, attrs, opset, n_out):
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in feeds.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, [*feeds, *consts], outs, name="n0", **attrs)
    graph = helper.make_graph([node], "one", inputs,
                              [helper.make_tensor_value_info(o, 1, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8)


@pytest.fixture
def against_ort():
    """``check(op_type, feeds, consts, attrs, opset)`` -> (ours, onnxruntime's) first outputs."""

    def check(op_type, feeds, consts=None, attrs=None, opset=13, n_out=1):
        model = _single_node_model(op_type, feeds, consts or {}, attrs or {}, opset, n_out)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)[0]
        graph = load_onnx(model)
        got = interpret(graph, feeds)["y0"]
        assert graph.tensors["y0"].shape == want.shape, "shape inference disagrees with ORT"
        assert got.shape == want.shape
        return got, want

    return check


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
