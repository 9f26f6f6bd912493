"""Constant folding, BatchNorm folding, bias/MatMul fusion and Clip-as-ReLU fusion.

Every pass is checked by running the graph before and after it (our interpreter),
and the graph before against onnxruntime (an independent implementation).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tengine_host.frontend import load_onnx
from tengine_host.interpreter import interpret
from tengine_host.passes import (
    fold_batchnorm,
    fold_constants,
    fuse_activation,
    fuse_bias,
    run_passes,
)

RNG = np.random.default_rng(11)


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _model(nodes, inits, x_shape, opset=13):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _check(model, apply, x_shape, rtol=0.0, atol=0.0):
    """Run before (vs onnxruntime), apply the pass to a fixpoint, run after; return the graph."""
    x = {"x": RNG.standard_normal(x_shape).astype(np.float32)}
    g = load_onnx(model)
    before = interpret(g, x)["y"]
    want = ort.InferenceSession(model.SerializeToString()).run(None, x)[0]
    np.testing.assert_allclose(before, want, rtol=1e-5, atol=1e-5)
    assert apply(g), "the pass found nothing to do"
    while apply(g):
        pass
    assert not apply(g)
    np.testing.assert_allclose(interpret(g, x)["y"], before, rtol=rtol, atol=atol)
    return g


def test_fold_shape_gather_concat_into_a_constant_reshape_shape():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Add", ["c1", "c2"], ["c"]),        # constant arithmetic
             helper.make_node("Mul", ["r", "c"], ["y"])]
    inits = [_const("i0", np.array(0, np.int64)), _const("ax", np.array([0], np.int64)),
             _const("minus1", np.array([-1], np.int64)),
             _const("c1", RNG.standard_normal(48).astype(np.float32)),
             _const("c2", RNG.standard_normal(48).astype(np.float32))]
    g = _check(_model(nodes, inits, [2, 3, 4, 4]), fold_constants.apply, (2, 3, 4, 4))
    assert [n.op_type for n in g.nodes] == ["Reshape", "Mul"]
    assert g.tensors["shape"].data.tolist() == [2, -1]      # batch read from the shape
    assert g.is_constant("c") and "c1" not in g.tensors       # folded operands forgotten


def test_fold_keeps_nodes_that_write_graph_outputs():
    nodes = [helper.make_node("Shape", ["x"], ["y0"]),
             helper.make_node("Cast", ["y0"], ["y"], to=TensorProto.FLOAT)]
    g = load_onnx(_model(nodes, [], [2, 3]))
    assert fold_constants.apply(g)
    assert [n.op_type for n in g.nodes] == ["Cast"]
    assert interpret(g, {"x": np.zeros((2, 3), np.float32)})["y"].tolist() == [2.0, 3.0]


def _bn_inits(k, prefix="bn"):
    return [_const(f"{prefix}_s", RNG.uniform(0.5, 2, k).astype(np.float32)),
            _const(f"{prefix}_b", RNG.standard_normal(k).astype(np.float32)),
            _const(f"{prefix}_m", RNG.standard_normal(k).astype(np.float32)),
            _const(f"{prefix}_v", RNG.uniform(0.1, 3, k).astype(np.float32))]


def _bn(x, y, prefix="bn"):
    return helper.make_node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b",
                                                   f"{prefix}_m", f"{prefix}_v"], [y],
                            epsilon=1e-3)


def test_fold_batchnorm_into_conv_with_and_without_bias():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), _bn("c", "n"),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"], strides=[2, 2]), _bn("c2", "y", "bn2")]
    inits = [_const("w", RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)),
             _const("b", RNG.standard_normal(4).astype(np.float32)),
             _const("w2", RNG.standard_normal((5, 4, 1, 1)).astype(np.float32)),
             *_bn_inits(4), *_bn_inits(5, "bn2")]
    g = _check(_model(nodes, inits, [1, 3, 6, 6]), fold_batchnorm.apply, (1, 3, 6, 6),
               rtol=1e-5, atol=1e-5)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu", "Conv"]
    assert g.nodes[0].outputs == ["n"] and g.nodes[2].outputs == ["y"]
    assert not any(t.startswith("bn") for t in g.tensors)


def test_batchnorm_whose_input_is_read_elsewhere_stays():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), _bn("c", "n"),
             helper.make_node("Add", ["c", "n"], ["y"])]
    inits = [_const("w", RNG.standard_normal((4, 3, 1, 1)).astype(np.float32)), *_bn_inits(4)]
    g = load_onnx(_model(nodes, inits, [1, 3, 2, 2]))
    assert not fold_batchnorm.apply(g)


def test_fuse_bias_into_conv_and_matmul_into_gemm():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Add", ["cb", "c"], ["a"]),          # constant first, [1,K,1,1]
             helper.make_node("Flatten", ["a"], ["f"]),
             helper.make_node("MatMul", ["f", "fw"], ["m"]),
             helper.make_node("Add", ["m", "fb"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    inits = [_const("w", RNG.standard_normal((4, 3, 1, 1)).astype(np.float32)),
             _const("cb", RNG.standard_normal((1, 4, 1, 1)).astype(np.float32)),
             _const("fw", RNG.standard_normal((16, 5)).astype(np.float32)),
             _const("fb", RNG.standard_normal(5).astype(np.float32))]
    model = _model(nodes, inits, [1, 3, 2, 2])
    g = _check(model, fuse_bias.apply, (1, 3, 2, 2), rtol=1e-6, atol=1e-6)
    assert [n.op_type for n in g.nodes] == ["Conv", "Flatten", "Gemm", "Relu"]
    assert len(g.nodes[0].inputs) == 3 and len(g.nodes[2].inputs) == 3
    # the whole default pipeline also fuses the ReLU: one FC layer as the DLA runs it
    g = load_onnx(model)
    run_passes(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Flatten", "Gemm"]
    assert g.nodes[2].attrs["activation"] == "Relu" and g.nodes[2].outputs == ["y"]


def test_add_that_is_not_per_channel_stays():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Add", ["c", "full"], ["y"])]
    inits = [_const("w", RNG.standard_normal((4, 3, 1, 1)).astype(np.float32)),
             _const("full", RNG.standard_normal((1, 4, 2, 2)).astype(np.float32))]
    g = load_onnx(_model(nodes, inits, [1, 3, 2, 2]))
    assert not fuse_bias.apply(g)


@pytest.mark.parametrize("lo, hi, fused", [(0.0, None, "Relu"), (0.0, 6.0, "Clip"),
                                             (-1.0, 6.0, None)])
def test_clip_at_zero_fuses(lo, hi, fused):
    """Clip(0) is a ReLU; Clip(0, hi) fuses as a capped ReLU; other clips stay."""
    ins = ["c", "lo"] + (["hi"] if hi is not None else [])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Clip", ins, ["y"])]
    inits = [_const("w", RNG.standard_normal((4, 3, 1, 1)).astype(np.float32)),
             _const("lo", np.array(lo, np.float32)), _const("hi", np.array(hi or 0, np.float32))]
    model = _model(nodes, inits, [1, 3, 2, 2])
    if fused:
        g = _check(model, fuse_activation.apply, (1, 3, 2, 2))
        assert [n.op_type for n in g.nodes] == ["Conv"] and g.nodes[0].outputs == ["y"]
        assert g.nodes[0].attrs["activation"] == fused
        assert g.nodes[0].attrs.get("activation_max") == hi
    else:
        assert not fuse_activation.apply(load_onnx(model))
